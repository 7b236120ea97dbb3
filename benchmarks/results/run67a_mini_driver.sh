#!/usr/bin/env bash
# run 67a-mini (session 59, on wip/b49-persist: the device time's last 4 minutes): B49 step 1's build, two probe cases
# with many items a CTA, and one A/B round (refuted it: NOTES_attention.md, run 67a-mini).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
export ATTN_AB_FLAGS="tree=;persist=-DEFTA_PERSIST=1"
ATTN_AB_BUILD_ONLY=1 timeout 120 python3 benchmarks/attention_ab.py > $OUT/run67a_build.txt 2>&1; st build rc=$?
PL=/tmp/torch_ext/ftcompile_efta_ab_persist/ftcompile_efta_ab_persist.so
for c in "(16, 8, 300, 300, 64, True, False)" "(8, 16, 1000, 1000, 128, True, False)"; do
  FTCOMPILE_ATTN_LIB=$PL timeout 25 python3 -c "
import sys; sys.argv=['x', '$c']
exec(open('benchmarks/attention_probe.py').read().split('CHILD = r\"\"\"')[1].split('\"\"\"')[0])" 2>&1 | tail -1 | sed "s/^/$c: /"; done; st probe
ATTN_AB_ROUNDS=1 timeout 70 python3 benchmarks/attention_ab.py > $OUT/run67a_ab.txt 2>&1; st ab rc=$?
grep "^|\|DIGESTS" $OUT/run67a_ab.txt
