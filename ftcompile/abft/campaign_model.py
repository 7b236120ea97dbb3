"""Model-level campaigns: does a fault inside a compiled model reach its output, with and without
protection?

The model is compiled twice with the ft backend: protected (policy "correct") and unprotected
(policy "detect": the same ops hit by the same fault, counted but never corrected, which is what
a model without protection computes). Each trial injects one seeded fault (site, stage, bit,
element) into both and compares their logits with the fault-free run: the output "changed" when
the max logit error exceeds rounding (campaign_data.tolerance against an fp64 eager run), and
separately when it changed by more than 0.1% of the largest logit ("significant") and when a
top-1 token changed. Trials whose fault found nothing to hit (stage "rescale" with a single key
tile) are not counted.
"""
from __future__ import annotations

import copy
import random
from typing import Dict, List, Optional, Sequence

import torch

from .. import telemetry
from . import campaign_data as cd
from .injection import ATTENTION_STAGES, FORMATS, GEMM_STAGES, FaultSpec, inject

SIGNIFICANT = 1e-3  # a logit error above this fraction of max |logit| is a significant change


def small_gpt2(seed: int = 0, n_layer: int = 2, n_embd: int = 128, n_head: int = 4,
               vocab_size: int = 512, n_positions: int = 128) -> torch.nn.Module:
    """A GPT2LMHeadModel from a small config with random weights (nothing downloaded)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the small vocab makes it warn about GPT-2's token ids
    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, vocab_size=vocab_size,
                     n_positions=n_positions, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval()


def _logits(out) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _total_counts(device) -> torch.Tensor:
    return telemetry.counters(device).sum(0)


def _run(model, inputs, device, spec: Optional[FaultSpec] = None):
    before = _total_counts(device)
    with torch.no_grad():
        if spec is None:
            logits, events = _logits(model(inputs)).float(), []
        else:
            with inject(spec) as inj:
                logits = _logits(model(inputs)).float()
            events = inj.events
    delta = dict(zip(telemetry.FIELDS, (_total_counts(device) - before).tolist()))
    return logits, events, delta


def compile_pair(model: torch.nn.Module, inputs: torch.Tensor, eager: bool = True):
    """(protected, unprotected, site records) of ``model`` compiled with the ft backend."""
    from .. import backend

    protected = torch.compile(model, backend="ft", options={"eager": eager, "policy": "correct"})
    unprotected = torch.compile(copy.deepcopy(model), backend="ft",
                                options={"eager": eager, "policy": "detect"})
    with backend.collect() as records, torch.no_grad():
        protected(inputs)
        unprotected(inputs)
    sites = {}
    for r in records:
        if r.protected:
            sites[r.name] = r.kind
    return protected, unprotected, sites


def run_model_campaign(model: Optional[torch.nn.Module] = None,
                       inputs: Optional[torch.Tensor] = None, trials: int = 200, seed: int = 0,
                       bits: Optional[Sequence[int]] = None, fmt: str = "fp32",
                       stages: Optional[Sequence[str]] = None, sites: Optional[Sequence[str]] = None,
                       eager: bool = True, progress: bool = True) -> Dict:
    """``trials`` seeded single faults, each in a uniformly drawn protected site and stage.

    bits: candidate bit positions (default: every bit of ``fmt``); stages: restrict the stages;
    sites: restrict the site names. Returns the configuration, per-trial records and a summary
    with the silent-corruption rates of the unprotected and the protected model."""
    from tqdm.auto import tqdm

    model = model if model is not None else small_gpt2(seed)
    if inputs is None:
        g = torch.Generator().manual_seed(seed)
        vocab = getattr(getattr(model, "config", None), "vocab_size", 512)
        inputs = torch.randint(0, vocab, (1, 128), generator=g)
    device = inputs.device
    protected, unprotected, kinds = compile_pair(model, inputs, eager)
    names = sorted(n for n in kinds if sites is None or n in sites)
    if not names:
        raise ValueError("no protected site to inject into (check `sites` and the ft backend)")
    width = FORMATS[fmt][2]  # bits of the format
    bits = list(range(width)) if bits is None else list(bits)

    clean, _, clean_counts = _run(protected, inputs, device)
    big = SIGNIFICANT * float(clean.abs().max())
    clean_u, _, _ = _run(unprotected, inputs, device)
    with torch.no_grad():
        ref = _logits(copy.deepcopy(model).double()(inputs)).double()
    tol = cd.tolerance(clean, ref)
    top1 = clean.argmax(-1)

    rng = random.Random(seed)
    records: List[Dict] = []
    skipped = 0
    for t in tqdm(range(trials), desc="model campaign", disable=not progress, leave=False):
        name = rng.choice(names)
        choices = ATTENTION_STAGES if kinds[name] == "attention" else GEMM_STAGES
        choices = [s for s in choices if stages is None or s in stages]
        if not choices:
            continue
        spec = FaultSpec(site=name, stage=rng.choice(choices), bit=rng.choice(bits), fmt=fmt,
                         seed=seed * 7919 + t, calls=1)
        rec = {"trial": t, "site": name, "kind": kinds[name], "stage": spec.stage, "bit": spec.bit}
        for label, model_ in (("unprotected", unprotected), ("protected", protected)):
            logits, events, counts = _run(model_, inputs, device, spec)
            err = cd.max_error(logits, clean)
            changed = not (cd.max_error(logits, ref) <= tol)
            flipped = bool((logits.argmax(-1) != top1).any()) or err == float("inf")
            if label == "unprotected":
                outcome = "missed" if changed else "masked"  # nothing acts on a detection
            else:
                outcome = cd.classify(bool(events), counts["detected"], counts["corrected"],
                                      counts["uncorrectable"], not changed)
            rec[label] = {"injected": bool(events), "detected": counts["detected"],
                          "corrected": counts["corrected"],
                          "uncorrectable": counts["uncorrectable"], "logit_error": err,
                          "changed": changed, "significant": not err <= big,
                          "top1_changed": flipped, "outcome": outcome}
            if events:
                rec["before"], rec["after"] = events[0].before, events[0].after
        if rec["protected"]["injected"]:  # e.g. no "rescale" with a single key tile
            records.append(rec)
        else:
            skipped += 1
    return {"model": type(model).__name__, "inputs": list(inputs.shape), "trials": len(records),
            "not_injected": skipped, "significant_logit_error": big,
            "seed": seed, "fmt": fmt, "bits": bits, "sites": kinds, "logit_tolerance": tol,
            "clean_false_alarms": clean_counts["detected"],
            "clean_unprotected_matches": bool(cd.max_error(clean_u, clean) == 0.0),
            "summary": summarize(records), "records": records}


def summarize(records: List[Dict]) -> Dict:
    """SDC / DUE / corrected / masked rates of both models, overall and by site kind and stage."""
    def rates(rs: List[Dict]) -> Dict:
        n = len(rs)
        out = {"trials": n}
        for label in ("unprotected", "protected"):
            c = cd.tally(r[label]["outcome"] for r in rs)
            out[label] = {
                **c,
                "sdc_rate": cd.rate(c["missed"] + c["miscorrected"], n),
                "top1_sdc_rate": cd.rate(sum(1 for r in rs if r[label]["top1_changed"]
                                             and r[label]["outcome"] in ("missed", "miscorrected")), n),
                "significant_sdc_rate": cd.rate(sum(
                    1 for r in rs if r[label]["significant"]
                    and r[label]["outcome"] in ("missed", "miscorrected")), n),
                "output_changed_rate": cd.rate(sum(1 for r in rs if r[label]["changed"]), n),
                "top1_changed_rate": cd.rate(sum(1 for r in rs if r[label]["top1_changed"]), n),
                "detected_rate": cd.rate(sum(1 for r in rs if r[label]["detected"]), n)}
        return out

    by_kind: Dict[str, List[Dict]] = {}
    by_stage: Dict[str, List[Dict]] = {}
    by_bit: Dict[int, List[Dict]] = {}
    for r in records:
        by_kind.setdefault(r["kind"], []).append(r)
        by_stage.setdefault(r["stage"], []).append(r)
        by_bit.setdefault(r["bit"], []).append(r)
    return {"overall": rates(records),
            "by_kind": {k: rates(v) for k, v in sorted(by_kind.items())},
            "by_stage": {k: rates(v) for k, v in sorted(by_stage.items())},
            "by_bit": {str(k): rates(v) for k, v in sorted(by_bit.items())}}
