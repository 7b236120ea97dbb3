"""Protected ops: ``torch.ops.ftcompile.{linear_global, linear_thread, attention}``."""
from .library import attention, linear_global, linear_thread

__all__ = ["attention", "linear_global", "linear_thread"]
