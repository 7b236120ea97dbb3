"""Builds of one kernel library timed against each other: each child process loads one build
(through the library's path variable) and runs the same script; every build runs `rounds` times,
in alternating order, so drift between processes shows (evict_probe.py, attention_ab.py, gemm_ab.py)."""
import os
import re
import statistics
import subprocess
import sys
from typing import Callable, Dict, List


def run_alternating(libs: Dict[str, str], env_var: str, child: Callable[[str], str], rounds: int = 2) -> List[str]:
    """libs: label -> library path; child(tag) -> the child's Python source, tag = 'label#round'.
    Echoes each child's output line by line as it comes (a run cut short by a time limit keeps what
    was done) and returns all of it."""
    lines: List[str] = []
    for rnd in range(rounds):
        for name, path in libs.items():
            env = dict(os.environ, **{env_var: path})
            with subprocess.Popen([sys.executable, "-c", child(f"{name}#{rnd}")], env=env, stdout=subprocess.PIPE,
                                  text=True) as proc:
                for line in proc.stdout:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    lines.append(line.rstrip("\n"))
    return lines


def summary(lines: List[str], line_re: str, metrics: List[str], builds: List[str]) -> str:
    """A markdown table of the children's lines that match line_re (named groups: build, config and
    each metric): per config and metric, every build's values in round order, and the change of the
    median against the first build's."""
    vals: Dict[str, Dict[str, Dict[str, List[float]]]] = {}
    for ln in lines:
        m = re.match(line_re, ln)
        if m:
            per = vals.setdefault(m["config"], {}).setdefault(m["build"], {})
            for k in metrics:
                per.setdefault(k, []).append(float(m[k]))
    head = "| config | metric | " + " | ".join(builds) + " |"
    out = [head, "|" + "---|" * (len(builds) + 2)]
    for config, per in vals.items():
        for k in metrics:
            cells = []
            ref = statistics.median(per[builds[0]][k]) if builds[0] in per else None
            for b in builds:
                v = per.get(b, {}).get(k, [])
                cell = "; ".join(f"{x:.4g}" for x in v) if v else "-"
                if v and ref and b != builds[0]:
                    cell += f" ({100 * (statistics.median(v) / ref - 1):+.1f} %)"
                cells.append(cell)
            out.append(f"| {config} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def flag_builds(env: str) -> Dict[str, List[str]]:
    """Flag variants of the working tree from $env: "name=-DX=1 -DY=0;name2=..." (default: the tree as is)."""
    specs = os.environ.get(env, "tree=").split(";")
    return {name: flags.split() for name, _, flags in (v.partition("=") for v in specs)}


def snapshot_bases(env: str) -> Dict[str, str]:
    """Reference source snapshots from $env: one path (labelled "base"), or "name=path;name2=path2"."""
    base = os.environ.get(env, "")
    if "=" in base:
        return dict(v.partition("=")[::2] for v in base.split(";"))
    return {"base": base} if base else {}
