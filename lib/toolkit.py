# GENERATED FILE: do not edit. Source: book/toolkit.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The book's toolkit, derived in book/toolkit.md (Appendix B).

Argument contracts (`checks`), the training loop `fit` (NaN/Inf stop, checkpoints, resume,
progress reports, data parallelism), Flax NNX steps, seeding, presets, the experiment registry
and `python -m lib`, results files and their provenance, and the reproduction record (claims
and the scorecard).
"""

# %% book/toolkit.md
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
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
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx


# %% book/toolkit.md
def known_deadlock(version: str | None = None, cores: int | None = None) -> str | None:
    """Why this jax may hang on this machine (None if no known reason): jax < 0.11 on a machine of
    at most two cores (jax 0.10.2 deadlocks there in concurrent batched triangular solves)."""
    version = jax.__version__ if version is None else version
    cores = (os.cpu_count() or 1) if cores is None else cores
    major_minor = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if major_minor < (0, 11) and cores <= 2:
        return (
            f"jax {version} on a machine with {cores} core(s): jax 0.10.2 (and, untested, older "
            "releases) can deadlock here when batched triangular solves run concurrently, as in "
            "the deep-GP chapter. Use Python >= 3.12 with jax >= 0.11 (pip install 'jax>=0.11')."
        )
    return None


if known_deadlock() is not None:
    import warnings

    warnings.warn(known_deadlock(), RuntimeWarning, stacklevel=2)


# %% book/toolkit.md
def set_lapack_threads(threads: int = 1) -> list[str]:
    """Run the LAPACK that JAX calls on the CPU (scipy's own OpenBLAS) on `threads` threads.

    Returns the paths of the libraries changed: [] when scipy has no BLAS of its own (then set
    OPENBLAS_NUM_THREADS or MKL_NUM_THREADS before Python starts) or threadpoolctl is missing.
    Called with 1 when lib.toolkit is imported, unless LIB_LAPACK_THREADS says otherwise.
    """
    if not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    try:
        import scipy
        import scipy.linalg  # noqa: F401  (loads scipy's BLAS)
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return []
    home = Path(scipy.__file__).resolve().parent
    own = [
        c.filepath
        for c in ThreadpoolController().select(user_api="blas").lib_controllers
        if home in Path(c.filepath).resolve().parents
        or Path(c.filepath).resolve().parent == home.with_name("scipy.libs")
    ]
    if own:
        ThreadpoolController().select(filepath=own).limit(limits=int(threads))
    return own


def _lapack_threads_from_environment():
    value = os.environ.get("LIB_LAPACK_THREADS", "1").strip()
    if value == "keep":
        return
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"LIB_LAPACK_THREADS must be a positive number of threads or 'keep', got {value!r}"
        )
    set_lapack_threads(int(value))


_lapack_threads_from_environment()


# %% book/toolkit.md
def make_rngs(seed: int, **streams: int) -> nnx.Rngs:
    """Flax NNX random streams from one integer seed >= 0 (Appendix B, "Seeds").

    streams: extra named streams with their own offsets, e.g. make_rngs(0, dropout=1).
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {type(seed).__name__} {seed!r}")
    return nnx.Rngs(
        int(seed), **{name: int(seed) * 1_000_003 + int(off) for name, off in streams.items()}
    )


def step_key(key: jax.Array, step) -> jax.Array:
    """The key of step `step` of a loop driven by `key`: fold_in(key, step), independent of
    history."""
    return jax.random.fold_in(key, step)


# %% book/toolkit.md
def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _all_binary(values: np.ndarray) -> bool:
    """Whether every value is 0 or 1: for unsigned integers, their maximum (a binarised MNIST's
    training set: 6 ms, where np.isin takes a second)."""
    if values.dtype == np.bool_:
        return True
    if np.issubdtype(values.dtype, np.unsignedinteger):
        return int(values.max()) <= 1
    return bool(np.logical_or(values == 0, values == 1).all())


def check_array(
    x,
    name: str,
    *,
    ndim: int | None = None,
    shape: tuple | None = None,
    dtype: str | None = None,
    finite: bool = True,
    binary: bool = False,
):
    """Validate an array argument and return it as an array; raise ValueError naming `name`.

    shape: expected shape, None entries are free, e.g. (None, 784). dtype: a numpy kind,
    "floating", "integer" or "bool". finite: reject NaN/Inf. binary: values must be 0 or 1.
    """
    if not hasattr(x, "shape"):
        try:
            x = np.asarray(x)
        except Exception as err:
            raise ValueError(f"{name} must be an array, got {type(x).__name__}") from err
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if shape is not None:
        if len(shape) != x.ndim or any(s is not None and s != t for s, t in zip(shape, x.shape)):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")
    kinds = {"floating": jnp.floating, "integer": jnp.integer, "bool": jnp.bool_}
    if dtype is not None:
        if dtype not in kinds:
            raise ValueError(f"dtype must be one of {sorted(kinds)}, got {dtype!r}")
        if not jnp.issubdtype(x.dtype, kinds[dtype]):
            raise ValueError(f"{name} must have a {dtype} dtype, got {x.dtype}")
    if _is_traced(x):
        return x
    values = np.asarray(x)
    if finite and jnp.issubdtype(values.dtype, jnp.inexact) and not np.isfinite(values).all():
        bad = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(
            f"{name} must be finite, got {values[tuple(bad)]} at index {tuple(int(i) for i in bad)}"
        )
    if binary and values.size and not _all_binary(values):
        bad = np.argwhere((values != 0) & (values != 1))[0]
        raise ValueError(
            f"{name} must be binary (0 or 1), got {values[tuple(bad)]} at index "
            f"{tuple(int(i) for i in bad)}"
        )
    return x


# %% book/toolkit.md
import functools
import inspect


def _shown(value) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0:
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _refuse(name: str, expected: str, value, error=ValueError):
    raise error(f"{name} must be {expected}, got {_shown(value)}")


class Arg:
    """The contract of one argument: `check(value, name)` raises a ValueError (a TypeError for a
    value of the wrong type) naming the argument; `bad()` lists (label, value) pairs it refuses and
    `good()` returns one value it accepts."""

    expected = "a value"

    def check(self, value, name: str):
        return value

    def good(self):
        raise NotImplementedError

    def bad(self) -> list:
        return []

    def __repr__(self) -> str:
        return f"<{self.expected}>"


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_scalar_array(value) -> bool:
    """A 0-d array (jax or numpy), not a numpy scalar."""
    is_array = hasattr(value, "dtype") and not isinstance(value, np.generic)
    return is_array and getattr(value, "ndim", None) == 0


def _bounds(low, high, low_open=False, high_open=False) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high}")
    return " and ".join(parts)


class Int(Arg):
    """An integer (not a bool) in [low, high]."""

    def __init__(self, low: int | None = None, high: int | None = None):
        self.low, self.high = low, high
        bounds = _bounds(low, high)
        self.expected = "an integer" + (f" {bounds}" if bounds else "")

    def check(self, value, name):
        if _is_scalar_array(value):  # a 0-d array (a loop counter under jit)
            if not jnp.issubdtype(value.dtype, jnp.integer):
                _refuse(name, self.expected, value, TypeError)
            if _is_traced(value):
                return value
            value = value.item()
        if not _is_int(value):
            _refuse(name, self.expected, value, TypeError)
        below = self.low is not None and value < self.low
        if below or (self.high is not None and value > self.high):
            _refuse(name, self.expected, value)
        return value

    def good(self):
        return self.low if self.low is not None else (self.high if self.high is not None else 0)

    def bad(self):
        cases = [("bool", True), ("float", 1.5), ("string", "3")]
        if self.low is not None:
            cases.append(("below", self.low - 1))
        if self.high is not None:
            cases.append(("above", self.high + 1))
        return cases


class Float(Arg):
    """A real number (int or float, not a bool), finite unless finite=False, within the bounds."""

    def __init__(self, low=None, high=None, *, low_open=False, high_open=False, finite=True):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        self.finite = finite
        kind = "a finite number" if finite else "a number (not NaN)"
        bounds = _bounds(low, high, low_open, high_open)
        self.expected = kind + (f" {bounds}" if bounds else "")

    def check(self, value, name):
        if _is_traced(value):
            return value
        value_ = value.item() if _is_scalar_array(value) else value
        numbers = (int, float, np.integer, np.floating)
        if isinstance(value_, (bool, np.bool_)) or not isinstance(value_, numbers):
            _refuse(name, self.expected, value, TypeError)
        v = float(value_)
        if np.isnan(v) or (self.finite and not np.isfinite(v)):
            _refuse(name, self.expected, value)
        low_bad = self.low is not None and (v <= self.low if self.low_open else v < self.low)
        high_bad = self.high is not None and (v >= self.high if self.high_open else v > self.high)
        if low_bad or high_bad:
            _refuse(name, self.expected, value)
        return value

    def good(self):
        if self.low is not None and self.high is not None:
            return (self.low + self.high) / 2
        if self.low is not None:
            return self.low + 1.0
        return self.high - 1.0 if self.high is not None else 0.5

    def bad(self):
        cases = [("NaN", float("nan")), ("bool", True), ("string", "0.1")]
        if self.finite:
            cases.append(("Inf", float("inf")))
        if self.low is not None:
            cases.append(("below", self.low if self.low_open else self.low - 1.0))
        if self.high is not None:
            cases.append(("above", self.high if self.high_open else self.high + 1.0))
        return cases


class OneOf(Arg):
    """One of a fixed set of values (a variant's name, an estimator...)."""

    def __init__(self, *choices):
        self.choices = tuple(choices)
        self.expected = "one of " + ", ".join(repr(c) for c in self.choices)

    def check(self, value, name):
        if _is_traced(value):
            return value
        try:  # equal to a choice (np.int64(1) is 1, np.str_("a") is "a"), but True is not 1
            ok = any(
                bool(value == c) and isinstance(value, bool) == isinstance(c, bool)
                for c in self.choices
            )
        except Exception:
            ok = False
        if not ok:
            _refuse(name, self.expected, value)
        return value

    def good(self):
        return self.choices[0]

    def bad(self):
        return [("unknown", "no-such-choice"), ("number", 3)]


class Bool(Arg):
    """True or False (not 0, 1 or a string)."""

    expected = "True or False"

    def check(self, value, name):
        if not isinstance(value, (bool, np.bool_)):
            _refuse(name, self.expected, value, TypeError)
        return value

    def good(self):
        return False

    def bad(self):
        return [("int", 1), ("string", "yes")]


class Maybe(Arg):
    """None, or a value that `inner` accepts."""

    def __init__(self, inner: Arg):
        self.inner = inner
        self.expected = f"None or {inner.expected}"

    def check(self, value, name):
        if value is None:
            return value
        try:
            return self.inner.check(value, name)
        except (TypeError, ValueError) as err:
            raise type(err)(f"{err} (or None)") from None

    def good(self):
        return None

    def bad(self):
        return [(label, value) for label, value in self.inner.bad() if value is not None]


class Array(Arg):
    """An array (anything with a shape, or a nested list) that `check_array` accepts, non-empty
    unless empty=True."""

    def __init__(
        self, *, ndim=None, shape=None, dtype=None, finite=True, binary=False, empty=False
    ):
        self.kw = dict(ndim=ndim, shape=shape, dtype=dtype, finite=finite, binary=binary)
        self.empty = empty
        self.ndim = len(shape) if shape is not None else ndim
        what = "a binary array" if binary else "an array"
        if self.ndim is not None:
            what += f" with {self.ndim} dimension{'s' if self.ndim != 1 else ''}"
        self.expected = what

    def check(self, value, name):
        if isinstance(value, (str, bytes, dict)) or value is None:
            _refuse(name, self.expected, value, TypeError)
        arr = check_array(value, name, **self.kw)
        if not self.empty and not _is_traced(arr) and np.size(arr) == 0:
            raise ValueError(f"{name} must not be empty, got shape {tuple(np.shape(arr))}")
        return value

    def good(self):
        shape = self.kw["shape"] or (3,) * (self.ndim or 1)
        shape = tuple(3 if s is None else s for s in shape)
        dtype = np.int32 if self.kw["dtype"] == "integer" else np.float32
        return np.ones(shape, dtype)

    def bad(self):
        good = self.good()
        cases = [("string", "x"), ("None", None)]
        if self.ndim is not None:
            cases.append(("wrong rank", np.ones(good.shape + (2,), good.dtype)))
        if self.kw["finite"] and good.dtype.kind == "f":
            with_nan = good.copy()
            with_nan.flat[0] = np.nan
            cases.append(("NaN", with_nan))
        if self.kw["binary"]:
            cases.append(("not binary", np.full(good.shape, 0.5, np.float32)))
        if self.kw["dtype"] == "integer":
            cases.append(("float", good.astype(np.float32) + 0.5))
        if not self.empty:
            cases.append(("empty", np.ones((0,) + good.shape[1:], good.dtype)))
        return cases


class Key(Arg):
    """A JAX random key: jax.random.key(seed), or a legacy uint32 key of shape (2,)."""

    expected = "a JAX random key (jax.random.key(seed))"

    def check(self, value, name):
        dtype = getattr(value, "dtype", None)
        if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            return value
        if dtype == np.uint32 and tuple(getattr(value, "shape", ())[-1:]) == (2,):
            return value
        _refuse(name, self.expected, value, TypeError)

    def good(self):
        return jax.random.key(0)

    def bad(self):
        return [("int", 0), ("float array", np.zeros(2, np.float32))]


class Function(Arg):
    """A callable (a loss, a policy, a validation score...)."""

    expected = "a function"

    def check(self, value, name):
        if not callable(value):
            _refuse(name, self.expected, value, TypeError)
        return value

    def good(self):
        return lambda *args, **kwargs: None

    def bad(self):
        return [("string", "f"), ("number", 1)]


class Instance(Arg):
    """An instance of one of `types` (a model class, a config dataclass)."""

    def __init__(self, *types, what: str | None = None):
        self.types = types
        self.expected = what or "a " + " or ".join(t.__name__ for t in types)

    def check(self, value, name):
        if not isinstance(value, self.types):
            _refuse(name, self.expected, value, TypeError)
        return value

    def bad(self):
        return [
            (label, v)
            for label, v in (("None", None), ("string", "model"), ("number", 3))
            if not isinstance(v, self.types)
        ]


def checks(**contracts: Arg):
    """Decorator: check the named arguments of each call against their contracts (`Arg`s) before
    the function runs. The contracts are kept in `fn.__checks__` for `bad_calls`. On a class (a
    dataclass, say), it checks the arguments of its __init__."""

    def wrap(fn):
        if inspect.isclass(fn):
            fn.__init__ = wrap(fn.__init__)
            return fn
        sig = inspect.signature(fn)
        unknown = set(contracts) - set(sig.parameters)
        if unknown:
            raise TypeError(f"checks: {fn.__qualname__} has no argument {sorted(unknown)}")

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as err:
                raise TypeError(f"{fn.__qualname__}(): {err}") from None
            for name, contract in contracts.items():
                if name in bound.arguments:
                    contract.check(bound.arguments[name], name)
            return fn(*args, **kwargs)

        checked.__checks__ = dict(contracts)
        return checked

    return wrap


def bad_calls(fn, required: dict | None = None):
    """Calls of `fn` (a function or class decorated with `checks`) that its contracts must refuse:
    yields (argument, label, kwargs), one per refused value of each checked argument, the other
    arguments valid (`good()`), or taken from `required` for unchecked ones without a default."""
    target = fn.__init__ if inspect.isclass(fn) else fn
    contracts = getattr(target, "__checks__", {})
    sig = inspect.signature(target)
    params = [
        p
        for p in sig.parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    required = dict(required or {})
    for name, contract in contracts.items():
        for label, value in contract.bad():
            kwargs = {}
            for p in params:
                if p.name == name:
                    kwargs[p.name] = value
                elif p.name in required:
                    kwargs[p.name] = required[p.name]
                elif p.default is not p.empty:
                    continue
                elif p.name in contracts:
                    try:
                        kwargs[p.name] = contracts[p.name].good()
                    except NotImplementedError:
                        raise TypeError(
                            f"bad_calls: pass required={{{p.name!r}: ...}}, a valid "
                            f"{p.name} for {target.__qualname__}"
                        ) from None
                else:
                    kwargs[p.name] = None
            yield name, label, kwargs


# %% book/toolkit.md
PRESETS = ("book", "paper")
PRESET_ENV = "LIB_PRESET"


def current_preset() -> str:
    """The active preset: the environment variable LIB_PRESET, default "book"."""
    name = os.environ.get(PRESET_ENV, "book")
    if name not in PRESETS:
        raise ValueError(f"{PRESET_ENV} must be one of {PRESETS}, got {name!r}")
    return name


def preset(*, book: dict, paper: dict, name: str | None = None) -> dict:
    """The configuration of the active preset (or of `name`): a copy of `book` or `paper`.

    The two must set the same keys, so that switching presets never leaves a knob undefined.
    """
    if set(book) != set(paper):
        raise ValueError(
            "book and paper presets must set the same keys; differ in "
            f"{sorted(set(book) ^ set(paper))}"
        )
    name = current_preset() if name is None else name
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {name!r}")
    return dict(book if name == "book" else paper)


# %% book/toolkit.md
class NonFiniteError(FloatingPointError):
    """A training quantity became NaN or infinite; carries the step and the quantity's name."""

    def __init__(self, step: int, name: str, value: float, hint: str = ""):
        self.step, self.name, self.value = step, name, value
        msg = f"step {step}: {name} is {value} (not finite); training stopped."
        super().__init__(msg + (f" Hint: {hint}." if hint else ""))


@checks(step=Int(), metrics=Instance(dict))
def check_finite(step: int, metrics: dict, hint: str = "") -> None:
    """Raise NonFiniteError for the first metric of `metrics` (name -> scalar) that is NaN or
    Inf."""
    for name in sorted(metrics, key=lambda k: (k != "loss", k)):  # the loss first
        value = float(np.asarray(metrics[name]))
        if not np.isfinite(value):
            raise NonFiniteError(step, name, value, hint)


# %% book/toolkit.md
_PROGRESS: dict = {"enabled": None, "every_seconds": None}


@checks(enabled=Maybe(Bool()), every_seconds=Maybe(Float(0, low_open=True)))
def set_progress(enabled: bool | None = None, every_seconds: float | None = None) -> None:
    """Turn the progress reports of every loop on or off (None: from the environment, where
    LIB_PROGRESS=0 or TQDM_DISABLE=1 turn them off), and set the seconds between two log lines
    when the output is not a terminal (None: LIB_PROGRESS_SECONDS, default 60)."""
    _PROGRESS.update(enabled=enabled, every_seconds=every_seconds)


def progress_enabled() -> bool:
    """Whether progress reports are on (set_progress, else the environment)."""
    if _PROGRESS["enabled"] is not None:
        return _PROGRESS["enabled"]
    off = ("0", "false", "no", "off")
    wanted = os.environ.get("LIB_PROGRESS", "1").lower() not in off
    bars_off = os.environ.get("TQDM_DISABLE", "0").lower() not in off + ("",)
    return wanted and not bars_off


def _interactive() -> bool:
    """A terminal or a Jupyter kernel, where a bar can redraw itself."""
    return "ipykernel" in sys.modules or (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())


class Progress:
    """The progress of a loop of `total` steps: a tqdm bar in a terminal or notebook; otherwise a
    line on stderr every few seconds (set_progress) with the step, the metrics and the time.

    with Progress(total, "train", initial=start, enabled=progress) as report:
        ... report.update(step, {"loss": loss})
    """

    def __init__(self, total: int, desc: str, *, initial: int = 0, enabled: bool = True):
        self.total, self.desc, self.n, self.metrics = total, desc, initial, {}
        self.on = bool(enabled) and progress_enabled()
        self.began = self.last = time.perf_counter()
        self.bar = None
        if self.on and _interactive():
            import warnings

            with warnings.catch_warnings():  # tqdm.auto warns when Jupyter has no ipywidgets
                warnings.simplefilter("ignore")
                from tqdm.auto import tqdm
            self.bar = tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True)

    def update(self, n: int, metrics: dict | None = None) -> None:
        """The loop has done `n` of its `total` steps; `metrics`: the latest scalars to show."""
        self.n = n
        if metrics:
            self.metrics = {k: float(np.asarray(v)) for k, v in metrics.items()}
        if not self.on:
            return
        if self.bar is not None:
            self.bar.update(n - self.bar.n)
            shown = {k: f"{v:.4g}" for k, v in self.metrics.items()}
            self.bar.set_postfix(shown, refresh=False)
            return
        every = _PROGRESS["every_seconds"] or float(os.environ.get("LIB_PROGRESS_SECONDS", 60))
        if time.perf_counter() - self.last >= every:
            self.line()

    def line(self) -> None:
        """Write the report as one line on stderr."""
        self.last = time.perf_counter()
        elapsed = self.last - self.began
        shown = "".join(f", {k} {v:.4g}" for k, v in self.metrics.items())
        print(
            f"{self.desc}: {self.n}/{self.total}{shown}; {elapsed / 60:.1f} min",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.on:
            self.line()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# %% book/toolkit.md
@dataclasses.dataclass
class FitResult:
    """What `fit` returns: the final state, per-step metrics, and where the run started."""

    state: Any
    history: dict[str, np.ndarray]
    start_step: int
    wall_seconds: float


def _checkpoint_manager(directory, keep: int = 2):
    import orbax.checkpoint as ocp

    return ocp.CheckpointManager(
        Path(directory).resolve(), options=ocp.CheckpointManagerOptions(max_to_keep=keep)
    )


@checks(step=Int(0))
def save_checkpoint(
    directory, step: int, state, extra: dict | None = None, arrays: dict | None = None
) -> None:
    """Save `state` (a pytree), JSON-able `extra` and `arrays` (a dict of numpy arrays whose shapes
    may differ from one checkpoint to the next, e.g. a growing history) as checkpoint `step` in
    `directory`."""
    import orbax.checkpoint as ocp

    extra = json.loads(json.dumps(extra or {}, default=float))  # numpy scalars as floats
    items = {"state": ocp.args.StandardSave({"state": state}), "extra": ocp.args.JsonSave(extra)}
    if arrays is not None:
        items["arrays"] = ocp.args.StandardSave({"arrays": arrays})
    with _checkpoint_manager(directory) as mngr:
        # wrapped in a dict: orbax's StandardSave refuses a bare array as the whole tree
        mngr.save(step, args=ocp.args.Composite(**items), force=True)
        mngr.wait_until_finished()


def restore_checkpoint(directory, like) -> tuple[int, Any, dict] | None:
    """The latest checkpoint in `directory` as (step, state, extra), or None if there is none.

    like: a pytree with the structure, shapes and dtypes of the saved state (e.g. the initial
    state). Saved `arrays` come back as extra["arrays"] (numpy, with their saved shapes).
    """
    import orbax.checkpoint as ocp

    if not Path(directory).exists():
        return None
    with _checkpoint_manager(directory) as mngr:
        step = mngr.latest_step()
        if step is None:
            return None
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, {"state": like})
        items = {"state": ocp.args.StandardRestore(abstract), "extra": ocp.args.JsonRestore()}
        has_arrays = (Path(directory).resolve() / str(step) / "arrays").exists()
        if has_arrays:
            items["arrays"] = ocp.args.StandardRestore()
        out = mngr.restore(step, args=ocp.args.Composite(**items))
    extra = dict(out.extra or {})
    if has_arrays:
        extra["arrays"] = jax.tree.map(np.asarray, out.arrays["arrays"])
    return step, out.state["state"], extra


def tree_digest(tree) -> str:
    """SHA-256 of the leaves of a pytree (their dtypes, shapes and bytes): equal digests,
    bit-identical trees."""
    import hashlib

    h = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(tree)):
        a = np.ascontiguousarray(leaf)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


_RUNS: list = []  # the experiment runs in progress, innermost last (see run_unit)


def note_restored(checkpoint_dir, step: int) -> None:
    """For trainers: record in the current experiment run (if any) that `checkpoint_dir` was
    restored at `step`."""
    if _RUNS:
        run = _RUNS[-1]
        try:  # named by its unit, and its sub-folder if any
            parts = (
                Path(checkpoint_dir)
                .resolve()
                .relative_to(run.directory.resolve() / "checkpoints")
                .parts
            )
            label = "/".join([run.names.get(parts[0], parts[0]), *parts[1:]])
        except ValueError:
            label = str(checkpoint_dir)
        run.restored[label] = int(step)


# %% book/toolkit.md
import types


class FlatStep:
    """`step(state, batch, key) -> (state, metrics)` jitted over the list of the state's leaves.

    Call it as `leaves, metrics = flat(leaves, batch, key)`, with `leaves = flat.flatten(state)`;
    `flat.unflatten(leaves)` rebuilds the state. `flat.at(leaves, batch, key, t)` is the call with
    the key `step_key(key, t)`, derived inside the compiled step (one dispatch per step instead of
    two: an eager `fold_in` costs more than a small step's whole call). jit_options go to `jax.jit`
    (e.g. `compiler_options`, `out_shardings`, which then apply to the list). The step must return a
    state of the same structure as it was given.
    """

    def __init__(self, step: Callable, state, **jit_options):
        self.treedef = jax.tree.structure(state)

        def flat_step(leaves, batch, key):
            new, metrics = step(jax.tree.unflatten(self.treedef, leaves), batch, key)
            new_leaves, treedef = jax.tree.flatten(new)
            if treedef != self.treedef:
                raise ValueError(
                    "the step changed the structure of the "
                    f"state:\n{self.treedef}\nbecame\n{treedef}"
                )
            return new_leaves, metrics

        options = {k: v for k, v in jit_options.items() if v is not None}
        self.jitted = jax.jit(flat_step, **options)
        self.jitted_at = jax.jit(
            lambda leaves, batch, key, t: flat_step(leaves, batch, step_key(key, t)), **options
        )

    def flatten(self, state) -> list:
        return jax.tree.leaves(state)

    def unflatten(self, leaves):
        return jax.tree.unflatten(self.treedef, leaves)

    def __call__(self, leaves, batch, key):
        return self.jitted(leaves, batch, key)

    def at(self, leaves, batch, key, t: int):
        return self.jitted_at(leaves, batch, key, t)


def _flat_step_for(step: Callable, state, jit_options: dict) -> FlatStep:
    """The FlatStep of `step` for this state's structure and these options, made once per step
    function: a training that calls `fit` chunk by chunk (validating in between) compiles its step
    once, not once per chunk. Kept on the function object (a function or a functools.partial), so
    it lives as long as the step does; other callables get a new FlatStep each call."""
    if not isinstance(step, (types.FunctionType, functools.partial)):
        return FlatStep(step, state, **jit_options)  # (a bound method's attributes are shared)
    key = (
        jax.tree.structure(state),
        tuple(sorted((k, repr(v)) for k, v in jit_options.items() if v is not None)),
    )
    made = step.__dict__.setdefault("_flat_steps", {})
    if key not in made:
        made[key] = FlatStep(step, state, **jit_options)
    return made[key]


@checks(
    step=Function(),
    data=Function(),
    num_steps=Int(1),
    key=Key(),
    log_every=Int(1),
    checkpoint_every=Maybe(Int(1)),
    progress=Bool(),
    first_step=Int(0),
    stop_after=Maybe(Int(0)),
)
def fit(
    step: Callable,
    state,
    data: Callable[[int], Any],
    num_steps: int,
    *,
    key: jax.Array,
    log_every: int = 100,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    desc: str = "train",
    progress: bool = True,
    first_step: int = 0,
    stop_after: int | None = None,
    hint: str = "lower the learning rate, or check the data and the initialisation",
    mesh: jax.sharding.Mesh | str | None = "auto",
    compiler_options: dict | None = None,
) -> FitResult:
    """Run `num_steps` of `state, metrics = step(state, data(t), fold_in(key, t))` (Appendix B).

    step: pure function (state pytree, batch, key) -> (state, dict of scalar metrics); jitted here.
    data: t -> batch of step t. Metrics are fetched every `log_every` steps and checked for NaN/Inf
    (NonFiniteError names the first bad step). With `checkpoint_dir`, the state is saved every
    `checkpoint_every` steps (a multiple of log_every; default: log_every) and at the end, and a
    later call resumes from the latest checkpoint between `first_step` and the end of the call.
    `first_step`: the step `state` is at (to train in chunks, e.g. evaluating between calls).
    `stop_after`: end the call at step first_step + stop_after (a chunk, or an interruption in a
    test), without a final checkpoint.
    mesh: data parallelism (see `data_mesh`): the state is replicated on the mesh's devices and
    every leaf of the batch split along its first axis. "auto": all devices when there are several
    and the batch divides among them (else one device, with a warning); None: the default device. A
    batch of the same array objects as the previous step's (full-batch training) is placed once.
    compiler_options: XLA options for compiling the step (`jax.jit(..., compiler_options=)`).
    The step runs over the state's leaves (`FlatStep`), compiled once per step function and state
    structure, however many calls train with it (as jax.jit: a step whose closure changes between
    calls must be a new function).
    """
    if not isinstance(num_steps, (int, np.integer)) or num_steps < 0:
        raise ValueError(f"num_steps must be a non-negative integer, got {num_steps!r}")
    if log_every < 1:
        raise ValueError(f"log_every must be at least 1, got {log_every}")
    checkpoint_every = checkpoint_every or log_every
    if checkpoint_dir is not None and checkpoint_every % log_every:
        raise ValueError(
            f"checkpoint_every ({checkpoint_every}) must be a multiple of log_every ({log_every})"
        )
    history: dict[str, list] = {}
    start = int(first_step)
    end = num_steps if stop_after is None else min(num_steps, start + stop_after)
    if checkpoint_dir is not None:
        restored = restore_checkpoint(checkpoint_dir, state)
        if restored is not None:
            if start < restored[0] <= end:
                start, state, extra = restored
                history = {k: list(v) for k, v in extra.get("history", {}).items()}
                note_restored(checkpoint_dir, start)
    feed, jit_options = data, {"compiler_options": compiler_options}
    mesh = _resolve_mesh(mesh, lambda: data(start) if start < end else None)
    if mesh is not None:
        everywhere = replicated(mesh)
        state, key = jax.device_put((state, key), everywhere)
        feed, jit_options["out_shardings"] = _placed_feed(data, mesh), (everywhere, everywhere)
    jitted = _flat_step_for(step, state, jit_options)
    leaves = jitted.flatten(state)
    began = time.perf_counter()
    pending: list = []
    t = start

    def flush():
        if not pending:
            return {}
        host = jax.device_get([m for _, m in pending])
        for (s, _), m in zip(pending, host):
            check_finite(s, m, hint)
            for name, value in m.items():
                history.setdefault(name, []).append(float(value))
            history.setdefault("step", []).append(s)
        pending.clear()
        return host[-1]

    with Progress(num_steps, desc, initial=start, enabled=progress) as report:
        while t < end:
            leaves, metrics = jitted.at(leaves, feed(t), key, t)
            pending.append((t, metrics))
            t += 1
            if t % log_every == 0 or t == end:
                report.update(t, flush())
                if checkpoint_dir is not None and (t % checkpoint_every == 0 or t == num_steps):
                    save_checkpoint(
                        checkpoint_dir, t, jitted.unflatten(leaves), {"history": history}
                    )
    state = jax.block_until_ready(jitted.unflatten(leaves))
    return FitResult(
        state, {k: np.asarray(v) for k, v in history.items()}, start, time.perf_counter() - began
    )


# %% book/toolkit.md
@checks(batch_size=Int(1), key=Key(), stream=Bool())
def minibatches(
    arrays, batch_size: int, *, key: jax.Array, stream: bool = False
) -> Callable[[int], Any]:
    """data(t) for `fit`: minibatch t of `arrays` (a pytree of arrays with a common first axis).

    Each epoch is a fresh permutation drawn from fold_in(key, epoch); the last incomplete batch of
    an epoch is dropped so every batch has `batch_size` rows (one compiled shape).
    stream: leave `arrays` where they are (numpy arrays, or np.memmap files larger than memory) and
    gather each batch on the host, its rows in increasing order (one pass over the file); `fit` then
    moves the batch to the device(s). The epoch's permutation is then drawn on the host by numpy,
    in place (4 bytes per row below 2^31 rows): other batches than the device version's, equally
    a function of (key, t). Otherwise the arrays are copied to device memory once.
    """
    leaves = jax.tree.leaves(arrays)
    if not leaves:
        raise ValueError("arrays must hold at least one array")
    n = leaves[0].shape[0]
    if any(a.shape[0] != n for a in leaves):
        raise ValueError(
            f"arrays must share their first dimension, got {[a.shape[0] for a in leaves]}"
        )
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in 1..{n} (the number of examples), got {batch_size}")
    per_epoch = n // batch_size
    if stream:
        orders = {}

        def host_batch(t: int):
            epoch = t // per_epoch
            if epoch not in orders:
                orders.clear()
                order = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
                seed = (
                    np.asarray(jax.random.key_data(jax.random.fold_in(key, epoch))).ravel().tolist()
                )
                np.random.default_rng(seed).shuffle(order)
                orders[epoch] = order
            position = t % per_epoch
            idx = np.sort(orders[epoch][position * batch_size : (position + 1) * batch_size])
            return jax.tree.map(lambda a: np.asarray(a[idx]), arrays)

        return host_batch
    arrays = jax.tree.map(jnp.asarray, arrays)
    permutation = jax.jit(lambda epoch: jax.random.permutation(jax.random.fold_in(key, epoch), n))

    @jax.jit
    def take(order, position):
        idx = jax.lax.dynamic_slice_in_dim(order, position * batch_size, batch_size)
        return jax.tree.map(lambda a: a[idx], arrays)

    cache = {}  # the permutation of the current epoch, drawn once per epoch

    def data(t: int):
        epoch = t // per_epoch
        if epoch not in cache:
            cache.clear()
            cache[epoch] = permutation(epoch)
        return take(cache[epoch], t % per_epoch)

    return data


# %% book/toolkit.md
class TrainState(NamedTuple):
    """The pytree `fit` carries for an NNX model: parameters, other variables, optimizer state."""

    params: Any
    rest: Any
    opt_state: Any


@checks(model=Instance(nnx.Module))
def nnx_train_state(model: nnx.Module, tx: optax.GradientTransformation):
    """Split `model` into (graphdef, TrainState) for `fit`; the optimizer sees only nnx.Param."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return graphdef, TrainState(params, rest, tx.init(params))


def nnx_model(graphdef, state: TrainState) -> nnx.Module:
    """The NNX module held in a TrainState."""
    return nnx.merge(graphdef, state.params, state.rest)


def _global_norm(tree) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(tree)))


@checks(loss_fn=Function())
def nnx_step(graphdef, tx: optax.GradientTransformation, loss_fn: Callable) -> Callable:
    """A `fit` step for an NNX model: gradient of loss_fn(model, batch, key) -> (loss, metrics
    dict).

    The step returns metrics {"loss": loss, **metrics, "grad_norm": global gradient norm}.
    """

    def step(state: TrainState, batch, key):
        def loss_of(params):
            model = nnx.merge(graphdef, params, state.rest)
            loss, metrics = loss_fn(model, batch, key)
            _, _, rest = nnx.split(model, nnx.Param, ...)
            return loss, (metrics, rest)

        (loss, (metrics, rest)), grads = jax.value_and_grad(loss_of, has_aux=True)(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return TrainState(params, rest, opt_state), {
            "loss": loss,
            **metrics,
            "grad_norm": _global_norm(grads),
        }

    return step


# %% book/toolkit.md
def data_mesh(devices=None) -> jax.sharding.Mesh:
    """A one-axis mesh named "data" over `devices` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("data_mesh needs at least one device")
    return jax.sharding.Mesh(np.asarray(devices), ("data",))


def replicated(mesh: jax.sharding.Mesh) -> jax.sharding.NamedSharding:
    """The sharding that puts a whole copy of an array on every device of `mesh`."""
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


def shard_batch(batch, mesh: jax.sharding.Mesh):
    """Place every leaf of `batch` on `mesh`, split along its first axis (which the device count
    must divide).

    Host arrays (numpy, np.memmap) are sliced per device, so a device's rows are the only ones read;
    device arrays are moved (a no-op if already placed so).
    """
    n = mesh.devices.size
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))

    def place(a):
        if np.ndim(a) == 0 or np.shape(a)[0] % n:
            raise ValueError(
                f"a batch leaf of shape {np.shape(a)} cannot be split over {n} devices: the first "
                f"dimension must be a multiple of {n}; change the batch size, or train with "
                "mesh=None"
            )
        if isinstance(a, jax.Array):
            return jax.device_put(a, sharding)
        return jax.make_array_from_callback(
            np.shape(a), sharding, lambda index: np.asarray(a[index])
        )

    return jax.tree.map(place, batch)


def _placed_feed(data: Callable[[int], Any], mesh: jax.sharding.Mesh) -> Callable[[int], Any]:
    """data(t) placed on `mesh` by shard_batch; a batch made of the same array objects as the
    previous step's (full-batch training) is placed once and reused. A data function that changes an
    array in place between steps must return a new array instead."""
    last: list = [None, None]

    def feed(t: int):
        batch = data(t)
        leaves = jax.tree.leaves(batch)
        if (
            last[0] is None
            or len(leaves) != len(last[0])
            or any(a is not b for a, b in zip(leaves, last[0]))
        ):
            last[:] = [leaves, shard_batch(batch, mesh)]
        return last[1]

    return feed


def _resolve_mesh(mesh, first_batch: Callable):
    """fit's `mesh` argument: a Mesh, None, or "auto" (all devices if there are several and the
    batch divides).

    first_batch: () -> the first batch (or None), called only to check the "auto" case on several
    devices.
    """
    if mesh is None or isinstance(mesh, jax.sharding.Mesh):
        return mesh
    if mesh != "auto":
        raise ValueError(f"mesh must be a jax.sharding.Mesh, None or 'auto', got {mesh!r}")
    example_batch = first_batch() if jax.device_count() > 1 else None
    if example_batch is None:
        return None
    n = jax.device_count()
    sizes = {np.shape(a)[0] if np.ndim(a) else 0 for a in jax.tree.leaves(example_batch)}
    if any(size == 0 or size % n for size in sizes):
        import warnings

        warnings.warn(
            f"fit: batch first dimensions {sorted(sizes)} do not divide among {n} devices; "
            "training on one device",
            stacklevel=3,
        )
        return None
    return data_mesh()


# %% book/toolkit.md
class SoftmaxRegression(nnx.Module):
    """p(y | x) = softmax(W x + b): the toolkit's example model (Appendix B)."""

    @checks(n_in=Int(1), n_classes=Int(2))
    def __init__(self, n_in: int, n_classes: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(n_in, n_classes, kernel_init=nnx.initializers.zeros, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear(x)


def softmax_loss(model: SoftmaxRegression, batch, key):
    """Mean cross-entropy of a batch (x (B, D) float, y (B,) int) and its accuracy."""
    x, y = batch
    logits = model(x)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    return loss, {"accuracy": (logits.argmax(-1) == y).mean()}


@checks(split=OneOf("train", "test"))
def mnist_arrays(split: str, data_dir=None):
    """MNIST as (x float32 (n, 784) in [0, 1], y int32 (n,)) for the example."""
    from lib.data import load_mnist

    images, labels = load_mnist(split, data_dir)
    return images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.int32)


# %% book/toolkit.md
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


# %% book/toolkit.md
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
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(config))
    if unknown:
        raise ValueError(f"experiment {name}: unknown settings {unknown}; it has {sorted(config)}")
    check_settings(name, exp.presets, overrides, exp.lists)
    config.update(overrides)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    origin = provenance()  # taken before the run: the code that runs is the code of this commit
    stem = f"{name}.{part}" if part else name
    run = _open_run(
        Path(results_dir) / ".checkpoints" / exp.chapter / stem,
        preset,
        config,
        origin,
        fresh=not resume,
    )
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
        import html

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


# %% book/toolkit.md
class _Run:
    """The checkpoint folder of one `run_experiment` call (see `run_unit`)."""

    def __init__(self, directory: Path, previous: dict | None):
        self.directory, self.previous = directory, previous
        self.reused: list[str] = []
        self.restored: dict[str, int] = {}
        self.names: dict[str, str] = {}  # unit folder -> unit name

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
    run.names[checkpoint_dir.name] = name
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


# %% book/toolkit.md
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


# %% book/toolkit.md
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
            note_restored(checkpoint_dir, done)
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


# %% book/toolkit.md
STATUSES = ("reproduced", "not reproduced", "not run")
DIRECTIONS = ("two-sided", "at least", "at most")
PAPERS = ("darn", "partition", "ebp", "nram", "dgp")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One cell of a paper's table or figure, or one claim of its text, and how the book checks it.

    paper: one of PAPERS; where: "Table 2", "Figure 1", "Sec. 4"; item: the row ("nh = 500");
    quantity: what is compared, with its unit. paper_value: the paper's number, or its words for a
    claim of its text; paper_error: its reported uncertainty. ours: where our number comes from,
    "results/<chapter>/<file>.json:<key>/<key>/..." (a list is indexed by position, or by
    `field=value` for the row whose field has that value) or a function of the loaded records
    {path: record} of `sources`; None: not run. target: the number ours is compared with (default:
    paper_value); tolerance and direction: reproduced iff |ours - target| <= tolerance
    ("two-sided"), ours >= target - tolerance ("at least") or ours <= target + tolerance
    ("at most"). expect: the status the book states. section: the chapter's section with the
    evidence, as "chapter#label"; note: why (the reason for "not run" and "not reproduced").
    """

    paper: str
    where: str
    item: str
    quantity: str
    paper_value: float | str | None
    ours: str | Callable[[dict], float] | None = None
    sources: tuple[str, ...] = ()
    target: float | None = None
    tolerance: float = 0.0
    direction: str = "two-sided"
    paper_error: float | None = None
    expect: str = "reproduced"
    section: str = ""
    note: str = ""
    digits: int = 4

    def __post_init__(self):
        if self.paper not in PAPERS:
            raise ValueError(f"Claim.paper must be one of {PAPERS}, got {self.paper!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"Claim.direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.expect not in STATUSES:
            raise ValueError(f"Claim.expect must be one of {STATUSES}, got {self.expect!r}")
        if not (
            isinstance(self.tolerance, (int, float))
            and np.isfinite(self.tolerance)
            and self.tolerance >= 0
        ):
            raise ValueError(
                f"Claim.tolerance must be a finite number >= 0, got {self.tolerance!r}"
            )
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
        if self.expect != "reproduced" and not self.note:
            raise ValueError(
                f"claim {self.item!r} ({self.where}) expects {self.expect!r}: say why in `note`"
            )
        if self.ours is not None and self.compared_with() is None:
            raise ValueError(f"claim {self.item!r}: paper_value is not a number, so give `target`")

    def compared_with(self) -> float | None:
        if self.target is not None:
            return float(self.target)
        return float(self.paper_value) if isinstance(self.paper_value, (int, float)) else None

    def files(self) -> tuple[str, ...]:
        if isinstance(self.ours, str):
            return (self.ours.split(":", 1)[0],)
        return tuple(self.sources)


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


def _format_tolerance(claim: Claim) -> str:
    t = claim.compared_with()
    if t is None or claim.ours is None:
        return ""
    tol, d = claim.tolerance, claim.digits
    if claim.direction == "two-sided":
        return f"{_format_value(t, d)} ± {_format_value(tol, d)}"
    bound = t - tol if claim.direction == "at least" else t + tol
    return ("≥ " if claim.direction == "at least" else "≤ ") + _format_value(bound, d)


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
    ours = None
    if claim.ours is None:
        status = "not run"
    else:
        if isinstance(claim.ours, str):
            rel, key = claim.ours.split(":", 1)
            ours = read_key_path(records[rel], key)
        else:
            ours = claim.ours(records)
        ours = float(ours)
        t, tol = claim.compared_with(), claim.tolerance
        ok = {
            "two-sided": abs(ours - t) <= tol,
            "at least": ours >= t - tol,
            "at most": ours <= t + tol,
        }[claim.direction]
        status = "reproduced" if (np.isfinite(ours) and ok) else "not reproduced"
    reduced = sorted(rel for rel, rec in records.items() if rec.get("reduced"))
    # runs recorded as "-dirty" before runs kept their diff: the code they ran is not known exactly
    unknown_code = sorted(rel for rel, rec in records.items() if rec.get("git_diff_note"))
    return {
        "paper": claim.paper,
        "where": claim.where,
        "item": claim.item,
        "quantity": claim.quantity,
        "paper_value": claim.paper_value,
        "paper_error": claim.paper_error,
        "ours": ours,
        "tolerance": _format_tolerance(claim),
        "status": status,
        "expect": claim.expect,
        "source": list(files),
        "reduced": reduced,
        "unknown_code": unknown_code,
        "section": claim.section,
        "note": claim.note,
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


class ScorecardTable:
    """Records of `evaluate` as a table: HTML in a notebook (links to evidence), text elsewhere."""

    def __init__(self, records, page: str = ""):
        self.records, self.page = list(records), page

    def summary(self) -> str:
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
                r["status"],
            )
            for r in self.records
        ]
        rows = [tuple(str(x)[:40] for x in row) for row in rows]
        width = [max(len(row[i]) for row in rows) for i in range(len(head))]
        text = ["  ".join(x.ljust(w) for x, w in zip(row, width)).rstrip() for row in rows]
        return "\n".join(text + [FOOTNOTE, self.summary()])

    def _repr_html_(self) -> str:
        import html

        colour = {"reproduced": "#1a7f37", "not reproduced": "#cf222e", "not run": "#6e7781"}
        out = [
            '<table class="scorecard"><thead><tr>'
            + "".join(
                f"<th>{h}</th>"
                for h in (
                    "Where",
                    "Item",
                    "Quantity",
                    "Paper",
                    "Ours",
                    "Tolerance",
                    "Status",
                    "Evidence",
                )
            )
            + "</tr></thead><tbody>"
        ]
        for r in self.records:
            ours = _format_value(r["ours"], r["digits"])
            if r["reduced"]:
                ours += (
                    '<sup title="rests on a reduced run: '
                    + html.escape(", ".join(r["reduced"]))
                    + '">*</sup>'
                )
            if r["unknown_code"]:
                ours += (
                    '<sup title="a run of uncommitted, unrecorded code: '
                    + html.escape(", ".join(r["unknown_code"]))
                    + '">†</sup>'
                )
            chapter, _, label = r["section"].partition("#")
            link = ""
            if chapter:
                target = ("" if chapter == self.page else f"{chapter}.html") + (
                    f"#{label}" if label else ""
                )
                mark = " §" if label else ""
                link = f'<a href="{html.escape(target)}">{html.escape(chapter)}{mark}</a> '
            evidence = link + html.escape(r["note"])
            sources = html.escape(", ".join(r["source"]))
            out.append(
                f"<tr><td>{html.escape(r['where'])}</td><td>{html.escape(r['item'])}</td>"
                f"<td>{html.escape(r['quantity'])}</td><td>{html.escape(_paper_cell(r))}</td>"
                f'<td title="{sources}">{ours}</td><td>{html.escape(r["tolerance"])}</td>'
                f'<td style="color:{colour[r["status"]]};font-weight:bold">{r["status"]}</td>'
                f"<td>{evidence}</td></tr>"
            )
        out.append(
            f"</tbody></table><p><em>{html.escape(self.summary())}.</em> "
            f"{html.escape(FOOTNOTE)}</p>"
        )
        return "".join(out)


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


# %% book/toolkit.md
__all__ = [
    "fit",
    "FitResult",
    "TrainState",
    "FlatStep",
    "nnx_train_state",
    "nnx_step",
    "nnx_model",
    "minibatches",
    "make_rngs",
    "step_key",
    "check_finite",
    "NonFiniteError",
    "save_checkpoint",
    "restore_checkpoint",
    "Progress",
    "set_progress",
    "progress_enabled",
    "data_mesh",
    "shard_batch",
    "replicated",
    "checks",
    "Arg",
    "Array",
    "Bool",
    "Float",
    "Int",
    "Key",
    "Function",
    "Instance",
    "Maybe",
    "OneOf",
    "check_array",
    "bad_calls",
    "experiment",
    "run_experiment",
    "EXPERIMENTS",
    "preset",
    "current_preset",
    "load_results",
    "require_results",
    "results_root",
    "provenance",
    "Claim",
    "scorecard",
    "set_lapack_threads",
    "known_deadlock",
    "tree_digest",
]
