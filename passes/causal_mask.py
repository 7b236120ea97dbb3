"""Is an attention mask a constant that says no more than is_causal?

Under torch.compile, HF transformers (5.x) build their causal mask from ``arange`` and a comparison
in the graph, then hand it to SDPA as a tensor even where no padding mask was given. A mask like
that depends on no input, so its value is known when the graph is compiled. Where it equals
SDPA's is_causal pattern (top-left: query i sees keys 0..i), the attention reads it as is_causal:
no mask tensor, no tile map kernel per call, no masked-tile loads (NOTES.md, session 45).

Only a short list of pure tensor ops is evaluated here; anything else (an input, a parameter, a
buffer, a random op, a symbolic size) keeps the mask as it is.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

import torch
from torch.fx import Node
from torch.fx.node import map_arg

from .common import fake

# Ops a constant mask is built from (HF's sdpa_mask and the classic tril / where forms).
_FUNCTIONS = {
    torch.arange, torch.tensor, torch.scalar_tensor, torch.ones, torch.zeros, torch.full, torch.tril,
    torch.triu, torch.where, torch.ones_like, torch.zeros_like, torch.full_like,
    torch.logical_and, torch.logical_or, torch.logical_not,
    torch.bitwise_and, torch.bitwise_or, torch.bitwise_not,
    torch.le, torch.lt, torch.ge, torch.gt, torch.eq, torch.ne,
    torch.add, torch.sub, torch.mul, torch.unsqueeze, torch.reshape,
    operator.add, operator.sub, operator.mul, operator.neg, operator.getitem,
    operator.le, operator.lt, operator.ge, operator.gt, operator.eq, operator.ne,
    operator.and_, operator.or_, operator.invert,
}
_METHODS = {
    "expand", "expand_as", "view", "reshape", "unsqueeze", "squeeze", "contiguous", "clone", "transpose",
    "permute", "to", "float", "half", "bfloat16", "bool", "long", "int", "type_as",
    "masked_fill", "tril", "triu", "le", "lt", "ge", "gt", "eq", "ne", "add", "sub", "mul",
    "logical_and", "logical_or", "logical_not", "__and__", "__or__", "__invert__",
}
# Evaluated at compile time only up to this many mask elements (Sq * Sk), and where no step of its
# computation holds more than MAX_BYTES: past either the mask stays.
MAX_ELEMENTS = 1 << 26
MAX_BYTES = 1 << 28
MAX_NODES = 64


def _ancestry(node: Node) -> Optional[list]:
    """node's ancestors and node, in graph order, if every one is an allowed pure op."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if len(seen) > MAX_NODES:
            return None
        allowed = (n.op == "call_function" and n.target in _FUNCTIONS) or \
                  (n.op == "call_method" and n.target in _METHODS)
        if not allowed:
            return None
        value = fake(n)
        if value is not None:
            nbytes = value.untyped_storage().nbytes()
            if not isinstance(nbytes, int) or nbytes > MAX_BYTES:  # (symbolic: a dynamic shape)
                return None
        stack.extend(n.all_input_nodes)
    return [n for n in node.graph.nodes if n in seen]


def _evaluate(node: Node) -> Optional[torch.Tensor]:
    order = _ancestry(node)
    if order is None:
        return None
    env: dict = {}
    with torch._subclasses.fake_tensor.unset_fake_temporarily(), torch.no_grad():
        for n in order:
            args = map_arg(n.args, lambda a: env[a])
            kwargs = map_arg(n.kwargs, lambda a: env[a])
            if n.op == "call_function":
                env[n] = n.target(*args, **kwargs)
            else:
                env[n] = getattr(args[0], n.target)(*args[1:], **kwargs)
    value = env[node]
    return value if isinstance(value, torch.Tensor) else None


def _compact(t: torch.Tensor) -> torch.Tensor:
    """t without the copies an expand made (stride-0 dimensions taken once)."""
    for d in range(t.dim()):
        if t.stride(d) == 0 and t.shape[d] > 1:
            t = t.narrow(d, 0, 1)
    return t


def is_constant_causal(mask: Any, q: Optional[torch.Tensor], k: Optional[torch.Tensor]) -> bool:
    """True where ``mask`` (a graph node) is computed from constants alone, broadcasts to the
    scores of q and k, and keeps exactly the keys is_causal keeps: 0 (float) or True (bool) on
    and below the top-left diagonal, -inf or the dtype's lowest value (float) or False (bool)
    above it."""
    if not isinstance(mask, Node) or q is None or k is None:
        return False
    fm = fake(mask)
    if fm is None or not all(isinstance(s, int) for t in (fm, q, k) for s in t.shape):
        return False
    key = (tuple(q.shape), tuple(k.shape))  # every layer of a model shares one mask: evaluated once
    memo = mask.meta.setdefault("ft_causal", {})
    if key not in memo:
        memo[key] = _is_causal(mask, fm, q, k)
    return memo[key]


def _is_causal(mask: Node, fm: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> bool:
    sq, sk = q.shape[-2], k.shape[-2]
    if sq * sk > MAX_ELEMENTS or fm.dim() < 2 or fm.dim() > q.dim():
        return False
    if not (fm.dtype == torch.bool or fm.is_floating_point()):
        return False
    try:
        torch.broadcast_shapes(tuple(fm.shape), tuple(q.shape[:-1]) + (sk,))
        value = _evaluate(mask)
    except Exception:  # noqa: BLE001  (anything unexpected keeps the mask: never a wrong answer)
        return False
    if value is None or tuple(value.shape) != tuple(fm.shape) or value.dtype != fm.dtype:
        return False
    value = _compact(value)
    if value.dtype == torch.bool:
        keep = value
    else:
        keep = value == 0
        blocked = (value == float("-inf")) | (value <= torch.finfo(value.dtype).min)
        if not bool((keep | blocked).all()):
            return False
    causal = torch.ones(sq, sk, dtype=torch.bool, device=value.device).tril()
    return bool(torch.equal(keep, causal.expand_as(keep))) if keep.shape[-2:] == (sq, sk) else False
