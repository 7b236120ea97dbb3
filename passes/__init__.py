"""The ft graph passes, in the order the backend runs them. Each is ``run(gm, ctx) -> gm``.

Attention first: its chains contain matmuls that the linear pass must not take. The leftover
report runs last and lists every product nobody protected.
"""
from . import attention_sdpa, attention_softmax, leftovers, linear
from .common import PassContext, counters

PASSES = [
    ("attention_sdpa", attention_sdpa.run),
    ("attention_softmax", attention_softmax.run),
    ("linear", linear.run),
    ("leftovers", leftovers.run),
]

__all__ = ["PASSES", "PassContext", "counters"]
