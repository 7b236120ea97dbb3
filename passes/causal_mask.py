"""Is an attention mask a constant that says no more than is_causal?

Under torch.compile, HF transformers (5.x) build their causal mask from ``arange`` and a comparison
in the graph, then hand it to SDPA as a tensor even where no padding mask was given. A mask like
that depends on no input, so its value is known when the graph is compiled. Where it equals
SDPA's is_causal pattern (top-left: query i sees keys 0..i), the attention reads it as is_causal:
no mask tensor, no tile map kernel per call, no masked-tile loads (NOTES.md, session 45).

A padded batch's mask is the same constant causal mask and-ed with the padding mask (a [B, 1, 1, Sk]
input): there the op takes is_causal with the padding factor alone as its mask, so the diagonal
tiles are masked by index and the tile map scans B x Sk values, not B x Sq x Sk.

Only a short list of pure tensor ops is evaluated here; anything else (an input, a parameter, a
buffer, a random op, a symbolic size) keeps the mask as it is.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
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
    "logical_and", "logical_or", "logical_not", "__and__", "__or__", "__invert__", "new_ones", "new_zeros",
    "new_full",
}
# A bool mask's conjunction, and the methods that hand a bool mask on with its values unchanged.
_AND_FUNCTIONS = {operator.and_, torch.logical_and, torch.bitwise_and}
_AND_METHODS = {"__and__", "logical_and", "bitwise_and"}
_SAME_VALUES = {"expand", "expand_as", "contiguous", "clone", "to"}
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


@dataclass(frozen=True)
class CausalMask:
    """An attention mask read as is_causal and ``rest``: None where the mask is is_causal's alone,
    else the node of the mask's other factor (a padding mask), which the op then takes as its mask."""
    rest: Optional[Node] = None


def read_causal(mask: Any, q: Optional[torch.Tensor], k: Optional[torch.Tensor]) -> Optional[CausalMask]:
    """How ``mask`` (a graph node; q and k the fake query and key) reads as is_causal, if it does:
    the whole mask a constant equal to is_causal's, or a bool conjunction of such constants and one
    other factor (HF's padded batches: ``(kv <= q) & padding[b, kv]``). None otherwise."""
    if is_constant_causal(mask, q, k):
        return CausalMask()
    rest = causal_padding_factor(mask, q, k)
    return None if rest is None else CausalMask(rest)


def is_constant_causal(mask: Any, q: Optional[torch.Tensor], k: Optional[torch.Tensor]) -> bool:
    """True where ``mask`` (a graph node) is computed from constants alone, broadcasts to the
    scores of q and k, and keeps exactly the keys is_causal keeps: 0 (float) or True (bool) on
    and below the top-left diagonal, -inf or the dtype's lowest value (float) or False (bool)
    above it."""
    if not _static_shapes(mask, q, k):
        return False
    key = (tuple(q.shape), tuple(k.shape))  # every layer of a model shares one mask: evaluated once
    memo = mask.meta.setdefault("ft_causal", {})
    if key not in memo:
        memo[key] = _is_causal(mask, fake(mask), q, k)
    return memo[key]


def causal_padding_factor(mask: Any, q: Optional[torch.Tensor], k: Optional[torch.Tensor]) -> Optional[Node]:
    """Where ``mask`` (a bool graph node, possibly expanded or moved) is a conjunction whose factors
    but one are constants that together keep exactly is_causal's keys, that one factor's node (it
    broadcasts to the scores of q and k); None otherwise. The op keeps the keys both is_causal and
    its mask keep, so is_causal with that factor as the mask keeps what the whole mask keeps."""
    if not _static_shapes(mask, q, k) or fake(mask).dtype != torch.bool:
        return None
    key = (tuple(q.shape), tuple(k.shape))
    memo = mask.meta.setdefault("ft_causal_factor", {})
    if key not in memo:
        memo[key] = _padding_factor(mask, q, k)
    return memo[key]


def _static_shapes(mask: Any, q: Optional[torch.Tensor], k: Optional[torch.Tensor]) -> bool:
    if not isinstance(mask, Node) or q is None or k is None:
        return False
    fm = fake(mask)
    return fm is not None and all(isinstance(s, int) for t in (fm, q, k) for s in t.shape)


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
    return _keeps_causal(keep, sq, sk)


def _keeps_causal(keep: torch.Tensor, sq: int, sk: int) -> bool:
    """keep (bool, its expanded dimensions compacted) is is_causal's top-left pattern over [sq, sk]."""
    if keep.shape[-2:] != (sq, sk):
        return False
    causal = torch.ones(sq, sk, dtype=torch.bool, device=keep.device).tril()
    return bool(torch.equal(keep, causal.expand_as(keep)))


def _factors(node: Node) -> list:
    """The factors of a bool conjunction (node itself where it is none), looking through the
    methods that hand a mask on unchanged (expand, a device move, ...) to reach it."""
    inner = node
    while inner.op == "call_method" and inner.target in _SAME_VALUES and isinstance(inner.args[0], Node) \
            and _is_bool(inner.args[0]):
        inner = inner.args[0]
    is_and = (inner.op == "call_function" and inner.target in _AND_FUNCTIONS) or \
             (inner.op == "call_method" and inner.target in _AND_METHODS)
    if is_and and len(inner.args) == 2 and not inner.kwargs and \
            all(isinstance(a, Node) and _is_bool(a) for a in inner.args):
        return _factors(inner.args[0]) + _factors(inner.args[1])
    return [node]


def _is_bool(node: Node) -> bool:
    value = fake(node)
    return value is not None and value.dtype == torch.bool


def _padding_factor(mask: Node, q: torch.Tensor, k: torch.Tensor) -> Optional[Node]:
    sq, sk = q.shape[-2], k.shape[-2]
    if sq * sk > MAX_ELEMENTS:
        return None
    factors = _factors(mask)
    rest = [f for f in factors if _ancestry(f) is None]
    constants = [f for f in factors if f not in rest]
    if len(rest) != 1 or not constants:
        return None
    scores = tuple(q.shape[:-1]) + (sk,)
    try:
        if torch.broadcast_shapes(tuple(fake(rest[0]).shape), scores) != scores:
            return None
        values = [_evaluate(f) for f in constants]
        if any(v is None or v.dtype != torch.bool for v in values):
            return None
        keep = values[0]
        for v in values[1:]:
            keep = keep & v
        if keep.dim() > len(scores) or torch.broadcast_shapes(tuple(keep.shape), scores) != scores:
            return None
        keep = _compact(keep)
        keep = keep.expand(*keep.shape[:-2], sq, sk) if keep.dim() >= 2 else keep.expand(sq, sk)
    except Exception:  # noqa: BLE001  (anything unexpected keeps the mask: never a wrong answer)
        return None
    return rest[0] if _keeps_causal(_compact(keep), sq, sk) else None
