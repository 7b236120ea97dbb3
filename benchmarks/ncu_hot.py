#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's source page (CSV, SASS view): per kernel the
stall reasons summed over all lines, the SASS lines with the most warp stall samples (with their top
reasons and execution counts), the executed instructions by opcode, then the samples by 8 KB
address window.
Usage: python3 benchmarks/ncu_hot.py source.csv [lines]  (ncu_gemm.sh, ncu_attention.sh)"""
import collections
import csv
import io
import sys


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


def main():
    text = open(sys.argv[1]).read()
    top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    key = "Warp Stall Sampling (All Samples)"
    for i, block in enumerate(t for t in text.split('"Address"') if t.strip()):
        rows = [r for r in csv.DictReader(io.StringIO('"Address"' + block)) if r.get("Address", "").startswith("0x")]
        if not rows or key not in rows[0]:
            continue
        stalls = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k]
        base = int(rows[0]["Address"], 16)
        total = sum(num(r[key]) for r in rows)
        print(f"== kernel block {i}: {len(rows)} SASS lines, {total:.0f} samples")
        by_reason = sorted(((sum(num(r[k]) for r in rows), k[6:]) for k in stalls), reverse=True)
        print("   stalls: " + ", ".join(f"{k} {v / max(total, 1):.1%}" for v, k in by_reason[:10] if v))
        for r in sorted(rows, key=lambda r: num(r[key]), reverse=True)[:top_n]:
            top = sorted(((num(r[k]), k[6:]) for k in stalls), reverse=True)[:3]
            print(f"{num(r[key]) / max(total, 1):6.1%} {int(r['Address'], 16) - base:6x} "
                  f"ex={r['Instructions Executed']:>9} {r['Source'][:60]:60s} "
                  + " ".join(f"{k}:{v:.0f}" for v, k in top if v))
        ops = collections.Counter()
        for r in rows:
            words = [w for w in r["Source"].split() if not w.startswith("@")]
            if words:
                ops[words[0].split(".")[0]] += num(r["Instructions Executed"])
        executed = sum(ops.values())
        print(f"   executed warp instructions {executed:.4g}: " +
              ", ".join(f"{k} {v / max(executed, 1):.1%}" for k, v in ops.most_common(24)))
        win = collections.defaultdict(float)
        for r in rows:
            win[(int(r["Address"], 16) - base) // 0x2000] += num(r[key])
        print("   by 8 KB window: " + ", ".join(f"{w * 0x2000:x}:{v:.0f}" for w, v in sorted(win.items()) if v >= 50))


if __name__ == "__main__":
    main()
