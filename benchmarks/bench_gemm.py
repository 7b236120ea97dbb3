"""Protected linear kernels (csrc/gemm) against cuBLAS on the GPU.

    python benchmarks/bench_gemm.py [--smoke] [--out DIR] [--quick]

Variants per shape: cuBLAS (F.linear), ours with protection off, on, and on with one injected
fault per call (output stage, +10 at a random element: detection, location, one-element
recompute, recheck). Device time only: each variant is captured in a CUDA graph over enough
rotated input sets to exceed L2, replayed, and timed with CUDA events (median of replays; a
shape's variants in turn, round by round, so clock drift does not enter their ratios).
Writes gemm_bench.json and gemm_bench.md (and prints the tables) to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ftcompile  # noqa: E402
from ftcompile import FaultSpec, telemetry  # noqa: E402
from ftcompile.abft import injection  # noqa: E402
from ftcompile.ops import cuda_gemm  # noqa: E402
from ftcompile.timing import interleaved_median_ms, median_ms  # noqa: E402

L2_BYTES = 60 << 20
GPT2 = [(768, 2304), (768, 768), (768, 3072), (3072, 768)]  # (K, N) of attn c_attn, c_proj, mlp
LLAMA7 = [(4096, 4096), (4096, 11008), (11008, 4096)]
LLAMA8 = [(4096, 1024), (4096, 14336), (14336, 4096)]
# The global scheme's compute-bound table (M x N x K): GPT-2 layers at 4096 rows, Llama layers at
# 2048, squares.
GLOBAL_SHAPES = ([(8192, 2304, 768), (8192, 768, 3072), (4096, 4096, 4096)]
                 + [(4096, n, k) for k, n in GPT2] + [(4096, 50257, 768)]  # GPT-2's LM head: N % 8 != 0
                 + [(2048, n, k) for k, n in LLAMA7 + LLAMA8]
                 + [(s, s, s) for s in (1024, 2048, 8192)])


def capture(call, sets) -> torch.cuda.CUDAGraph:
    """One CUDA graph that calls `call` once per rotated input set (warmed up outside capture:
    caches, workspaces, lazy init)."""
    for args in sets:
        call(*args)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for args in sets:
            call(*args)
    return g


def graph_time(call, sets) -> float:
    """ms per call: the graph of `capture` replayed."""
    return graph_times({"call": call}, sets)["call"]


def graph_times(calls, sets, failed=None) -> dict:
    """ms per call of each of `calls` (name -> call): each captured as one graph over `sets`, then
    the graphs replayed in turn, round by round (interleaved_median_ms: clock drift does not fall
    between them). With `failed` (a dict), a call whose capture raises is left out and its
    exception recorded there instead of raised."""
    graphs = {}
    for name, call in calls.items():
        try:
            graphs[name] = capture(call, sets)
        except Exception as exc:
            if failed is None:
                raise
            failed[name] = exc
    timed = interleaved_median_ms({name: g.replay for name, g in graphs.items()}, 15, before=flush_l2)
    return {name: ms / len(sets) for name, ms in timed.items()}


_FLUSH = []


def flush_l2():
    """Reads twice L2's bytes (clean lines: nothing to write back), so a timed graph does not start
    with the lines the previous variant left: run 73c, a graph replayed right after cuBLAS's ran
    1-2 us a call faster than after a thin-kernel one (cuBLAS leaves the last set's W in L2, the
    thin kernel's evict-first loads do not), which favoured whichever variant came second."""
    if not _FLUSH:
        _FLUSH.append(torch.empty(2 * L2_BYTES // 4, dtype=torch.float32, device="cuda").fill_(1.0))
    _FLUSH[0].sum()


def make_sets(m, n, k, dtype, bias=True, budget=None):
    per = (m * k + n * k + m * n + n) * 2
    rot = max(1, min(24, math.ceil(3 * L2_BYTES / per)))
    if budget is not None:
        rot = max(1, min(rot, budget // per))
    out = []
    for _ in range(rot):
        x = torch.randn(m, k, device="cuda", dtype=dtype)
        w = (torch.randn(n, k, device="cuda", dtype=dtype) * k ** -0.5)
        b = torch.randn(n, device="cuda", dtype=dtype) if bias else None
        out.append((x, w, b))
    return out


def ceilings():
    n = 1 << 30
    a, b = torch.empty(n, dtype=torch.uint8, device="cuda"), torch.empty(n, dtype=torch.uint8, device="cuda")
    copy_ms = median_ms(lambda: b.copy_(a), 15)
    del a, b
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm_ms = median_ms(lambda: torch.mm(x, w), 15)
    del x, w
    torch.cuda.empty_cache()
    return {"copy_GBs": 2 * n / copy_ms / 1e6, "mm_bf16_TFLOPs": 2 * 8192 ** 3 / mm_ms / 1e9}


class Runner:
    def __init__(self):
        sid = telemetry.register("bench.gemm", "linear", "bench", "correct", 2.5, 1.0)
        self.site = telemetry.site(sid)
        self.inj = injection.Injection(FaultSpec(site="bench.gemm", stage="output", value=10.0))
        # Adds 0: the injecting kernel build runs, nothing is detected. The global kernel's
        # injection code is a build of its own (it would slow the production build); "fault cost"
        # compares a real fault with this, so it measures detection and correction alone.
        self.noop = injection.Injection(FaultSpec(site="bench.gemm", stage="output", value=0.0))
        self.log = torch.zeros(cuda_gemm.MAX_INJ, 2, device="cuda")
        self.g = torch.Generator().manual_seed(0)

    def variant(self, name, scheme=None, split=None, mtile=None, nbox=None, stages=None, wm=None, kernel=None,
                warps=None, pdl=None, bn=None):
        if name == "cublas":
            return lambda x, w, b: F.linear(x, w, b)
        cluster = 2 if name.endswith("_mc") else None
        name = name[:-3] if name.endswith("_mc") else name
        name, _, check = name.partition("@")  # "on@tiles": the global scheme with a forced check
        protect = name != "off"

        def call(x, w, b):
            plan = None
            if name in ("fault", "noop"):
                m, n = x.shape[0], w.shape[0]
                r, c = (int(torch.randint(0, m, (1,), generator=self.g)),
                        int(torch.randint(0, n, (1,), generator=self.g)))
                plan = [(self.inj if name == "fault" else self.noop, "output", r, c, -1)]
            return cuda_gemm.run(scheme, x, w, b, self.site, protect=protect, inject=False,
                                 split=split, mtile=mtile, nbox=nbox, stages=stages, wm=wm, plan=plan,
                                 log=self.log, cluster=cluster, kernel=kernel, warps=warps, pdl=pdl, bn=bn,
                                 **({"check": check} if check else {}))
        return call

    def global_variant(self, spec):
        """A global-scheme variant spelled "name[#width[/split]]" ("off#128/1", "on@tiles#192")."""
        name, _, shape = spec.partition("#")
        bn, _, split = shape.partition("/")
        return self.variant(name, "linear_global", bn=int(bn) if bn else None, split=int(split) if split else None)


def record(shape, dtype, variant, ms, copy_gbs):
    m, n, k = shape
    flops, nbytes = 2 * m * n * k, (m * k + n * k + m * n + n) * 2
    return {"M": m, "N": n, "K": k, "dtype": str(dtype).split(".")[-1], "variant": variant, "ms": ms,
            "TFLOPs": flops / ms / 1e9, "GBs": nbytes / ms / 1e6, "intensity": flops / nbytes,
            "pct_copy_bw": 100 * nbytes / ms / 1e6 / copy_gbs}


def bench_shape(runner, shape, dtype, variants, copy_gbs, rows):
    """Every variant of a shape timed by graph_times (in turn, round by round: the ratios between
    variants, a fault's cost of a few percent among them, do not carry clock drift)."""
    m, n, k = shape
    sets = make_sets(m, n, k, dtype, budget=6 << 30)
    failed = {}
    timed = graph_times({label: runner.variant(name, scheme, **kw) for label, scheme, name, kw in variants}, sets,
                        failed)
    res = {}
    for label, exc in failed.items():  # keep going; the table shows the failure
        print(f"  {label} {shape} {dtype}: FAILED {type(exc).__name__}: {exc}", flush=True)
        res[label] = None
    base = timed.get("cublas")
    for label, *_ in variants:
        if label not in timed:
            continue
        ms = timed[label]
        rec = record(shape, dtype, label, ms, copy_gbs)
        rec["ratio_vs_cublas"] = ms / base if base else None
        rows.append(rec)
        res[label] = ms
    del sets
    torch.cuda.empty_cache()
    return res


def fmt_table(title, header, lines):
    out = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def smoke():
    """Tiny correctness runs of every kernel variant (fp64 reference), before pytest."""
    runner = Runner()
    ok = True
    for scheme in ("linear_global", "linear_thread"):
        for dtype in (torch.bfloat16, torch.float16):
            for (m, n, k) in [(1, 64, 64), (37, 200, 136), (300, 520, 1024), (100, 264, 512), (3, 70, 13)]:
                x = torch.randn(m, k, device="cuda", dtype=dtype)
                w = torch.randn(n, k, device="cuda", dtype=dtype) * k ** -0.5
                b = torch.randn(n, device="cuda", dtype=dtype)
                ref = F.linear(x.double(), w.double(), b.double())
                terr = (F.linear(x, w, b).double() - ref).abs().max().item()
                for protect in (False, True):
                    y = cuda_gemm.run(scheme, x, w, b, runner.site, protect=protect, inject=False)
                    torch.cuda.synchronize()
                    err = (y.double() - ref).abs().max().item()
                    good = err <= 2 * terr + 1e-6
                    ok &= good
                    print(f"smoke {scheme:14s} {str(dtype):15s} {m:4d}x{n:4d}x{k:4d} protect={protect!s:5s} "
                          f"err={err:.3e} torch={terr:.3e} {'ok' if good else 'BAD'}", flush=True)
    print("counters:", ftcompile.stats("bench.gemm"))
    return ok


def diag():
    """Where the checks' residuals come from: per trial of the false-positive test, the largest
    |sum - check| / threshold, split into the error of the sum (vs fp64) and of the check."""
    runner = Runner()
    from ftcompile.abft import gemm as ref
    for trial in range(48):
        g = torch.Generator().manual_seed(trial)
        dtype = [torch.bfloat16, torch.float16][trial % 2]
        shift, spread = [(0.0, 1.0), (1.0, 1.0), (0.0, 30.0), (3.0, 0.1)][trial % 4]
        m, n, k = [(24, 192, 192), (1, 4096, 4096), (300, 520, 2048), (16, 11008, 512)][trial % 4]
        x = (torch.randn(m, k, generator=g) * spread + shift).to("cuda", dtype)
        w = (torch.randn(n, k, generator=g) * (0.1 if trial % 3 else 0.02) + 0.01 * (trial % 5)).to("cuda", dtype)
        b = torch.randn(n, generator=g).to("cuda", dtype) if trial % 2 else None
        yd = x.double() @ w.double().T + (b.double() if b is not None else 0)
        line = [f"t{trial:02d} {str(dtype)[6:]:8s} x~({shift},{spread}) {m}x{n}x{k} bias={b is not None}"]
        for scheme in ("linear_global", "linear_thread"):
            if scheme == "linear_global":
                dbg = torch.zeros(m, 3, dtype=torch.float64, device="cuda")
                exact = yd.sum(-1)
            else:
                gcount = math.ceil(n / 64) * 8
                dbg = torch.zeros(m, gcount, 3, dtype=torch.float64, device="cuda")
                ypad = F.pad(yd, (0, math.ceil(n / 64) * 64 - n))
                exact = ypad.view(m, -1, 8, 8).sum(-2).reshape(m, gcount)  # [m, tiles*8]: group g of tile
            cuda_gemm.run(scheme, x, w, b, runner.site, inject=False, dbg=dbg)
            torch.cuda.synchronize()
            s, c, t = dbg[..., 0], dbg[..., 1], dbg[..., 2]
            ok = t > 0
            ratio = torch.where(ok, (s - c).abs() / t.clamp_min(1e-30), torch.zeros_like(t))
            i = int(ratio.argmax())
            es, ec, tt = (s.flatten()[i] - exact.flatten()[i]), (c.flatten()[i] - exact.flatten()[i]), t.flatten()[i]
            line.append(f"{scheme[7:]}: max|D|/T={ratio.max().item():.2e} n>1={int((ratio > 1).sum())} "
                        f"at {i}: sum-err/T={(es / tt).item():+.2e} chk-err/T={(ec / tt).item():+.2e} T={tt.item():.2e}")
        # the reference algorithm on the GPU (fp32 matmul), same thresholds
        with torch.no_grad():
            _, oc = ref.linear_global(x, w, b, site_name="diag", site_id=0, policy="detect", c_sigma=2.5,
                                      e_max_safety=1.0)
            _, ot = ref.linear_thread(x, w, b, site_name="diag", site_id=0, policy="detect", c_sigma=2.5,
                                      e_max_safety=1.0)
        line.append(f"reference detections: global {int(oc.detected)} thread {int(ot.detected)}")
        print(" | ".join(line), flush=True)


def profile():
    """A few launches for ncu: thread on/off (memory-bound), global on/off (4096^3)."""
    runner = Runner()
    mc = os.environ.get("FTG_MC") == "1"
    for (m, n, k), scheme in (((1, 4096, 4096), "linear_thread"), ((16, 11008, 4096), "linear_thread"),
                              ((1, 4096, 11008), "linear_thread"), ((1, 768, 768), "linear_thread"),
                              ((4096, 4096, 4096), "linear_global"), ((8192, 768, 3072), "linear_global")):
        x, w, b = make_sets(m, n, k, torch.bfloat16, budget=1)[0]
        names = ("off", "on") + (("off_mc", "on_mc") if mc and scheme == "linear_global" else ())
        for name in names:
            runner.variant(name, scheme)(x, w, b)
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--diag", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--parts", default="global,thread,square,sweep",
                    help="comma list of: global, thread, square, sweep, stream (streaming kernel depth x warps x split), "
                         "midm (streaming vs ring kernel at M = 17-128)")
    ap.add_argument("--sweep-shapes", default=None,
                    help="MxNxK,... for the thread configuration sweep (default: LLM shapes)")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.smoke:
        sys.exit(0 if smoke() else 1)
    if args.diag:
        return diag()
    if args.profile:
        return profile()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    ceil = ceilings()
    copy = ceil["copy_GBs"]
    print(f"ceilings: {ceil}", flush=True)
    runner = Runner()
    rows, md = [], []
    bf16, fp16 = torch.bfloat16, torch.float16

    # ---- global scheme: compute-bound shapes
    gshapes = GLOBAL_SHAPES
    if args.quick:
        gshapes = gshapes[:3] + [(8192, 8192, 8192)]
    mc = os.environ.get("FTG_MC") == "1"  # the 2-CTA multicast variant passed its smoke test
    gvars = [("cublas", None, "cublas", {}), ("off", "linear_global", "off", {}),
             ("on", "linear_global", "on", {}), ("noop", "linear_global", "noop", {}),
             ("fault", "linear_global", "fault", {})]
    checks = [f"{v}@{c}" for c in ("rows", "tiles") for v in ("on", "noop", "fault")]
    gvars += [(v, "linear_global", v, {}) for v in checks]
    if mc:
        gvars += [(f"{v}_mc", "linear_global", f"{v}_mc", {}) for v in ("off", "on", "noop", "fault")]
    glines = []
    parts = set(args.parts.split(","))
    for dtype in ((bf16, fp16) if "global" in parts else ()):
        for shape in (gshapes if dtype == bf16 else gshapes[:3]):
            r = bench_shape(runner, shape, dtype, gvars, copy, rows)
            m, n, k = shape
            ai = 2 * m * n * k / ((m * k + n * k + m * n + n) * 2)
            c = r.get("cublas")
            f = lambda v: f"{v:.4f}" if v else "fail"
            q = lambda v: f"{v / c:.3f}" if v and c else "-"
            cost = lambda a, b: f"{(r[a] / r[b] - 1) * 100:.1f}%" if r.get(a) and r.get(b) else "-"
            line = [f"{m}x{n}x{k}", str(dtype).split(".")[-1], f"{ai:.0f}", f(c), f(r.get("off")),
                    f(r.get("on")), q(r.get("off")), q(r.get("on")), cost("on", "off"), cost("fault", "noop"),
                    cost("noop", "on"), q(r.get("on@rows")), q(r.get("on@tiles")), cost("on@rows", "off"),
                    cost("on@tiles", "off"), cost("fault@rows", "noop@rows"), cost("fault@tiles", "noop@tiles")]
            if mc:
                line += [f(r.get("on_mc")), q(r.get("off_mc")), q(r.get("on_mc")), cost("on_mc", "off_mc"),
                         cost("fault_mc", "noop_mc")]
            glines.append(line)
            print(" | ".join(line), flush=True)
    head = ["M×N×K", "dtype", "AI", "cuBLAS", "off", "on", "off/cuBLAS", "on/cuBLAS", "on vs off",
            "fault cost", "injecting build", "rows/cuBLAS", "tiles/cuBLAS", "rows vs off", "tiles vs off",
            "fault cost rows", "fault cost tiles"]
    if mc:
        head += ["on (mc)", "off/cuBLAS (mc)", "on/cuBLAS (mc)", "on vs off (mc)", "fault cost (mc)"]
    md.append(fmt_table("Global scheme vs cuBLAS (ms; mc = 2-CTA clusters with W multicast)", head, glines))

    # ---- thread scheme: bandwidth-bound shapes, and the crossover with global
    tshapes = [(k, n) for k, n in LLAMA7 + [(4096, 14336)] + GPT2]
    mlist = [1, 8, 16, 32, 64, 128, 256]
    if args.quick:
        tshapes, mlist = tshapes[:2], [1, 16, 64]
    tvars = [("cublas", None, "cublas", {}), ("off", "linear_thread", "off", {}),
             ("on", "linear_thread", "on", {}), ("fault", "linear_thread", "fault", {}),
             ("global_on", "linear_global", "on", {})]
    # For M <= 16 (the streaming kernel's rows) the TMA-ring kernel too, for comparison.
    ring = [("ring_on", "linear_thread", "on", {"kernel": "ring"})]
    tlines, cross = [], []
    for (k, n) in (tshapes if "thread" in parts else ()):
        for m in mlist:
            shape = (m, n, k)
            r = bench_shape(runner, shape, bf16, tvars + (ring if m <= 16 else []), copy, rows)
            nbytes = (m * k + n * k + m * n + n) * 2
            ai = 2 * m * n * k / nbytes
            c = r.get("cublas")
            f = lambda v: f"{v * 1000:.1f}" if v else "fail"
            q = lambda v: f"{v / c:.3f}" if v and c else "-"
            gbs = lambda v: f"{nbytes / v / 1e6:.0f}" if v else "-"
            tlines.append([f"{m}x{n}x{k}", f"{ai:.1f}", f(c), f(r.get("off")), f(r.get("on")),
                           f(r.get("global_on")), q(r.get("on")), q(r.get("global_on")), gbs(c),
                           gbs(r.get("on")), f"{100 * nbytes / r['on'] / 1e6 / copy:.0f}%" if r.get("on") else "-",
                           f"{(r['on'] / r['off'] - 1) * 100:.1f}%" if r.get("on") and r.get("off") else "-",
                           f(r.get("ring_on")) if m <= 16 else "-",
                           f"{(r['fault'] / r['on'] - 1) * 100:.1f}%" if r.get("fault") and r.get("on") else "-"])
            print(" | ".join(tlines[-1]), flush=True)
            if r.get("on") and r.get("global_on") and c:
                cross.append({"M": m, "N": n, "K": k, "intensity": ai, "thread_over_cublas": r["on"] / c,
                              "global_over_cublas": r["global_on"] / c,
                              "winner": "thread" if r["on"] < r["global_on"] else "global"})
    md.append(fmt_table("Thread scheme (bf16) vs cuBLAS and the global scheme (µs; GB/s counts x, W, y, b once)",
                        ["M×N×K", "AI", "cuBLAS", "thread off", "thread on", "global on", "thread/cuBLAS",
                         "global/cuBLAS", "cuBLAS GB/s", "thread GB/s", "% copy BW", "thread on/off",
                         "ring kernel on", "fault cost"], tlines))

    # ---- square sizes (the paper's Figure 12 sweep) for the crossover
    slines = []
    for s in (([32, 64, 128, 256, 512, 1024, 2048] if not args.quick else [64, 512, 2048])
              if "square" in parts else ()):
        r = bench_shape(runner, (s, s, s), bf16, tvars, copy, rows)
        nbytes = (3 * s * s + s) * 2
        ai = 2 * s ** 3 / nbytes
        c = r.get("cublas")
        if r.get("on") and r.get("global_on") and c:
            cross.append({"M": s, "N": s, "K": s, "intensity": ai, "thread_over_cublas": r["on"] / c,
                          "global_over_cublas": r["global_on"] / c,
                          "winner": "thread" if r["on"] < r["global_on"] else "global"})
        f = lambda v: f"{v * 1000:.1f}" if v else "fail"
        q = lambda v: f"{v / c:.3f}" if v and c else "-"
        slines.append([f"{s}³", f"{ai:.0f}", f(c), f(r.get("off")), f(r.get("on")), f(r.get("global_on")),
                       q(r.get("on")), q(r.get("global_on"))])
        print(" | ".join(slines[-1]), flush=True)
    md.append(fmt_table("Square M=N=K (bf16, µs)", ["size", "AI", "cuBLAS", "thread off", "thread on",
                                                      "global on", "thread/cuBLAS", "global/cuBLAS"], slines))

    # ---- thread kernel configuration sweep: k-boxes per stage x ring depth x cluster split
    sweep = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sweep_shapes = ([tuple(int(v) for v in s.split("x")) for s in args.sweep_shapes.split(",")]
                    if args.sweep_shapes else
                    [(1, 4096, 4096), (16, 11008, 4096), (1, 4096, 11008), (16, 768, 3072), (64, 4096, 4096),
                     (64, 11008, 4096), (128, 11008, 4096)] if not args.quick else [(1, 4096, 4096)])
    for (m, n, k) in (sweep_shapes if "sweep" in parts else ()):
        sets = make_sets(m, n, k, bf16)
        _, a_wm, a_sp, a_nbox, a_ns = cuda_gemm.thread_config(m, n, k, 1, sms)
        best = None
        if m <= 16:  # the streaming kernel: only its cluster split
            for sp in (1, 2, 4, 8):
                ms = graph_time(runner.variant("on", "linear_thread", split=sp, kernel="stream"), sets)
                rows.append({**record((m, n, k), bf16, f"stream_on_k{sp}", ms, copy)})
                if best is None or ms < best[0]:
                    best = (ms, "stream", "-", sp, 1)
        wms = [1] if m <= 16 else [1, 2, 4] if m <= 64 else [2, 4]
        for wm in wms:
            for nbox, stages in ((1, 8), (2, 8), (1, 4), (2, 4)):
                for sp in (1, 2, 3, 4, 8):
                    if sp > 1 and math.ceil(k / (64 * nbox)) < sp:
                        continue
                    if stages % (4 // wm) or (wm == 4 and nbox == 2 and stages == 8):
                        continue
                    try:
                        ms = graph_time(runner.variant("on", "linear_thread", split=sp, nbox=nbox,
                                                       stages=stages, wm=wm, kernel="ring"), sets)
                    except Exception as exc:
                        print(f"  sweep {m}x{n}x{k} wm={wm} nbox={nbox} ns={stages} split={sp}: "
                              f"{type(exc).__name__} {exc}")
                        torch.cuda.synchronize()
                        continue
                    rows.append({**record((m, n, k), bf16, f"thread_on_w{wm}_b{nbox}_s{stages}_k{sp}", ms, copy)})
                    if best is None or ms < best[0]:
                        best = (ms, nbox, stages, sp, wm)
        nbytes = (m * k + n * k + m * n + n) * 2
        auto_ms = graph_time(runner.variant("on", "linear_thread"), sets)
        if cuda_gemm.thread_kernel(m, n, k, 1, sms) == "stream":
            a_sp, a_ns, a_w = cuda_gemm.stream_config(m, n, k, 1, sms)
            a_wm, a_nbox = f"{a_w}", "stream"
        sweep.append([f"{m}x{n}x{k}", f"w{a_wm} b{a_nbox} s{a_ns} k{a_sp}", f"{auto_ms * 1000:.1f}",
                      f"w{best[4]} b{best[1]} s{best[2]} k{best[3]}" if best else "-",
                      f"{best[0] * 1000:.1f}" if best else "-",
                      f"{100 * nbytes / best[0] / 1e6 / copy:.0f}%" if best else "-"])
        print(" | ".join(sweep[-1]), flush=True)
        del sets
    md.append(fmt_table("Thread kernel configurations (protected; w = warps across M, b = 64-wide k-boxes per "
                        "stage or 'stream' for the streaming kernel, s = ring depth, k = cluster split; all timings in "
                        "gemm_bench.json)",
                        ["shape", "auto", "auto µs", "best", "best µs", "% copy BW"], sweep))

    # ---- streaming kernel: depth x warps per CTA x cluster split at M <= 16 (run 14)
    stream_lines = []
    stream_shapes = [(1, 4096, 4096), (16, 4096, 4096), (1, 11008, 4096), (1, 4096, 11008), (1, 14336, 4096),
                     (1, 4096, 14336), (16, 14336, 4096), (1, 768, 768), (1, 2304, 768), (16, 768, 3072)]
    for (m, n, k) in (stream_shapes if "stream" in parts else ()):
        sets = make_sets(m, n, k, bf16)
        nbytes = (m * k + n * k + m * n + n) * 2
        cub = graph_time(runner.variant("cublas"), sets)
        by_depth = {}  # (depth, warps) -> (ms, split)
        for depth, warps in ((1, 8), (2, 8), (1, 16), (2, 16)):
            for sp in (range(1, 9) if (depth, warps) == (2, 8) else (1, 2, 4, 8)):  # d2 w8: any cluster size
                if math.ceil(k / 32) < 4 * sp:
                    continue
                ms = graph_time(runner.variant("on", "linear_thread", split=sp, stages=depth, kernel="stream",
                                               warps=warps), sets)
                rows.append({**record((m, n, k), bf16, f"stream_on_d{depth}_w{warps}_k{sp}", ms, copy)})
                if (depth, warps) not in by_depth or ms < by_depth[(depth, warps)][0]:
                    by_depth[(depth, warps)] = (ms, sp)
        d_best = min(by_depth, key=lambda d: by_depth[d][0])
        ms, sp = by_depth[d_best]
        off = graph_time(runner.variant("off", "linear_thread", split=sp, stages=d_best[0], kernel="stream",
                                        warps=d_best[1]), sets)
        auto = graph_time(runner.variant("on", "linear_thread"), sets)
        stream_lines.append([f"{m}x{n}x{k}", f"{cub * 1e3:.1f}", f"{auto * 1e3:.1f}"] +
                            [f"{by_depth[d][0] * 1e3:.1f} k{by_depth[d][1]}" if d in by_depth else "-"
                             for d in ((1, 8), (2, 8), (1, 16), (2, 16))] +
                            [f"{off * 1e3:.1f}", f"{ms / cub:.3f}", f"{100 * nbytes / ms / 1e6 / copy:.0f}%",
                             f"{100 * (ms / off - 1):.1f}%"])
        print(" | ".join(stream_lines[-1]), flush=True)
        del sets
    md.append(fmt_table("Streaming thread kernel (bf16, protected, µs): best cluster split k per depth d "
                        "(d1: load, then compute; d2: the next chunk loads while this one computes) and warps per CTA w; "
                        "'off' and the ratios at the best",
                        ["shape", "cuBLAS", "auto", "d1 w8", "d2 w8", "d1 w16", "d2 w16", "off", "best/cuBLAS",
                         "% copy BW", "on/off"], stream_lines))

    # ---- M = 17-128: the streaming kernel (1 or 2 m16 blocks of x per CTA) against the ring kernel
    mid_lines = []
    mid_ms = [24, 32, 48, 64, 96, 128] if not args.quick else [32, 64, 128]
    mid_vars = [(1, 8, 1), (2, 8, 1), (1, 16, 1), (2, 16, 1), (1, 8, 2), (2, 8, 2)]  # depth, warps, mtile
    for (k, n) in ([(k, n) for k, n in LLAMA7 + [(4096, 14336)] + GPT2] if "midm" in parts else ()):
        for m in mid_ms:
            sets = make_sets(m, n, k, bf16)
            nbytes = (m * k + n * k + m * n + n) * 2
            cub = graph_time(runner.variant("cublas"), sets)
            ring_ms = graph_time(runner.variant("on", "linear_thread", kernel="ring"), sets)
            auto_ms = graph_time(runner.variant("on", "linear_thread"), sets)
            by = {}
            for depth, warps, mt in mid_vars:
                ms = graph_time(runner.variant("on", "linear_thread", stages=depth, kernel="stream", warps=warps,
                                               mtile=mt), sets)
                rows.append({**record((m, n, k), bf16, f"stream_on_d{depth}_w{warps}_mt{mt}", ms, copy)})
                by[(depth, warps, mt)] = ms
            d, w, mt = min(by, key=by.get)
            off = graph_time(runner.variant("off", "linear_thread", stages=d, kernel="stream", warps=w, mtile=mt),
                             sets)
            rows.append({**record((m, n, k), bf16, "ring_on", ring_ms, copy)})
            rows.append({**record((m, n, k), bf16, "auto_on", auto_ms, copy)})
            mid_lines.append([f"{m}x{n}x{k}", f"{cub * 1e3:.1f}", f"{ring_ms * 1e3:.1f}", f"{auto_ms * 1e3:.1f}"] +
                             [f"{by[v] * 1e3:.1f}" for v in mid_vars] +
                             [f"{off * 1e3:.1f}", f"{auto_ms / cub:.3f}", f"{ring_ms / cub:.3f}",
                              f"{100 * nbytes / auto_ms / 1e6 / copy:.0f}%"])
            print(" | ".join(mid_lines[-1]), flush=True)
            del sets
    md.append(fmt_table("M = 17-128, protected (bf16, µs): the ring kernel, auto, and the streaming kernel at "
                        "depth d, w warps per CTA, mt m16 blocks of x per CTA (auto split); 'off' at the best",
                        ["shape", "cuBLAS", "ring", "auto"] + [f"d{d} w{w} mt{mt}" for d, w, mt in mid_vars] +
                        ["stream off", "auto/cuBLAS", "ring/cuBLAS", "auto % copy BW"], mid_lines))

    cross.sort(key=lambda c: c["intensity"])
    xl = [[f"{c['M']}x{c['N']}x{c['K']}", f"{c['intensity']:.1f}", f"{c['thread_over_cublas']:.3f}",
           f"{c['global_over_cublas']:.3f}", c["winner"]] for c in cross]
    md.append(fmt_table("Thread vs global crossover (protected time / cuBLAS, by arithmetic intensity)",
                        ["shape", "AI", "thread", "global", "faster"], xl))
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "python": platform.python_version(), "ceilings": ceil, "seconds": time.time() - t0,
           "timing": "CUDA graph over rotated input sets (> 3x L2), median of 15 replays, CUDA events"}
    (out / "gemm_bench.json").write_text(json.dumps({"env": env, "rows": rows, "crossover": cross}, indent=1))
    head = (f"GPU {env['gpu']}, torch {env['torch']}, CUDA {env['cuda']}; copy {ceil['copy_GBs']:.0f} GB/s, "
            f"cuBLAS 8192³ bf16 {ceil['mm_bf16_TFLOPs']:.0f} TFLOP/s\n\n")
    (out / "gemm_bench.md").write_text(head + "\n".join(md))
    print(head + "\n".join(md))


if __name__ == "__main__":
    main()
