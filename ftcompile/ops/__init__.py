"""Protected ops: ``torch.ops.ftcompile.{linear_global, linear_thread, attention}``."""
from .library import attention, linear_global, linear_thread
from . import inference  # noqa: F401  (registers torch.ops.ftcompile_infer.*, the twins)

__all__ = ["attention", "linear_global", "linear_thread"]
