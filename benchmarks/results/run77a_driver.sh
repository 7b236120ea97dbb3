#!/usr/bin/env bash
# run 77a (session 69): B53 step 1, the unprotected d=64 kernel at 128 keys a step: P in registers
# (k128r), P through shared memory (k128s, 2 stages; k128s3, 3 stages) against the tree. The hang
# probe's d=64 cases on k128s and k128r first, then attention_ab.py, two rounds.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
R="-DEFTA_K128=1"; S="-DEFTA_K128=1 -DEFTA_P_SMEM=1"
export ATTN_AB_FLAGS="tree=;k128r=$R;k128s=$S;k128s3=$S -DEFTA_K128_STAGES=3"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run77a_abbuild.txt 2>&1; st ab-build rc=$?
tail -2 $OUT/run77a_abbuild.txt
lib() { python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_$1', '$2'.split()))" 2>/dev/null | tail -1; }
LS=$(lib k128s "$S"); LR=$(lib k128r "$R"); echo "libs: $LS $LR"
FTCOMPILE_ATTN_LIB=$LS timeout 120 python3 benchmarks/attention_probe.py --timeout 30 --d 64 > $OUT/run77a_probe_s.txt 2>&1 &
FTCOMPILE_ATTN_LIB=$LR timeout 120 python3 benchmarks/attention_probe.py --timeout 30 --d 64 > $OUT/run77a_probe_r.txt 2>&1 &
wait; st probes
cat $OUT/run77a_probe_s.txt; echo "-- r"; cat $OUT/run77a_probe_r.txt
if grep -q "HANG\|FAIL\|OVER" $OUT/run77a_probe_s.txt; then echo "k128s probe failed"; fi
left=$(( 585 - ($(date +%s) - t0) ))
ATTN_AB_ROUNDS=2 timeout $left python3 benchmarks/attention_ab.py > $OUT/run77a_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS\|Error\|error" $OUT/run77a_ab.txt | head -60
