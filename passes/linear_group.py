"""Sibling linears -> one GEMM (``ftcompile.linear_group``), called by the linear pass.

Global-scheme nn.Linear layers that read the same x (a layer's q/k/v projections, an MLP's
gate/up) run as one protected GEMM over their weights side by side: one launch whose tiles fill
the GPU where the members alone would not (Llama-1B at 2048 tokens: its 512-wide k/v projections
make 32 tiles each for 132 SMs, 33 us a call against 10 for cuBLAS; q/k/v as one GEMM 60 us
against 101: benchmarks/NOTES.md, session 23), with one check per output row over all members.
Nothing is copied: the kernel reads each member's weight through its own TMA descriptor, so no
tile may straddle two members (every member but the last spans whole 128-column tiles). Each
member's output is a narrow view of the group's; explain names the group on every member.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch.fx import GraphModule, Node

from ftcompile.ops.cuda_gemm import GLOBAL_BNS, MAX_GROUP
from ftcompile.report import SiteRecord

from .common import PassContext, fake, new_site, note_gemm_kernel

TILE = min(GLOBAL_BNS)  # the narrowest global tile: members but the last span whole ones


@dataclass
class Candidate:
    """A global-scheme linear (x W^T + b, W a parameter [N, K]) that may join a group."""
    node: Node
    x: Node
    w: Node
    b: Optional[Node]
    record: SiteRecord
    n: int


def plan(candidates: List[Candidate]) -> List[List[Candidate]]:
    """Groups of 2 to MAX_GROUP candidates reading the same x, all with a bias or none, in graph
    order except that a member whose N is not a whole number of tiles goes last (one per group)."""
    by_input: Dict[tuple, List[Candidate]] = defaultdict(list)
    for c in candidates:
        by_input[(c.x, c.b is None)].append(c)
    groups = []
    for members in by_input.values():
        whole = [c for c in members if c.n % TILE == 0]
        ragged = [c for c in members if c.n % TILE]
        for i in range(0, len(whole), MAX_GROUP):
            chunk = whole[i:i + MAX_GROUP]
            if len(chunk) < MAX_GROUP and ragged:
                chunk.append(ragged.pop(0))
            if len(chunk) > 1:
                groups.append(chunk)
    return groups


def group_name(members: List[Candidate]) -> str:
    """"model.layers.0.self_attn.{q_proj,k_proj,v_proj}" from the members' site names."""
    names = [c.record.name for c in members]
    parts = [n.split(".") for n in names]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    prefix = ".".join(parts[0][:common])
    tails = ",".join(".".join(p[common:]) for p in parts)
    return f"{prefix}.{{{tails}}}" if prefix else f"{{{tails}}}"


def rewrite(gm: GraphModule, ctx: PassContext, members: List[Candidate]) -> None:
    """One linear_group node before the first member (graph order); each member's uses take its
    columns of the group's output."""
    graph = gm.graph
    order = {node: i for i, node in enumerate(graph.nodes)}
    first = min((c.node for c in members), key=order.__getitem__)
    for c in members:  # get_attr weights defined after the first member move up (they take no inputs)
        for p in (c.w, c.b):
            if p is not None and p.op == "get_attr" and order[p] > order[first]:
                first.prepend(p)
    name = ctx.unique(group_name(members))
    width = sum(c.n for c in members)
    site = new_site(ctx, name, "linear", "global")  # candidates' weights are parameters
    biases = [c.b for c in members] if members[0].b is not None else []
    with graph.inserting_before(first):
        new = graph.call_function(torch.ops.ftcompile.linear_group.default,
                                  (members[0].x, [c.w for c in members], biases, site))
        new.meta = dict(first.meta)
        val = first.meta.get("val", first.meta.get("example_value"))
        if isinstance(val, torch.Tensor):  # the group's output: the members' widths side by side
            new.meta["val"] = val.new_empty(*val.shape[:-1], width)
            new.meta.pop("example_value", None)
    # the kernel the group runs (its member boundaries on whole tiles, as the launcher allows)
    ends = [sum(c.n for c in members[:i + 1]) for i in range(len(members) - 1)]
    allowed = tuple(b for b in GLOBAL_BNS if all(e % b == 0 for e in ends))
    offset = 0
    for c in members:
        others = ", ".join(o.record.name for o in members if o is not c)
        c.record.site_id = site
        c.record.group = name
        c.record.reason += f"; one GEMM with {others} ({width} columns: {name})"
        fx = fake(c.x)
        note_gemm_kernel(ctx, c.record, fx, width, fx.shape[-1], allowed=allowed)
        with graph.inserting_before(c.node):
            view = graph.call_function(torch.narrow, (new, -1, offset, c.n))
            view.meta = dict(c.node.meta)
        c.node.replace_all_uses_with(view)
        graph.erase_node(c.node)
        offset += c.n
