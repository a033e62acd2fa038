"""What every benchmark script shares: where results go and the record's provenance.

A benchmark writes results/benchmarks/<name>.json with the command, the start time, the wall time,
the machine's load average (above its core count, other work shared the CPU and every time is
inflated), the git commit, the device and the library versions, its configuration and its rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "benchmarks"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class Record:
    """Collects a benchmark's rows; `write()` saves them with the provenance taken at creation."""

    def __init__(self, name: str, config: dict, argv=None):
        from lib.record import provenance

        self.name, self.config, self.rows = name, dict(config), []
        args = sys.argv[1:] if argv is None else list(argv)
        self.command = f"python benchmarks/{name.replace('-', '_')}.py" + "".join(
            f" {a}" for a in args
        )
        self.started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self.origin = provenance()  # the code that runs: this commit (and its diff, if dirty)
        self.began = time.perf_counter()

    def add(self, **row) -> dict:
        self.rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    def write(self, out=None, **extra) -> Path:
        record = {
            "experiment": self.name,
            "chapter": "benchmarks",
            "command": self.command,
            "started": self.started,
            "wall_seconds": round(time.perf_counter() - self.began, 1),
            "load_average_1min": round(os.getloadavg()[0], 2),
            **{k: v for k, v in self.origin.items() if k != "git_diff"},
            # a benchmark has no preset: nothing selected from one, nothing changed from one
            "deviations": {},
            "selection": {},
            **extra,
            "config": self.config,
            "rows": self.rows,
        }
        path = Path(out) if out else RESULTS / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        if self.origin.get("git_diff"):  # the uncommitted code that git_diff_sha256 names
            path.with_suffix(".diff").write_text(self.origin["git_diff"])
        print(f"wrote {path}")
        return path
