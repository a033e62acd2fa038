# GENERATED FILE: do not edit. Source: book/toolkit.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The book's toolkit, derived in book/toolkit.md (Appendix B).

Argument contracts (`checks`), the training loop `fit` (NaN/Inf stop, checkpoints, resume,
progress reports, data parallelism), Flax NNX steps, seeding and presets. The experiment registry,
`python -m lib`, results files and the scorecard are lib.record (Appendix B, part 2), which this
module does not import.
"""

# %% book/toolkit.md
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import sys
import time
import warnings
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
def add_to_class(cls: type):
    """Decorator of a class body: its methods (functions, properties, static and class methods)
    become `cls`'s own, so that a long class can be written over several cells (d2l's
    add_to_class, for a group of methods). A name `cls` itself defines raises TypeError; names an
    earlier add_to_class added may be replaced. Returns the body unchanged."""

    def add(body: type) -> type:
        names = [  # dunder methods (__call__) too, not what every class has (__dict__)
            n
            for n, v in vars(body).items()
            if not (n.startswith("__") and n.endswith("__")) or inspect.isfunction(v)
        ]
        added = set(vars(cls).get("_added_to_class", ()))
        clash = [n for n in names if n in vars(cls) and n not in added]
        if clash:
            raise TypeError(f"add_to_class: {cls.__name__} already defines {', '.join(clash)}")
        for name in names:
            member = vars(body)[name]
            inner = member.fget if isinstance(member, property) else member
            inner = getattr(inner, "__func__", inner)  # staticmethod, classmethod
            if hasattr(inner, "__qualname__"):
                inner.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, member)
        cls._added_to_class = frozenset(added | set(names))
        return body

    return add


# %% book/toolkit.md
class _ConstructorSignature:
    """`__signature__` of a class: its __init__'s parameters without self. Read on an instance it
    is absent, so that inspect.signature(instance) stays its __call__'s."""

    def __get__(self, obj, cls):
        if obj is not None:
            raise AttributeError("__signature__")
        sig = inspect.signature(cls.__init__)
        params = list(sig.parameters.values())[1:]
        return sig.replace(parameters=params, return_annotation=inspect.Signature.empty)


def constructor_signatures(namespace: dict) -> list[str]:
    """Give each class defined in `namespace` (a module's globals()) whose metaclass hides its
    constructor's parameters (Flax NNX modules and variables) the signature of its __init__, for
    inspect.signature and help(); returns the names of the classes it fixed."""
    fixed = []
    for name, value in list(namespace.items()):
        own = isinstance(value, type) and value.__module__ == namespace.get("__name__")
        if not own or type(value).__call__ is type.__call__:  # a plain class shows its own
            continue
        value.__signature__ = _ConstructorSignature()
        fixed.append(name)
    return fixed


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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("check", "good", "bad"):  # an override states what Arg's method states
            method = cls.__dict__.get(name)
            if method is not None and not method.__doc__:
                method.__doc__ = getattr(Arg, name).__doc__

    def check(self, value, name: str):
        """`value` if it keeps the contract, else a ValueError (TypeError) naming `name`."""
        return value

    def good(self):
        """One value that keeps the contract (for the generated bad-call tests)."""
        raise NotImplementedError

    def bad(self) -> list:
        """(label, value) pairs that break the contract, each refused by `check`."""
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


# %% book/toolkit.md
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


# %% book/toolkit.md
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


# %% book/toolkit.md
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


# %% book/toolkit.md
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


# %% book/toolkit.md
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
def seed_key(seed) -> jax.Array:
    """The JAX key of a trainer's `seed`: jax.random.key(seed) for an integer >= 0; a key is used
    as it is."""
    dtype = getattr(seed, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return seed
    if dtype == np.uint32 and tuple(getattr(seed, "shape", ())) == (2,):
        return seed  # a legacy raw key
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(
            f"seed must be an integer >= 0 or a JAX key, got {type(seed).__name__} {seed!r}"
        )
    return jax.random.key(int(seed))


class History(dict):
    """What a trainer logged, as Keras's `fit(...).history`: a dict from each quantity's name to a
    1-D numpy array of its values (one per logged step, pass or evaluation; a quantity logged at
    evaluations has its own `*step` or `epoch` array beside it). What is not a series is an
    attribute (e.g. `best_step`); `vars(history)` lists them."""

    def __init__(self, series=(), /, **extras):
        super().__init__((name, np.asarray(values)) for name, values in dict(series).items())
        self.__dict__.update(extras)

    def rows(self, *names: str) -> list[dict]:
        """The series `names` (default: all; they must have one length) as a list of dicts, one
        per logged step, pass or evaluation, with Python numbers."""
        names = names or tuple(self)
        lengths = {len(self[name]) for name in names}
        if len(lengths) > 1:
            raise ValueError(f"the series {names} have different lengths {sorted(lengths)}")
        return [dict(zip(names, values)) for values in zip(*(self[n].tolist() for n in names))]

    def __missing__(self, name: str):
        if name in vars(self):  # trainers kept such values among the series before
            warnings.warn(
                f"history[{name!r}] is deprecated: use history.{name}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(self, name)
        raise KeyError(name)

    def __repr__(self) -> str:
        series = ", ".join(f"{name!r}: {len(v) if v.ndim else v}" for name, v in self.items())
        extras = ", ".join(vars(self))
        return f"History({{{series}}}" + (f"; attributes {extras})" if extras else ")")


class Trained(NamedTuple):
    """What every trainer of lib returns: `model, history = train_...(...)`. `model` is a new
    object (the model passed in is not changed); `history` is a `History`."""

    model: Any
    history: History

    def __getattr__(self, name: str):
        """The fields of the results that trainers returned before (`.controller`, `.state`,
        `.evals`, ...), with a DeprecationWarning."""
        if name.startswith("_") or name not in _OLD_FIELDS and name not in vars(self.history):
            raise AttributeError(f"'Trained' object has no attribute {name!r}")
        new = "model" if name in _OLD_FIELDS else f"history.{name}"
        warnings.warn(f"result.{name} is deprecated: use {new}", DeprecationWarning, stacklevel=2)
        return self.model if name in _OLD_FIELDS else getattr(self.history, name)


_OLD_FIELDS = ("controller", "rbm", "net")


# %% book/toolkit.md
class Seed(Arg):
    """A trainer's `seed`: an integer >= 0 or a JAX random key (see `seed_key`)."""

    expected = "an integer >= 0 or a JAX random key"

    def check(self, value, name):
        try:
            seed_key(value)
        except ValueError:
            _refuse(name, self.expected, value)
        return value

    def good(self):
        return 0

    def bad(self):
        return [("negative", -1), ("float", 0.5), ("string", "0")]


def renamed(positional: tuple[str, ...] = (), **old_to_new: str):
    """Decorator: a call may still use each old keyword name of `old_to_new` (and pass the old
    positional arguments `positional` after the function's own), with a DeprecationWarning that
    names the new keyword. The signature shows the new names only."""

    def wrap(fn):
        own = sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in inspect.signature(fn).parameters.values()
        )

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if len(args) > own:
                if len(args) > own + len(positional):
                    raise TypeError(f"{fn.__name__}() takes {own} positional arguments")
                kwargs.update(zip(positional, args[own:]))
                args = args[:own]
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {old}= (deprecated) and {new}=")
                    warnings.warn(
                        f"{fn.__name__}({old}=...) is deprecated: use {new}=",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        call.__renamed__ = dict(old_to_new)
        return call

    return wrap


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


# %% book/toolkit.md
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
        """End the report: close the bar, or print the last line."""
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


# %% book/toolkit.md
@checks(step=Int(0))
def save_checkpoint(
    directory, step: int, state, extra: dict | None = None, arrays: dict | None = None
) -> None:
    """Save `state` (a pytree), JSON-able `extra` and `arrays` (a dict of numpy arrays whose shapes
    may differ from one checkpoint to the next, e.g. a growing history) as checkpoint `step` in
    `directory`."""
    import orbax.checkpoint as ocp

    extra = json.loads(json.dumps(extra or {}, default=float))  # numpy scalars as floats
    if jax.process_count() > 1:  # orbax saves arrays of all the processes' devices only
        everywhere = replicated(data_mesh())
        state = jax.tree.map(
            lambda a: (
                put_global(a, everywhere)
                if isinstance(a, jax.Array) and a.is_fully_addressable
                else a
            ),
            state,
        )
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


# %% book/toolkit.md
def checkpoint_steps(directory) -> dict[str, int]:
    """{folder: step} of the latest checkpoint in `directory` and in each folder below it that
    holds checkpoints ("" for `directory` itself; others by their path relative to it): the steps
    that restore_checkpoint of each folder would resume from. Empty if there is none."""
    found, root = {}, Path(directory)
    if not root.is_dir():
        return found
    for folder in sorted([root, *(p for p in root.rglob("*") if p.is_dir())]):
        if any(part.isdigit() for part in folder.relative_to(root).parts):
            continue  # inside a checkpoint
        steps = [
            int(p.name)
            for p in folder.iterdir()
            if p.name.isdigit() and (p / "_CHECKPOINT_METADATA").exists()
        ]
        if steps:
            found[folder.relative_to(root).as_posix().removeprefix(".")] = max(steps)
    return found


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
        """The state's leaves, in the order the flat step takes them."""
        return jax.tree.leaves(state)

    def unflatten(self, leaves):
        """The state of `leaves` (the inverse of flatten)."""
        return jax.tree.unflatten(self.treedef, leaves)

    def __call__(self, leaves, batch, key):
        return self.jitted(leaves, batch, key)

    def at(self, leaves, batch, key, t: int):
        """One step on flat leaves, with the step's key derived from `key` and `t` inside."""
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


# %% book/toolkit.md
def _fit_checks(num_steps, log_every: int, checkpoint_dir, checkpoint_every) -> int:
    """fit's checkpoint interval (default: log_every), after refusing arguments that cannot run."""
    if not isinstance(num_steps, (int, np.integer)) or num_steps < 0:
        raise ValueError(f"num_steps must be a non-negative integer, got {num_steps!r}")
    if log_every < 1:
        raise ValueError(f"log_every must be at least 1, got {log_every}")
    checkpoint_every = checkpoint_every or log_every
    if checkpoint_dir is not None and checkpoint_every % log_every:
        raise ValueError(
            f"checkpoint_every ({checkpoint_every}) must be a multiple of log_every ({log_every})"
        )
    return checkpoint_every


def _fit_resume(checkpoint_dir, state, start: int, end: int) -> tuple:
    """(first step, state, history) of a fit call: those of the latest checkpoint in
    checkpoint_dir if its step lies after `start` and at most at `end`, else as given."""
    restored = None if checkpoint_dir is None else restore_checkpoint(checkpoint_dir, state)
    if restored is None or not start < restored[0] <= end:
        return start, state, {}
    step, state, extra = restored
    return step, state, {k: list(v) for k, v in extra.get("history", {}).items()}


def _flush(pending: list, history: dict, hint: str) -> dict:
    """Fetch the metrics of the (step, metrics) in `pending`, check each step's for NaN/Inf
    (NonFiniteError names the first bad step), append them to `history` and empty `pending`;
    return the last step's metrics ({} if none)."""
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


# %% book/toolkit.md
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
    checkpoint_every = _fit_checks(num_steps, log_every, checkpoint_dir, checkpoint_every)
    start = int(first_step)
    end = num_steps if stop_after is None else min(num_steps, start + stop_after)
    start, state, history = _fit_resume(checkpoint_dir, state, start, end)
    feed, jit_options = data, {"compiler_options": compiler_options}
    mesh = _resolve_mesh(mesh, lambda: data(start) if start < end else None)
    if mesh is not None:
        everywhere = replicated(mesh)
        state, key = put_global((state, key), everywhere)
        feed, jit_options["out_shardings"] = _placed_feed(data, mesh), (everywhere, everywhere)
    jitted = _flat_step_for(step, state, jit_options)
    leaves = jitted.flatten(state)
    began = time.perf_counter()
    pending: list = []
    t = start
    with Progress(num_steps, desc, initial=start, enabled=progress) as report:
        while t < end:
            leaves, metrics = jitted.at(leaves, feed(t), key, t)
            pending.append((t, metrics))
            t += 1
            if t % log_every == 0 or t == end:
                report.update(t, _flush(pending, history, hint))
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


def put_global(tree, sharding: jax.sharding.Sharding):
    """jax.device_put of `tree` onto `sharding`, also when the sharding spans several processes
    (jax.distributed): each process then gives the values of its own devices' shards from its own
    copy of the tree, which must be the same in every process."""
    if sharding.is_fully_addressable:
        return jax.device_put(tree, sharding)

    def put(a):
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            data = put(jax.random.key_data(a))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(a))
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(put, tree)


def shard_batch(batch, mesh: jax.sharding.Mesh):
    """Place every leaf of `batch` on `mesh`, split along its first axis (which the device count
    must divide).

    Host arrays (numpy, np.memmap) are sliced per device, so a device's rows are the only ones read
    (across processes too: each process reads the rows of its own devices); device arrays are
    moved (a no-op if already placed so).
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
            return put_global(a, sharding)
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


# %% book/toolkit.md
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
def full_precision(fn):
    """Decorator: `fn` runs with jax.default_matmul_precision("highest"), its matrix products in
    full float32 (on a GPU, not TF32), whatever the caller's global setting; a jitted function it
    calls is traced (and cached) under that setting."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    wrapped.__full_precision__ = True
    return wrapped


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
    "seed_key",
    "Seed",
    "History",
    "Trained",
    "renamed",
    "check_finite",
    "NonFiniteError",
    "save_checkpoint",
    "restore_checkpoint",
    "Progress",
    "set_progress",
    "progress_enabled",
    "data_mesh",
    "shard_batch",
    "put_global",
    "full_precision",
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
    "preset",
    "current_preset",
    "set_lapack_threads",
    "known_deadlock",
    "add_to_class",
    "constructor_signatures",
    "tree_digest",
    "checkpoint_steps",
    "PRESETS",
    "PRESET_ENV",
    "SoftmaxRegression",
    "softmax_loss",
    "mnist_arrays",
]
constructor_signatures(globals())  # help() and inspect.signature show __init__'s parameters


# %% book/toolkit.md
def __getattr__(name: str):
    if name.startswith("_"):  # dunders that tools probe for: never the record's
        raise AttributeError(f"module 'lib.toolkit' has no attribute {name!r}")
    import lib.record  # on demand only: lib.toolkit does not import the record

    if name in lib.record.__all__:
        import warnings

        warnings.warn(
            f"lib.toolkit.{name} moved to lib.record.{name}", DeprecationWarning, stacklevel=2
        )
        return getattr(lib.record, name)
    raise AttributeError(f"module 'lib.toolkit' has no attribute {name!r}")
