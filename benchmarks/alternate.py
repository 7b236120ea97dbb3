"""Builds of one kernel library timed against each other: each child process loads one build
(through the library's path variable) and runs the same script; every build runs `rounds` times,
in alternating order, so drift between processes shows (evict_probe.py, attention_ab.py)."""
import os
import subprocess
import sys
from typing import Callable, Dict


def run_alternating(libs: Dict[str, str], env_var: str, child: Callable[[str], str], rounds: int = 2) -> None:
    """libs: label -> library path; child(tag) -> the child's Python source, tag = 'label#round'."""
    for rnd in range(rounds):
        for name, path in libs.items():
            subprocess.run([sys.executable, "-c", child(f"{name}#{rnd}")], env=dict(os.environ, **{env_var: path}),
                           check=False)
