"""What every pass shares: the pass context, node predicates and the rewrite helper."""
from __future__ import annotations

import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from ftcompile import telemetry
from ftcompile.config import FTConfig
from ftcompile.cost import Cost
from ftcompile.hardware import DeviceSpec
from ftcompile.ops import layout, support
from ftcompile.ops.cuda_gemm import GLOBAL_BNS
from ftcompile.report import SiteRecord
from ftcompile.selection import SUPPORTED_DTYPES, Decision, select

# Rewrites per pass, for tests and explain (reset with counters.clear()).
counters: Counter = Counter()

MATMULS = {torch.matmul, operator.matmul, torch.mm, torch.bmm}
MATMUL_METHODS = {"matmul", "mm", "bmm", "__matmul__"}
LINEARS = {torch._C._nn.linear, F.linear}
SDPA = {torch._C._nn.scaled_dot_product_attention, F.scaled_dot_product_attention}
SOFTMAX = {torch.softmax, F.softmax}  # and the method x.softmax(-1)
DROPOUT = {F.dropout, torch.dropout}
ADDS = {operator.add, torch.add, operator.iadd}
MULS = {operator.mul, torch.mul, operator.imul}
DIVS = {operator.truediv, torch.div, operator.itruediv}
CASTS = {"to", "float", "type", "type_as", "half", "bfloat16"}


@dataclass
class PassContext:
    config: FTConfig
    spec: DeviceSpec
    graph_index: int
    values: Dict[str, Any]  # placeholder name -> the real example input (weights are real)
    device: torch.device = torch.device("cpu")  # where the graph runs (profile mode times there)
    records: List[SiteRecord] = field(default_factory=list)
    names: Counter = field(default_factory=Counter)

    def unique(self, name: str) -> str:
        self.names[name] += 1
        return name if self.names[name] == 1 else f"{name}#{self.names[name]}"


def fake(node: Any) -> Optional[torch.Tensor]:
    if not isinstance(node, Node):
        return None
    value = node.meta.get("example_value", node.meta.get("val"))
    return value if isinstance(value, torch.Tensor) else None


def is_call(node: Any, targets=(), methods=()) -> bool:
    if not isinstance(node, Node):
        return False
    if node.op == "call_function":
        return node.target in targets
    return node.op == "call_method" and node.target in methods


def arg(node: Node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def scalar(value) -> Optional[float]:
    """A Python number (not a tensor, not symbolic), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


# The root: L['self'], or L['args'][0] where a decorator passes the model as a positional argument
# (transformers >= 5 wraps forward that way).
_SOURCE_PREFIX = re.compile(r"^L\['args'\]\[\d+\]|^L\['[^']*'\]")


def clean_path(path: str) -> str:
    """"L['self']._modules['h']._modules['0'].attn" -> "h.0.attn"."""
    path = _SOURCE_PREFIX.sub("", path)
    path = re.sub(r"\._(?:modules|parameters|buffers)\['([^']*)'\]", r".\1", path)
    path = re.sub(r"\[['\"]?([^'\"\]]*)['\"]?\]", r".\1", path)
    return path.strip(".")


def module_path(node: Node) -> Optional[str]:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1][0]
    return clean_path(path) or None


def parameter_path(node: Any) -> Optional[str]:
    """Qualified name of a parameter node (placeholder from a module attribute, or get_attr)."""
    if not isinstance(node, Node):
        return None
    if node.op == "get_attr":
        return str(node.target)
    if node.op == "placeholder":
        grapharg = node.meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        name = source.name if source is not None else None
        name = name() if callable(name) else name
        if name and ("_parameters[" in name or "_buffers[" in name):
            return clean_path(name)
    return None


def is_parameter(node: Any, ctx: PassContext) -> bool:
    if not isinstance(node, Node):
        return False
    if node.op == "get_attr":
        return True
    real = ctx.values.get(node.name)
    return isinstance(real, torch.nn.Parameter) or parameter_path(node) is not None


def shape_str(*tensors: Optional[torch.Tensor]) -> str:
    return " x ".join("[" + ",".join(str(s) for s in t.shape) + "]" for t in tensors if t is not None)


def decide(ctx: PassContext, kind: str, op: str, name: str, dtype: torch.dtype, cost: Cost,
           shapes: str, blocker: Optional[str] = None) -> SiteRecord:
    decision: Decision = select(kind, name, dtype, cost, ctx.spec, ctx.config, blocker)
    cmr = None
    if kind == "linear" and dtype in SUPPORTED_DTYPES:
        cmr = ctx.spec.cmr(dtype)
    record = SiteRecord(name=name, kind=kind, op=op, shapes=shapes, dtype=str(dtype).replace("torch.", ""),
                        flops=cost.flops, bytes=cost.bytes, intensity=cost.intensity, cmr=cmr,
                        scheme=decision.scheme, reason=decision.reason, graph=ctx.graph_index,
                        dynamic=cost.dynamic)
    ctx.records.append(record)
    return record


def note_runs(ctx: PassContext, record: SiteRecord, verdict: Tuple[str, Optional[str]]) -> None:
    """What runs the site on the target (ops/support.py: a kernel or the reference op), and on a
    GPU target why where it is not the kernel as it is (the reference op, zero-padded heads)."""
    runs, note = verdict
    record.runs = runs
    if note and ctx.spec.device_class != "cpu":
        record.reason += f"; {note}" if runs == support.KERNEL else f"; on {ctx.spec.name} it runs the reference op: {note}"


def note_gemm_kernel(ctx: PassContext, record: SiteRecord, x: torch.Tensor, n: int, k: int, wb: int = 1,
                     allowed: Tuple[int, ...] = GLOBAL_BNS) -> None:
    """Where a linear site runs a GEMM kernel on the target: which configuration (support.gemm_note),
    as the launcher will choose it for these shapes."""
    note = support.gemm_note(ctx.spec, record.scheme, x, n, k, wb, allowed) if record.runs == support.KERNEL else None
    if note:
        record.reason += f"; {note}"


def register_site(ctx: PassContext, record: SiteRecord, static_weight: bool = True) -> int:
    record.site_id = new_site(ctx, record.name, record.kind, record.scheme, static_weight)
    return record.site_id


def new_site(ctx: PassContext, name: str, kind: str, scheme: str, static_weight: bool = True) -> int:
    """The telemetry site of a protected op under the compile's policy and thresholds."""
    cfg = ctx.config
    return telemetry.register(name, kind, scheme, cfg.policy, cfg.c_sigma, cfg.e_max_safety, static_weight)


def replace(gm: GraphModule, old: Node, target, args: Sequence, dead: Sequence[Node],
            out_dtype: Optional[torch.dtype] = None, in_dtype: Optional[torch.dtype] = None) -> Node:
    """Put target(*args) where ``old`` was (cast back to ``out_dtype`` if the op's output dtype
    ``in_dtype`` differs) and erase ``old`` plus the now-dead nodes of the matched chain."""
    graph = gm.graph
    with graph.inserting_before(old):
        new = graph.call_function(target, tuple(args))
        new.meta = dict(old.meta)
        result = new
        if out_dtype is not None and in_dtype is not None and out_dtype != in_dtype:
            result = graph.call_method("to", (new, out_dtype))
            result.meta = dict(old.meta)
    old.replace_all_uses_with(result)
    for node in [old, *dead]:
        if node.graph is graph and not node.users:
            graph.erase_node(node)
    return result


def transposed_back(node: Node) -> bool:
    """Every use of an attention output [B, H, S, D] swaps its head and sequence dimensions
    (transpose(1, 2), permute(0, 2, 1, 3); through reshapes or views to the same shape, as HF's
    SDPA path has): the output may then lie in memory as [B, S, H, D] (the attention op's
    heads_last), and those uses' results are contiguous. Static shapes only (comparing symbolic
    sizes would add guards)."""
    val = fake(node)
    if val is None or val.dim() != 4 or not node.users or not _static(val):
        return False
    for user in node.users:
        if user.kwargs or not user.args or user.args[0] is not node:
            return False
        if is_call(user, (torch.reshape,), ("reshape", "view")):
            out = fake(user)
            if out is None or not _static(out) or tuple(out.shape) != tuple(val.shape) or not transposed_back(user):
                return False
            continue
        dims = user.args[1:]
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if not all(isinstance(d, int) for d in dims):
            return False
        dims = tuple(d % 4 for d in dims)
        if is_call(user, (torch.transpose,), ("transpose",)):
            ok = sorted(dims) == [1, 2]
        else:
            ok = is_call(user, (torch.permute,), ("permute",)) and dims == (0, 2, 1, 3)
        if not ok:
            return False
    return True


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(s, int) for s in t.shape)


def _full_slice(i) -> bool:
    return i is Ellipsis or (isinstance(i, slice) and i == slice(None, None, None))


def repeated_kv(node: Any) -> Optional[Tuple[Node, List[Node]]]:
    """HF's repeat_kv, ``kv[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)`` (also
    through unsqueeze(2), or view): the unrepeated kv [b, h, s, d] and the chain's nodes, which
    are dead once the attention op reads kv with enable_gqa (query head i reads kv head i // n in
    both). None for anything else, or where the shapes are symbolic."""
    if not is_call(node, (torch.reshape,), ("reshape", "view")) or node.kwargs:
        return None
    expand = node.args[0]
    if not is_call(expand, (), ("expand",)) or len(expand.users) != 1:
        return None
    unsq = expand.args[0]
    if is_call(unsq, (torch.unsqueeze,), ("unsqueeze",)) and len(unsq.args) == 2 and unsq.args[1] in (2, -3):
        pass
    elif is_call(unsq, (operator.getitem,)) and isinstance(unsq.args[1], tuple):
        idx = unsq.args[1]
        if not (len(idx) >= 3 and _full_slice(idx[0]) and _full_slice(idx[1]) and idx[2] is None
                and all(_full_slice(i) for i in idx[3:])):
            return None
    else:
        return None
    if len(unsq.users) != 1:
        return None
    kv = unsq.args[0]
    fkv, fout = fake(kv), fake(node)
    if fkv is None or fout is None or fkv.dim() != 4 or fout.dim() != 4:
        return None
    if not (_static(fkv) and _static(fout)):
        return None
    shape_in, shape_out = tuple(fkv.shape), tuple(fout.shape)
    b, h, s, d = shape_in
    if shape_out[0] != b or shape_out[2:] != (s, d) or shape_out[1] % h:
        return None
    return kv, [node, expand, unsq]


def unrepeat_kv(q: Any, k: Any, v: Any, enable_gqa: bool):
    """(k, v, enable_gqa, dead nodes): k and v before repeat_kv where both were repeated alike
    for q's heads (the attention then reads them with enable_gqa), else as given."""
    rk, rv = (repeated_kv(k), repeated_kv(v)) if not enable_gqa else (None, None)
    fq, fk = fake(q), fake(k)
    if not (rk and rv) or fq is None or fq.dim() != 4 or not _static(fq) or fq.shape[1] != fk.shape[1]:
        return k, v, enable_gqa, []
    if fake(rk[0]).shape[1] != fake(rv[0]).shape[1]:
        return k, v, enable_gqa, []
    return rk[0], rv[0], True, rk[1] + rv[1]


def replace_attention(gm: GraphModule, ctx: PassContext, node: Node, record: SiteRecord, q: Node, k: Node, v: Node,
                      mask: Any, is_causal: bool, scale: Any, enable_gqa: bool, dead: Sequence[Node],
                      unrepeated: Sequence[Node], out_dtype: Optional[torch.dtype] = None,
                      in_dtype: Optional[torch.dtype] = None, causal: Any = None) -> None:
    """The attention op in node's place (both attention passes): K and V read before repeat_kv
    where ``unrepeated`` holds that chain's nodes (erased with ``dead``), is_causal in place of a
    constant causal mask or of that factor of a padded batch's mask (``causal``, a CausalMask of
    passes/causal_mask.py), and the output in [B, S, H, D] memory (heads_last) where the model
    transposes it back and no cast follows; each noted in the site's reason or the counters."""
    if unrepeated:
        record.reason += "; K and V read before repeat_kv (grouped heads in the kernel)"
        counters["attention_gqa_unrepeated"] += 1
    if causal is not None and causal.rest is None:
        mask, is_causal = None, True
        record.reason += "; its mask is a constant equal to is_causal: run as is_causal (no mask reads)"
        counters["attention_causal_mask"] += 1
    elif causal is not None:
        mask, is_causal = causal.rest, True
        record.reason += ("; its mask is a constant causal mask and-ed with a padding mask: run as is_causal "
                          f"with the padding mask{shape_str(fake(causal.rest))} alone")
        counters["attention_causal_padding"] += 1
    note_runs(ctx, record, support.attention(ctx.spec, fake(q), fake(k), fake(v), fake(mask), scale, enable_gqa))
    site = register_site(ctx, record)
    heads_last = out_dtype == in_dtype and transposed_back(node)
    new = replace(gm, node, torch.ops.ftcompile.attention.default,
                  (q, k, v, mask, is_causal, scale, enable_gqa, site) + ((True,) if heads_last else ()),
                  dead=[*dead, *unrepeated], out_dtype=out_dtype, in_dtype=in_dtype)
    if heads_last:
        restride(new, layout.heads_last_strides)
        counters["attention_heads_last"] += 1


def restride(node: Node, strides: Callable[[Sequence[int]], Sequence[int]]) -> None:
    """node's fake value with the strides its op returns (a layout other than contiguous)."""
    val = node.meta.get("val", node.meta.get("example_value"))
    if isinstance(val, torch.Tensor):
        node.meta["val"] = val.new_empty_strided(val.shape, tuple(strides(val.shape)))
        node.meta.pop("example_value", None)


def mark(node: Node) -> None:
    """This node was looked at by a pass (so the leftover report skips it)."""
    node.meta["ft_seen"] = True
