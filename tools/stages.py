#!/usr/bin/env python3
"""Run the stages of `make test` in order, stop at the first that fails, print how long each took.

    python tools/stages.py NAME=COMMAND [&NAME=COMMAND ...]

Each COMMAND runs in a shell from the repository root; its output streams through. A stage whose
name starts with `&` runs beside the stages after it (for a stage that would otherwise leave a core
idle while they run): it starts at its place in the list, its output goes to a log that is printed
when it ends, and the run waits for it at the end. At the end (also after a failure), a table of the
stages' wall times and results; the exit status is that of the first failed stage.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time


def main(argv: list[str]) -> int:
    stages = []
    for arg in argv:
        name, sep, command = arg.partition("=")
        if not sep or not name.lstrip("&") or not command:
            print(f"stages: expected NAME=COMMAND or &NAME=COMMAND, got {arg!r}", file=sys.stderr)
            return 2
        stages.append((name, command))
    rows, status, beside = {}, 0, []
    began = time.perf_counter()
    for name, command in stages:
        start = time.perf_counter()
        if name.startswith("&"):
            name = name[1:]
            print(
                f"\n=== stage {name} (beside the next stages, output at its end): {command}",
                flush=True,
            )
            log = tempfile.TemporaryFile("w+")
            proc = subprocess.Popen(  # its own process group, so that a failure stops it whole
                command,
                shell=True,
                executable="/bin/bash",
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            beside.append((name, proc, log, start))
            rows[name] = None
            continue
        print(f"\n=== stage {name}: {command}", flush=True)
        code = subprocess.call(command, shell=True, executable="/bin/bash")
        rows[name] = (time.perf_counter() - start, "ok" if code == 0 else f"FAILED ({code})")
        if code:
            status = code
            break
    for name, proc, log, start in beside:
        if status and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait()
        rows[name] = (time.perf_counter() - start, "ok" if code == 0 else f"FAILED ({code})")
        log.seek(0)
        print(f"\n=== stage {name} (ran beside the others), its output:\n{log.read()}", flush=True)
        if code and not status:
            status = code
    total = time.perf_counter() - began
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{'stage':<12} {'seconds':>8}  result")
    for name, _ in stages:
        name = name.lstrip("&")
        seconds, result = rows.get(name) or (None, "not run")
        print(f"{name:<12} {'' if seconds is None else f'{seconds:.0f}':>8}  {result}")
    print(f"{'total':<12} {total:8.0f}  ({total / 60:.1f} min; load average at the end {load:.2f})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
