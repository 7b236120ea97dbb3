"""Landmarks of a kernel's tile loop in its SASS, to screen a change on a machine without a GPU.

Small edits to the EFTA check region moved the d=64 kernel by 5-12 % through the compiler's schedule
rather than the instruction count (NOTES_attention.md, sessions 34-35). Two of those showed in the
SASS as convergence code in the hot loop (BRA.DIV in session 34, WARPSYNC.ALL at the loop head in
B27), where a bad schedule is visible before any device time is spent. For each kernel of a cubin
(or of a .cu file compiled here with nvcc, sm_90a), this prints its tile loops - the innermost
backward branches whose bodies hold `--hgmma` wgmma instructions, smallest (production) first - with
their size and the counts and
positions that matter: convergence (WARPSYNC, BRA.DIV, BSSY), uniform-register moves (R2UR), local
memory (LDL/STL), the wgmma waits (WARPGROUP.DEPBAR) against the exponentials (MUFU.EX2).

    python benchmarks/sass_landmarks.py csrc/attention/efta_sm90_fp16_d64.cu [more.cu | x.cubin ...]
    (-D flags after --: ... -- -DEFTA_ABLATE=1)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
COUNTED = ("WARPSYNC", "BRA.DIV", "BSSY", "R2UR", "LDL", "STL", "VOTE", "BAR.", "MUFU.EX2", "MUFU.LG2", "HGMMA")


def sass_of(path: str, flags: List[str]) -> str:
    """SASS text of a cubin, or of a .cu compiled for sm_90a with the project's include paths."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        sys.exit("cuobjdump not found: put the CUDA toolkit's bin directory on PATH")
    if not path.endswith(".cu"):
        return subprocess.run([tool, "-sass", path], check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.cubin")
        inc = [f"-I{os.path.join(ROOT, d)}" for d in ("csrc/common", "csrc/attention", "csrc/gemm")]
        subprocess.run(["nvcc", "-O3", "-std=c++17", *inc, "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler",
                        "-fPIC", "-cubin", "-o", out, path, *flags], check=True)
        return subprocess.run([tool, "-sass", out], check=True, capture_output=True, text=True).stdout


def functions(sass: str) -> List[Tuple[str, List[Tuple[int, str]]]]:
    funcs: List[Tuple[str, List[Tuple[int, str]]]] = []
    for line in sass.splitlines():
        if "Function :" in line:
            funcs.append((line.split("Function :")[1].strip(), []))
            continue
        m = INS.match(line)
        if m and funcs:
            funcs[-1][1].append((int(m.group(1), 16), m.group(2).strip()))
    return funcs


def tile_loops(ins: List[Tuple[int, str]], hgmma: int) -> List[List[Tuple[int, str]]]:
    """The bodies of the backward branches that hold `hgmma` wgmma instructions, innermost first
    (one per instantiation of the loop: EFTA's protected kernel has the production one and the
    fault-injection one)."""
    loops = []
    for addr, text in ins:
        m = re.search(r"BRA\b.*0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr:
            body = [x for x in ins if int(m.group(1), 16) <= x[0] <= addr]
            if sum("HGMMA" in t for _, t in body) == hgmma:
                loops.append(body)
    inner = [b for b in loops if not any(o is not b and o[0][0] >= b[0][0] and o[-1][0] <= b[-1][0] for o in loops)]
    return sorted(inner, key=len)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", nargs="+", help=".cu or .cubin files")
    ap.add_argument("--hgmma", type=int, default=8, help="wgmma instructions in the tile loop (EFTA: 8)")
    ap.add_argument("--match", default="attn_fwd", help="substring of the kernels to report")
    args, flags = ap.parse_known_args()
    flags = [f for f in flags if f != "--"]
    for path in args.inputs:
        for name, ins in functions(sass_of(path, flags)):
            if args.match not in name:
                continue
            loops = tile_loops(ins, args.hgmma)
            print(f"{os.path.basename(path)}: {name[:70]}" + ("" if loops else f": no loop with {args.hgmma} HGMMA"))
            for body in loops:  # the smallest first: the production instantiation
                counts = {k: sum(k in t for _, t in body) for k in COUNTED}
                ex2 = [i for i, (_, t) in enumerate(body) if "MUFU.EX2" in t]
                waits = [f"{i}:{t.split()[-1]}" for i, (_, t) in enumerate(body) if "WARPGROUP.DEPBAR" in t]
                syncs = [str(i) for i, (_, t) in enumerate(body) if "WARPSYNC" in t or "BRA.DIV" in t]
                print(f"  loop {body[0][0]:#x}-{body[-1][0]:#x}: {len(body)} instructions; "
                      + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
                print(f"    MUFU.EX2 at {ex2[0] if ex2 else '-'}..{ex2[-1] if ex2 else '-'}; wgmma waits at "
                      f"{' '.join(waits)}; WARPSYNC / BRA.DIV at {' '.join(syncs) or '-'}")


if __name__ == "__main__":
    main()
