"""CUDA kernels of the protected linears (csrc/gemm): numerics, fault detection and correction,
policies, counters. The CUDA tier skips without a GPU; the CPU part checks what needs no GPU
(the injection draws match the reference, the C argument block matches its ctypes mirror)."""
import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import ftcompile
from ftcompile import FaultDetected, FaultSpec, inject
from ftcompile.abft import gemm, injection
from ftcompile.ops import cuda_gemm, layout
from conftest import site

CUDA = torch.cuda.is_available()
HOPPER = CUDA and torch.cuda.get_device_capability() == (9, 0)
needs_hopper = pytest.mark.skipif(not HOPPER, reason="needs a CUDA sm_90 GPU")
OPS = {"global": torch.ops.ftcompile.linear_global, "global-tiles": torch.ops.ftcompile.linear_global,
       "thread": torch.ops.ftcompile.linear_thread, "stream": torch.ops.ftcompile.linear_thread,
       "thin": torch.ops.ftcompile.linear_thread}
SCHEME = {"global": "linear_global", "global-tiles": "linear_global", "thread": "linear_thread",
          "stream": "linear_thread", "thin": "linear_thread"}
# The thread scheme has two kernels; each test runs both on every shape: "thread" forces the
# TMA-ring kernel, "stream" the streaming one (which auto picks for M <= 16 only). The global
# scheme has two checks: "global" forces the per-row one, "global-tiles" the tile-local one.
THREAD_KERNEL = {"thread": "ring", "stream": "stream", "thin": "thin"}
GLOBAL_CHECK = {"global": "rows", "global-tiles": "tiles"}
SCHEMES = ["global", "global-tiles", "thread", "stream", "thin"]


@pytest.fixture(autouse=True)
def _thread_kernel(request, monkeypatch):
    callspec = getattr(request.node, "callspec", None)
    scheme = callspec.params.get("scheme") if callspec else None
    if scheme in THREAD_KERNEL:
        monkeypatch.setattr(cuda_gemm, "THREAD_KERNEL", THREAD_KERNEL[scheme])
    if scheme in GLOBAL_CHECK:
        monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", GLOBAL_CHECK[scheme])


def _stats(name):
    return ftcompile.stats(name)[name]


def _rand(*shape, dtype, scale=1.0, shift=0.0, gen=None):
    return (torch.randn(*shape, generator=gen) * scale + shift).to("cuda", dtype)


def _assert_same_but_corrected(y, clean, dtype, recomputed=1):
    """The corrected output equals the fault-free run; the recomputed elements (at most
    `recomputed`) may differ by one rounding of their fp32 values (a different summation order)."""
    diff = (y.float() - clean.float()).abs()
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    assert int((diff > 0).sum()) <= recomputed
    assert bool((diff <= ulp * clean.float().abs() + 1e-6).all())


# ------------------------------------------------------------------------------- CPU tier
@pytest.mark.parametrize("spread", [1, 8])
def test_injection_plan_draws_the_reference_elements(spread):
    """Same FaultSpec, same seed: the CUDA path corrupts the element the CPU reference does."""
    x, w = torch.randn(2, 24, 192), torch.randn(130, 192)
    ref = gemm.linear_global if spread == 1 else gemm.linear_thread
    for seed in range(6):
        for stage in ("accumulator", "output"):
            spec = FaultSpec(site="plan", stage=stage, seed=seed, count=1 + seed % 3, value=1.0)
            with inject(spec) as inj:
                ref(x, w, None, site_name="plan", site_id=0, policy="detect", c_sigma=2.5,
                    e_max_safety=1.0)
            cpu = [e.index for e in inj.events]
            with inject(spec):
                pending = injection.pending(0, "plan", injection.GEMM_STAGES)
                plan = cuda_gemm.plan_injections(pending, 48, 130, 192, spread, "plan")
            assert [(r, c) for _, _, r, c, _ in plan] == cpu


def test_thread_kernel_choice_follows_the_measurements():
    """The auto rule picks the kernel runs 17, 45b, 47g-j and 74c-d measured faster (H200, 132
    SMs): at 1-8 rows the streaming kernel (replica-checked), but the thin kernel where its 128-row
    tiles fill 45-100 % of the SMs on 32 MB of W or more; at 9-128 rows the thin kernel (two waves
    of tiles included), but past 32 rows on weights of at most 2 MB the streaming kernel while its
    32-row CTAs fit one wave (else thin), except at 33-64 rows on 1.5-2 MB where the thin kernel
    checks against replicas (run 76e); beyond 128 rows the streaming kernel while it fits (past
    one CTA row only for W under 64 MB), else the ring kernel; the streaming kernel takes two m16
    blocks per CTA (8 warps) above M = 16."""
    stream = [(1, 4096, 4096), (8, 4096, 11008), (1, 2304, 768), (8, 768, 3072), (1, 6144, 4096),
              (1, 22016, 4096), (128, 768, 768), (48, 768, 768), (64, 768, 768), (96, 1024, 1024),
              (300, 768, 768)]
    thin = [(1, 11008, 4096), (8, 11008, 4096), (1, 8192, 4096), (16, 14336, 4096), (16, 16384, 4096),
            (16, 4096, 4096), (16, 2304, 768), (9, 768, 768), (12, 4096, 11008), (16, 22016, 4096),
            (32, 768, 768), (24, 2304, 768), (32, 4096, 4096), (48, 2048, 2048), (32, 11008, 4096),
            (32, 4096, 11008), (64, 4096, 4096), (96, 2304, 768), (64, 768, 3072), (128, 14336, 4096),
            (128, 2304, 768), (96, 3072, 768), (128, 1024, 1040), (64, 1024, 1024), (40, 1024, 1024),
            (64, 1024, 768), (64, 2048, 512)]
    ring = [(256, 4096, 4096), (8192, 4096, 4096), (129, 2304, 768)]
    for kind, shapes in (("stream", stream), ("thin", thin), ("ring", ring)):
        for m, n, k in shapes:
            assert cuda_gemm.thread_kernel(m, n, k, 1, 132) == kind, (m, n, k)
    assert cuda_gemm.thread_kernel(128, 768, 768, 1, 132, kernel="ring") == "ring"
    assert cuda_gemm.thread_kernel(300, 4096, 4096, 1, 132, kernel="thin") == "ring"  # past its rows
    assert cuda_gemm.stream_mtile(16) == 1 and cuda_gemm.stream_mtile(17) == 2
    h200 = (132, 66, 39, 30, 22, 17, 15, 15)  # clusters of 1-8 streaming CTAs held at once
    assert cuda_gemm.stream_config(32, 4096, 4096, 1, 132, clusters=h200)[2] == 8  # two blocks: 8 warps


def test_stream_split_fits_the_clusters_the_device_holds():
    """The streaming kernel's K split: the largest whose CTAs fit one per SM, with >= 4 k chunks
    each, and whose clusters the device holds at once; run 45f (H200, M = 1 and 16) measured each
    pick below as the fastest split, protected, or within 0.1 us of it."""
    h200 = (132, 66, 39, 30, 22, 17, 15, 15)
    pick = lambda m, n, k, clusters=h200: cuda_gemm.stream_config(m, n, k, 1, 132, clusters=clusters)[0]
    for m in (1, 16):
        assert pick(m, 2048, 2048) == 3 and pick(m, 2048, 8192) == 3  # 32 tiles: 32 clusters of 4 > 30
        assert pick(m, 1024, 4096) == 6  # 16 tiles: 16 clusters of 7 or 8 > 15
        assert pick(m, 2304, 768) == 3 and pick(m, 3072, 768) == 2 and pick(m, 4096, 4096) == 2
        assert pick(m, 768, 3072) == 8 and pick(m, 512, 4096) == 8
        assert pick(m, 11008, 4096) == 1  # 172 tiles: more than the SMs
    perfect = tuple(132 // s for s in range(1, 9))  # a device whose GPCs divide by every cluster size
    assert pick(1, 2048, 2048, perfect) == 4 and pick(1, 1024, 4096, perfect) == 8
    assert pick(1, 512, 256, perfect) == 2  # 8 k chunks: 4 per CTA at most


def test_thin_split_follows_the_time_model():
    """The thin kernel's K split is the one its time model finds fastest, counting waves in the
    clusters the device holds (H200: 132 / 66 / 39 / 30 of 1-4 CTAs). Run 45b measured every
    choice below the fastest of splits 1-4 protected: 32 tiles (N = 4096) take 3, not 4 - 32
    clusters of 4 need a second wave for two of them, which a perfectly packed device would not;
    86 and 112 tiles (N = 11008, 14336) stay whole; K = 768 splits 4 ways (3 k-steps per CTA)."""
    h200 = (132, 66, 39, 30)
    pick = lambda m, n, k, clusters=h200, protect=True: cuda_gemm.thin_config(
        m, n, k, 1, 132, protect, stages=8, clusters=clusters)[1]
    for m in (32, 64, 128):
        assert pick(m, 4096, 4096) == 3 and pick(m, 4096, 11008) == 3
        assert pick(m, 11008, 4096) == 1 and pick(m, 14336, 4096) == 1
        assert pick(m, 2304, 768) == 4 and pick(m, 768, 3072) == 4 and pick(m, 768, 768) == 4
    assert pick(64, 4096, 4096, clusters=(132, 66, 44, 33)) == 4  # one wave of 4-CTA clusters
    assert pick(64, 4096, 4096, protect=False) == 2  # unprotected: 2 and 3 tie, the smaller wins
    assert pick(64, 4096, 128) == 1  # 2 k-steps: no split
    # The model's parts: a second wave costs its fixed part again; the checks scale with the rows.
    t = lambda tiles, split, clusters, protect=False: cuda_gemm.thin_time_us(64, 4096, tiles, split, clusters, protect)
    assert t(31, 4, 30) > t(30, 4, 30) + cuda_gemm.THIN_WAVE_US
    assert t(32, 1, 132, True) - t(32, 1, 132) == pytest.approx(4 * (t(32, 4, 132, True) - t(32, 4, 132)))


@pytest.mark.parametrize("bias", [False, True])
def test_thin_reference_checks_each_column_over_the_rows(bias, monkeypatch):
    """The thin kernel's algorithm (gemm.linear_thin) on the CPU, with the checksum rows (40 rows;
    gemm.thin_replica's width limit set to 0): clean inputs of several distributions pass; one
    fault is located in its column and recomputed; two in one column are uncorrectable, and
    "recompute" repairs them."""
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", 0)
    kw = dict(c_sigma=2.5, e_max_safety=1.0)
    g = torch.Generator().manual_seed(3)
    w = torch.randn(72, 96, generator=g) * 0.1
    b = torch.randn(72, generator=g) if bias else None
    for shift, scale in ((0.0, 1.0), (2.0, 0.5), (0.0, 30.0)):
        x = torch.randn(40, 96, generator=g) * scale + shift
        _, out = gemm.linear_thin(x, w, b, site_name="cpu-thin", site_id=site("cpu-thin"), policy="correct", **kw)
        assert int(out.detected) == 0
    clean, _ = gemm.linear_thin(x, w, b, site_name="cpu-thin", site_id=site("cpu-thin"), policy="correct", **kw)
    with inject(FaultSpec(site="cpu-thin", stage="accumulator", index=(7, 30), value=5.0, k_step=0)):
        y, out = gemm.linear_thin(x, w, b, site_name="cpu-thin", site_id=site("cpu-thin"), policy="correct", **kw)
    assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (1, 1, 0)
    assert torch.allclose(y, clean, rtol=0, atol=1e-4)
    two = [FaultSpec(site="cpu-thin", stage="output", index=(r, 30), value=5.0) for r in (7, 9)]
    with inject(*two):
        y, out = gemm.linear_thin(x, w, b, site_name="cpu-thin", site_id=site("cpu-thin"), policy="correct", **kw)
    assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (1, 0, 1)
    assert (y - clean).abs().max() > 1
    with inject(*two):
        y, out = gemm.linear_thin(x, w, b, site_name="cpu-thin", site_id=site("cpu-thin"), policy="recompute", **kw)
    assert int(out.uncorrectable) == 1 and torch.allclose(y, clean, rtol=0, atol=1e-4)


# The replica-checked references: function, rows it checks against replicas, W's rows, the relative
# tolerance of a corrected output (the streaming reference's wider W reaches larger values, and an
# accumulator fault sums k-tile by k-tile), and fault cases (FaultSpec keywords of each fault, the
# checks they fall in).
REPLICA_REFERENCES = {
    "thin": (gemm.linear_thin, gemm.THIN_REPLICA_ROWS, 72, 0.0, [
        ([dict(index=(3, 30))], 1),
        ([dict(index=(r, 30)) for r in (7, 9)], 1),  # one column of y: one check
        ([dict(stage="accumulator", index=(15, 2), k_step=1)], 1)]),
    # 33-64 rows where gemm.thin_replica takes replicas for W's rows (the test sets the limit)
    "thin-wide": (gemm.linear_thin, gemm.THIN_REPLICA_WIDE_ROWS, 72, 0.0, [
        ([dict(index=(50, 30))], 1),
        ([dict(index=(r, 30)) for r in (7, 60)], 1),
        ([dict(stage="accumulator", index=(40, 2), k_step=1)], 1)]),
    "stream": (gemm.linear_stream, gemm.STREAM_REPLICA_ROWS, 150, 1e-6, [
        ([dict(index=(3, 130))], 1),
        ([dict(index=(7, 66), count=2)], 1),  # columns 66 and 74 of a row: one strided group
        ([dict(stage="accumulator", index=(0, 2), k_step=1)], 1),
        ([dict(index=(2, c)) for c in (9, 10)], 2)]),  # two groups
}


@pytest.mark.parametrize("kind", sorted(REPLICA_REFERENCES))
def test_reference_few_rows_against_a_replica(kind, monkeypatch):
    """Up to their replica rows, gemm.linear_thin and gemm.linear_stream (the thin and streaming
    kernels' algorithms there) compare each element with a replica computed the same way (the thin
    kernel one check per column of y, the streaming one per row and group of 8 strided columns):
    clean inputs of several distributions and row counts raise no alarm; one fault at either
    stage, or two in one check, are detected once per check and corrected to the fault-free value;
    "detect" corrects nothing; NaN in x is counted as a non-finite input and raises no alarm."""
    ref, rows, n, rtol, cases = REPLICA_REFERENCES[kind]
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", n)
    name = f"cpu-rep-{kind}"
    kw = dict(c_sigma=2.5, e_max_safety=1.0, site_name=name, site_id=site(name))
    g = torch.Generator().manual_seed(5)
    w, b = torch.randn(n, 300, generator=g) * 0.1, torch.randn(n, generator=g)
    for m, (shift, scale) in zip((1, 5, rows), ((0.0, 1.0), (2.0, 0.5), (0.0, 30.0))):
        x = torch.randn(m, 300, generator=g) * scale + shift
        _, out = ref(x, w, b, policy="correct", **kw)
        assert int(out.detected) == 0
    clean, _ = ref(x, w, b, policy="correct", **kw)
    specs = lambda faults: [FaultSpec(site=name, **{"stage": "output", "value": 5.0, **f}) for f in faults]  # noqa: E731
    for faults, checks in cases:
        with inject(*specs(faults)):
            y, out = ref(x, w, b, policy="correct", **kw)
        assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (checks, checks, 0)
        assert torch.allclose(y, clean, rtol=rtol, atol=1e-4)
    with inject(*specs(cases[0][0])):
        y, out = ref(x, w, b, policy="detect", **kw)
    assert (int(out.detected), int(out.corrected)) == (1, 0) and (y - clean).abs().max() > 4
    x[2, 5] = float("nan")
    y, out = ref(x, w, b, policy="correct", **kw)
    assert int(out.detected) == 0 and int(out.nonfinite_inputs) == 1 and y[2].isnan().all()


def test_thin_replica_rule(monkeypatch):
    """gemm.thin_replica: replicas up to THIN_REPLICA_ROWS rows at any width, up to
    THIN_REPLICA_WIDE_ROWS where W has at most THIN_REPLICA_WIDE_MAX_N rows; the launcher's protect
    mode (cuda_gemm.thin_protect) and linear_thin follow it: past the limit two faults in one column
    of y are one uncorrectable check (the checksum rows), within it both are corrected."""
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", 3072)
    assert gemm.thin_replica(32, 14336) and gemm.thin_replica(64, 3072) and gemm.thin_replica(40, 768)
    assert not gemm.thin_replica(64, 3073) and not gemm.thin_replica(65, 768)
    assert [cuda_gemm.thin_protect(*a) for a in ((64, 768, True), (64, 4096, True), (20, 4096, True),
                                                 (64, 768, False))] == [2, 1, 2, 0]
    kw = dict(c_sigma=2.5, e_max_safety=1.0, site_name="cpu-thin-rule", site_id=site("cpu-thin-rule"))
    g = torch.Generator().manual_seed(8)
    x = torch.randn(48, 128, generator=g)
    for n, outcome in ((3072, (1, 1, 0)), (3080, (1, 0, 1))):
        w = torch.randn(n, 128, generator=g) * 0.1
        with inject(*[FaultSpec(site="cpu-thin-rule", stage="output", index=(r, 30), value=5.0) for r in (7, 9)]):
            _, out = gemm.linear_thin(x, w, None, policy="correct", **kw)
        assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == outcome, n


def test_stream_reference_past_its_replica_rows_is_linear_thread():
    """Past gemm.STREAM_REPLICA_ROWS rows gemm.linear_stream is gemm.linear_thread: two faults in
    one strided group are located as one and reported uncorrectable."""
    kw = dict(c_sigma=2.5, e_max_safety=1.0, site_name="cpu-srep9", site_id=site("cpu-srep9"))
    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(gemm.STREAM_REPLICA_ROWS + 1, 300, generator=g), torch.randn(150, 300, generator=g) * 0.1
    with inject(FaultSpec(site="cpu-srep9", stage="output", index=(3, 5), value=4.0, count=2)):
        _, out = gemm.linear_stream(x, w, None, policy="correct", **kw)
    assert (int(out.detected), int(out.uncorrectable)) == (1, 1)


def test_global_split_follows_the_sweep():
    """The global kernel's K split is the one the run 18g sweep measured fastest (H200, 132 SMs):
    at most 4 splits, all units in one wave, >= 8 k-steps each; none where the tiles fill the GPU."""
    picks = {(1024, 1024, 1024): 2, (2048, 1024, 4096): 2, (64, 4096, 4096): 4, (128, 11008, 4096): 3,
             (256, 11008, 4096): 1, (4096, 768, 768): 1, (2048, 2048, 2048): 1, (64, 4096, 256): 1}
    for (m, n, k), split in picks.items():
        assert cuda_gemm.global_split(m, n, k, 1, 132) == split, (m, n, k)
    assert cuda_gemm.global_split(64, 4096, 4096, 2, 132) == 4 and cuda_gemm.global_split(64, 4096, 4096, 8, 132) == 1


def test_global_tail_splits_a_part_full_last_wave():
    """Where the last of several waves is at most half full, only its tiles are split (over the SMs
    it would leave idle, <= 4 ways, >= 8 k-steps a unit, for a gain of >= 3 % of the call); the
    tiles before it run whole. Otherwise no split."""
    assert cuda_gemm.global_tail(2048, 11008, 4096, 1, 132, 256) == (4, 660)  # 688 tiles: 5 waves + 28
    assert cuda_gemm.global_tail(2048, 5120, 5120, 1, 132, 256) == (2, 264)   # 320: 2 waves + 56
    assert cuda_gemm.global_tail(1024, 11008, 4096, 1, 132, 256) == (1, 0)   # 344: the last wave 80 of 132
    assert cuda_gemm.global_tail(1024, 1024, 4096, 1, 132, 256) == (1, 0)    # one part-full wave: global_split's
    assert cuda_gemm.global_tail(2048, 11008, 768, 1, 132, 256) == (1, 0)    # 12 k-steps: no split keeps 8 a unit
    assert cuda_gemm.global_tail(2048, 11008, 4096, 1, 132, 256, cluster=2) == (4, 330)  # in cluster tiles
    note = cuda_gemm.kernel_note("global", 2048, 11008, 4096, 1, 132)
    assert "the last wave's 28 tiles K split 4" in note, note


def test_global_tile_width_follows_the_waves():
    """192-wide tiles where 256-wide ones leave a wave mostly idle (N a few tiles wide: the GPT-2
    shapes of the global table), 256 where both fill their waves alike (NOTES_gemm.md run 19);
    128-wide where few rows leave SMs idle even after split-K (runs 23a/d: the fastest width
    there)."""
    narrow = [(8192, 2304, 768), (8192, 768, 3072), (4096, 2304, 768), (4096, 768, 768), (4096, 768, 3072)]
    wide = [(4096, 4096, 4096), (4096, 3072, 768), (2048, 4096, 4096), (2048, 11008, 4096), (2048, 4096, 11008),
            (2048, 14336, 4096), (2048, 2048, 2048), (8192, 8192, 8192)]
    for m, n, k in narrow:
        assert cuda_gemm.global_tile(m, n, k, 1, 132) == (192, 1), (m, n, k)
    for m, n, k in wide:
        assert cuda_gemm.global_tile(m, n, k, 1, 132) == (256, 1), (m, n, k)
    # many rows in one wave: a split costs more than the narrower tile (run 64c: 256 / 2 against 128 / 1
    # 13-24 % slower at 2048x1024x4096, 1024x2048x4096, 2048x1024x2048)
    for m, n, k in [(2048, 1024, 4096), (1024, 2048, 4096), (2048, 1024, 2048)]:
        assert cuda_gemm.global_tile(m, n, k, 1, 132) == (128, 1), (m, n, k)
    assert cuda_gemm.global_tile(1024, 1024, 4096, 1, 132) == (128, 2)
    assert cuda_gemm.global_tile(2048, 768, 3072, 1, 132) == (192, 2)  # the split still pays here
    for m, n, k in [(1024, 1024, 1024), (32, 4096, 4096), (64, 4096, 11008), (128, 4096, 4096), (128, 4096, 14336)]:
        assert cuda_gemm.global_tile(m, n, k, 1, 132)[0] == 128, (m, n, k)
    assert cuda_gemm.global_tile(128, 4096, 4096, 1, 132) == (128, 4)  # 32 tiles x 4 splits: one wave
    # few rows (<= 2 M-tiles): no margin, splits cost extra; the widest where more tiles would not
    # fill more SMs (sweep of run 23d: each the fastest width)
    assert cuda_gemm.global_tile(256, 4096, 4096, 1, 132) == (128, 2)
    assert cuda_gemm.global_tile(256, 11008, 4096, 1, 132) == (192, 1)
    assert cuda_gemm.global_tile(32, 11008, 4096, 1, 132) == (256, 3)
    assert cuda_gemm.global_split(4096, 768, 768, 1, 132, 192) == 1


def test_global_check_follows_the_measurements():
    """The tile-local check where runs 25, 26, 64c and 65a-c measured it faster (K <= 3072 at widths
    as cheap as the unprotected kernel's, or at most 10 % dearer in calls of <= 4 waves; longer K
    where the call is one wave at a width as cheap as its; one M-tile; two on weights up to 32 MB),
    the row check elsewhere."""
    tiles = [(4096, 768, 768), (1024, 1024, 1024), (4096, 768, 3072), (8192, 2304, 768), (8192, 768, 3072),
             (4096, 2304, 768), (128, 4096, 4096), (1, 4096, 4096), (64, 11008, 4096), (128, 4096, 14336),
             (256, 4096, 4096), (256, 768, 3072), (2048, 1024, 4096), (1024, 2048, 4096), (1024, 1024, 4096),
             (2048, 1024, 2048), (4096, 3072, 768), (16384, 768, 768), (384, 3072, 3072), (1024, 11008, 768)]
    rows = [(4096, 4096, 4096), (2048, 2048, 2048), (4096, 2048, 2048), (8192, 3072, 768), (4096, 50257, 768),
            (256, 14336, 4096), (256, 4096, 11008), (2048, 4096, 4096), (1024, 4096, 4096), (2048, 11008, 4096)]
    assert [cuda_gemm.global_check(m, n, k, 1, 132) for m, n, k in tiles] == ["tiles"] * len(tiles)
    assert [cuda_gemm.global_check(m, n, k, 1, 132) for m, n, k in rows] == ["rows"] * len(rows)


@pytest.mark.timeout(300)  # compiles every GEMM kernel: over a minute on the GPU machine
def test_argument_block_matches_ctypes_mirror(tmp_path):
    """Compile the kernels with nvcc (no GPU needed) and compare sizeof(Args) with ctypes."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    src = sorted(str(p) for p in (Path(cuda_gemm.__file__).resolve().parents[2] / "csrc" / "gemm").glob("*.cu"))
    out = tmp_path / "libftgemm.so"
    cmd = [nvcc, "-std=c++17", "-O1", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-fPIC",
           f"-I{cuda_gemm.cuda.csrc_dir('common')}", "-shared", *src, "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    lib = ctypes.CDLL(str(out))
    assert lib.ft_args_size() == ctypes.sizeof(cuda_gemm._Args)


def test_fallback_reasons_on_cpu():
    x, w = torch.randn(4, 16), torch.randn(8, 16)
    assert "CUDA" in cuda_gemm.fallback_reason("linear_global", x, w)


# ------------------------------------------------------------------------------- CUDA tier
SHAPES = [  # (x shape, N, K): tails in M, N and K, odd N, batched weights
    ((3, 17, 96), 200, 96), ((1, 64), 64, 64), ((130, 264), 520, 264), ((5, 1000), 77, 1000),
    ((2, 7, 4096), 4096, 4096), ((256, 512), 384, 512), ((40, 1024), 3000, 1024),
    # thread kernel: x rows split over 2 and 4 warps (one W pass), and K not a multiple of 8 (padded)
    ((48, 512), 264, 512), ((100, 1024), 3000, 1024), ((1, 13), 512, 13), ((70, 30), 200, 30),
    # N % 8 != 0 over many rows and column segments (rows start at every alignment): GPT-2's LM head
    ((2, 150, 128), 1001, 128), ((256, 768), 50257, 768),
]


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s[0]}x{s[1]}x{s[2]}" for s in SHAPES])
def test_kernel_matches_fp32_reference(scheme, dtype, shape):
    xs, n, k = shape
    name = f"cu-{scheme}-{dtype}-{n}"
    sid = site(name)
    assert cuda_gemm.fallback_reason(SCHEME[scheme], torch.zeros(1, k, device="cuda", dtype=dtype),
                                     torch.zeros(n, k, device="cuda", dtype=dtype)) is None
    x, w, b = _rand(*xs, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
    ref = F.linear(x.double(), w.double(), b.double())
    torch_err = (F.linear(x, w, b).double() - ref).abs().max()
    for bias in (b, None):
        y = OPS[scheme](x, w, bias, sid)
        r = ref if bias is not None else F.linear(x.double(), w.double())
        assert y.dtype == dtype and y.shape == (*xs[:-1], n) and y.is_contiguous()
        assert torch.isfinite(y).all()
        assert (y.double() - r).abs().max() <= 2 * torch_err + 1e-6
        off = cuda_gemm.run(SCHEME[scheme], x, w, bias, ftcompile.telemetry.site(sid), protect=False)
        assert (off.double() - r).abs().max() <= 2 * torch_err + 1e-6
    s = _stats(name)
    assert s["detected"] == 0 and s["checks"] == 2 and s["nonfinite_inputs"] == 0


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [((2, 150, 128), 1001, 128), ((256, 768), 50257, 768), ((3, 40, 96), 77, 96)],
                         ids=["1001", "50257", "77"])
def test_padded_rows_equal_the_contiguous_output(scheme, dtype, shape):
    """pad_rows (an LM head's logits): rows 16 bytes apart, the contiguous call's values bit for bit
    (the global kernel stores whole 16-byte chunks there); a fault in such a row is corrected."""
    xs, n, k = shape
    name = f"cu-pad-{scheme}-{dtype}-{n}"
    sid = site(name)
    ld = layout.padded_row_stride(n, dtype)
    x, w, b = _rand(*xs, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
    for bias in (b, None):
        y = OPS[scheme](x, w, bias, sid, False, True)
        assert y.shape == (*xs[:-1], n) and y.stride()[-2:] == (ld, 1) and y._base is None
        assert torch.equal(y, OPS[scheme](x, w, bias, sid))
    clean = OPS[scheme](x, w, b, sid, False, True)
    with inject(FaultSpec(site=name, index=(5, n - 3), stage="accumulator", bit=30, fmt="fp32")):
        y = OPS[scheme](x, w, b, sid, False, True)
    _assert_same_but_corrected(y, clean, dtype)
    s = _stats(name)
    assert s["checks"] == 6 and s["detected"] == 1 and s["corrected"] == 1 and s["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("scheme", ["global", "global-tiles"])
@pytest.mark.parametrize("m, row", [(200, 100), (200, 150), (129, 5), (129, 128), (300, 180)])
@pytest.mark.parametrize("stage", [dict(stage="accumulator", bit=30, fmt="fp32"),
                                   dict(stage="accumulator", value=0.5, k_step=1)], ids=["bitflip", "kstep"])
def test_partial_last_m_tile_is_loaded_shifted(scheme, m, row, stage):
    """A partial last M-tile loads the last 128 rows of x (out-of-bounds rows are slow to fill), so
    its first rows are the previous tile's, computed twice: the output matches the reference, and a
    fault in a row of either tile (row 100 of 200: the overlap, owned by the first tile) is detected
    and corrected once, the output then equal to the fault-free one."""
    name = f"cu-shift-{scheme}-{m}-{row}-{stage.get('k_step', 'b')}"
    sid = site(name)
    dtype = torch.bfloat16
    x, w, b = _rand(m, 1024, dtype=dtype), _rand(768, 1024, dtype=dtype, scale=1024 ** -0.5), _rand(768, dtype=dtype)
    clean = OPS[scheme](x, w, b, sid)
    ref = F.linear(x.double(), w.double(), b.double())
    assert (clean.double() - ref).abs().max() <= 2 * (F.linear(x, w, b).double() - ref).abs().max() + 1e-6
    with inject(FaultSpec(site=name, index=(row, 300), **stage)):
        y = OPS[scheme](x, w, b, sid)
    _assert_same_but_corrected(y, clean, dtype)
    s = _stats(name)
    assert s["checks"] == 2 and s["detected"] == 1 and s["corrected"] == 1 and s["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_batched_and_strided_weights(scheme):
    sid = site(f"cu-bmm-{scheme}")
    x, w = _rand(4, 33, 64, dtype=torch.bfloat16), _rand(4, 64, 96, dtype=torch.bfloat16)  # W [B, K, N]
    y = OPS[scheme](x, w.transpose(-1, -2), None, sid)
    ref = x.double() @ w.double()
    assert (y.double() - ref).abs().max() <= 2 * ((x @ w).double() - ref).abs().max() + 1e-6
    wt = _rand(64, 200, dtype=torch.float16)  # a transposed view as weight
    xt = _rand(64, 9, dtype=torch.float16).t()  # non-contiguous x
    y = OPS[scheme](xt, wt.t(), None, sid)
    ref = xt.double() @ wt.double()
    assert (y.double() - ref).abs().max() <= 2 * ((xt @ wt).double() - ref).abs().max() + 1e-6
    assert _stats(f"cu-bmm-{scheme}")["detected"] == 0


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_no_false_positives_over_many_random_inputs(scheme):
    name = f"cu-clean-{scheme}"
    sid = site(name)
    calls = 0
    for trial in range(48):
        g = torch.Generator().manual_seed(trial)
        dtype = [torch.bfloat16, torch.float16][trial % 2]
        shift, spread = [(0.0, 1.0), (1.0, 1.0), (0.0, 30.0), (3.0, 0.1)][trial % 4]
        m, n, k = [(24, 192, 192), (1, 4096, 4096), (300, 520, 2048), (16, 11008, 512),
                   (100, 2048, 4096)][trial % 5]
        x = _rand(m, k, dtype=dtype, scale=spread, shift=shift, gen=g)
        w = _rand(n, k, dtype=dtype, scale=0.1 if trial % 3 else 0.02, shift=0.01 * (trial % 5), gen=g)
        b = _rand(n, dtype=dtype, gen=g) if trial % 2 else None
        OPS[scheme](x, w, b, sid)
        calls += 1
    s = _stats(name)
    assert s["detected"] == 0 and s["checks"] == calls and s["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("protect", [False, True])
def test_ring_kernel_never_reads_a_refilled_slot(protect):
    """Regression (run 30a): without a proxy fence before a slot's release, the ring kernel's
    consumers could still be reading a slot the TMA refilled: 1-10 % of calls at this shape (4 warps
    over M, 4 stages) returned a wrong block. 60 calls, each compared with the fp64 product."""
    sid = site(f"cu-ring-refill-{protect}")
    m, n, k = 256, 11008, 4096
    assert cuda_gemm.thread_config(m, n, k, 1, 132)[1] == 4  # the configuration the race hit
    torch.manual_seed(0)
    x, w = _rand(m, k, dtype=torch.bfloat16), _rand(n, k, dtype=torch.bfloat16, scale=k ** -0.5)
    ref = F.linear(x.double(), w.double())
    tol = 2 * (F.linear(x, w).double() - ref).abs().max() + 1e-6
    bad = sum(int(((cuda_gemm.run("linear_thread", x, w, None, ftcompile.telemetry.site(sid), protect=protect,
                                  kernel="ring").double() - ref).abs() > tol).any()) for _ in range(60))
    assert bad == 0
    assert _stats(f"cu-ring-refill-{protect}")["detected"] == 0


FAULTS = [dict(stage="accumulator", value=0.5, k_step=1), dict(stage="accumulator", bit=30, fmt="fp32"),
          dict(stage="accumulator", bit=27, fmt="fp32", k_step=0), dict(stage="output", bit=14, fmt="bf16"),
          dict(stage="output", bit=31, fmt="fp32"), dict(stage="output", value=float("nan")),
          dict(stage="output", value=float("inf"))]


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: "-".join(str(v) for v in f.values()))
def test_single_fault_detected_and_corrected(scheme, dtype, fault):
    name = f"cu-fault-{scheme}-{dtype}"
    sid = site(name)
    x, w, b = _rand(48, 256, dtype=dtype), _rand(160, 256, dtype=dtype, scale=0.1), _rand(160, dtype=dtype)
    clean = OPS[scheme](x, w, b, sid)
    with inject(FaultSpec(site=name, index=(7, 70), **fault)) as inj:
        y = OPS[scheme](x, w, b, sid)
    ev = inj.events[0]
    assert ev.index == (7, 70) and not (ev.after == ev.before)
    _assert_same_but_corrected(y, clean, dtype)
    assert _stats(name) == {"checks": 2, "detected": 1, "corrected": 1, "uncorrectable": 0,
                            "nonfinite_inputs": 0}


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_random_single_fault_is_corrected(scheme):
    """Random element and k-step, exponent bit flips: each one that changes the value by more
    than 5% (all but flips of near-zero partial sums) is detected and corrected."""
    name = f"cu-rand-{scheme}"
    sid = site(name)
    x, w, b = (_rand(200, 1024, dtype=torch.bfloat16), _rand(640, 1024, dtype=torch.bfloat16, scale=0.05),
               _rand(640, dtype=torch.bfloat16))
    clean = OPS[scheme](x, w, b, sid)
    big = 0
    for seed in range(30):
        stage = "accumulator" if seed % 2 else "output"
        spec = FaultSpec(site=name, stage=stage, seed=seed, bit=[30, 27, 25][seed % 3], fmt="fp32")
        before = dict(_stats(name))
        with inject(spec) as inj:
            y = OPS[scheme](x, w, b, sid)
        ev = inj.events[0]
        if not abs(ev.after - ev.before) > 0.05 * (1 + abs(ev.before)):
            continue  # near-zero partial sums: a change the threshold may rightly not resolve
        big += 1
        after = _stats(name)
        assert after["detected"] - before["detected"] == 1, (seed, ev)
        assert after["corrected"] - before["corrected"] == 1, (seed, ev)
        assert after["uncorrectable"] == before["uncorrectable"], (seed, ev)
        _assert_same_but_corrected(y, clean, torch.bfloat16)
    assert big >= 15


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_two_faults_in_one_check_are_uncorrectable_and_recompute_repairs(scheme, monkeypatch):
    name, rname = f"cu-multi-{scheme}", f"cu-multi-re-{scheme}"
    sid, rid = site(name), site(rname, policy="recompute")
    # The thin kernel checks a column of y over the call's rows: its two faults share a column
    # of more than 32 rows, with the checksum rows (where gemm.thin_replica takes a replica, both
    # are corrected: the test sets its width limit to 0).
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", 0)
    x = _rand(40 if scheme == "thin" else 16, 128, dtype=torch.bfloat16)
    w = _rand(128, 128, dtype=torch.bfloat16)
    clean = OPS[scheme](x, w, None, sid)
    specs = ([dict(stage="output", index=(3, 5), value=4.0), dict(stage="output", index=(9, 5), value=4.0)]
             if scheme == "thin" else [dict(stage="output", index=(3, 5), value=4.0, count=2)])
    with inject(*[FaultSpec(site=name, **sp) for sp in specs]) as inj:
        y = OPS[scheme](x, w, None, sid)
    assert sum(len(i.events) for i in (inj if isinstance(inj, list) else [inj])) == 2
    s = _stats(name)
    assert s["detected"] == 1 and s["uncorrectable"] == 1 and s["corrected"] == 0
    assert not torch.allclose(y, clean)
    with inject(*[FaultSpec(site=rname, **sp) for sp in specs]):
        y = OPS[scheme](x, w, None, rid)
    _assert_same_but_corrected(y, clean, torch.bfloat16)
    assert _stats(rname)["uncorrectable"] == 1


@needs_hopper
@pytest.mark.parametrize("rows", [40, 12, 24], ids=["checksum-rows", "loaded-replica", "crossed-replica"])
@pytest.mark.parametrize("stage", ["accumulator", "output"])
def test_thin_kernel_corrects_as_its_cpu_reference(stage, rows, monkeypatch):
    """The thin kernel and gemm.linear_thin on the same inputs and fault: the same outcome, and both
    outputs equal their fault-free runs (40 rows: the checksum rows, gemm.thin_replica's width
    limit set to 0)."""
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", 0)
    name = f"cu-thin-ref-{stage}-{rows}"
    sid = site(name)
    x, w, b = _rand(rows, 256, dtype=torch.bfloat16), _rand(300, 256, dtype=torch.bfloat16, scale=0.1), \
        _rand(300, dtype=torch.bfloat16)
    spec = FaultSpec(site=name, stage=stage, index=(11, 130), value=3.0)
    kw = dict(site_name=name, site_id=sid, policy="correct", c_sigma=2.5, e_max_safety=1.0)
    clean_ref, _ = gemm.linear_thin(x.cpu().float(), w.cpu().float(), b.cpu().float(), **kw)
    with inject(spec):
        y_ref, out = gemm.linear_thin(x.cpu().float(), w.cpu().float(), b.cpu().float(), **kw)
    assert (int(out.detected), int(out.corrected)) == (1, 1)
    assert torch.allclose(y_ref, clean_ref, rtol=0, atol=1e-4)
    clean = cuda_gemm.run("linear_thread", x, w, b, ftcompile.telemetry.site(sid), kernel="thin")
    with inject(spec):
        y = cuda_gemm.run("linear_thread", x, w, b, ftcompile.telemetry.site(sid), kernel="thin")
    _assert_same_but_corrected(y, clean, torch.bfloat16)
    assert _stats(name)["detected"] == 1 and _stats(name)["corrected"] == 1


@needs_hopper
@pytest.mark.parametrize("kernel", ["thin", "stream"])
@pytest.mark.parametrize("protect", [True, False])
def test_thread_kernel_reads_a_weight_written_just_before(protect, kernel):
    """A weight that is not a parameter (static_weight=False) may be written by the kernel right
    before the call: the thin and streaming kernels, which read a parameter's first W before their
    dependency wait, then read it only after. Replays of one CUDA graph in which each call's W is
    copied in by the preceding kernel (a different W per call) must each equal F.linear's result on
    that W, with no false alarm."""
    name = f"cu-{kernel}-dynamic-w-{int(protect)}"
    sid = ftcompile.register_site(name, "linear", static_weight=False)
    gen = torch.Generator().manual_seed(3)
    ws = [_rand(11008, 4096, dtype=torch.bfloat16, scale=4096 ** -0.5, gen=gen) for _ in range(3)]
    x, b = _rand(32, 4096, dtype=torch.bfloat16, gen=gen), _rand(11008, dtype=torch.bfloat16, gen=gen)
    w = torch.empty_like(ws[0])
    outs = [torch.empty(32, 11008, dtype=torch.bfloat16, device="cuda") for _ in ws]
    call = lambda: cuda_gemm.run("linear_thread", x, w, b, ftcompile.telemetry.site(sid),  # noqa: E731
                                 protect=protect, inject=False, kernel=kernel)
    w.copy_(ws[0])
    call()  # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for wi, out in zip(ws, outs):
            w.copy_(wi)
            out.copy_(call())
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        for wi, out in zip(ws, outs):
            ref = F.linear(x.float(), wi.float(), b.float())
            assert (out.float() - ref).abs().max() <= 2 * (F.linear(x, wi, b).float() - ref).abs().max() + 1e-3
    assert _stats(name)["detected"] == 0


@needs_hopper
def test_symmetric_double_fault_is_not_miscorrected():
    sid = site("cu-sym")
    x, w = _rand(4, 64, dtype=torch.bfloat16), _rand(64, 64, dtype=torch.bfloat16)
    clean = torch.ops.ftcompile.linear_global(x, w, None, sid)
    with inject(FaultSpec(site="cu-sym", stage="output", index=(1, 10), value=3.0, count=3)) as inj:
        y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    assert [e.index for e in inj.events] == [(1, 10), (1, 11), (1, 12)]
    assert _stats("cu-sym")["uncorrectable"] == 1 and _stats("cu-sym")["corrected"] == 0
    assert (y.float() - clean.float()).abs().max() > 1


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_policies_detect_and_raise(scheme):
    x, w = _rand(8, 64, dtype=torch.bfloat16), _rand(32, 64, dtype=torch.bfloat16)
    name = f"cu-pol-detect-{scheme}"
    sid = site(name, policy="detect")
    clean = OPS[scheme](x, w, None, sid)
    with inject(FaultSpec(site=name, stage="output", index=(2, 3), value=8.0)):
        y = OPS[scheme](x, w, None, sid)
    assert _stats(name)["detected"] == 1 and _stats(name)["corrected"] == 0
    assert float(y[2, 3]) - float(clean[2, 3]) == pytest.approx(8.0, abs=0.07)
    rname = f"model.layers.3.mlp.{scheme}"
    rid = site(rname, policy="raise")
    OPS[scheme](x, w, None, rid)  # clean call: no raise
    with inject(FaultSpec(site="model.layers.*", stage="output", value=8.0)):
        with pytest.raises(FaultDetected, match=rname):
            OPS[scheme](x, w, None, rid)
    assert _stats(rname)["detected"] == 1


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("rows", [300, 8], ids=["several-row-blocks", "one-row-block"])
def test_nonfinite_inputs_are_reported_once_not_as_faults(scheme, rows):
    name = f"cu-nonfinite-{scheme}-{rows}"
    sid = site(name)
    x = _rand(rows, 64, dtype=torch.bfloat16)
    x[1, 3] = float("nan")
    x[rows - 2, 5] = float("inf")
    y = OPS[scheme](x, _rand(16, 64, dtype=torch.bfloat16), None, sid)
    assert torch.isnan(y[1]).all() and torch.isfinite(y[0]).all()
    s = _stats(name)
    assert s["nonfinite_inputs"] == 1 and s["detected"] == 0
    OPS[scheme](x, _rand(16, 64, dtype=torch.bfloat16), None, sid)
    assert _stats(name)["nonfinite_inputs"] == 2


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_same_element_as_cpu_reference(scheme):
    name = f"cu-same-{scheme}"
    sid = site(name)
    x, w = torch.randn(3, 20, 128), torch.randn(96, 128)
    spec = FaultSpec(site=name, stage="accumulator", seed=11, value=2.0)
    with inject(spec) as cpu:
        OPS[scheme](x, w, None, sid)
    xg, wg = x.cuda().bfloat16(), w.cuda().bfloat16()
    clean = OPS[scheme](xg, wg, None, sid)
    with inject(spec) as gpu:
        y = OPS[scheme](xg, wg, None, sid)
    assert [e.index for e in gpu.events] == [e.index for e in cpu.events]
    assert _stats(name)["corrected"] == 2
    _assert_same_but_corrected(y, clean, torch.bfloat16)


@needs_hopper
def test_fp32_falls_back_to_the_reference_with_a_reason():
    x, w = torch.randn(4, 32, device="cuda"), torch.randn(16, 32, device="cuda")
    assert "bf16" in cuda_gemm.fallback_reason("linear_thread", x, w)
    sid = site("cu-fp32")
    y = torch.ops.ftcompile.linear_thread(x, w, None, sid)
    torch.testing.assert_close(y, x @ w.t(), rtol=1e-5, atol=1e-5)


@needs_hopper
@pytest.mark.parametrize("scheme", SCHEMES)
def test_cuda_graph_replay_keeps_counting(scheme):
    """No host sync per call: the op captures into a CUDA graph and replays with counters."""
    name = f"cu-graph-{scheme}"
    sid = site(name)
    x, w = _rand(16, 512, dtype=torch.bfloat16), _rand(1024, 512, dtype=torch.bfloat16)
    OPS[scheme](x, w, None, sid)  # warm-up: caches, workspace
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = OPS[scheme](x, w, None, sid)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert _stats(name)["checks"] == 4 and _stats(name)["detected"] == 0
    torch.testing.assert_close(y, F.linear(x, w), rtol=2e-2, atol=2e-2)


@needs_hopper
@pytest.mark.parametrize("scheme", ["global", "thread"])
def test_capture_without_warm_up_shares_one_workspace(scheme, monkeypatch):
    """A capture whose stream saw no warm-up call makes a workspace the graph owns: once per capture
    (one per call put 3 fill kernels before every captured GEMM, run 30f), a new one for the next
    capture; outputs and counts stay right on replay."""
    from ftcompile import cudagraphs
    made = []
    real = cudagraphs.persistent

    def counting(device, what, make, per_graph=False):
        value, in_graph = real(device, what, make, per_graph)
        made.append((what, in_graph))
        return value, in_graph
    monkeypatch.setattr(cudagraphs, "persistent", counting)
    name = f"cu-graph-ws-{scheme}"
    sid = site(name)
    xs = [_rand(300, 512, dtype=torch.bfloat16) for _ in range(3)]
    w = _rand(1024, 512, dtype=torch.bfloat16)
    OPS[scheme](xs[0], w, None, sid)  # caches (per weight) made outside the capture
    torch.cuda.synchronize()
    for _ in range(2):  # two captures
        made.clear()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            ys = [OPS[scheme](x, w, None, sid) for x in xs]
        whats = [what for what, in_graph in made]
        assert whats and all(in_graph for _, in_graph in made), made  # graph-owned ...
        assert len(whats) == len(set(whats)), made  # ... and one of each kind per capture
        g.replay()
        torch.cuda.synchronize()
        for x, y in zip(xs, ys):
            torch.testing.assert_close(y, F.linear(x, w), rtol=2e-2, atol=2e-2)
    assert _stats(name)["checks"] == 1 + 2 * 3 and _stats(name)["detected"] == 0


@needs_hopper
def test_weight_checksums_follow_in_place_updates():
    sid = site("cu-update")
    x, w = _rand(4, 64, dtype=torch.bfloat16), _rand(32, 64, dtype=torch.bfloat16)
    torch.ops.ftcompile.linear_global(x, w, None, sid)
    w.mul_(3.0)
    y = torch.ops.ftcompile.linear_global(x, w, None, sid)
    torch.testing.assert_close(y, F.linear(x, w), rtol=2e-2, atol=2e-2)
    assert _stats("cu-update")["detected"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("check", ["rows", "tiles"])
def test_global_multicast_variant(dtype, check, monkeypatch):
    """The 2-CTA cluster variant (W half-tiles multicast) computes and checks the same thing."""
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", check)
    name = f"cu-mc-{dtype}-{check}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    for m, n, k in [(300, 520, 264), (129, 1000, 4096), (8, 64, 64)]:  # odd M-tile counts too
        x, w, b = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
        ref = F.linear(x.double(), w.double(), b.double())
        torch_err = (F.linear(x, w, b).double() - ref).abs().max()
        for protect in (True, False):
            y = cuda_gemm.run("linear_global", x, w, b, s, protect=protect, cluster=2)
            assert (y.double() - ref).abs().max() <= 2 * torch_err + 1e-6
        clean = cuda_gemm.run("linear_global", x, w, b, s, cluster=2)
        with inject(FaultSpec(site=name, stage="output", index=(m // 2, n // 3), value=5.0)):
            y = cuda_gemm.run("linear_global", x, w, b, s, cluster=2)
        _assert_same_but_corrected(y, clean, dtype)
    st = _stats(name)
    assert st["detected"] == 3 and st["corrected"] == 3 and st["uncorrectable"] == 0


def _assert_graph_replays(run, expected):
    """run() captured in a CUDA graph (workspaces already sized by eager calls) and replayed three
    times: each replay gives `expected` bit for bit."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = run()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, expected)


def _fault_each_stage(name, run, clean, dtype, index, k):
    """One accumulator fault (in the last k-step) and one output fault at `index`, each a call of
    `run()`: both corrected back to `clean`. Returns the number of faults injected."""
    for stage in ("accumulator", "output"):
        spec = FaultSpec(site=name, stage=stage, index=index, value=5.0,
                         **({"k_step": (k - 1) // 64} if stage == "accumulator" else {}))
        with inject(spec) as inj:
            y = run()
        assert len(inj.events) == 1
        _assert_same_but_corrected(y, clean, dtype)
    return 2


@needs_hopper
@pytest.mark.parametrize("depth,warps", [(1, 8), (2, 8), (1, 16), (2, 16)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_stream_kernel_every_cluster_split(dtype, depth, warps):
    """The streaming kernel splits K over 1-8 CTAs (any cluster size; the others push their
    partials into the leader's shared memory), with 8 or 16 warps, loading a chunk then computing
    it (depth 1) or loading the next chunk while this one computes (depth 2, bit-identical to
    depth 1): the same numerics, checks and corrections for every split, with K tails, partial
    column tiles, and a fault in the last CTA's K slice."""
    name = f"cu-stream-split-{dtype}-{depth}-{warps}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    faults = 0
    for m, n, k in [(1, 4096, 4096), (5, 200, 1032), (16, 96, 8), (3, 520, 264)]:
        x, w, b = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
        ref = F.linear(x.double(), w.double(), b.double())
        torch_err = (F.linear(x, w, b).double() - ref).abs().max()
        for split in (1, 2, 3, 4, 5, 8):
            run = lambda protect=True: cuda_gemm.run("linear_thread", x, w, b, s, protect=protect, split=split,
                                                     stages=depth, warps=warps, kernel="stream")
            for protect in (True, False):
                assert (run(protect).double() - ref).abs().max() <= 2 * torch_err + 1e-6, (m, n, k, split)
            clean = run()
            same_order = cuda_gemm.run("linear_thread", x, w, b, s, split=split, stages=1, warps=warps,
                                       kernel="stream")
            assert torch.equal(clean, same_order), (m, n, k, split)
            faults += _fault_each_stage(name, run, clean, dtype, (m - 1, n // 3), k)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_thin_kernel_every_cluster_split(dtype):
    """The thin kernel splits K over 1-4 CTAs, each finishing a slice of the tile's rows of D
    (even slices, or 40 / 40 / 48 rows for 3): the same numerics, checks and corrections for
    every split, with N and K tails, and faults in the first and the last slice."""
    name = f"cu-thin-split-{dtype}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    faults = 0
    for m, n, k in [(17, 300, 1032), (64, 4096, 1024), (128, 200, 2048)]:
        x, w, b = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
        ref = F.linear(x.double(), w.double(), b.double())
        torch_err = (F.linear(x, w, b).double() - ref).abs().max()
        for split in (1, 2, 3, 4):
            run = lambda protect=True: cuda_gemm.run("linear_thread", x, w, b, s, protect=protect, split=split,
                                                     kernel="thin")
            for protect in (True, False):
                assert (run(protect).double() - ref).abs().max() <= 2 * torch_err + 1e-6, (m, n, k, split)
            clean = run()
            for col in (3, 127):  # the first slice's rows of D, the last one's
                faults += _fault_each_stage(name, run, clean, dtype, (m - 1, col), k)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_thin_kernel_decode_rows_checked_in_registers(dtype, monkeypatch):
    """At split 1 with x padded to 32 or 64 rows each thread of the thin kernel adds the bias,
    checks its rows of D with quad shuffles (up to 32 rows: each value against its replica; 33-64
    with the checksum rows: gemm.thin_replica's width limit set to 0) and
    stores y from its registers; a failed check sends
    the CTA through the partial tile, which counts and corrects (as every call padded to 128 rows
    does). Row counts at every padding of x (32, 64, 128; with and without bias, N tails): within
    the 2x rule protected and not, no false alarm, and faults at the first and last live row of x,
    in the first and last tile, corrected; two faults in one column of 40 rows reported
    uncorrectable."""
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", 0)
    name = f"cu-thin-regs-{dtype}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    faults = 0
    for m, n, k, bias in [(1, 1000, 512, True), (3, 1000, 520, False), (16, 300, 1024, True), (32, 260, 256, True),
                          (33, 300, 512, False), (64, 260, 256, True), (100, 1000, 512, True), (128, 300, 1024, False)]:
        x, w = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5)
        b = _rand(n, dtype=dtype) if bias else None
        ref = F.linear(x.double(), w.double(), None if b is None else b.double())
        torch_err = (F.linear(x, w, b).double() - ref).abs().max()
        run = lambda protect=True: cuda_gemm.run("linear_thread", x, w, b, s, protect=protect, split=1,  # noqa: E731
                                                 kernel="thin")
        for protect in (True, False):
            assert (run(protect).double() - ref).abs().max() <= 2 * torch_err + 1e-6, (m, n, k)
        assert _stats(name)["detected"] == faults
        clean = run()
        for row, col in ((0, 3), (m - 1, n - 1)):
            faults += _fault_each_stage(name, run, clean, dtype, (row, col), k)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0
    for m, rows in ((40, (2, 6)), (100, (40, 99))):  # (up to 32 rows: both corrected, see the replica test)
        x, w = _rand(m, 512, dtype=dtype), _rand(300, 512, dtype=dtype, scale=512 ** -0.5)
        with inject(*[FaultSpec(site=name, stage="output", index=(r, 7), value=4.0) for r in rows]):
            cuda_gemm.run("linear_thread", x, w, None, s, split=1, kernel="thin")
    assert _stats(name)["uncorrectable"] == 2


def _replicas_correct_exactly(name, s, dtype, kernel_kw, cases):
    """For each (wb, m, n, k, split, bias): the thread kernel of `kernel_kw` within the 2x rule
    protected and not, no alarm; then (wb = 1) one fault at either stage in the first and the last
    row, each corrected to the fault-free output bit for bit. Returns the faults injected."""
    faults = 0
    for wb, m, n, k, split, bias in cases:
        x = _rand(*([wb] if wb > 1 else []), m, k, dtype=dtype)
        w = _rand(*([wb] if wb > 1 else []), n, k, dtype=dtype, scale=k ** -0.5)
        b = _rand(n, dtype=dtype) if bias else None
        ref = F.linear(x.double(), w.double(), None if b is None else b.double()) if wb == 1 else \
            x.double() @ w.double().transpose(-1, -2)
        torch_err = ((F.linear(x, w, b) if wb == 1 else x @ w.transpose(-1, -2)).double() - ref).abs().max()
        run = lambda protect=True: cuda_gemm.run("linear_thread", x, w, b, s, protect=protect,  # noqa: E731
                                                 split=split, **kernel_kw)
        for protect in (True, False):
            assert (run(protect).double() - ref).abs().max() <= 2 * torch_err + 1e-6, (wb, m, n, k, split)
        assert _stats(name)["detected"] == faults
        clean = run()
        if wb > 1:
            continue
        for row in sorted({0, m - 1}):
            for stage in ("accumulator", "output"):
                spec = FaultSpec(site=name, stage=stage, index=(row, n - 1), value=5.0,
                                 **({"k_step": (k - 1) // 64} if stage == "accumulator" else {}))
                with inject(spec) as inj:
                    y = run()
                assert len(inj.events) == 1 and torch.equal(y, clean), (m, n, k, split, row, stage)
                faults += 1
    return faults


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_thin_kernel_few_rows_checked_against_a_replica(dtype):
    """Up to 32 rows of x the thin kernel runs no x-side pass: every element of y is compared
    with its replica, bit for bit (up to 16 rows x's rows loaded a second time into the wgmma's
    padding, at 17-32 a second accumulator set in which each warpgroup computes the other's rows
    of W). Row counts 1-32, K tails, K splits 1-4, batched weights: within the 2x rule protected
    and not, no false alarm; a fault at either stage, in the first or the last row, is corrected
    to the fault-free output exactly (the intact copy is kept); two faults in one column of y are both
    corrected; a NaN or an infinity in x is reported once as a non-finite input, not as a fault."""
    name = f"cu-thin-replica-{dtype}"
    s = ftcompile.telemetry.site(site(name))
    faults = _replicas_correct_exactly(name, s, dtype, dict(kernel="thin"), [
        (1, 1, 1000, 520, 1, True), (1, 3, 4096, 4096, 2, False), (1, 16, 300, 8, 1, True),
        (1, 8, 2048, 1032, 4, True), (3, 5, 300, 256, 1, False), (1, 16, 1000, 1024, 3, True),
        (1, 12, 11008, 512, 1, False), (1, 17, 1000, 520, 1, True), (1, 24, 4096, 4096, 2, False),
        (1, 32, 2048, 1032, 4, True), (3, 32, 300, 256, 1, False), (1, 29, 300, 1024, 3, True)])
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0
    for m, rows in ((12, (2, 9)), (30, (3, 29))):  # two faults in one column of y
        x, w = _rand(m, 512, dtype=dtype), _rand(300, 512, dtype=dtype, scale=512 ** -0.5)
        clean = cuda_gemm.run("linear_thread", x, w, None, s, split=1, kernel="thin")
        with inject(*[FaultSpec(site=name, stage="output", index=(r, 7), value=4.0) for r in rows]):
            y = cuda_gemm.run("linear_thread", x, w, None, s, split=1, kernel="thin")
        assert torch.equal(y, clean), m
        faults += 1
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0
    for i, (bad, m) in enumerate(((float("nan"), 3), (float("inf"), 24))):
        x = _rand(m, 512, dtype=dtype)
        x[1, 7] = bad
        y = cuda_gemm.run("linear_thread", x, w, None, s, split=1, kernel="thin")
        assert not torch.isfinite(y[1]).any() and torch.isfinite(y[0]).all()
        assert _stats(name)["nonfinite_inputs"] == i + 1 and _stats(name)["detected"] == faults


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_thin_kernel_wide_replica_per_call(dtype, monkeypatch):
    """At 33-64 rows the thin kernel checks a call against its crossed replica where
    gemm.thin_replica asks (protect mode 2), and with checksum rows where it does not, in one
    library: rows 33-64, K tails, K splits 1-4, batched weights, within the 2x rule, no false alarm,
    faults corrected bit for bit; past the width limit two faults in one column of y are one
    uncorrectable check, within it both are corrected."""
    if not cuda_gemm._thin_replica_checked(cuda_gemm.lib(), 64, 2):
        pytest.skip("a library without replicas at 64 rows of padding (thin_gemm.cu FTG_THIN_REPLICA_NX)")
    monkeypatch.setattr(gemm, "THIN_REPLICA_WIDE_MAX_N", 2048)
    name = f"cu-thin-wide-{dtype}"
    s = ftcompile.telemetry.site(site(name))
    faults = _replicas_correct_exactly(name, s, dtype, dict(kernel="thin"), [
        (1, 40, 1000, 520, 1, True), (1, 64, 2048, 1032, 4, True), (1, 33, 2048, 4096, 2, False),
        (3, 64, 300, 256, 1, False), (1, 57, 300, 1024, 3, True), (1, 48, 768, 768, 1, False)])
    assert _stats(name)["corrected"] == faults and _stats(name)["uncorrectable"] == 0
    x = _rand(48, 512, dtype=dtype)
    for n, outcome in ((2048, (1, 1, 0)), (2176, (1, 0, 1))):  # the rule's limit, then one tile past it
        w = _rand(n, 512, dtype=dtype, scale=512 ** -0.5)
        before = {f: _stats(name)[f] for f in ("detected", "corrected", "uncorrectable")}
        clean = cuda_gemm.run("linear_thread", x, w, None, s, kernel="thin")
        with inject(*[FaultSpec(site=name, stage="output", index=(r, 7), value=4.0) for r in (3, 40)]):
            y = cuda_gemm.run("linear_thread", x, w, None, s, kernel="thin")
        assert tuple(_stats(name)[f] - before[f] for f in before) == outcome, n
        assert torch.equal(y, clean) == (outcome[1] == 1), n


@needs_hopper
@pytest.mark.parametrize("depth,warps", [(1, 8), (2, 16)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_stream_kernel_few_rows_checked_against_a_replica(dtype, depth, warps):
    """Up to gemm.STREAM_REPLICA_ROWS rows the streaming kernel computes every element twice (x's
    rows again in rows 8-15 of the m16 block) and compares the copies bit for bit: rows 1-8, K
    tails, K splits, partial column tiles, batched weights, within the 2x rule protected and not;
    no false alarm; a fault at either stage in the first or the last row is corrected to the
    fault-free output exactly; two faults in one check group (8 strided columns of a row) are both
    corrected; the outcomes are gemm.linear_stream's; NaN / inf in x are reported once each as
    non-finite inputs, not as faults; the checksum path (diagnostics asked for) still runs."""
    name = f"cu-stream-replica-{dtype}-{depth}-{warps}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    faults = _replicas_correct_exactly(name, s, dtype, dict(stages=depth, warps=warps, kernel="stream"), [
        (1, 1, 4096, 4096, 8, True), (1, 8, 768, 768, 4, False), (1, 5, 200, 1032, 3, True),
        (1, 3, 96, 8, 1, True), (3, 4, 300, 256, 2, False), (1, 7, 2304, 768, 1, True)])
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0
    # Two faults in one group (columns 5 and 13 of a tile), and the CPU reference's outcome.
    x, w = _rand(6, 512, dtype=dtype), _rand(300, 512, dtype=dtype, scale=512 ** -0.5)
    spec = FaultSpec(site=name, stage="output", index=(4, 69), value=4.0, count=2)
    clean = cuda_gemm.run("linear_thread", x, w, None, s, stages=depth, warps=warps, kernel="stream")
    with inject(spec) as inj:
        y = cuda_gemm.run("linear_thread", x, w, None, s, stages=depth, warps=warps, kernel="stream")
    assert [e.index for e in inj.events] == [(4, 69), (4, 77)] and torch.equal(y, clean)
    faults += 1
    with inject(spec):
        _, out = gemm.linear_stream(x.cpu().float(), w.cpu().float(), None, site_name=name, site_id=sid,
                                    policy="correct", c_sigma=2.5, e_max_safety=1.0)
    assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (1, 1, 0)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0
    for i, bad in enumerate((float("nan"), float("inf"))):
        xb = x.clone()
        xb[1, 7] = bad
        y = cuda_gemm.run("linear_thread", xb, w, None, s, stages=depth, warps=warps, kernel="stream")
        assert not torch.isfinite(y[1]).any() and torch.isfinite(y[0]).all()
        assert _stats(name)["nonfinite_inputs"] == i + 1 and _stats(name)["detected"] == faults
    dbg = torch.zeros(6, 300 // 64 * 8 + 8, 3, dtype=torch.float64, device="cuda")
    y = cuda_gemm.run("linear_thread", x, w, None, s, stages=depth, warps=warps, kernel="stream", dbg=dbg)
    assert torch.equal(y, clean) and bool((dbg[..., 2] > 0).all())  # the checksums' thresholds


@needs_hopper
@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_stream_kernel_two_row_blocks_per_cta(dtype, depth):
    """mtile 2: a CTA takes 32 rows of x (two m16 blocks share each W fragment; warp mt checks
    and stores block mt). Every accumulator sees the same MMAs in the same order as with one
    block per CTA, so the outputs equal mtile 1's bit for bit, for any cluster split, row tails
    (blocks with 0-15 live rows) and K tails; faults in either block are corrected and counted
    once."""
    name = f"cu-stream-mt2-{dtype}-{depth}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    faults = 0
    for m, n, k in [(32, 4096, 1024), (17, 200, 1032), (24, 520, 264), (40, 96, 8), (64, 264, 512)]:
        x, w, b = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
        ref = F.linear(x.double(), w.double(), b.double())
        torch_err = (F.linear(x, w, b).double() - ref).abs().max()
        for split in (1, 3, 8):
            run = lambda protect=True, mtile=2: cuda_gemm.run(
                "linear_thread", x, w, b, s, protect=protect, split=split, stages=depth, warps=8, mtile=mtile,
                kernel="stream")
            for protect in (True, False):
                y = run(protect)
                assert (y.double() - ref).abs().max() <= 2 * torch_err + 1e-6, (m, n, k, split)
                assert torch.equal(y, run(protect, mtile=1)), (m, n, k, split, protect)
            clean = run()
            for row in sorted({m - 1, 16 % m, 5}):  # the last row, block 1's first row, block 0
                faults += _fault_each_stage(name, run, clean, dtype, (row, n // 3), k)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("kernel", ["stream", "global"])
def test_chained_launches_wait_for_their_input(kernel):
    """Programmatic dependent launch (streaming and global kernels): each call may start while the
    previous kernel ends and must wait for it before reading x (and, global, the workspace the
    previous call's verification resets). A chain of calls, each reading the output the previous
    one just wrote (eager, then replayed from a CUDA graph), equals the same chain launched
    plainly, bit for bit, and stays within the 2x rule of an fp64 chain."""
    name = f"cu-{kernel}-pdl"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(0)
    ws = [_rand(n, k, dtype=torch.bfloat16, scale=k ** -0.5) for n, k in [(4096, 1024), (1024, 4096), (768, 1024),
                                                                         (1024, 768)]]
    x0 = _rand(1 if kernel == "stream" else 300, 1024, dtype=torch.bfloat16)
    scheme = "linear_thread" if kernel == "stream" else "linear_global"

    def chain(pdl):
        y = x0
        for w in ws * 3:
            y = cuda_gemm.run(scheme, y, w, None, s, kernel="stream" if kernel == "stream" else None, pdl=pdl)
        return y

    plain, ordered = chain(False), chain(True)
    assert torch.equal(plain, ordered)
    ref, torch_chain = x0.double(), x0
    for w in ws * 3:
        ref, torch_chain = F.linear(ref, w.double()), F.linear(torch_chain, w)
    assert (plain.double() - ref).abs().max() <= 2 * (torch_chain.double() - ref).abs().max()
    chain(True)  # warm (workspaces) before capture
    _assert_graph_replays(lambda: chain(True), plain)
    st = _stats(name)
    assert st["detected"] == 0 and st["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("split", [2, 3, 5])
@pytest.mark.parametrize("check", ["rows", "tiles"])
def test_global_split_k(dtype, split, check, monkeypatch):
    """K split over consecutive CTAs (the last one adds the others' partial tiles): within the 2x
    rule, protected equal to unprotected, no false alarm; accumulator faults in the first and the
    last split's k-steps and output faults detected and corrected (output = the fault-free one);
    the workspace flags reset (repeated calls, CUDA graph replay)."""
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", check)
    name = f"cu-splitk-{split}-{dtype}-{check}"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(split)
    x, w, b = _rand(200, 1000, dtype=dtype), _rand(600, 1000, dtype=dtype, scale=1000 ** -0.5), _rand(600, dtype=dtype)
    ref = F.linear(x.double(), w.double(), b.double())
    torch_err = (F.linear(x, w, b).double() - ref).abs().max()
    run = lambda **kw: cuda_gemm.run("linear_global", x, w, b, s, split=split, **kw)
    clean = run()
    assert (clean.double() - ref).abs().max() <= 2 * torch_err + 1e-6
    assert torch.equal(run(protect=False), clean)
    assert torch.equal(run(), clean)  # flags were reset: the same again
    faults = 0
    for spec in (dict(stage="accumulator", value=0.5, k_step=0), dict(stage="accumulator", value=-0.75, k_step=15),
                 dict(stage="output", bit=30, fmt="fp32")):
        for index in ((7, 70), (150, 590)):
            with inject(FaultSpec(site=name, index=index, **spec)):
                y = run()
            _assert_same_but_corrected(y, clean, dtype)
            faults += 1
    _assert_graph_replays(run, clean)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("check,cluster", [("rows", 1), ("tiles", 1), ("rows", 2), ("tiles", 2)])
def test_global_tail_split(dtype, check, cluster, monkeypatch):
    """A call of one wave and a few tiles more (128-wide tiles, two M-tiles, 32 k-steps; alone, and
    in 2-CTA clusters multicasting W): the last wave's tiles K split 4 ways over consecutive units,
    the others whole. Within the 2x rule, equal to the call without the tail split but for those
    tiles' summation order, protected equal to unprotected, no false alarm; faults in a whole tile
    and in a split tile detected and corrected; the split tiles' flags reset (repeated calls, CUDA
    graph replay)."""
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", check)
    name = f"cu-tail-{dtype}-{check}-{cluster}"
    s = ftcompile.telemetry.site(site(name))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m, n, k = 256, 128 * ((sms + 4 + 1) // 2), 2048
    split, split_from = cuda_gemm.global_tail(m, n, k, 1, sms, 128, cluster)
    slots = sms // cluster  # cluster units a wave
    assert split == 4 and split_from == slots, (split, split_from)  # one wave and a few tiles, 8 k-steps a unit
    torch.manual_seed(7)
    x, w, b = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
    ref = F.linear(x.double(), w.double(), b.double())
    torch_err = (F.linear(x, w, b).double() - ref).abs().max()
    run = lambda **kw: cuda_gemm.run("linear_global", x, w, b, s, bn=128, cluster=cluster, **kw)
    clean = run()
    assert (clean.double() - ref).abs().max() <= 2 * torch_err + 1e-6
    assert torch.equal(run(protect=False), clean)
    assert torch.equal(run(), clean)  # flags were reset: the same again
    monkeypatch.setattr(cuda_gemm, "GLOBAL_TAIL", False)
    whole = run()
    monkeypatch.setattr(cuda_gemm, "GLOBAL_TAIL", True)
    assert (whole.double() - ref).abs().max() <= 2 * torch_err + 1e-6
    c0 = 128 * (split_from // (2 // cluster))  # the raster's last tiles: 2 // cluster cluster tiles a column
    assert torch.equal(whole[:, :c0], clean[:, :c0])  # only the last wave's tiles changed order
    assert not torch.equal(whole, clean)  # (they did change it: the tail split ran)
    faults = 0
    for col in (5, n - 1):  # a whole tile, a split one (the raster's last: the last N-tiles)
        faults += _fault_each_stage(name, run, clean, dtype, (m - 3, col), k)
    _assert_graph_replays(run, clean)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bn,check", [(256, "rows"), (192, "rows"), (128, "rows"), (192, "tiles"), (128, "tiles")])
def test_global_tile_widths(dtype, bn, check, monkeypatch):
    """Every tile width (and check), forced: within the 2x rule (N tails of every width, batched
    weights, split K), protected equal to unprotected, no false alarm; faults in the first, a
    middle and the last N-tile (the position weights carry the tile's offset) detected and
    corrected."""
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", check)
    name = f"cu-width-{bn}-{dtype}-{check}"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(bn)
    faults = 0
    for xs, n, k, split in [((300, 264), 520, 264, 1), ((200, 1000), 600, 1000, 2), ((2, 70, 512), 1000, 512, 1)]:
        x, b = _rand(*xs, dtype=dtype), _rand(n, dtype=dtype)
        w = _rand(*xs[:-2], n, k, dtype=dtype, scale=k ** -0.5)  # batched where x is
        ref = (x.double() @ w.double().transpose(-1, -2)) + b.double()
        torch_err = ((x @ w.transpose(-1, -2) + b).double() - ref).abs().max()
        run = lambda **kw: cuda_gemm.run("linear_global", x, w, b, s, bn=bn, split=split, **kw)
        clean = run()
        assert (clean.double() - ref).abs().max() <= 2 * torch_err + 1e-6
        assert torch.equal(run(protect=False), clean)
        rows = clean.numel() // n
        for col in (5, bn + 7, n - 1):
            faults += _fault_each_stage(name, run, clean, dtype, (rows - 3, col), k)
    st = _stats(name)
    assert st["detected"] == faults and st["corrected"] == faults and st["uncorrectable"] == 0


@needs_hopper
def test_global_rows_past_the_fix_list_are_uncorrectable():
    """A CTA corrects at most 32 flagged rows per call (its fix list); the verifier warps take
    the list's slots atomically and count every row past them uncorrectable. W changed behind
    the checksum cache (through .data: no version bump) puts every row of both M-tiles off."""
    name = "cu-fixlist"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(0)
    x, w = _rand(256, 512, dtype=torch.bfloat16), _rand(512, 512, dtype=torch.bfloat16, scale=512 ** -0.5)
    cuda_gemm.run("linear_global", x, w, None, s, check="rows")  # checksums cached for this weight
    assert _stats(name)["detected"] == 0
    w.data[:, 0] += 1.0
    cuda_gemm.run("linear_global", x, w, None, s, check="rows")
    torch.cuda.synchronize()
    st = _stats(name)
    assert st["detected"] == 256
    assert st["corrected"] + st["uncorrectable"] == 256 and st["uncorrectable"] >= 2 * (128 - 32)


@needs_hopper
def test_global_tile_rows_past_the_warps_lists_are_uncorrectable():
    """The tile-local check lists at most 4 flagged tile rows per consumer warp (corrected after
    its last tile) and counts the rest uncorrectable. W changed behind the checksum cache flags
    every row of all 6 tiles (2 M-tiles x 3 N-tiles of 192): 768 tile rows, 8 warps x 4 listed
    per tile at most."""
    name = "cu-fixlist-tiles"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(0)
    x, w = _rand(256, 512, dtype=torch.bfloat16), _rand(512, 512, dtype=torch.bfloat16, scale=512 ** -0.5)
    x[:, 0] = 1.0  # every tile row then misses its tile's width (192 or 128) from its check
    cuda_gemm.run("linear_global", x, w, None, s, bn=192, check="tiles")
    assert _stats(name)["detected"] == 0
    w.data[:, 0] += 1.0
    cuda_gemm.run("linear_global", x, w, None, s, bn=192, check="tiles")
    torch.cuda.synchronize()
    st = _stats(name)
    assert st["detected"] == 768
    assert st["corrected"] + st["uncorrectable"] == 768 and st["uncorrectable"] >= 768 - 6 * 8 * 4


def _global_tile_index(row, col, tm_n, tn_n, bn, group_m=8):
    """The persistent schedule's index of the tile holding (row, col) (global_gemm.cu, tile_coord:
    groups of 8 M-tiles sweep the N-tiles together); CTA i of a grid of g takes i, i + g, ..."""
    mt, nt = row // 128, col // bn
    first_m = mt // group_m * group_m
    return first_m * tn_n + nt * min(tm_n - first_m, group_m) + mt - first_m


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_global_tile_faults_before_a_ctas_last_tile_are_corrected_by_the_fixer(dtype):
    """A CTA of the tile-local check hands the rows it flags before its last tile to its fixer warp
    (WG0), which corrects them while the consumers go on; the last tile's rows stay with the
    consumers. 384 tiles over the SMs: faults in first tiles (handed over), in a last tile (kept),
    two in one handed-over row (uncorrectable; "recompute" repairs the row through the fixer)."""
    name = f"cu-fixer-{dtype}"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(3)
    m, n, k, bn = 2048, 4608, 256, 192
    x, w, b = _rand(m, k, dtype=dtype), _rand(n, k, dtype=dtype, scale=k ** -0.5), _rand(n, dtype=dtype)
    run = lambda site_=s, **kw: cuda_gemm.run("linear_global", x, w, b, site_, bn=bn, check="tiles", split=1,
                                              cluster=1, **kw)
    clean = run()
    sms, total = torch.cuda.get_device_properties(0).multi_processor_count, (m // 128) * (n // bn)
    grid = min(sms, total)
    handed, kept = [(5, 10), (700, 3000), (1030, 190)], (1900, 4500)
    for r, c in handed:  # each lies in a tile its CTA takes before another
        assert _global_tile_index(r, c, m // 128, n // bn, bn) + grid < total
    assert _global_tile_index(*kept, m // 128, n // bn, bn) + grid >= total  # a CTA's last tile
    specs = [FaultSpec(site=name, stage="output", index=i, value=v) for i, v in zip(handed, (3.0, -5.0, 40.0))]
    specs.append(FaultSpec(site=name, stage="accumulator", index=kept, value=-2.0, k_step=2))
    with inject(*specs):
        y = run()
    _assert_same_but_corrected(y, clean, dtype, recomputed=4)
    st = _stats(name)
    assert (st["detected"], st["corrected"], st["uncorrectable"]) == (4, 4, 0)
    with inject(FaultSpec(site=name, stage="output", index=(5, 10), value=4.0, count=2)):
        run()
    st = _stats(name)
    assert (st["detected"], st["corrected"], st["uncorrectable"]) == (5, 4, 1)
    rs = ftcompile.telemetry.site(site(name + "-re", policy="recompute"))
    with inject(FaultSpec(site=name + "-re", stage="output", index=(5, 10), value=4.0, count=2)):
        y = run(rs)
    _assert_same_but_corrected(y, clean, dtype, recomputed=bn)  # the tile row, recomputed
    y = run()
    assert torch.equal(y, clean) and _stats(name)["detected"] == 5  # and no false alarm after


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_global_tile_check_corrects_one_fault_per_tile(dtype):
    """The tile-local check groups a row by tile: two faults in one row, in different tiles, are
    both corrected, as the reference with the same tile width counts them (per-row checks would
    call them uncorrectable); two in one tile are uncorrectable, and "recompute" repairs them."""
    name = f"cu-tilecheck-{dtype}"
    s = ftcompile.telemetry.site(site(name))
    torch.manual_seed(1)
    x, w, b = _rand(70, 512, dtype=dtype), _rand(600, 512, dtype=dtype, scale=512 ** -0.5), _rand(600, dtype=dtype)
    run = lambda **kw: cuda_gemm.run("linear_global", x, w, b, s, bn=192, check="tiles", **kw)
    clean = run()
    specs = (FaultSpec(site=name, stage="output", index=(5, 10), value=3.0),
             FaultSpec(site=name, stage="accumulator", index=(5, 300), value=-2.0, k_step=3))
    with inject(*specs):
        y = run()
    _assert_same_but_corrected(y, clean, dtype, recomputed=2)
    st = _stats(name)
    assert (st["detected"], st["corrected"], st["uncorrectable"]) == (2, 2, 0)
    ref_site = site(name + "-ref")
    with inject(*(FaultSpec(site=name + "-ref", stage=f.stage, index=f.index, value=f.value, k_step=f.k_step)
                  for f in specs)):
        _, out = gemm.linear_global(x.cpu().float(), w.cpu().float(), b.cpu().float(), site_name=name + "-ref",
                                    site_id=ref_site, policy="correct", c_sigma=2.5, e_max_safety=2.0, tile_width=192)
    assert (int(out.detected), int(out.corrected), int(out.uncorrectable)) == (2, 2, 0)
    with inject(FaultSpec(site=name, stage="output", index=(9, 200), value=4.0, count=2)):
        y = run()
    st = _stats(name)
    assert (st["detected"], st["corrected"], st["uncorrectable"]) == (3, 2, 1)
    rs = ftcompile.telemetry.site(site(name + "-re", policy="recompute"))
    with inject(FaultSpec(site=name + "-re", stage="output", index=(9, 200), value=4.0, count=2)):
        y = cuda_gemm.run("linear_global", x, w, b, rs, bn=192, check="tiles")
    _assert_same_but_corrected(y, clean, dtype, recomputed=192)  # the tile row, recomputed


# ------------------------------------------------------------------------------- sibling groups
# (M, the members' N, K): q/k/v-like (128-wide tiles only), gate/up-like (every width), a ragged
# last member (N % 8 != 0), four members; split-K at few rows.
GROUPS = [(300, (256, 128, 128), 256), (130, (384, 384), 192), (64, (256, 200), 128),
          (257, (128, 256, 128, 72), 512), (2, (256, 256), 1024)]


def _group(case, dtype, bias, gen=None):
    m, ns, k = GROUPS[case]
    x = _rand(m, k, dtype=dtype, gen=gen)
    ws = [_rand(n, k, dtype=dtype, scale=k ** -0.5, gen=gen) for n in ns]
    bs = [_rand(n, dtype=dtype, gen=gen) for n in ns] if bias else []
    return x, ws, bs


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", range(len(GROUPS)))
def test_group_matches_fp32_reference_at_every_width(case, dtype):
    """A group's one GEMM reads each member's weight where it is: every check and every width its
    member boundaries allow give the joined weight's product (2x rule), with no false alarm; a
    width that would straddle two members is refused."""
    name = f"cu-group-{case}-{dtype}"
    s = ftcompile.telemetry.site(site(name))
    assert cuda_gemm.group_fallback_reason(*_group(case, dtype, True)) is None
    calls = 0
    for bias in (True, False):
        x, ws, bs = _group(case, dtype, bias)
        wj, bj = torch.cat(ws), torch.cat(bs) if bias else None
        ref = F.linear(x.double(), wj.double(), bj.double() if bias else None)
        tol = 2 * (F.linear(x, wj, bj).double() - ref).abs().max() + 1e-6
        y = torch.ops.ftcompile.linear_group(x, ws, bs, s.id)
        calls += 1
        assert y.shape == ref.shape and y.is_contiguous() and (y.double() - ref).abs().max() <= tol
        bounds = torch.tensor([w.shape[0] for w in ws]).cumsum(0)[:-1]
        for check, widths in (("rows", cuda_gemm.GLOBAL_BNS), ("tiles", cuda_gemm.TILE_CHECK_BNS)):
            for bn in widths:
                run = lambda: cuda_gemm.run("linear_global", x, tuple(ws), tuple(bs) if bias else None, s,
                                            bn=bn, check=check)
                if bool((bounds % bn).any()):
                    with pytest.raises(ValueError, match="tile width"):
                        run()
                    continue
                assert (run().double() - ref).abs().max() <= tol, (check, bn)
                calls += 1
    st = _stats(name)
    assert st["checks"] == calls and st["detected"] == 0 and st["nonfinite_inputs"] == 0


@needs_hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("check", ["rows", "tiles"])
def test_group_fault_in_each_member_is_corrected(dtype, check, monkeypatch):
    """A fault in any member's columns (accumulator or output) is located in the group's row (or
    tile) and corrected from that member's weight: the output equals the fault-free one."""
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", check)
    name = f"cu-group-fault-{check}-{dtype}"
    sid = site(name)
    x, ws, bs = _group(0, dtype, True)
    clean = torch.ops.ftcompile.linear_group(x, ws, bs, sid)
    for col, stage in ((3, "output"), (300, "accumulator"), (510, "output"), (420, "accumulator")):
        with inject(FaultSpec(site=name, stage=stage, index=(17, col), value=3.0, k_step=1)) as inj:
            y = torch.ops.ftcompile.linear_group(x, ws, bs, sid)
        assert inj.events[0].index == (17, col)
        _assert_same_but_corrected(y, clean, dtype)
    assert _stats(name) == {"checks": 5, "detected": 4, "corrected": 4, "uncorrectable": 0, "nonfinite_inputs": 0}


@needs_hopper
@pytest.mark.parametrize("check", ["rows", "tiles"])
def test_group_tail_split(check, monkeypatch):
    """A gate/up-like group whose last wave is a few tiles (128-wide, two M-tiles, 32 k-steps: the
    last wave's tiles K split, the second member's last columns among them): the joined product
    (2x rule), no false alarm, and faults in both members' columns corrected."""
    monkeypatch.setattr(cuda_gemm, "GLOBAL_CHECK", check)
    name = f"cu-group-tail-{check}"
    sid = site(name)
    s = ftcompile.telemetry.site(sid)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    half = 128 * ((sms + 4 + 3) // 4)  # two members of half the N-tiles: one wave and 4-6 tiles more
    m, k = 256, 2048
    split, split_from = cuda_gemm.global_tail(m, 2 * half, k, 1, sms, 128)
    assert split > 1
    torch.manual_seed(11)
    x = _rand(m, k, dtype=torch.bfloat16)
    ws = [_rand(half, k, dtype=torch.bfloat16, scale=k ** -0.5) for _ in range(2)]
    bs = [_rand(half, dtype=torch.bfloat16) for _ in range(2)]
    wj, bj = torch.cat(ws), torch.cat(bs)
    ref = F.linear(x.double(), wj.double(), bj.double())
    tol = 2 * (F.linear(x, wj, bj).double() - ref).abs().max() + 1e-6
    run = lambda: cuda_gemm.run("linear_global", x, tuple(ws), tuple(bs), s, bn=128)
    clean = run()
    assert (clean.double() - ref).abs().max() <= tol
    # member 1 in a whole tile, member 2 in a split one (the raster's last N-tiles); each at its row's
    # largest output, where a recomputation's fp32 rounding (K = 2048) stays within the helper's ulp
    row, c0 = m - 5, 128 * (split_from // 2)
    for col in (int(clean[row, :half].abs().argmax()), c0 + int(clean[row, c0:].abs().argmax())):
        with inject(FaultSpec(site=name, stage="accumulator", index=(row, col), value=3.0, k_step=k // 64 - 1)):
            y = run()
        _assert_same_but_corrected(y, clean, torch.bfloat16)
    st = _stats(name)
    assert st["detected"] == 2 and st["corrected"] == 2 and st["uncorrectable"] == 0


@needs_hopper
def test_group_sees_a_member_changed_in_place():
    """The group's encoding is keyed on every member: changing one in place re-encodes it (no
    false alarm, the new product), as for a single weight."""
    name = "cu-group-inplace"
    sid = site(name)
    x, ws, bs = _group(1, torch.bfloat16, False)
    torch.ops.ftcompile.linear_group(x, ws, bs, sid)
    ws[1].mul_(-2.0)
    y = torch.ops.ftcompile.linear_group(x, ws, bs, sid)
    ref = F.linear(x.double(), torch.cat(ws).double())
    assert (y.double() - ref).abs().max() <= 2 * (F.linear(x, torch.cat(ws)).double() - ref).abs().max() + 1e-6
    assert _stats(name)["detected"] == 0
