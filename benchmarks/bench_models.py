"""Whole models on the GPU: eager, inductor (default backend) and backend="ft" (inductor), each
without and with CUDA graphs (mode="reduce-overhead"), the ANCHORS.md configurations, random
weights. Prints a table of ms per forward and ft's overhead over inductor, measured in one run,
and writes JSON + markdown under --out. --padded left|right: a padded batch (an attention mask
keeping 100 % of the first sequence down to ~50 % of the last), as batched generation's prefill
(left) or a classifier's batch (right) hands it over.

    python benchmarks/bench_models.py --out benchmarks/results [--only gpt2] [--padded left]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from ftcompile.timing import median_ms

CONFIGS = {
    # name: (builder, dtype, batch, seq)
    "gpt2-small fp16 8x512": ("gpt2", torch.float16, 8, 512),
    "bert-base fp16 32x128": ("bert", torch.float16, 32, 128),
    "llama-1b bf16 1x2048": ("llama", torch.bfloat16, 1, 2048),
    "llama-1b bf16 8x512": ("llama", torch.bfloat16, 8, 512),
}


def build(kind: str):
    import transformers as tf
    if kind == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(attn_implementation="sdpa"))
    if kind == "bert":
        return tf.BertModel(tf.BertConfig(attn_implementation="sdpa"))
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=32000, attn_implementation="sdpa"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--only", default=None, help="substring of a config name")
    parser.add_argument("--padded", choices=("left", "right"), default=None)
    args = parser.parse_args()
    import ftcompile
    from ftcompile.backend import collect

    rows = []
    for name, (kind, dtype, batch, seq) in CONFIGS.items():
        if args.only and args.only not in name:
            continue
        torch.manual_seed(0)
        model = build(kind).eval().cuda().to(dtype)
        ids = torch.randint(0, 1000, (batch, seq), device="cuda")
        kw, kept = {}, ...  # kept: the tokens compared (a padded query's output is nobody's contract)
        if args.padded:
            keep = torch.ones(batch, seq, dtype=torch.long, device="cuda")
            for i in range(batch):  # sequence i keeps seq - i * seq / (2 batch) tokens
                n = seq - i * seq // (2 * batch)
                keep[i, n:] = 0 if args.padded == "right" else 1
                keep[i, :seq - n] = 0 if args.padded == "left" else 1
            kw, kept = {"attention_mask": keep}, keep.bool()
            name = f"{name} padded {args.padded}"
        row = {"model": name}
        with torch.no_grad():
            row["eager_ms"] = median_ms(lambda: model(ids, **kw))
            torch._dynamo.reset()
            t0 = time.time()
            ind = torch.compile(model)
            ref = ind(ids, **kw)  # the reference output (calling ind after the reset below recompiles)
            row["inductor_compile_s"] = time.time() - t0
            row["inductor_ms"] = median_ms(lambda: ind(ids, **kw))
            torch._dynamo.reset()
            ftcompile.reset_stats()  # alarms are counted per model
            t0 = time.time()
            ft = torch.compile(model, backend="ft")
            with collect() as records:  # the site records of this compile (what explain reports)
                out = ft(ids, **kw)
            row["ft_compile_s"] = time.time() - t0
            row["ft_ms"] = median_ms(lambda: ft(ids, **kw))
            first = lambda o: o[0] if isinstance(o, tuple) else (o.logits if hasattr(o, "logits") else o.last_hidden_state)
            row["max_abs_diff_vs_inductor"] = (first(out)[kept].float() - first(ref)[kept].float()).abs().max().item()
            # CUDA graphs (mode="reduce-overhead"), both backends: these models are host-bound
            # without them (one Python op call per site), so this pair compares the kernels.
            del ind, ft
            torch._dynamo.reset()
            ind_g = torch.compile(model, mode="reduce-overhead")
            row["inductor_graphs_ms"] = median_ms(lambda: ind_g(ids, **kw))
            torch._dynamo.reset()
            ft_g = torch.compile(model, backend="ft", mode="reduce-overhead")
            try:
                row["ft_graphs_ms"] = median_ms(lambda: ft_g(ids, **kw))
                row["max_abs_diff_graphs"] = (first(ft_g(ids, **kw))[kept].float() - first(ref)[kept].float()).abs().max().item()
            except ftcompile.GraphCaptureError as exc:  # said, not hidden (NOTES.md)
                row["ft_graphs_error"] = str(exc)
            del ind_g, ft_g
        stats = ftcompile.stats()
        row["false_alarms"] = sum(v["detected"] for v in stats.values())
        row["checks"] = sum(v["checks"] for v in stats.values())
        row["sites_protected"] = sum(r.protected for r in records)
        row["sites_left"] = sum(not r.protected for r in records)
        row["schemes"] = {s: sum(r.scheme == s for r in records) for s in ("efta", "global", "thread", "none")}
        row["ft_over_inductor"] = row["ft_ms"] / row["inductor_ms"]
        row["ft_over_inductor_graphs"] = row["ft_graphs_ms"] / row["inductor_graphs_ms"] if "ft_graphs_ms" in row else None
        rows.append(row)
        print(json.dumps(row), flush=True)
        del model
        torch.cuda.empty_cache()

    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version()}
    os.makedirs(args.out, exist_ok=True)
    stem = "models" + (f"_padded_{args.padded}" if args.padded else "")
    with open(os.path.join(args.out, f"{stem}.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = ["| model | eager ms | inductor ms | ft ms | ft / inductor | inductor, graphs ms | ft, graphs ms | "
             "ft / inductor, graphs | protected | left | schemes | max diff | max diff, graphs | false alarms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        graphs = (f"{r['ft_graphs_ms']:.2f} | {r['ft_over_inductor_graphs']:.2f}x" if "ft_graphs_ms" in r
                  else "capture refused | -")
        diff_g = f"{r['max_abs_diff_graphs']:.2e}" if "max_abs_diff_graphs" in r else "-"
        lines.append(f"| {r['model']} | {r['eager_ms']:.2f} | {r['inductor_ms']:.2f} | {r['ft_ms']:.2f} | "
                     f"{r['ft_over_inductor']:.2f}x | {r['inductor_graphs_ms']:.2f} | {graphs} | "
                     f"{r['sites_protected']} | {r['sites_left']} | "
                     f"{r['schemes']} | {r['max_abs_diff_vs_inductor']:.2e} | {diff_g} | {r['false_alarms']} |")
    table = "\n".join(lines)
    with open(os.path.join(args.out, f"{stem}.md"), "w") as f:
        f.write(f"# Whole models on {meta['gpu']} (torch {meta['torch']}, CUDA {meta['cuda']})\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
