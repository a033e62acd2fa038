#!/usr/bin/env python3
"""Give every committed results file the provenance fields that runs now write themselves.

    python tools/migrate_results.py            rewrite results/**/*.json in place (idempotent)
    python tools/migrate_results.py --check    exit 1 if a file lacks them

`run_experiment` records how a run's configuration differs from the preset it names
(`lib.record.compare_to_preset`): "selection" (the splits, seeds, models... that make it a part of
the preset's run), "deviations" (every other difference) and "reduced" (true iff there are
deviations); and, for a checkout whose code differs from its commit, the diff's SHA-256. Files
written before that carry a "reduced" flag set by any --set. This script computes the three fields
from each file's recorded config and today's preset, and adds "git_diff_sha256": null.

A setting added to an experiment after a run was made is absent from that run's config. Where the
code before the setting existed behaved as a known value of it, that value is filled in and listed
under "migrated"/"filled" (the run did not have the later feature, or ran the behaviour that is now
the default); where it did not, the absence stays a deviation. A run recorded as "-dirty" before
diffs were kept gets "git_diff_note": its uncommitted change is not known.

A record made at "X-dirty" whose .diff file did not come back (a lent machine's copy with a stale
.git, say) is resolved when a later commit C has exactly that diff from X (the SHA-256 of
`git diff X C`, outside results/, equals the record's): the code that ran was C's, so the record
names C, and "git_commit_resolved" keeps what it said before. The same for the commit of the run
that a resumed record began with ("resumed"/"first_commit", its hash "first_diff_sha256"; runs
resumed before that hash was kept take it from SAME_COPY).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (experiment, setting) -> the value that the code had before the setting existed.
BEFORE_THE_SETTING = {
    ("dgp-kin8nm", "ard"): True,  # one lengthscale per input, as before `ard` was added
    ("nram", "setting"): {},  # no setting changed from the TrainConfig defaults
    ("nram", "side_by_side"): False,  # a task's seeds one after another, as before the setting
    ("partition-uci", "adapt"): False,  # fixed temperatures, as before adaptive tempering
    ("darn-mnist", "deep"): [],  # deep DARNs, fDARN and the mixtures were later parts of the run
    ("darn-mnist", "fdarn_hidden"): [],
    ("darn-mnist", "mixture_components"): [],
    ("ebp-text", "bp_losses"): ["ce", "mse"],  # BP trained with both losses before the setting
    ("nram-search", "seeds"): [0],  # one seed per setting, the setting's index
}
# (experiment, setting) -> the settings that make it irrelevant when they are empty lists.
UNUSED_WITHOUT = {
    ("darn-mnist", "sparsity_target"): "fdarn_hidden",
    ("darn-mnist", "sparsity_weight"): "fdarn_hidden",
    ("darn-mnist", "mixture_iterations"): "mixture_components",
}
DIRTY_NOTE = (
    "recorded before runs kept their diff: the commit had uncommitted changes outside "
    "results/ (code or chapter text) that are not known"
)


# "X-dirty" -> the diff hash of the one copy that ran at it, for the runs that began there and were
# resumed elsewhere before run.json kept the hash: the copy a lent machine ran on 2026-11-27 (one
# tools/device_run.sh call, whose clone had a stale .git at 31ff127); dgp-kin8nm.sgp500.json ran
# in that copy from start to end and records this hash.
SAME_COPY = {
    "31ff1273e4f80c5197e91efa4c6d49e03020785a-dirty": (
        "e85c4548e1aff574603bab67052c742f997dd7b3fa7ddcc3486ccd4a5822286a"
    ),
}


def _commit_with_diff(sha: str, digest: str | None, root: Path) -> str | None:
    """The later commit C whose diff from X (sha = "X-dirty") has the SHA-256 `digest`, or None."""
    if not (sha.endswith("-dirty") and digest):
        return None
    base = sha.removesuffix("-dirty")
    git = ["git", "-C", str(root)]
    later = subprocess.run(
        git + ["rev-list", "--ancestry-path", f"{base}..HEAD"], capture_output=True, text=True
    ).stdout.split()
    for commit in later:
        diff = subprocess.run(
            git + ["diff", base, commit, "--", ".", ":(exclude)results"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if hashlib.sha256(diff.encode()).hexdigest() == digest:
            return commit
    return None


def resolve_commit(record: dict, root: Path = ROOT) -> dict:
    """`record` naming the commit whose tree ran, if it says "X-dirty" with a diff hash that the
    diff from X to a later commit C of this checkout's history has (see the module's docstring);
    the same for the commit a resumed record began with; else `record` unchanged."""
    sha, digest = str(record.get("git_commit", "")), record.get("git_diff_sha256")
    commit = _commit_with_diff(sha, digest, root)
    if commit is not None:
        record = {
            **record,
            "git_commit": commit,
            "git_diff_sha256": None,
            "git_commit_resolved": {"from": sha, "diff_sha256": digest},
        }
    resumed = record.get("resumed")
    if isinstance(resumed, dict):
        first = str(resumed.get("first_commit") or "")
        digest = resumed.get("first_diff_sha256") or SAME_COPY.get(first)
        commit = _commit_with_diff(first, digest, root)
        if commit is not None:
            resumed = {**resumed, "first_commit": commit, "first_diff_sha256": None}
            resumed["first_commit_resolved"] = {"from": first, "diff_sha256": digest}
            record = {**record, "resumed": resumed}
    return record


def migrate(record: dict, experiments: dict) -> dict:
    from lib.record import compare_to_preset

    out = dict(record)
    out.setdefault("git_diff_sha256", None)
    if str(out.get("git_commit", "")).endswith("-dirty") and out["git_diff_sha256"] is None:
        out["git_diff_note"] = DIRTY_NOTE
    name = record.get("experiment")
    if name not in experiments or record.get("preset") is None:  # a benchmark: no preset to compare
        out.setdefault("deviations", {})
        out.setdefault("selection", {})
        return out
    preset = experiments[name].presets[record["preset"]]
    config, filled = dict(record["config"]), {}
    for key in preset:
        if key not in config and (name, key) in BEFORE_THE_SETTING:
            config[key] = filled[key] = BEFORE_THE_SETTING[(name, key)]
    for key in preset:
        other = UNUSED_WITHOUT.get((name, key))
        if key not in config and other and config.get(other) == []:
            config[key] = filled[key] = preset[key]
    selection, deviations = compare_to_preset(preset, config)
    out.update(reduced=bool(deviations), selection=selection, deviations=deviations)
    if filled:
        out["migrated"] = {"by": "tools/migrate_results.py", "filled": filled}
    # keep the record's keys in the order a run writes them
    order = [
        "experiment",
        "chapter",
        "command",
        "preset",
        "reduced",
        "selection",
        "deviations",
        "part",
    ]
    return {
        **{k: out[k] for k in order if k in out},
        **{k: v for k, v in out.items() if k not in order},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    import lib

    for module in lib.MODULES:
        importlib.import_module(f"lib.{module}")
    from lib.record import EXPERIMENTS

    stale = []
    for path in sorted((ROOT / "results").glob("*/*.json")):
        record = json.loads(path.read_text())
        new = migrate(record, EXPERIMENTS)
        if not path.with_suffix(".diff").exists():
            new = resolve_commit(new)
        if new != record:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(json.dumps(new, indent=1) + "\n")
    if args.check and stale:
        print(
            "results files without selection/deviations: run tools/migrate_results.py:",
            *map(str, stale),
            sep="\n  ",
        )
        return 1
    print(f"{'stale' if args.check else 'migrated'}: {len(stale)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
