"""Run the paper-scale queue: the parts of tools/queue.json not yet in results/, several at a time.

    python tools/run_queue.py [--pool N] [--deadline S] [--pack DIR] [--tests] [--only PART ...]

Each entry of tools/queue.json is one `python -m lib` part, in the order the issue tracker asks for
them: {"experiment", "preset", "set": {setting: value}, "part", "note"}. A part whose results file
(results/<chapter>/<experiment>.<part>.json) exists is done and skipped, so the file is the one list
of what is still to run, on this CPU or on a lent GPU. `--pool N` runs N parts side by side (one
process each; on a GPU they share the card, which small deep-GP steps leave mostly idle).
`--deadline S`: S seconds after the start, the parts still running are stopped (each keeps its last
checkpoint, and the same command resumes it). `--pack DIR`: while the parts run and at the end,
DIR receives a tarball of the results files, the finished units and run.json of each interrupted
run, and the logs (two alternating copies, so that one is whole if the machine goes away), and at
the end the latest checkpoint of each unfinished unit in chunks of at most 15 MiB, at most four.
`--tests`: the library's unit tests run beside the parts (`pytest -v`, so that the log names every
test as it finishes). The logs go to results/.queue/. `--list` prints the parts still to run.
`--stow` packs the checkpoints of the parts still to run into results/.handoff/ and exits:
a new session lays the work tree anew, and results/.checkpoints (ignored) with it, so an
unfinished part crosses sessions as a committed tarball (its latest step only); starting the part
unpacks it; once the part is done, `git rm` its tarball (the queue's test fails until then).
`--legacy` takes instead the parts whose results file is legacy ("git_diff_note": recorded at a
commit with uncommitted changes that were not kept) and runs each again with its own command.
On a lent accelerator machine, start it through tools/device_run.sh, which gives the copied tree
the git checkout it lacks (so that the records name their commit) and packs into $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # lib, from this checkout
QUEUE = ROOT / "tools" / "queue.json"
TEST_FILES = (
    *("toolkit", "dgp", "darn", "partition", "ebp", "nram"),
    *("data", "contracts", "bad_calls"),
)


def experiments() -> dict:
    """The experiments the chapters register (lib.record.EXPERIMENTS), by name."""
    import importlib

    import lib

    for module in lib.MODULES:
        importlib.import_module(f"lib.{module}")
    from lib.record import EXPERIMENTS

    return EXPERIMENTS


def load_queue(path: Path = QUEUE) -> list[dict]:
    """The queue's entries, checked as `python -m lib` would check them: a registered experiment,
    one of its presets, settings it has with values it accepts, a part name; no part twice."""
    registry, entries, seen = experiments(), json.loads(path.read_text()), set()
    from lib.toolkit import PRESETS
    from lib.record import check_settings

    for e in entries:
        missing = {"experiment", "preset", "set", "part"} - set(e)
        if missing:
            raise ValueError(f"{path}: entry {e} lacks {sorted(missing)}")
        if e["experiment"] not in registry or e["preset"] not in PRESETS:
            raise ValueError(
                f"{path}: no experiment {e['experiment']!r} with preset {e['preset']!r}"
            )
        presets = registry[e["experiment"]].presets
        unknown = set(e["set"]) - set(presets[e["preset"]])
        if unknown:
            raise ValueError(f"{path}: {e['part']}: {e['experiment']} has no {sorted(unknown)}")
        check_settings(e["experiment"], presets, e["set"])
        key = (e["experiment"], e["part"])
        if key in seen:
            raise ValueError(f"{path}: part {key} is listed twice")
        seen.add(key)
        e["chapter"] = registry[e["experiment"]].chapter
    return entries


def results_file(entry: dict, root: Path = ROOT) -> Path:
    """Where `python -m lib` writes the entry's results (see lib.record.run_experiment)."""
    return root / "results" / entry["chapter"] / f"{entry['experiment']}.{entry['part']}.json"


def command(entry: dict) -> list[str]:
    cmd = [sys.executable, "-m", "lib", entry["experiment"], "--preset", entry["preset"]]
    for key, value in entry["set"].items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    return cmd + ["--part", entry["part"]]


def split_command(text: str) -> dict:
    """The queue entry of a recorded `python -m lib EXPERIMENT --preset P [--set K=V]... [--part X]`
    command (its options joined by spaces, as lib.toolkit records them; a value holds no " --"),
    each value read as `python -m lib` reads it."""
    from lib.record import _parse_value

    head, *options = text.split(" --")
    words = head.split()
    if words[:3] != ["python", "-m", "lib"] or len(words) != 4:
        raise ValueError(f"not a `python -m lib EXPERIMENT` command: {text!r}")
    entry = {"experiment": words[3], "set": {}}
    for option in options:
        name, _, value = option.partition(" ")
        if name == "set":
            key, _, raw = value.partition("=")
            entry["set"][key] = _parse_value(raw)
        elif name in ("preset", "part"):
            entry[name] = value
        else:
            raise ValueError(f"option --{name} of {text!r} is not one a queue entry has")
    return entry


def legacy(root: Path = ROOT) -> list[dict]:
    """Entries that run again the parts whose results file is legacy (see migrate_results.py): the
    recorded command, and the settings added to the experiment since, at the values the record was
    given for them ("migrated"/"filled"; without them today's preset would run more, e.g. the
    mixtures that darn-mnist gained after a part with none)."""
    entries = []
    for path in sorted((root / "results").glob("*/*.json")):
        record = json.loads(path.read_text())
        if isinstance(record, dict) and record.get("git_diff_note"):
            entry = split_command(record["command"])
            entry["set"].update((record.get("migrated") or {}).get("filled", {}))
            entry["chapter"] = path.parent.name
            if results_file(entry, root) != path:
                raise ValueError(f"{path}: its command writes {results_file(entry, root)}")
            entries.append(entry)
    return entries


def checkpoint_dir(entry: dict, root: Path = ROOT) -> Path:
    """Where `python -m lib` keeps the part's interrupted run (see lib.record.run_experiment)."""
    name = f"{entry['experiment']}.{entry['part']}"
    return root / "results" / ".checkpoints" / entry["chapter"] / name


def handoff_file(entry: dict, root: Path = ROOT) -> Path:
    """The committed tarball that carries the part's checkpoints to the next session."""
    name = f"{entry['experiment']}.{entry['part']}.tgz"
    return root / "results" / ".handoff" / entry["chapter"] / name


def stow(entry: dict, root: Path = ROOT) -> Path | None:
    """Pack the part's checkpoint folder into its handoff file: the run's records and finished
    units whole, of each unit's checkpoints the latest step only. None if it has no folder."""
    source = checkpoint_dir(entry, root)
    if not source.exists():
        return None
    target = handoff_file(entry, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            parts = path.relative_to(source).parts
            # checkpoints/<unit>/<step>/... or, with folders per kind of checkpoint (DARN's
            # validated/ and steps/), checkpoints/<unit>/<kind>/<step>/...: the latest step of each
            numbered = [i for i, name in enumerate(parts[:-1]) if name.isdigit()]
            if parts[0] == "checkpoints" and numbered:
                i = numbered[0]
                steps = (d.name for d in source.joinpath(*parts[:i]).iterdir())
                if parts[i] != str(max(int(s) for s in steps if s.isdigit())):
                    continue
            tar.add(path, arcname=path.relative_to(root).as_posix())
    return target


def unstow(entry: dict, root: Path = ROOT) -> bool:
    """Unpack the part's handoff file into results/.checkpoints, unless the part has a checkpoint
    folder already (a later one, from this session). True if it unpacked."""
    source = handoff_file(entry, root)
    if not source.exists() or checkpoint_dir(entry, root).exists():
        return False
    with tarfile.open(source) as tar:
        names = tar.getnames()
        prefix = checkpoint_dir(entry, root).relative_to(root).as_posix() + "/"
        if not all(n.startswith(prefix) for n in names):
            raise ValueError(f"{source} holds files outside {prefix}")
        tar.extractall(root, filter="data")
    return True


def pending(entries: list[dict]) -> list[dict]:
    return [e for e in entries if not results_file(e).exists()]


class Packer:
    """Copies of what the run has made so far, in a folder that outlives the run."""

    def __init__(self, out: Path, logs: Path):
        self.out, self.logs, self.k = out, logs, 0
        out.mkdir(parents=True, exist_ok=True)

    def small(self, name: str | None = None) -> None:
        name = name or f"small-{'ab'[self.k % 2]}.tgz"
        self.k += 1
        tmp = Path("/tmp") / f"queue-{name}"
        ck = ROOT / "results" / ".checkpoints"
        with tarfile.open(tmp, "w:gz") as tar:
            for p in sorted((ROOT / "results").glob("*/*.json")):
                tar.add(p, arcname=str(p.relative_to(ROOT)))
                if p.with_suffix(".diff").exists():  # the uncommitted code a record names
                    tar.add(
                        p.with_suffix(".diff"),
                        arcname=str(p.with_suffix(".diff").relative_to(ROOT)),
                    )
            for p in sorted(ck.rglob("*.json")) if ck.exists() else ():
                if "checkpoints" not in p.relative_to(ck).parts[2:-1]:
                    tar.add(p, arcname=str(p.relative_to(ROOT)))
            for p in sorted(self.logs.glob("*")):
                tar.add(p, arcname=str(p.relative_to(ROOT)))
        shutil.copy(tmp, self.out / name)

    def checkpoints(self, chunk: int = 15 * 2**20, most: int = 4) -> str:
        ck = ROOT / "results" / ".checkpoints"
        tmp = Path("/tmp/queue-ckpt.tgz")
        with tarfile.open(tmp, "w:gz") as tar:
            for unit in sorted(ck.glob("*/*/checkpoints/*")) if ck.exists() else ():
                steps = [d for d in unit.iterdir() if d.is_dir() and d.name.isdigit()]
                if steps:
                    last = max(steps, key=lambda d: int(d.name))
                    tar.add(last, arcname=str(last.relative_to(ROOT)))
        size = tmp.stat().st_size
        if size > most * chunk:
            return f"checkpoints: {size / 2**20:.1f} MiB, too many to pack"
        with open(tmp, "rb") as f:
            for i in range(most):
                data = f.read(chunk)
                if not data:
                    break
                (self.out / f"ckpt.tgz.{i}").write_bytes(data)
        return f"checkpoints: {size / 2**20:.1f} MiB packed (cat ckpt.tgz.* | tar xz)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=1, help="parts run side by side")
    parser.add_argument("--deadline", type=float, help="seconds after which the parts are stopped")
    parser.add_argument("--pack", type=Path, help="folder that receives the results as they land")
    parser.add_argument("--tests", action="store_true", help="run the unit tests beside the parts")
    parser.add_argument("--only", nargs="+", help="these parts only (in the queue's order)")
    parser.add_argument("--list", action="store_true", help="print the parts still to run")
    parser.add_argument(
        "--legacy", action="store_true", help="run again the parts whose results file is legacy"
    )
    parser.add_argument(
        "--stow", action="store_true", help="pack the parts' checkpoints into results/.handoff"
    )
    args = parser.parse_args(argv)
    if args.pool < 1:
        parser.error(f"--pool must be at least 1, got {args.pool}")
    todo = legacy() if args.legacy else pending(load_queue())
    if args.only:
        unknown = set(args.only) - {e["part"] for e in todo}
        if unknown:
            parser.error(f"not in the queue, or done already: {sorted(unknown)}")
        todo = [e for e in todo if e["part"] in args.only]
    if args.list:
        for e in todo:
            print("python " + " ".join(command(e)[1:]))
        return 0
    if args.stow:
        for e in todo:
            target = stow(e)
            if target is not None:
                size = target.stat().st_size / 2**20
                print(f"{e['part']}: {target.relative_to(ROOT)} ({size:.1f} MiB); commit it")
        return 0
    began = time.time()
    logs = ROOT / "results" / ".queue"
    logs.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        line = f"[{time.time() - began:7.1f}s] {msg}"
        print(line, flush=True)
        with open(logs / "queue.log", "a") as f:
            f.write(line + "\n")

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_MININTERVAL": "10"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # parts share one accelerator
    packer = Packer(args.pack, logs) if args.pack else None
    stop = threading.Event()
    if packer:

        def keep():
            while not stop.wait(30):
                try:
                    packer.small()
                except Exception as e:  # noqa: BLE001 (a failed copy must not stop the runs)
                    say(f"pack: {e!r}")

        threading.Thread(target=keep, daemon=True).start()
    say(f"{len(todo)} parts, pool {args.pool}, deadline {args.deadline}")
    tests = None
    if args.tests:
        tests = subprocess.Popen(
            [sys.executable, "-m", "pytest", *(f"tests/test_{m}.py" for m in TEST_FILES)]
            + ["-m", "not render", "-n", "3", "-v", "-p", "no:cacheprovider", "--durations=30"],
            cwd=ROOT,
            env=env,
            stdout=open(logs / "tests.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running: dict[str, tuple[subprocess.Popen, float, dict]] = {}
    failed = []
    while todo or running:
        if args.deadline is not None and time.time() - began > args.deadline:
            break
        for part, (proc, start, entry) in list(running.items()):
            if proc.poll() is not None:
                say(f"{part}: exit {proc.returncode} after {(time.time() - start) / 60:.1f} min")
                failed += [part] if proc.returncode else []
                if results_file(entry).exists() and handoff_file(entry).exists():
                    # not deleted here: the parts still to start must find the tree clean
                    say(f"{part}: done; git rm {handoff_file(entry).relative_to(ROOT)}")
                del running[part]
        while todo and len(running) < args.pool:
            entry = todo.pop(0)
            if unstow(entry):
                say(f"{entry['part']}: its checkpoints unpacked from {handoff_file(entry).name}")
            proc = subprocess.Popen(
                command(entry),
                cwd=ROOT,
                env=env,
                stdout=open(logs / f"{entry['part']}.log", "w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            running[entry["part"]] = (proc, time.time(), entry)
            say(f"{entry['part']}: started")
        time.sleep(2)
    for part, (proc, _, _) in running.items():
        say(f"{part}: stopped at the deadline (resumes from its last checkpoint)")
        os.killpg(proc.pid, signal.SIGTERM)
    if tests is not None and tests.poll() is None:
        say("tests: stopped at the deadline")
        os.killpg(tests.pid, signal.SIGTERM)
    for proc, _, _ in running.values():
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    if tests is not None:
        say(f"tests: exit {tests.wait()}")
    stop.set()
    if packer:
        packer.small("small-final.tgz")
        say(packer.checkpoints())
    say("failed: " + (", ".join(failed) or "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
