#!/usr/bin/env bash
# run 77e (session 69): B50 on B54's code: the d=64 kernel on two consumer warpgroups (w2), at 128 keys a
# step protected and not (w2k, 4 stages), and with the warpgroups taking turns on the tensor cores
# (w2kt), against the tree (three warpgroups, 64 keys). The probe's d=64 cases on w2kt (its protected
# 128-key step never ran before), then attention_ab.py, two rounds; then d=64 attention tests on w2kt.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
K="-DEFTA_D64_2WG=1 -DEFTA_K128=1 -DEFTA_K128_FT=1 -DEFTA_K128_STAGES=4"
export ATTN_AB_FLAGS="tree=;w2=-DEFTA_D64_2WG=1;w2k=$K;w2kt=$K -DEFTA_TURNS=1"
ATTN_AB_BUILD_ONLY=1 timeout 300 python3 benchmarks/attention_ab.py > $OUT/run77e_abbuild.txt 2>&1; st ab-build rc=$?
tail -1 $OUT/run77e_abbuild.txt | cut -c1-200
LT=$(python3 -c "from ftcompile.ops.cuda_attention import build; print(build('ftcompile_efta_ab_w2kt', '$K -DEFTA_TURNS=1'.split()))" 2>/dev/null | tail -1)
FTCOMPILE_ATTN_LIB=$LT timeout 150 python3 benchmarks/attention_probe.py --timeout 30 --d 64 > $OUT/run77e_probe.txt 2>&1; st probe rc=$?
cat $OUT/run77e_probe.txt
if grep -q "HANG\|FAIL" $OUT/run77e_probe.txt; then export ATTN_AB_FLAGS="tree=;w2=-DEFTA_D64_2WG=1;w2k=$K"; echo "w2kt dropped"; fi
ATTN_AB_ROUNDS=2 timeout 260 python3 benchmarks/attention_ab.py > $OUT/run77e_ab.txt 2>&1; st ab rc=$?
grep "^|\|Error\|error" $OUT/run77e_ab.txt | head -40
left=$(( 580 - ($(date +%s) - t0) ))
FTCOMPILE_ATTN_LIB=$LT timeout $left python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py -k "64" > $OUT/run77e_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run77e_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run77e_tests.txt | head
