# GENERATED FILE: do not edit. Source: book/record.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record, derived in book/record.md (Appendix B, part 2).

The experiment registry and `python -m lib`, results files and their provenance, resumable runs
(`run_unit`), the tables and glue of the book, and the claims and the scorecard. Trains with
lib.toolkit, which does not import this module.
"""

# %% book/record.md
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import html
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import numpy as np
import optax

from lib.toolkit import PRESETS, Bool, Function, Instance, Maybe, OneOf, _is_int, checks
from lib.toolkit import SoftmaxRegression, checkpoint_steps, fit, make_rngs, minibatches
from lib.toolkit import mnist_arrays, nnx_model, nnx_step, nnx_train_state, progress_enabled
from lib.toolkit import restore_checkpoint, save_checkpoint, set_progress, softmax_loss
from lib.toolkit import add_to_class, tree_digest


# %% book/record.md
@dataclasses.dataclass(frozen=True)
class Experiment:
    """A registered experiment: fn(config) -> list of row dicts."""

    name: str
    chapter: str
    fn: Callable[[dict], list]
    presets: dict
    description: str
    lists: tuple[str, ...] = ()  # settings that also take a list of their presets' kind of value


EXPERIMENTS: dict[str, Experiment] = {}
_RUNS: list = []  # the experiment runs in progress, innermost last (see run_unit)


def experiment(
    name: str, *, chapter: str, book: dict, paper: dict, description: str = "", lists=()
):
    """Decorator registering fn(config: dict) -> list[dict] as experiment `name` of `chapter`.

    lists: settings that take either a value like their presets' or a list of such values (a
    network's width, or the widths of its layers), so that `check_settings` accepts both."""
    if set(book) != set(paper):
        raise ValueError(f"experiment {name}: book and paper presets must set the same keys")
    if set(lists) - set(book):
        unknown = sorted(set(lists) - set(book))
        raise ValueError(f"experiment {name}: lists names settings it lacks: {unknown}")

    def register(fn):
        if name in EXPERIMENTS and EXPERIMENTS[name].fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"experiment {name!r} is registered twice")
        # the first paragraph of the docstring, on one line
        doc = description or " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())
        EXPERIMENTS[name] = Experiment(
            name, chapter, fn, {"book": dict(book), "paper": dict(paper)}, doc, tuple(lists)
        )
        return fn

    return register


# %% book/record.md
def project_root() -> Path | None:
    """The checkout of this book that holds `lib` (a folder with pyproject.toml and lib/), if any.

    Looked for above the module's file, then above the working directory (a chapter runs in book/).
    """
    starts = [Path(globals()["__file__"]).resolve().parent] if "__file__" in globals() else []
    for start in starts + [Path.cwd().resolve()]:
        for folder in (start, *start.parents):
            if (folder / "pyproject.toml").is_file() and (folder / "lib").is_dir():
                return folder
    return None


def _git_state(root=None) -> dict:
    """The code a run is made with: {"git_commit": HEAD's sha, "git_diff_sha256": None or a hash}.

    If a tracked file outside results/ differs from HEAD (a results file that an earlier run rewrote
    is output, not code), the sha carries "-dirty", "git_diff" holds the diff and "git_diff_sha256"
    its SHA-256, so the record names exactly the code that ran.
    """
    import hashlib

    state = {"git_commit": "unknown", "git_diff_sha256": None}
    try:
        root = root or project_root()
        git = ["git", "-C", str(root)]
        sha = subprocess.run(
            git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        diff = subprocess.run(
            git + ["diff", "HEAD", "--", ".", ":(exclude)results"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except Exception:
        return state
    state["git_commit"] = sha + ("-dirty" if diff else "")
    if diff:
        state["git_diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
        state["git_diff"] = diff
    return state


_VECTOR_ISA = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile")


def _cpu_model() -> dict:
    """The host CPU as /proc/cpuinfo names it, and which of the vector extensions that XLA:CPU
    compiles for it has ({} where there is no /proc/cpuinfo). Two CPUs with other extensions run
    other machine code, whose floating-point rounding can differ: a long training run is
    reproducible bit for bit on one machine, not always across machines."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())  # the first processor's
    flags = set(fields.get("flags", "").split())
    return {
        "cpu": fields.get("model name", ""),
        "vector_isa": [f for f in _VECTOR_ISA if f in flags],
    }


# %% book/record.md
def provenance() -> dict:
    """Where and with what a result was computed: device (and the host CPU), versions, git
    commit."""
    import importlib.metadata as md

    versions = {"python": platform.python_version()}
    for pkg in (
        "jax",
        "jaxlib",
        "flax",
        "optax",
        "orbax-checkpoint",
        "numpy",
        "scipy",
        "rederived",
    ):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    devices = jax.devices()
    device = {
        "platform": devices[0].platform,
        "kind": devices[0].device_kind,
        "count": len(devices),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        **_cpu_model(),
        # how float32 matrix products were computed ("default": TF32 on recent NVIDIA GPUs)
        "matmul_precision": str(jax.config.jax_default_matmul_precision or "default"),
    }
    return {**_git_state(), "device": device, "versions": versions}


SELECTORS = ("datasets", "splits", "split", "models", "tasks", "seeds", "seed", "schedules")


def _is_selection(key: str, preset_value, value) -> bool:
    """Whether setting `key` to `value` picks a part of the preset's run instead of changing it."""
    if key in ("seed", "seeds", "split", "splits"):
        return (
            True  # which seeds or splits: more samples of the same configuration, not another one
        )
    if isinstance(preset_value, list) and isinstance(value, list):
        return all(v in preset_value for v in value)  # a subset of the preset's grid
    return preset_value == "all" and key in SELECTORS and isinstance(value, list)


def compare_to_preset(preset_config: dict, config: dict) -> tuple[dict, dict]:
    """(selection, deviations) of a run's `config` against the configuration of its preset.

    selection: the settings that pick a part of the preset's run (its seeds or splits, a subset of
    its datasets, models, tasks or schedules, or of any other list it sets), {key: value run}.
    deviations: every other difference, {key: {"preset": value, "run": value}}; a key that only one
    of the two has is a deviation too (value "absent"). A run with deviations is *reduced*: it is
    not the preset's configuration. One with a selection alone is a *part* of the preset's run.
    """
    selection, deviations = {}, {}
    for key in sorted(set(preset_config) | set(config)):
        want, got = preset_config.get(key, "absent"), config.get(key, "absent")
        if json.dumps(want, default=float) == json.dumps(got, default=float):
            continue
        if key in preset_config and key in config and _is_selection(key, want, got):
            selection[key] = got
        else:
            deviations[key] = {"preset": want, "run": got}
    return selection, deviations


# %% book/record.md
def run_kind(record: dict) -> str:
    """How a results record relates to its preset: "reduced run (...)", "part of the paper run" or
    "paper run"."""
    if record.get("deviations"):
        return "reduced run (" + ", ".join(sorted(record["deviations"])) + ")"
    return (
        f"part of the {record.get('preset')} run"
        if record.get("selection")
        else f"{record.get('preset')} run"
    )


def _setting_kind(refs: list) -> tuple[str, str]:
    """What a setting whose preset values are `refs` accepts: (kind, description)."""
    refs = [r for r in refs if r is not None]
    if refs and all(isinstance(r, bool) for r in refs):
        return "bool", "true or false"
    if refs and all(_is_int(r) for r in refs):
        low = min(refs)
        if low >= 1:
            return "int1", "an integer >= 1"
        return ("int0", "an integer >= 0") if low >= 0 else ("int", "an integer")
    if refs and all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in refs):
        low = min(refs)
        return (
            ("pos", "a number > 0")
            if low > 0
            else (("nonneg", "a number >= 0") if low >= 0 else ("num", "a number"))
        )
    return "other", ""


def check_settings(name: str, presets: dict, overrides: dict, lists=()) -> None:
    """Refuse an override whose type or range differs from the setting's values in the presets
    (`python -m lib ... --set KEY=VALUE`): an integer where the presets hold integers (not a bool,
    not 1.5), positive where they are positive, a list of the same kind of items (or an empty one),
    one of the strings the presets use where a setting is either a list or a string ("all").
    lists: settings that may also be a non-empty list of values each fitting the presets' (see
    `experiment`)."""
    for key, value in overrides.items():
        refs = [presets[p][key] for p in presets if key in presets[p]]
        if key in lists and isinstance(value, list):
            fits = value and not any(_setting_problem(refs, v) for v in value)
            problem = (
                "" if fits else f"{_setting_problem(refs, value)}, or a non-empty list of such"
            )
        else:
            problem = _setting_problem(refs, value)
        if problem:
            shown = ", ".join(json.dumps(r) for r in refs)
            raise ValueError(
                f"experiment {name}: setting {key} must be {problem} "
                f"(its presets: {shown}), got {json.dumps(value)}"
            )


# %% book/record.md
def _setting_problem(refs: list, value) -> str:
    """'' if value fits the preset values refs, else what it should be."""
    if value is None:
        return "" if any(r is None for r in refs) else "a value (not null)"
    present = [r for r in refs if r is not None]
    if not present:
        return ""
    kind, text = _setting_kind(present)
    if kind != "other":
        ok = {
            "bool": lambda v: isinstance(v, bool),
            "int1": lambda v: _is_int(v) and v >= 1,
            "int0": lambda v: _is_int(v) and v >= 0,
            "int": _is_int,
            "pos": lambda v: _is_number(v) and v > 0,
            "nonneg": lambda v: _is_number(v) and v >= 0,
            "num": _is_number,
        }[kind](value)
        return "" if ok else text
    lists = [r for r in present if isinstance(r, list)]
    strings = [r for r in present if isinstance(r, str)]
    if isinstance(value, list) and lists:
        items = [item for r in lists for item in r]
        for item in value:  # empty is allowed: a part may run none of one sub-grid (darn-mnist)
            inner = _setting_problem(items, item) if items else ""
            if inner:
                return f"a list of items each {inner}"
        return ""
    if isinstance(value, str) and strings:
        if not lists or value in strings:
            return ""
        return " or ".join(["a list"] + [json.dumps(s) for s in strings])
    if isinstance(value, dict) and all(isinstance(r, dict) for r in present):
        return ""
    kinds = sorted(
        {
            "a list"
            if isinstance(r, list)
            else "a string"
            if isinstance(r, str)
            else "an object"
            if isinstance(r, dict)
            else type(r).__name__
            for r in present
        }
    )
    return " or ".join(kinds)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# %% book/record.md
def _run_config(name: str, preset: str, overrides: dict, part: str | None) -> tuple:
    """(the experiment, the configuration to run): preset `preset` of experiment `name` with
    `overrides`, or a ValueError that says which argument is wrong."""
    if part is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", part):
        raise ValueError(f"part must be letters, digits, '-' or '_', got {part!r}")
    if name not in EXPERIMENTS:
        raise ValueError(
            f"no experiment {name!r}; registered: {', '.join(sorted(EXPERIMENTS)) or 'none'}"
        )
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    exp = EXPERIMENTS[name]
    config = dict(exp.presets[preset])
    unknown = sorted(set(overrides) - set(config))
    if unknown:
        raise ValueError(f"experiment {name}: unknown settings {unknown}; it has {sorted(config)}")
    check_settings(name, exp.presets, overrides, exp.lists)
    return exp, {**config, **overrides}


# %% book/record.md
@checks(
    name=Instance(str),
    preset=OneOf(*PRESETS),
    overrides=Maybe(Instance(dict)),
    part=Maybe(Instance(str)),
    resume=Bool(),
)
def run_experiment(
    name: str,
    preset: str = "book",
    overrides: dict | None = None,
    results_dir: str | os.PathLike | None = None,
    command: str | None = None,
    part: str | None = None,
    resume: bool = True,
) -> dict:
    """Run registered experiment `name` and write results/<chapter>/<name>.json; return the record.

    overrides: keys of the preset to change. The record says how the run relates to its preset
    (see `compare_to_preset`): "selection" (the overrides that pick a part of the preset's run: its
    splits, seeds, models...), "deviations" (every other difference, preset value and value run),
    and "reduced": true if there are deviations. part: a name for one piece of a run that is made
    in pieces (one group of models, say): written to <name>.<part>.json, so pieces do not overwrite
    each other; load_results(..., part=) reads it back. If the checkout's code differs from its
    commit, the record holds the diff's SHA-256 and the diff is written beside it (<stem>.diff).
    resume: keep the run's finished units and checkpoints in
    results/.checkpoints/<chapter>/<name>[.<part>] while it runs (see `run_unit`) and, if an
    interrupted run of the same configuration left them there, continue from them (the record's
    "resumed" says what was reused); False: start afresh.
    results_dir: default, the results/ folder of the checkout, where load_results reads (or
    ./results outside a checkout).
    """
    results_dir = default_results_dir() if results_dir is None else results_dir
    overrides = dict(overrides or {})
    exp, config = _run_config(name, preset, overrides, part)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    origin = provenance()  # taken before the run: the code that runs is the code of this commit
    stem = f"{name}.{part}" if part else name
    folder = Path(results_dir) / ".checkpoints" / exp.chapter / stem
    run = _open_run(folder, preset, config, origin, fresh=not resume)
    began = time.perf_counter()
    _RUNS.append(run)
    try:
        rows = exp.fn(config)
    finally:
        _RUNS.remove(run)
    selection, deviations = compare_to_preset(exp.presets[preset], config)
    diff = origin.pop("git_diff", None)
    record = {
        "experiment": name,
        "chapter": exp.chapter,
        "command": command
        or f"python -m lib {name} --preset {preset}"
        + "".join(f" --set {k}={json.dumps(v)}" for k, v in overrides.items())
        + (f" --part {part}" if part else ""),
        "preset": preset,
        "reduced": bool(deviations),
        "selection": selection,
        "deviations": deviations,
        "part": part,
        "started": started,
        "wall_seconds": round(time.perf_counter() - began, 3),
        "resumed": run.summary(),
        **origin,
        "config": config,
        "rows": rows,
    }
    out = Path(results_dir) / exp.chapter / f"{stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=float) + "\n")
    if diff:  # the uncommitted code this run was made with, which the record's hash names
        out.with_suffix(".diff").write_text(diff)
    shutil.rmtree(run.directory, ignore_errors=True)  # the results file now holds everything
    record["path"] = str(out)
    return record


# %% book/record.md
def default_results_dir() -> Path:
    """results/ of the checkout (see project_root), else ./results: where runs write by default."""
    root = project_root()
    return root / "results" if root is not None else Path("results")


def results_root() -> Path | None:
    """Where the committed results are read from: the folder LIB_RESULTS_DIR names, else the
    checkout's results/, else the copy installed with the library (lib/_results: a chapter run
    outside a checkout, as in Colab, reads the results the book was built with)."""
    if os.environ.get("LIB_RESULTS_DIR"):
        return Path(os.environ["LIB_RESULTS_DIR"]).expanduser().resolve()
    root = project_root()
    if root is not None:
        return root / "results"
    import importlib.util

    spec = importlib.util.find_spec("lib")  # the installed package (this module, or the chapter's)
    if spec is None or spec.origin is None:
        return None
    packaged = Path(spec.origin).resolve().parent / "_results"
    return packaged if packaged.is_dir() else None


@checks(chapter=Instance(str), name=Instance(str), part=Maybe(Instance(str)))
def load_results(
    chapter: str, name: str, results_dir: str | os.PathLike | None = None, part: str | None = None
) -> dict | None:
    """The record of results/<chapter>/<name>.json, or <name>.<part>.json (None if not made).

    results_dir: default, the committed results (see results_root).
    """
    if results_dir is None:
        results_dir = results_root()
        if results_dir is None:
            return None
    base = Path(results_dir)
    path = base / chapter / (f"{name}.{part}.json" if part else f"{name}.json")
    return json.loads(path.read_text()) if path.exists() else None


@checks(chapter=Instance(str), name=Instance(str), part=Maybe(Instance(str)))
def require_results(chapter: str, name: str, part: str | None = None, results_dir=None) -> dict:
    """load_results, but a missing file is an error: a chapter's paper-scale cell fails without
    it."""
    record = load_results(chapter, name, results_dir, part=part)
    if record is None:
        stem = f"{name}.{part}" if part else name
        raise FileNotFoundError(
            f"results/{chapter}/{stem}.json is missing: the chapter's text gives the "
            f"`python -m lib {name} --preset paper ...` command that makes it"
        )
    return record


# %% book/record.md
class Table:
    """Rows as a table: HTML in a notebook (the book's pages), aligned text elsewhere.

    rows: dicts (keys are the columns, in order of first appearance) or sequences with `columns`;
    formats: {column: format spec} for numbers ("{:.3f}" style specs without braces, e.g. ".3f").
    """

    def __init__(self, rows, columns=None, formats=None, caption: str = ""):
        rows = list(rows)
        if columns is None:
            columns = (
                list(dict.fromkeys(k for r in rows for k in r))
                if rows and isinstance(rows[0], dict)
                else []
            )
        self.columns, self.formats, self.caption = list(columns), dict(formats or {}), caption
        self.rows = [
            [r.get(c) for c in self.columns] if isinstance(r, dict) else list(r) for r in rows
        ]

    def _cell(self, column, value) -> str:
        if value is None:
            return ""
        if isinstance(value, (float, np.floating)) and column in self.formats:
            return format(value, self.formats[column])
        return str(value)

    def __repr__(self) -> str:
        cells = [self.columns] + [
            [self._cell(c, v) for c, v in zip(self.columns, row)] for row in self.rows
        ]
        width = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = ["  ".join(x.rjust(w) for x, w in zip(row, width)) for row in cells]
        return "\n".join(([self.caption] if self.caption else []) + lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(self._cell(c, v))}</td>" for c, v in zip(self.columns, row)
            )
            + "</tr>"
            for row in self.rows
        )
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (
            f'<table class="lib-table">{caption}<thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )


@checks(name=Instance(str), display=Bool())
def glue(name: str, value, display: bool = False) -> None:
    """Store `value` in the running notebook under `name`, for myst-nb's {glue:text}`name:.2f` role.

    The same output that `myst_nb.glue` writes (which the book's build reads), without needing
    myst-nb where a chapter runs (Colab). Outside a notebook it does nothing. A number the text
    states is glued from the cell that computed it, never typed (tools/prose.py checks the text).
    """
    try:
        from IPython import get_ipython
        from IPython.core.formatters import format_display_data
        from IPython.display import display as ipy_display
    except ImportError:
        return
    if get_ipython() is None:
        return
    if isinstance(value, (np.generic, jax.Array)) and np.ndim(value) == 0:
        value = value.item()  # the text must read back as a number: 0.08, not np.float64(0.08)
    bundle, metadata = format_display_data(value)
    prefix = "" if display else "application/papermill.record/"
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)


# %% book/record.md
def experiment_list(width: int = 100) -> str:
    """The registered experiments, each with its description and presets, wrapped at `width`."""
    import textwrap

    def wrap(text, first, rest):
        return textwrap.fill(
            text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
        )

    lines = [
        wrap(
            "python -m lib NAME [--preset book|paper] runs one; book (the default) is the "
            "chapter's size, paper the paper's:",
            "",
            "",
        )
    ]
    for exp in sorted(EXPERIMENTS.values(), key=lambda e: (e.chapter, e.name)):
        lines += ["", f"{exp.name}  ({exp.chapter} chapter)", wrap(exp.description, "    ", "    ")]
        for p in PRESETS:
            settings = " ".join(f"{k}={json.dumps(v)}" for k, v in exp.presets[p].items())
            lines.append(wrap(settings, f"    {p + ':':7s}", " " * 11))
    return "\n".join(lines)


# %% book/record.md
def main(argv: list[str] | None = None) -> int:
    """`python -m lib`: list the registered experiments, run one, or print the scorecard."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    if args_in[:1] == ["scorecard"]:
        return scorecard_main(args_in[1:])  # defined with the reproduction record below
    parser = argparse.ArgumentParser(
        prog="python -m lib",
        description="Run the experiments of the book's chapters "
        "(`python -m lib scorecard [--json]`: what reproduces).",
    )
    parser.add_argument("experiment", nargs="?", help="experiment name (omit to list them)")
    parser.add_argument(
        "--preset",
        choices=PRESETS,
        default="book",
        help="book (the default): the chapter's size, minutes on a laptop CPU; paper: the "
        "paper's configuration, hours to weeks of CPU (an accelerator, or --set and --part to "
        "run it in pieces)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting (JSON value): a selection of the preset's splits, seeds, "
        "models... makes the run a part of it, any other change a deviation (reduced)",
    )
    parser.add_argument(
        "--results-dir",
        default=None,
        help="where to write (default: the checkout's results/, which the chapters read)",
    )
    parser.add_argument(
        "--part", help="name of this piece of a run made in pieces: writes NAME.PART.json"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="discard what an interrupted run of this experiment left, instead of resuming it",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress reports (default: a bar in a terminal, a line a minute to a file)",
    )
    args = parser.parse_args(args_in)
    # Float32 matrix products in full float32 on every device: a GPU's default is TF32 (10 bits of
    # mantissa), under which three of seven partition-large runs diverged on an H200 that had
    # converged on a CPU. The choice is recorded in each record's device.
    jax.config.update("jax_default_matmul_precision", "highest")
    if args.experiment is None:
        print(experiment_list())
        return 0
    if args.quiet:
        set_progress(False)
    overrides = {}
    for item in args.set:
        if "=" not in item:
            parser.error(f"--set takes KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        overrides[k] = _parse_value(v)
    command = "python -m lib " + " ".join(args_in)
    try:
        record = run_experiment(
            args.experiment,
            args.preset,
            overrides,
            args.results_dir,
            command,
            args.part,
            resume=not args.fresh,
        )
    except ValueError as err:
        parser.error(str(err))
    print(f"wrote {record['path']} ({record['wall_seconds']:.1f} s)")
    return 0


# %% book/record.md
class _Run:
    """The checkpoint folder of one `run_experiment` call (see `run_unit`)."""

    def __init__(self, directory: Path, previous: dict | None):
        self.directory, self.previous = directory, previous
        self.reused: list[str] = []
        self.restored: dict[str, int] = {}  # unit (and sub-folder) -> step of its checkpoint

    def summary(self) -> dict | None:
        if not (self.reused or self.restored):
            return None
        return {
            "units_reused": self.reused,
            "checkpoints_restored": self.restored,
            "first_started": (self.previous or {}).get("started"),
            "first_commit": (self.previous or {}).get("git_commit"),
            "first_diff_sha256": (self.previous or {}).get("git_diff_sha256"),
            "first_device": (self.previous or {}).get("device"),
        }


def _open_run(directory: Path, preset: str, config: dict, origin: dict, fresh: bool) -> _Run:
    """The run folder for this configuration: reused if an interrupted run of it left one, else made
    anew."""
    about = directory / "run.json"
    mine = {"preset": preset, "config": json.loads(json.dumps(config, default=float))}
    if fresh:
        shutil.rmtree(directory, ignore_errors=True)
    previous = json.loads(about.read_text()) if about.exists() else None
    if previous is not None and {k: previous.get(k) for k in mine} != mine:
        raise ValueError(
            f"{directory} holds an interrupted run with another configuration "
            f"({previous.get('preset')}, {previous.get('config')}); run with --fresh "
            "(resume=False) to discard it, or repeat that run's command to finish it"
        )
    directory.mkdir(parents=True, exist_ok=True)
    if previous is None:
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        about.write_text(
            json.dumps(
                {
                    **mine,
                    "started": now,
                    "git_commit": origin["git_commit"],
                    "git_diff_sha256": origin.get("git_diff_sha256"),
                    "device": origin.get("device"),
                },
                indent=1,
            )
            + "\n"
        )
    return _Run(directory, previous)


def _safe_name(name: str) -> str:
    """A file name for unit `name`: its letters, digits and . = - _, and a hash of the whole name
    (no collisions)."""
    import hashlib

    return (
        re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)[:80]
        + "-"
        + hashlib.sha1(name.encode()).hexdigest()[:8]
    )


# %% book/record.md
@checks(name=Instance(str), compute=Function())
def run_unit(name: str, compute: Callable[[Path | None], Any]) -> Any:
    """compute(checkpoint_dir) -> JSON-able result, once per experiment run.

    Inside `run_experiment`, a result stored under `name` by an interrupted run of the same
    configuration is returned without calling `compute`; otherwise `compute` gets a folder of its
    own for checkpoints (a trainer that was interrupted restores its latest one there) and its
    result is stored. Outside an experiment run: compute(None). Either way the result comes back as
    JSON would give it (tuples as lists, numpy scalars as floats), so a resumed run returns the same
    values.
    """
    run = _RUNS[-1] if _RUNS else None
    if run is None:
        return json.loads(json.dumps(compute(None), default=float))
    done = run.directory / "units" / f"{_safe_name(name)}.json"
    if done.exists():
        run.reused.append(name)
        return json.loads(done.read_text())["result"]
    checkpoint_dir = run.directory / "checkpoints" / _safe_name(name)
    for folder, step in checkpoint_steps(checkpoint_dir).items():  # what compute resumes from
        run.restored["/".join(p for p in (name, folder) if p)] = step
    began = time.perf_counter()
    if progress_enabled():
        print(f"unit {name}: started", file=sys.stderr, flush=True)
    result = json.loads(json.dumps(compute(checkpoint_dir), default=float))
    if progress_enabled():
        minutes = (time.perf_counter() - began) / 60
        print(f"unit {name}: done in {minutes:.1f} min", file=sys.stderr, flush=True)
    done.parent.mkdir(parents=True, exist_ok=True)
    partial_file = done.with_suffix(".tmp")
    partial_file.write_text(json.dumps({"name": name, "result": result}) + "\n")
    partial_file.replace(done)  # atomic: a unit is either stored whole or not at all
    shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return result


# %% book/record.md
def device_name(device: dict) -> str:
    """A record's `"device"` in words: "CPU (n cores)" or the accelerator's kind."""
    if device.get("platform") == "cpu":
        return f"CPU ({device.get('cpus')} cores)"
    return str(device.get("kind", device.get("platform", "unknown")))


def where_run(record: dict) -> str:
    """Where a results record was computed; for a resumed run, where it began and how far it got
    there (units finished whole, the steps of the checkpoints restored), then where it ended."""
    here, resumed = device_name(record["device"]), record.get("resumed") or {}
    if not resumed:
        return here
    began = [f"{len(resumed['units_reused'])} unit(s) whole"] if resumed["units_reused"] else []
    steps = sorted(set(resumed["checkpoints_restored"].values()))
    began += [f"to step {', '.join(map(str, steps))}"] if steps else []
    first = resumed.get("first_device")
    first = device_name(first) if first else "an earlier run"
    if first == here:
        return f"{here}, resumed ({'; '.join(began)})"
    return f"{first} ({'; '.join(began)}), then {here}"


# %% book/record.md
@experiment(
    "toolkit-mnist-softmax",
    chapter="toolkit",
    book={"steps": 1200, "batch_size": 100, "learning_rate": 1e-3, "seed": 0},
    paper={"steps": 12000, "batch_size": 100, "learning_rate": 1e-3, "seed": 0},
)
def run_mnist_softmax(config: dict) -> list:
    """Softmax regression on MNIST with Adam: test accuracy and cross-entropy every 10% of the run.

    One unit (see `run_unit`), checkpointed at every row; each row carries the digest of the
    parameters.
    """
    x_train, y_train = mnist_arrays("train")
    x_test, y_test = mnist_arrays("test")
    key = jax.random.key(config["seed"])
    tx = optax.adam(config["learning_rate"])
    graphdef, state = nnx_train_state(
        SoftmaxRegression(784, 10, rngs=make_rngs(config["seed"])), tx
    )
    step = nnx_step(graphdef, tx, softmax_loss)
    data = minibatches((x_train, y_train), config["batch_size"], key=key)

    def train(checkpoint_dir):
        rows, done, now = [], 0, state
        restored = restore_checkpoint(checkpoint_dir, now) if checkpoint_dir else None
        if restored is not None:
            done, now, extra = restored
            rows = extra["rows"]
        for target in np.linspace(0, config["steps"], 11)[1:].astype(int).tolist():
            if target <= done:
                continue
            now = fit(
                step,
                now,
                data,
                target,
                key=key,
                first_step=done,
                log_every=max(1, target - done),
            ).state
            done = target
            loss, metrics = softmax_loss(nnx_model(graphdef, now), (x_test, y_test), key)
            rows.append(
                {
                    "step": done,
                    "test_cross_entropy": float(loss),
                    "test_accuracy": float(metrics["accuracy"]),
                    "params_sha256": tree_digest(now.params),
                }
            )
            if checkpoint_dir is not None:
                save_checkpoint(checkpoint_dir, done, now, {"rows": rows})
        return rows

    return run_unit("softmax", train)


# %% book/record.md
STATUSES = ("reproduced", "reproduced with changes", "not reproduced", "not run")
DIRECTIONS = ("two-sided", "at least", "at most")
PAPERS = ("darn", "partition", "ebp", "nram", "dgp")
TOLERANCE_Z = 2.0  # a tolerance from uncertainties: this many standard errors of the difference
PAIRED_Z = 2.0  # A worse (better) than B: mean paired A - B this many standard errors below (above)


class Paired(NamedTuple):
    """Paired differences A - B over n splits (folds, seeds): their mean and its standard error."""

    mean: float
    se: float
    n: int

    @property
    def margin(self) -> float:
        """How far the mean clears PAIRED_Z standard errors: positive iff A is better than B."""
        return self.mean - PAIRED_Z * self.se

    @property
    def reading(self) -> str:
        """'worse', 'better' or 'tie': the book's one reading of a paired comparison (PAIRED_Z)."""
        if self.mean < -PAIRED_Z * self.se:
            return "worse"
        return "better" if self.margin > 0 else "tie"


def paired_difference(a, b) -> Paired:
    """Mean and standard error of the paired differences a - b (the same splits, in order)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.ndim != 1 or a.shape != b.shape or len(a) < 2:
        raise ValueError(
            "paired_difference needs two 1-D sequences of one length >= 2, got shapes "
            f"{a.shape} and {b.shape}"
        )
    d = a - b
    return Paired(float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))), len(d))


# %% book/record.md
@dataclasses.dataclass(frozen=True)
class Claim:
    """One cell of a paper's table or figure, or one claim of its text, and how the book checks it.

    paper: one of PAPERS; where: "Table 2", "Figure 1", "Sec. 4"; item: the row ("nh = 500");
    quantity: what is compared, with its unit. paper_value: the paper's number, or its words for a
    claim of its text; paper_error: its reported uncertainty. ours: where our number comes from,
    "results/<chapter>/<file>.json:<key>/<key>/..." (a list is indexed by position, or by
    `field=value` for the row whose field has that value) or a function of the loaded records
    {path: record} of `sources`; None: not run. target: the number ours is compared with (default:
    paper_value); tolerance (a number, or a function of the loaded records: those of `sources`
    beside the file of a path `ours`) and direction:
    within it iff |ours - target| <= tolerance ("two-sided"), ours >= target - tolerance ("at
    least") or ours <= target + tolerance ("at most"). tolerance_basis: where the tolerance comes
    from (required with a result). changes: what our procedure did that the paper's did not
    (within the tolerance, the status is then "reproduced with changes"). unreliable: why our
    value cannot support a verdict of reproduced (the status is then "not reproduced"). better:
    "higher" or "lower", the paper's better side (default: the direction's side); a value beyond
    the tolerance there is "better than the paper". rate: where the paper reports success over
    seeds, a function of the loaded records giving (runs that reach the paper's value, runs,
    which runs: "at the paper's setting"). expect: the status the book states. section: the
    report's section with the evidence, "page#label"; note: why (required unless reproduced).
    """

    paper: str
    where: str
    item: str
    quantity: str
    paper_value: float | str | None
    ours: str | Callable[[dict], float] | None = None
    sources: tuple[str, ...] = ()
    target: float | None = None
    tolerance: float | Callable[[dict], float] = 0.0
    direction: str = "two-sided"
    paper_error: float | None = None
    expect: str = "reproduced"
    section: str = ""
    note: str = ""
    digits: int = 4
    tolerance_basis: str = ""
    changes: str = ""
    unreliable: str = ""
    better: str | None = None
    rate: Callable[[dict], tuple[int, int, str]] | None = None

    def __post_init__(self):
        self._check_fields()
        if self.ours is None:
            if self.expect != "not run" or not self.note:
                raise ValueError(
                    f"claim {self.item!r} ({self.where}) names no result: it must expect "
                    "'not run' and say why in `note`"
                )
        elif isinstance(self.ours, str):
            if ":" not in self.ours or not self.ours.startswith("results/"):
                raise ValueError(
                    f"Claim.ours must be 'results/...json:key/path', got {self.ours!r}"
                )
        elif not self.sources:
            raise ValueError(
                f"claim {self.item!r}: a function in `ours` needs the files it reads in `sources`"
            )
        if self.ours is not None and not self.tolerance_basis.strip():
            raise ValueError(
                f"claim {self.item!r} ({self.where}): say where its tolerance comes from in "
                "`tolerance_basis`"
            )
        if self.expect != "reproduced" and not self.note:
            raise ValueError(
                f"claim {self.item!r} ({self.where}) expects {self.expect!r}: say why in `note`"
            )
        if (self.expect == "reproduced with changes") != bool(self.changes):
            raise ValueError(
                f"claim {self.item!r} ({self.where}): 'reproduced with changes' and `changes` "
                "(what the paper did not do) go together"
            )
        if self.ours is not None and self.compared_with() is None:
            raise ValueError(f"claim {self.item!r}: paper_value is not a number, so give `target`")


# %% book/record.md
@add_to_class(Claim)
class _ClaimFields:
    def _check_fields(self):
        for name, allowed in (
            ("paper", PAPERS),
            ("direction", DIRECTIONS),
            ("expect", STATUSES),
            ("better", (None, "higher", "lower")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"Claim.{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        tol = self.tolerance
        if not callable(tol) and not (
            isinstance(tol, (int, float)) and np.isfinite(tol) and tol >= 0
        ):
            raise ValueError(
                f"Claim.tolerance must be a finite number >= 0 or a function, got {tol!r}"
            )

    def compared_with(self) -> float | None:
        """The number ours is held against: `target`, else the paper's value if it is a number."""
        if self.target is not None:
            return float(self.target)
        return float(self.paper_value) if isinstance(self.paper_value, (int, float)) else None

    def better_side(self) -> str | None:
        """'higher' or 'lower': the paper's better side (`better`, else the direction's)."""
        return self.better or {"at least": "higher", "at most": "lower"}.get(self.direction)

    def files(self) -> tuple[str, ...]:
        """The results files the claim reads: the file of `ours` (a path) and `sources` (which a
        tolerance computed from the records may read besides it)."""
        if isinstance(self.ours, str):
            return tuple(dict.fromkeys((self.ours.split(":", 1)[0], *self.sources)))
        return tuple(self.sources)


# %% book/record.md
def read_key_path(record, path: str):
    """record's value at "a/b/0/model=SGP/c": keys, list positions, or the row with field=value."""
    value = record
    for step in [s for s in path.split("/") if s]:
        if isinstance(value, list):
            if "=" in step:
                field, want = step.split("=", 1)
                hits = [
                    row for row in value if isinstance(row, dict) and str(row.get(field)) == want
                ]
                if len(hits) != 1:
                    raise KeyError(
                        f"{path!r}: {len(hits)} rows with {field} = {want!r}, expected one"
                    )
                value = hits[0]
            else:
                value = value[int(step)]
        else:
            if step not in value:
                raise KeyError(f"{path!r}: no key {step!r} (there are {sorted(value)[:12]})")
            value = value[step]
    return value


def _format_tolerance(claim: Claim, tol: float | None) -> str:
    t = claim.compared_with()
    if t is None or claim.ours is None or tol is None:
        return ""
    d = claim.digits
    if claim.direction == "two-sided":
        return f"{_format_value(t, d)} ± {_format_value(tol, d)}"
    bound = t - tol if claim.direction == "at least" else t + tol
    return ("≥ " if claim.direction == "at least" else "≤ ") + _format_value(bound, d)


# %% book/record.md
def judge(claim: Claim, ours: float, tol: float) -> tuple[str, str | None]:
    """(status, finding) of our value against the claim with tolerance tol; the finding is
    "better than the paper" for a value beyond the tolerance on the paper's better side."""
    t = claim.compared_with()
    within = (
        np.isfinite(ours)
        and {
            "two-sided": abs(ours - t) <= tol,
            "at least": ours >= t - tol,
            "at most": ours <= t + tol,
        }[claim.direction]
    )
    side = claim.better_side()
    beyond = np.isfinite(ours) and (
        (side == "higher" and ours > t + tol) or (side == "lower" and ours < t - tol)
    )
    finding = "better than the paper" if beyond and not within else None
    if within and not claim.unreliable:
        return ("reproduced with changes" if claim.changes else "reproduced"), finding
    return "not reproduced", finding


# %% book/record.md
def evaluate(claim: Claim, root=None) -> dict:
    """The record of one claim: its fields, our value and the status computed from results/.

    Raises FileNotFoundError if a results file the claim names is missing.
    """
    files = claim.files()
    records = {}
    # root: a folder holding results/ (a checkout); default, the committed results (results_root)
    base = (results_root() or Path("results")) if root is None else None
    for rel in files:
        path = Path(root) / rel if root is not None else base / rel.removeprefix("results/")
        if not path.is_file():
            raise FileNotFoundError(
                f"claim {claim.paper} / {claim.where} / {claim.item}: results file "
                f"{rel} is missing (the command in its chapter makes it)"
            )
        records[rel] = json.loads(path.read_text())
    ours = tol = finding = None
    status = "not run"
    if claim.ours is not None:
        if isinstance(claim.ours, str):
            rel, key = claim.ours.split(":", 1)
            ours = read_key_path(records[rel], key)
        else:
            ours = claim.ours(records)
        ours = float(ours)
        tol = float(claim.tolerance(records) if callable(claim.tolerance) else claim.tolerance)
        if not (np.isfinite(tol) and tol >= 0):
            raise ValueError(
                f"claim {claim.paper} / {claim.where} / {claim.item}: its tolerance from the "
                f"results files is {tol}, not a finite number >= 0"
            )
        status, finding = judge(claim, ours, tol)
    reduced = sorted(rel for rel, rec in records.items() if rec.get("reduced"))
    # runs recorded as "-dirty" before runs kept their diff: the code they ran is not known exactly
    unknown_code = sorted(rel for rel, rec in records.items() if rec.get("git_diff_note"))
    t = claim.compared_with()
    gap = None if ours is None or not tol or t is None else (ours - t) / tol
    return {
        "paper": claim.paper,
        "where": claim.where,
        "item": claim.item,
        "quantity": claim.quantity,
        "paper_value": claim.paper_value,
        "paper_error": claim.paper_error,
        "ours": ours,
        "tolerance": _format_tolerance(claim, tol),
        "tolerance_value": tol,
        "tolerance_basis": claim.tolerance_basis,
        "gap": gap,
        "status": status,
        "finding": finding,
        "expect": claim.expect,
        "source": list(files),
        "reduced": reduced,
        "unknown_code": unknown_code,
        "section": claim.section,
        "note": claim.note,
        "changes": claim.changes,
        "rate": None if claim.rate is None or ours is None else list(claim.rate(records)),
        "digits": claim.digits,
    }


def check_claims(claims, root=None) -> list[dict]:
    """Evaluate `claims`; raise AssertionError listing each claim whose status is not as stated."""
    records = [evaluate(c, root) for c in claims]
    wrong = [
        f"{r['paper']} / {r['where']} / {r['item']}: {r['status']} (ours {r['ours']}, "
        f"tolerance {r['tolerance']}), the book states {r['expect']}"
        for r in records
        if r["status"] != r["expect"]
    ]
    if wrong:
        raise AssertionError("claims whose status changed:\n  " + "\n  ".join(wrong))
    return records


# %% book/record.md
def all_claims() -> list[Claim]:
    """Every chapter's CLAIMS, in the book's order of papers."""
    import importlib

    import lib

    claims = []
    for module in lib.MODULES:
        claims += list(getattr(importlib.import_module(f"lib.{module}"), "CLAIMS", []))
    return sorted(claims, key=lambda c: PAPERS.index(c.paper))


def scorecard(root=None, papers=None) -> list[dict]:
    """The records of every claim (of `papers`, default all), each with its computed status."""
    return [evaluate(c, root) for c in all_claims() if papers is None or c.paper in papers]


def scorecard_counts(records) -> dict:
    """{paper: {status: count}} over `records` (every status present, zeros included)."""
    counts = {
        p: dict.fromkeys(STATUSES, 0) for p in PAPERS if any(r["paper"] == p for r in records)
    }
    for r in records:
        counts[r["paper"]][r["status"]] += 1
    return counts


def _format_value(value, digits: int = 4) -> str:
    """A number for the tables: thousands grouped, 2 decimals from 1 up, `digits` significant
    below."""
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if not np.isfinite(value) or value == 0:
        return f"{value:g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.{digits}g}"


def _paper_cell(r: dict) -> str:
    text = _format_value(r["paper_value"], r["digits"])
    if r["paper_error"] is not None:
        text += f" ± {_format_value(r['paper_error'], r['digits'])}"
    return text


FOOTNOTE = (
    "* rests on a reduced run (its results file lists the deviations); † rests on a run made "
    "from a checkout with uncommitted changes before runs kept their diff (the code is not known "
    "exactly)."
)


# %% book/record.md
def _ours_html(r: dict) -> str:
    ours = _format_value(r["ours"], r["digits"])
    if r.get("rate"):
        k, n, which = r["rate"]
        ours += f"<br><small>{k} of {n} runs {html.escape(which)}</small>"
    if r["reduced"]:
        ours += (
            f'<sup title="rests on a reduced run: {html.escape(", ".join(r["reduced"]))}">*</sup>'
        )
    if r["unknown_code"]:
        code = html.escape(", ".join(r["unknown_code"]))
        ours += f'<sup title="a run of uncommitted, unrecorded code: {code}">†</sup>'
    return ours


def _evidence_html(r: dict, page: str) -> str:
    chapter, _, label = r["section"].partition("#")
    link = ""
    if chapter:
        target = ("" if chapter == page else f"{chapter}.html") + (f"#{label}" if label else "")
        mark = " §" if label else ""
        link = f'<a href="{html.escape(target)}">{html.escape(chapter)}{mark}</a> '
    evidence = link + html.escape(r["note"])
    if r.get("changes"):
        evidence += " <em>Changed:</em> " + html.escape(r["changes"])
    if r.get("tolerance_basis"):
        evidence += " <em>Tolerance:</em> " + html.escape(r["tolerance_basis"])
    return evidence


# %% book/record.md
class ScorecardTable:
    """Records of `evaluate` as a table: HTML in a notebook (links to evidence), text elsewhere."""

    def __init__(self, records, page: str = ""):
        self.records, self.page = list(records), page

    def summary(self) -> str:
        """One line per paper: its records counted by status."""
        lines = []
        for paper, c in scorecard_counts(self.records).items():
            lines.append(f"{paper}: " + ", ".join(f"{c[s]} {s}" for s in STATUSES))
        return "; ".join(lines)

    def __repr__(self) -> str:
        head = ("paper", "where", "item", "paper value", "ours", "tolerance", "status")
        rows = [head] + [
            (
                r["paper"],
                r["where"],
                r["item"],
                _paper_cell(r),
                _format_value(r["ours"], r["digits"])
                + ("*" if r["reduced"] else "")
                + ("†" if r["unknown_code"] else ""),
                r["tolerance"],
                r["status"] + (" (better)" if r.get("finding") else ""),
            )
            for r in self.records
        ]
        rows = [tuple(str(x)[:40] for x in row) for row in rows]
        width = [max(len(row[i]) for row in rows) for i in range(len(head))]
        text = ["  ".join(x.ljust(w) for x, w in zip(row, width)).rstrip() for row in rows]
        return "\n".join(text + [FOOTNOTE, self.summary()])

    def _repr_html_(self) -> str:
        colour = {
            "reproduced": "#1a7f37",
            "reproduced with changes": "#9a6700",
            "not reproduced": "#cf222e",
            "not run": "#6e7781",
        }
        heads = ("Where", "Item", "Quantity", "Paper", "Ours", "Tolerance", "Status", "Evidence")
        out = ['<table class="scorecard"><thead><tr>']
        out += [f"<th>{h}</th>" for h in heads] + ["</tr></thead><tbody>"]
        for r in self.records:
            ours, evidence = _ours_html(r), _evidence_html(r, self.page)
            status = r["status"] + ("<br>(better than the paper)" if r.get("finding") else "")
            sources = html.escape(", ".join(r["source"]))
            out.append(
                f"<tr><td>{html.escape(r['where'])}</td><td>{html.escape(r['item'])}</td>"
                f"<td>{html.escape(r['quantity'])}</td><td>{html.escape(_paper_cell(r))}</td>"
                f'<td title="{sources}">{ours}</td><td>{html.escape(r["tolerance"])}</td>'
                f'<td style="color:{colour[r["status"]]};font-weight:bold">{status}</td>'
                f"<td>{evidence}</td></tr>"
            )
        out.append(
            f"</tbody></table><p><em>{html.escape(self.summary())}.</em> "
            f"{html.escape(FOOTNOTE)}</p>"
        )
        return "".join(out)


# %% book/record.md
def scorecard_main(argv: list[str]) -> int:
    """`python -m lib scorecard [--json] [--paper NAME]`: every claim's status, from results/."""
    parser = argparse.ArgumentParser(
        prog="python -m lib scorecard",
        description="The reproduction record: every claim of the book and its status.",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of the records")
    parser.add_argument(
        "--paper", action="append", choices=PAPERS, help="only these papers (repeatable)"
    )
    args = parser.parse_args(argv)
    records = scorecard(papers=args.paper)
    if args.json:
        print(json.dumps(records, indent=1, default=float))
    else:
        print(repr(ScorecardTable(records)))
    return 0


# %% book/record.md
__all__ = [
    "experiment",
    "run_experiment",
    "EXPERIMENTS",
    "load_results",
    "require_results",
    "results_root",
    "provenance",
    "Claim",
    "Paired",
    "paired_difference",
    "PAIRED_Z",
    "TOLERANCE_Z",
    "judge",
    "scorecard",
    "DIRECTIONS",
    "Experiment",
    "FOOTNOTE",
    "PAPERS",
    "SELECTORS",
    "STATUSES",
    "ScorecardTable",
    "Table",
    "all_claims",
    "check_claims",
    "check_settings",
    "compare_to_preset",
    "default_results_dir",
    "device_name",
    "evaluate",
    "experiment_list",
    "glue",
    "main",
    "project_root",
    "read_key_path",
    "run_kind",
    "run_mnist_softmax",
    "run_unit",
    "scorecard_counts",
    "scorecard_main",
    "where_run",
]
