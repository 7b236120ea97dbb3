"""Builds of one kernel library timed against each other: each child process loads one build
(through the library's path variable) and runs the same script; every build runs `rounds` times,
in alternating order, so drift between processes shows (evict_probe.py, attention_ab.py, gemm_ab.py)."""
import os
import subprocess
import sys
from typing import Callable, Dict, List


def run_alternating(libs: Dict[str, str], env_var: str, child: Callable[[str], str], rounds: int = 2) -> None:
    """libs: label -> library path; child(tag) -> the child's Python source, tag = 'label#round'."""
    for rnd in range(rounds):
        for name, path in libs.items():
            subprocess.run([sys.executable, "-c", child(f"{name}#{rnd}")], env=dict(os.environ, **{env_var: path}),
                           check=False)


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
