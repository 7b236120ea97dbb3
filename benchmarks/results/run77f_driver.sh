#!/usr/bin/env bash
# run 77f (session 69): the hang probe, with its 8 new d=64 cases, on main's attention library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
LIB=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_tree', []))" 2>/dev/null | tail -1); st build
FTCOMPILE_ATTN_LIB=$LIB timeout 300 python3 benchmarks/attention_probe.py --timeout 30 > $OUT/run77f_probe.txt 2>&1; st probe rc=$?
cat $OUT/run77f_probe.txt
