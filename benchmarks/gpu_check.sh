#!/usr/bin/env bash
# The whole project in one GPU call: install ftcompile (so backend="ft" resolves through its entry
# point), build both kernel libraries, run every CUDA test tier, then the whole-model benchmark.
# The kernel families keep their own deeper scripts (gpu_check_gemm.sh, gpu_check_attention.sh).
# Usage (device tool): bash benchmarks/gpu_check.sh [tests|e2e|gemmtests] [models] [host] [profile] [gemm|gemmquick]
#                                                   [sweep] [global] [stream] [phases] [midm] [splitk] [tiles]
#                                                   [tilesmidm] [globalref] [shapes] [decode]
#                                                   [decodetests] [decodefma] [decodeab] [decodeprobe]
#                                                   [decodephases] [prefillphases] [prefillab]
#   (default: tests models; gemmtests = the linear kernels' CUDA tests alone; host = host time per
#    op call and GPT-2's forward without CUDA graphs (benchmarks/host_overhead.py); profile =
#    selection="profile" on DLRM / Llama decode MLPs, gemm = the thread-scheme table of
#    bench_gemm.py with its squares, the crossover's data (gemmquick: 6 shapes), sweep = its thread-kernel configuration sweep,
#    global = its compute-bound table, stream = the streaming kernel's depth x warps x split at M <= 16,
#    phases = where a streaming-kernel CTA's time goes, from a diagnostic build with timestamps;
#    midm = the streaming against the ring kernel at M = 17-128; splitk = the global kernel's
#    time by forced K split (benchmarks/split_sweep.py); tiles = its time at every tile width
#    (benchmarks/tile_sweep.py; tilesmidm: on the thread table's M = 32-256 Llama rows, beside the
#    thread kernel); globalref (after global, REF_LIB=path) = the global table with another library
#    and both side by side (benchmarks/compare_global.py); shapes = the attention op at zero-padded
#    head dims and at decode shapes (benchmarks/attention_shapes.py); decode = the decode kernel's
#    CUDA tests (tests/test_cuda_decode.py) on its tensor-core split kernel, then its shapes
#    (attention_shapes.py --set decode); decodetests = those tests alone; decodefma = the same tests
#    on the FMA split kernel (FTCOMPILE_DECODE_IMPL=fma); decodeab = attention_ab.py on the decode
#    shapes, the tree against ATTN_AB_BASE (a source snapshot); decodeprobe = each decode kernel's time
#    in a graph and the tensor-core split kernel's SASS (benchmarks/decode_probe.py); decodephases =
#    where a tensor-core split CTA's time goes, from a diagnostic build with timestamps
#    (benchmarks/decode_phases.py); prefillphases = where a prefill CTA's time goes (the wgmma kernel
#    on the paper's configurations, protected and not), from a diagnostic build with timestamps
#    (benchmarks/prefill_phases.py); prefillab = attention_ab.py on the paper's configurations, the
#    tree and its ATTN_AB_FLAGS variants against ATTN_AB_BASE (a source snapshot) if given)
# Calls whose parts are all decode* or prefill* build no GEMM library; their own builds (the A/B's,
# the timestamps') alongside the production one.
# At most 6 files land in $OUT (the device tool returns 8); a short summary is printed last.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ftcompile_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_ext}
parts=${*:-tests models}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" >> "$OUT/env.log"; }
# The decode kernel's tests on one split kernel ($1: tc or fma) into $OUT/$2.
decode_tests() {
  FTCOMPILE_DECODE_IMPL=$1 timeout 300 python3 -m pytest -q -p no:cacheprovider -ra --maxfail=25 \
    tests/test_cuda_decode.py > "$OUT/$2" 2>&1
  stamp "decode tests ($1 split kernel) rc=$?"
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > "$OUT/env.log" 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . >> "$OUT/env.log" 2>&1 || stamp "editable install FAILED"
python3 -c "import torch; torch._dynamo.lookup_backend('ft'); print('backend ft registered')" >> "$OUT/env.log" 2>&1

stamp "build"
# a build killed earlier on this machine leaves torch's lock, on which every later load waits forever
find "$TORCH_EXTENSIONS_DIR" -name lock -delete 2>/dev/null
: > "$OUT/build.log"
no_gemm=1  # parts that need no GEMM library: the decode ones and the prefill ones
for part in $parts; do case $part in decode*|prefill*) ;; *) no_gemm=0 ;; esac; done
[ $no_gemm = 0 ] && ( timeout 300 python3 -c "from ftcompile.ops import cuda_gemm as c; print('gemm', c.build())" ) >> "$OUT/build.log" 2>&1 &
case " $parts " in *" decodeab "*)
  ( ATTN_AB_SET=decode ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py ) >> "$OUT/build.log" 2>&1 & ;;
esac
case " $parts " in *" decodephases "*)
  ( timeout 300 python3 benchmarks/decode_phases.py --build-only ) >> "$OUT/build.log" 2>&1 & ;;
esac
case " $parts " in *" prefillphases "*)
  ( timeout 300 python3 benchmarks/prefill_phases.py --build-only ) >> "$OUT/build.log" 2>&1 & ;;
esac
case " $parts " in *" prefillab "*)
  ( ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py ) >> "$OUT/build.log" 2>&1 & ;;
esac
case "$parts" in phases|prefillphases|prefillab) ;; *)  # (these load their own builds alone)
  ( timeout 300 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" ) >> "$OUT/build.log" 2>&1 & ;;
esac
( timeout 300 python3 -c "from ftcompile.ops import fastpath; print('fastpath', fastpath.module())" ) >> "$OUT/build.log" 2>&1 &
case " $parts " in *" phases "*)  # the diagnostic build too, alongside (stream_phases.py then finds it built)
  ( timeout 300 python3 -c "from ftcompile.ops import cuda; print('stamps', cuda.build_library('gemm', \
      'ftcompile_gemm_sm90a_stamps', extra_cuda_cflags=['-DPHASE_STAMPS']))" ) >> "$OUT/build.log" 2>&1 & ;;
esac
wait
stamp "built"

for part in $parts; do
  case $part in
    tests) timeout 360 python3 -m pytest -q -p no:cacheprovider -ra tests/test_cuda_gemm.py \
             tests/test_cuda_attention.py tests/test_cuda_e2e.py tests/test_replay.py tests/test_inference_ops.py tests/test_fastpath.py > "$OUT/pytest.log" 2>&1
           stamp "tests rc=$?" ;;
    gemmtests) timeout 300 python3 -m pytest -q -p no:cacheprovider -ra --timeout=60 tests/test_cuda_gemm.py \
                 > "$OUT/pytest.log" 2>&1
               stamp "gemm tests rc=$?" ;;
    e2e) timeout 330 python3 -m pytest -q -p no:cacheprovider -ra tests/test_cuda_e2e.py \
           > "$OUT/pytest.log" 2>&1
         stamp "e2e rc=$?" ;;
    decode) decode_tests tc pytest_decode.log
            timeout 240 python3 benchmarks/attention_shapes.py --set decode --out "$OUT/attention_decode.txt" \
              > "$OUT/attention_decode.log" 2>&1
            stamp "shapes decode rc=$?" ;;
    decodetests) decode_tests tc pytest_decode.log ;;
    decodefma) decode_tests fma pytest_decode_fma.log ;;
    decodeab) ATTN_AB_SET=decode timeout 420 python3 benchmarks/attention_ab.py > "$OUT/decode_ab.txt" 2>&1
              stamp "decode ab rc=$?" ;;
    decodephases) timeout 150 python3 benchmarks/decode_phases.py --out "$OUT/decode_phases.json" > "$OUT/decode_phases.txt" 2>&1
                  stamp "decode phases rc=$?" ;;
    prefillab) timeout 480 python3 benchmarks/attention_ab.py > "$OUT/prefill_ab.txt" 2>&1
               stamp "prefill A/B rc=$?" ;;
    prefillphases) timeout 200 python3 benchmarks/prefill_phases.py --out "$OUT/prefill_phases.json" > "$OUT/prefill_phases.txt" 2>&1
                   stamp "prefill phases rc=$?" ;;
    decodeprobe) timeout 150 python3 benchmarks/decode_probe.py --sass "$OUT" > "$OUT/decode_probe.txt" 2>&1
                 stamp "decode probe rc=$?" ;;
    shapes) for set in headdims decode; do
              timeout 240 python3 benchmarks/attention_shapes.py --set $set --out "$OUT/attention_$set.txt" \
                > "$OUT/attention_$set.log" 2>&1
              stamp "shapes $set rc=$?"
            done ;;
    models) timeout 520 python3 benchmarks/bench_models.py --out "$OUT" > "$OUT/models.log" 2>&1
            stamp "models rc=$?" ;;
    host) timeout 200 python3 benchmarks/host_overhead.py --model --out "$OUT" > "$OUT/host_overhead.txt" 2>&1
          stamp "host rc=$?" ;;
    profile) timeout 200 python3 benchmarks/profile_selection.py > "$OUT/profile_selection.log" 2>&1
             stamp "profile rc=$?" ;;
    gemm) timeout 300 python3 benchmarks/bench_gemm.py --parts thread,square --out "$OUT" > "$OUT/gemm.log" 2>&1
          stamp "gemm rc=$?" ;;
    gemmquick) timeout 120 python3 benchmarks/bench_gemm.py --parts thread --quick --out "$OUT" > "$OUT/gemm.log" 2>&1
               stamp "gemm quick rc=$?" ;;
    sweep) timeout 150 python3 benchmarks/bench_gemm.py --parts sweep --out "$OUT/sweep" \
             --sweep-shapes 1x4096x4096,16x4096x4096,1x11008x4096,1x4096x11008,1x14336x4096,16x768x3072,1x768x768 \
             > "$OUT/sweep.log" 2>&1
           stamp "sweep rc=$?" ;;
    stream) timeout 240 python3 benchmarks/bench_gemm.py --parts stream --out "$OUT/stream" > "$OUT/stream.log" 2>&1
            stamp "stream rc=$?" ;;
    phases) timeout 360 python3 benchmarks/stream_phases.py --out "$OUT" > "$OUT/phases.log" 2>&1
            stamp "phases rc=$?" ;;
    midm) timeout 300 python3 benchmarks/bench_gemm.py --parts midm --out "$OUT/midm" > "$OUT/midm.log" 2>&1
          stamp "midm rc=$?" ;;
    splitk) timeout 200 python3 benchmarks/split_sweep.py > "$OUT/split_sweep.txt" 2>&1
            stamp "splitk rc=$?" ;;
    tiles) timeout 300 python3 benchmarks/tile_sweep.py --out "$OUT/tile_sweep.json" > "$OUT/tile_sweep.txt" 2>&1
           stamp "tiles rc=$?" ;;
    tilesmidm) timeout 300 python3 benchmarks/tile_sweep.py --only-midm --out "$OUT/tile_sweep_midm.json" \
                 > "$OUT/tile_sweep_midm.txt" 2>&1
               stamp "tilesmidm rc=$?" ;;
    global) timeout 300 python3 benchmarks/bench_gemm.py --parts global --out "$OUT/global" > "$OUT/global.log" 2>&1
            stamp "global rc=$?" ;;
    globalref)  # the global table again with the library REF_LIB (e.g. the last commit's), then both side by side
      FTCOMPILE_GEMM_LIB=${REF_LIB:?REF_LIB names the other library} timeout 300 python3 benchmarks/bench_gemm.py \
        --parts global --out "$OUT/global_ref" > "$OUT/global_ref.log" 2>&1
      stamp "global ref rc=$?"
      python3 benchmarks/compare_global.py REF="$OUT/global_ref/gemm_bench.json" NEW="$OUT/global/gemm_bench.json" \
        > "$OUT/global_compare.md" 2>&1 ;;
  esac
done

cat "$OUT/env.log"; tail -4 "$OUT/build.log"
[ -f "$OUT/pytest.log" ] && { grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20; tail -3 "$OUT/pytest.log"; }
for log in pytest_decode_fma pytest_decode; do
  [ -f "$OUT/$log.log" ] && { grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/$log.log" | head -30; tail -3 "$OUT/$log.log"; }
done
[ -f "$OUT/models.md" ] && cat "$OUT/models.md" || tail -20 "$OUT/models.log" 2>/dev/null
[ -f "$OUT/host_overhead.txt" ] && grep "^|" "$OUT/host_overhead.txt"
[ -f "$OUT/profile_selection.log" ] && grep -E "^(==|total)" "$OUT/profile_selection.log"
[ -f "$OUT/gemm.log" ] && grep -E "^[0-9]+x" "$OUT/gemm.log" | cut -d'|' -f1-8,11-14
[ -f "$OUT/sweep.log" ] && grep -E "^[0-9]+x" "$OUT/sweep.log"
[ -f "$OUT/stream.log" ] && grep -E "^[0-9]+x|Error|error" "$OUT/stream.log" | tail -14
[ -f "$OUT/midm.log" ] && grep -E "^[0-9]+x|Error|error" "$OUT/midm.log" | tail -50
[ -f "$OUT/split_sweep.txt" ] && grep -E "^[0-9]+x" "$OUT/split_sweep.txt"
[ -f "$OUT/tile_sweep.txt" ] && grep -E "^[0-9]+x|Error" "$OUT/tile_sweep.txt"
[ -f "$OUT/tile_sweep_midm.txt" ] && grep -E "^[0-9]+x|Error" "$OUT/tile_sweep_midm.txt"
[ -f "$OUT/phases.log" ] && grep -vE "^\s*$|Warning|warn" "$OUT/phases.log" | tail -40
[ -f "$OUT/global_compare.md" ] && cat "$OUT/global_compare.md"
[ -f "$OUT/global/gemm_bench.md" ] && grep -E "^\| [0-9]" "$OUT/global/gemm_bench.md" | cut -d'|' -f2,3,5,6,7,8,9,10,11,12
for set in headdims decode; do
  [ -f "$OUT/attention_$set.log" ] && grep -E "^B[0-9]|Error|false alarms" "$OUT/attention_$set.log" | tail -26
done
[ -f "$OUT/decode_ab.txt" ] && grep -E "^\||DIGESTS|Error|error" "$OUT/decode_ab.txt" | tail -24
[ -f "$OUT/decode_probe.txt" ] && cat "$OUT/decode_probe.txt" | cut -c1-400
[ -f "$OUT/decode_phases.txt" ] && grep -vE "^\s*$|Warning|warn" "$OUT/decode_phases.txt" | cut -c1-600 | tail -20
[ -f "$OUT/prefill_phases.txt" ] && grep -vE "^\s*$|Warning|warn" "$OUT/prefill_phases.txt" | cut -c1-700 | tail -30
[ -f "$OUT/prefill_ab.txt" ] && grep -E "^\||DIGESTS|Error|error" "$OUT/prefill_ab.txt" | tail -30
