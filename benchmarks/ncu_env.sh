# Set-up shared by the Nsight Compute scripts (sourced, with the kernel family as $1: gemm or
# attention): $OUT and /tmp/ncu exist, ftcompile is installed, the family's library is built
# (its log in /tmp/ncu/env.log), and NCU_BIN names the ncu binary.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/ftcompile_out}
mkdir -p "$OUT" /tmp/ncu
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_ext} MAX_JOBS=16
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/ncu/env.log 2>&1
case $1 in
  gemm) python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" >> /tmp/ncu/env.log 2>&1 ;;
  attention) python3 -c "import ftcompile.ops.cuda_attention as ca; ca.library()" >> /tmp/ncu/env.log 2>&1 ;;
esac
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)

# The reports of profile /tmp/ncu/$1.ncu-rep in $OUT: its details page (ncu_details_$1.txt) and its
# hottest SASS lines (ncu_hot_$1.txt, the top $2; the per-line CSV stays in /tmp/ncu/source.csv).
ncu_reports() {
  "$NCU_BIN" --import /tmp/ncu/$1.ncu-rep --page details > "$OUT/ncu_details_$1.txt" 2>&1
  "$NCU_BIN" --import /tmp/ncu/$1.ncu-rep --page source --csv --print-source sass > /tmp/ncu/source.csv 2>&1
  python3 benchmarks/ncu_hot.py /tmp/ncu/source.csv "$2" > "$OUT/ncu_hot_$1.txt" 2>&1
}
