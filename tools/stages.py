#!/usr/bin/env python3
"""Run the stages of `make test` in order, stop at the first that fails, print how long each took.

    python tools/stages.py NAME=COMMAND [NAME=COMMAND ...]

Each COMMAND runs in a shell from the repository root; its output streams through. At the end (also
after a failure), a table of the stages' wall times and results; the exit status is that of the
failed stage.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    stages = []
    for arg in argv:
        name, sep, command = arg.partition("=")
        if not sep or not name or not command:
            print(f"stages: expected NAME=COMMAND, got {arg!r}", file=sys.stderr)
            return 2
        stages.append((name, command))
    rows, status = [], 0
    began = time.perf_counter()
    for name, command in stages:
        start = time.perf_counter()
        print(f"\n=== stage {name}: {command}", flush=True)
        status = subprocess.call(command, shell=True, executable="/bin/bash")
        rows.append(
            (name, time.perf_counter() - start, "ok" if status == 0 else f"FAILED ({status})")
        )
        if status:
            break
    total = time.perf_counter() - began
    skipped = [name for name, _ in stages[len(rows) :]]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{'stage':<12} {'seconds':>8}  result")
    for name, seconds, result in rows:
        print(f"{name:<12} {seconds:8.0f}  {result}")
    for name in skipped:
        print(f"{name:<12} {'':>8}  not run")
    print(f"{'total':<12} {total:8.0f}  ({total / 60:.1f} min; load average at the end {load:.2f})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
