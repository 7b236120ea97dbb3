"""Hand-written attention -> ftcompile.attention (EFTA), anchored on softmax(dim=-1).

Recognised chain (HF GPT-2, BERT, T5, Llama "eager" attention, and their older forms):

    matmul(q, k.transpose(-2, -1)) [* c | / c] [+ mask / position bias ...] [.float()]
      -> softmax(-1[, dtype]) [.to(dtype) / .type(dtype)] [dropout(p, training=False)]
      -> matmul(., v)

Scales and additive terms may come in any order: a term added before a scale is multiplied by
it. Anything else in the chain, or probabilities used outside it (output_attentions=True), leaves
the site as it was, reported with the reason.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch.fx import GraphModule, Node

from ftcompile.cost import attention_cost, numel

from .causal_mask import CausalMask, is_constant_causal
from .common import (ADDS, CASTS, DIVS, DROPOUT, MATMUL_METHODS, MATMULS, MULS, SOFTMAX,
                     PassContext, arg, counters, decide, fake, is_call, mark, module_path,
                     replace_attention, scalar, shape_str, unrepeat_kv)


class NoMatch(Exception):
    """The chain is not attention we can replace; the message says why."""


def _dtype_only_use(user: Node, node: Node) -> bool:
    """x.type_as(node) reads only node's dtype (T5 casts the probabilities back this way)."""
    return user.op == "call_method" and user.target == "type_as" and user.args[1] is node


def _single_user(node: Node) -> bool:
    return sum(not _dtype_only_use(u, node) for u in node.users) == 1


def _is_cast(node) -> bool:
    if is_call(node, (), ("type_as",)):
        return True
    return is_call(node, (), CASTS) and all(not isinstance(a, Node) for a in node.args[1:])


def _is_matmul(node) -> bool:
    return is_call(node, MATMULS, MATMUL_METHODS)


def _softmax_dim_ok(node: Node) -> bool:
    dim = arg(node, 1, "dim")
    value = fake(node)
    return dim == -1 or (value is not None and dim == value.dim() - 1)


def _leads_to_scores(node, depth: int = 8) -> bool:
    """Does this operand (through casts, scales and adds) come from a matmul?"""
    for _ in range(depth):
        if _is_matmul(node):
            return True
        if _is_cast(node) or is_call(node, MULS | DIVS, ("mul", "div")):
            node = node.args[0] if isinstance(node.args[0], Node) else node.args[1]
        elif is_call(node, ADDS, ("add", "add_")):
            return any(_leads_to_scores(a, depth - 1) for a in node.args[:2] if isinstance(a, Node))
        else:
            return False
    return False


def _walk_back(softmax: Node) -> Tuple[Node, float, List[Tuple[Node, float]], List[Node]]:
    """(scores matmul, scale, [(additive term, its multiplier)], chain nodes between)."""
    cur = softmax.args[0]
    scale = 1.0
    terms: List[Tuple[Node, float]] = []
    chain: List[Node] = []
    while not _is_matmul(cur):
        if not isinstance(cur, Node) or not _single_user(cur):
            raise NoMatch("the scores feed more than the softmax")
        if _is_cast(cur):
            nxt = cur.args[0]
        elif is_call(cur, MULS | DIVS, ("mul", "div", "mul_", "div_")):
            a, b = cur.args[:2]
            c = scalar(b) if isinstance(a, Node) else scalar(a)
            nxt = a if isinstance(a, Node) else b
            if c is None or (is_call(cur, DIVS, ("div", "div_")) and not isinstance(a, Node)):
                raise NoMatch("the scores are scaled by a tensor, not a constant")
            if is_call(cur, DIVS, ("div", "div_")):
                c = 1.0 / c
            scale *= c
        elif is_call(cur, ADDS, ("add", "add_")):
            a, b = cur.args[:2]
            if arg(cur, 2, "alpha", 1) != 1:
                raise NoMatch("add with alpha != 1")
            if not (isinstance(a, Node) and isinstance(b, Node)):
                raise NoMatch("a constant added to the scores")
            if _leads_to_scores(a):
                nxt, term = a, b
            elif _leads_to_scores(b):
                nxt, term = b, a
            else:
                raise NoMatch("could not tell the scores from the added term")
            if fake(term) is None or fake(term).dtype == torch.bool:
                raise NoMatch("the added term is not a float tensor")
            # Walking backwards, ``scale`` holds the factors applied after this term.
            terms.append((term, scale))
        else:
            raise NoMatch(f"unexpected {cur.op} {getattr(cur.target, '__name__', cur.target)} "
                          "between the scores and the softmax")
        chain.append(cur)
        cur = nxt
    if not _single_user(cur):
        raise NoMatch("the QK^T product feeds more than the softmax")
    return cur, scale, terms, chain


def _walk_forward(softmax: Node) -> Tuple[Node, List[Node]]:
    """(the P @ V matmul, the cast/dropout nodes between)."""
    cur, chain = softmax, []
    while True:
        if len(cur.users) != 1:
            raise NoMatch("attention probabilities are used outside the attention "
                          "(e.g. output_attentions=True)")
        user = next(iter(cur.users))
        if _is_cast(user):
            pass
        elif is_call(user, DROPOUT, ("dropout",)):
            p = scalar(arg(user, 1, "p", 0.5))
            training = arg(user, 2, "training", True)
            if p is None or (p > 0 and training is not False):
                raise NoMatch(f"dropout p={p} in training mode cannot be protected")
        elif _is_matmul(user) and user.args[0] is cur:
            return user, chain
        else:
            raise NoMatch("the softmax output does not feed a matmul with V")
        chain.append(user)
        cur = user


def _key_of(gm: GraphModule, kt: Node, before: Node) -> Tuple[Node, Optional[Node]]:
    """k from k^T: unwrap a transpose of the last two dims, else insert one."""
    ft = fake(kt)
    nd = ft.dim()
    if is_call(kt, (torch.transpose,), ("transpose",)):
        dims = {d % nd for d in kt.args[1:3]}
        if dims == {nd - 1, nd - 2} and _single_user(kt):
            return kt.args[0], kt
    with gm.graph.inserting_before(before):
        k = gm.graph.call_method("transpose", (kt, -2, -1))
        k.meta["example_value"] = ft.transpose(-2, -1)
    return k, None


def run(gm: GraphModule, ctx: PassContext) -> GraphModule:
    for softmax in list(gm.graph.nodes):
        if not is_call(softmax, SOFTMAX, ("softmax",)) or not _softmax_dim_ok(softmax):
            continue
        name = ctx.unique(module_path(softmax) or softmax.name)
        try:
            scores, scale, terms, back = _walk_back(softmax)
            out, fwd = _walk_forward(softmax)
        except NoMatch as why:
            fs = fake(softmax)
            decide(ctx, "attention", "softmax-chain", name, fs.dtype, attention_cost(
                fs.shape, fs.shape, fs.shape, fs.dtype), shape_str(fs), f"not protected: {why}")
            continue
        q, kt = scores.args[:2]
        v = out.args[1]
        fq, fkt, fv, fo = fake(q), fake(kt), fake(v), fake(out)
        mark(scores)
        mark(out)
        blocker = None
        if not (fq.dtype == fkt.dtype == fv.dtype):
            blocker = f"q, k, v dtypes differ ({fq.dtype}, {fkt.dtype}, {fv.dtype})"
        elif fq.dim() < 3:
            blocker = "attention operands must be at least 3-D (batch, seq, dim)"
        # HF's causal mask, built from constants in the graph and added unscaled: is_causal
        causal_mask = blocker is None and len(terms) == 1 and terms[0][1] == 1.0 and \
            is_constant_causal(terms[0][0], fq, fkt.transpose(-2, -1))
        mask_numel = 0 if causal_mask else sum(numel(fake(t).shape) for t, _ in terms)
        cost = attention_cost(fq.shape, fkt.transpose(-2, -1).shape, fv.shape, fq.dtype,
                              mask_numel, fq.element_size())
        shapes = shape_str(fq, fkt.transpose(-2, -1), fv) + (f" +{len(terms)} term(s)" if terms else "")
        record = decide(ctx, "attention", "softmax-chain", name, fq.dtype, cost, shapes, blocker)
        if record.scheme != "efta":
            continue
        k, kt_node = _key_of(gm, kt, out)
        k, v, gqa, unrepeated = unrepeat_kv(q, k, v, False)
        mask = None if causal_mask else _sum_terms(gm, terms, out)
        dead = [*reversed(fwd), softmax, *back, scores] + ([kt_node] if kt_node else [])
        replace_attention(gm, ctx, out, record, q, k, v, mask, False, scale, gqa, dead, unrepeated,
                          out_dtype=fo.dtype, in_dtype=fq.dtype, causal=CausalMask() if causal_mask else None)
        counters["attention_softmax"] += 1
    return gm


def _sum_terms(gm: GraphModule, terms: List[Tuple[Node, float]], before: Node) -> Optional[Node]:
    """One additive mask from the matched terms (each multiplied by the scale applied after it)."""
    graph = gm.graph
    total = None
    with graph.inserting_before(before):
        for term, mult in terms:
            if mult != 1.0:
                term = graph.call_function(torch.mul, (term, mult))
            total = term if total is None else graph.call_function(torch.add, (total, term))
    return total
