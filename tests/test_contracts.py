"""The generated bad-input suite: every call that an argument contract of a public function of `lib`
must refuse (`lib.toolkit.bad_calls`) raises a ValueError or TypeError naming the argument, within a
timeout. Plus the bad calls a user makes by mistake that contracts alone cannot see (the body's
checks)."""

import dataclasses
import functools
import importlib
import inspect
import signal

import jax
import numpy as np
import pytest
from flax import nnx

from lib.toolkit import Instance, bad_calls

MODULES = __import__("lib").MODULES  # the method modules and the reports' record modules
TIMEOUT = 30  # seconds per call: a hang fails instead of stalling the suite


def _examples():
    """A valid instance of each type that some contract asks for (built on first use)."""
    import lib.darn as D
    import lib.dgp as G
    import lib.ebp as E
    import lib.nram as N
    import lib.partition as P

    darn = D.DARN(4, 2, 3, rngs=nnx.Rngs(0))
    return {
        D.DARN: darn,
        nnx.Module: darn,
        D.Reinforce: D.Reinforce(darn, rngs=nnx.Rngs(0)),
        D.WeightNoise: D.WeightNoise(darn, n_data=10),
        E.EBPNet: E.init_ebp(jax.random.key(0), [4, 3, 1], kind="binary"),
        P.RBM: P.RBM(4, 3, rngs=nnx.Rngs(0)),
        P.Tracker: P.tracker_init(3, 0.0),
        N.NRAMSpec: N.NRAMSpec(),
        N.TrainConfig: N.TrainConfig(),
        np.random.Generator: np.random.default_rng(0),
        str: "",
        dict: {},
        G.RBF: G.RBF(2),
        G.DeepGP: G.build_dgp(
            *(np.random.default_rng(0).normal(size=(6, k)).astype(np.float32) for k in (2, 1)),
            1,
            num_inducing=3,
        ),
        G.Standardizer: G.Standardizer(*(np.zeros(1),) * 4),
    }


@functools.cache
def _by_name() -> dict:
    return dict(library_callables())


def library_callables():
    """Every function and class a module of lib defines: its public API (`__all__`) and its
    helpers, whose contracts hold as well."""
    for module_name in MODULES:
        module = importlib.import_module(f"lib.{module_name}")
        for name, obj in vars(module).items():
            if (
                not name.startswith("_")
                and callable(obj)
                and getattr(obj, "__module__", None) == module.__name__
            ):
                yield f"{module_name}.{name}", obj


def contracts_of(obj) -> dict:
    target = obj.__init__ if inspect.isclass(obj) else obj
    return getattr(target, "__checks__", {})


def cases():
    for qualname, obj in library_callables():
        for arg, contract in contracts_of(obj).items():
            for label, _ in contract.bad():
                yield pytest.param(qualname, arg, label, id=f"{qualname}:{arg}:{label}")


class _Timeout(Exception):
    pass


def _call_with_timeout(fn, kwargs):
    def alarm(signum, frame):
        raise _Timeout(f"no answer after {TIMEOUT} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIMEOUT)
    try:
        return fn(**kwargs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def examples():
    return _examples()


@pytest.mark.parametrize("qualname,arg,label", list(cases()))
def test_a_refused_value_raises_an_error_naming_the_argument(qualname, arg, label, examples):
    obj = _by_name()[qualname]
    contracts = contracts_of(obj)
    required = {}
    for name, contract in contracts.items():
        if isinstance(contract, Instance):
            required[name] = next(v for t, v in examples.items() if isinstance(v, contract.types))
    (kwargs,) = [kw for a, lab, kw in bad_calls(obj, required) if (a, lab) == (arg, label)]
    with pytest.raises((TypeError, ValueError)) as info:
        _call_with_timeout(obj, kwargs)
    assert arg in str(info.value), f"{qualname}({arg}={kwargs[arg]!r}): {info.value}"


def test_every_contract_names_a_parameter_and_the_suite_is_not_empty():
    checked = [(q, o) for q, o in library_callables() if contracts_of(o)]
    assert len(checked) >= 25
    for qualname, obj in checked:
        target = obj.__init__ if inspect.isclass(obj) else obj
        assert set(contracts_of(obj)) <= set(inspect.signature(target).parameters), qualname


def _raises_naming(arg, fn, *args, **kwargs):
    with pytest.raises((TypeError, ValueError)) as info:
        _call_with_timeout(lambda: fn(*args, **kwargs), {})
    assert arg in str(info.value), str(info.value)
    return str(info.value)


def test_checks_inside_the_function_body():
    """Bad calls that need the other arguments to be seen wrong: sizes, schedules, shapes."""
    import lib.darn as D
    import lib.ebp as E
    import lib.partition as P

    x = (np.random.default_rng(0).random((30, 6)) < 0.5).astype(np.float32)
    darn = D.DARN(6, 3, 4, rngs=nnx.Rngs(0))
    for bad in (0, -3):  # once looped forever
        _raises_naming("eval_every", D.train_darn, darn, x, steps=10, x_valid=x, eval_every=bad)
    _raises_naming("steps", D.train_darn, darn, x, steps=-1)
    _raises_naming("batch_size", D.train_darn, darn, x, steps=5, batch_size=31)
    _raises_naming("chunk", D.exact_log_prob, darn, x, chunk=3)  # once dropped codes silently
    _raises_naming(
        "enumerate_codes", D.enumerate_codes, D.DARN(8, 30, 4, rngs=nnx.Rngs(0)), x[:, :8]
    )
    _raises_naming("alpha", D.fit_mixture_of_bernoullis, x, 2, alpha=-1.0)
    _raises_naming("n_hidden", D.DARN, 6, [3, True], rngs=nnx.Rngs(0))
    _raises_naming("sizes", D.split_layers, np.zeros((2, 5)), [2, 2])

    net = E.init_ebp(jax.random.key(0), [6, 4, 1], kind="binary")
    y = np.where(x[:, 0] > 0, 1.0, -1.0)
    out = E.ebp_p(net, x)  # (30, 1) against labels (30,), as load_ebp gives them
    assert E.error_rate(out, y) == pytest.approx(
        float(np.mean(np.sign(np.asarray(out)[:, 0]) != y))
    )
    _raises_naming("y", E.error_rate, out, np.zeros(30))
    _raises_naming("y", E.error_rate, np.zeros((30, 3)), y)
    _raises_naming("kind", E.train_ebp, net, x, y, kind="ternary")
    _raises_naming("kind", E.train_ebp, net, x, y, kind="real")  # the net's are binary
    _raises_naming("learning_rate", E.train_bp, net, x, y, learning_rate=float("nan"))
    _raises_naming("batch_size", E.train_ebp, net, x, y, batch_size=64)

    rbm = P.RBM(6, 3, rngs=nnx.Rngs(0))
    for betas in ([1.0], [1.0, 0.5, 0.0], [0.0, 0.5], [0.0, 0.7, 0.3, 1.0]):  # once a wrong log Z
        _raises_naming("betas", P.ais_log_z, rbm, jax.random.key(0), betas=betas)
    _raises_naming("edges", P.ais_betas, (10, 10), (0.0, 0.6, 0.5))
    _raises_naming("n_bits", P.binary_codes, 30)  # 2^30 rows: refused, with the bound
    assert P.binary_codes(30, start=5, count=3).shape == (3, 30)
    _raises_naming("(n=30)", D.all_binary, 30)
    _raises_naming(
        "learning_rate", P.train_sml_pt, rbm, x, steps=10, learning_rate=float("nan"), track=False
    )


def test_a_diverging_ebp_pass_stops_naming_the_pass_and_the_quantity(monkeypatch):
    import lib.ebp as E
    from lib.toolkit import NonFiniteError

    x = np.random.default_rng(0).normal(size=(40, 5)).astype(np.float32)
    y = np.where(x[:, 0] > 0, 1.0, -1.0)
    net = E.init_ebp(jax.random.key(0), [5, 4, 1], kind="real")
    passes, original = [], E._scan_dense

    def scan_then_break_the_second_pass(*args):  # a NaN in an output bias after pass 2
        out = original(*args)
        passes.append(1)
        if len(passes) == 2:
            biases = (out.biases[0], out.biases[1].at[0].set(np.nan))
            out = dataclasses.replace(out, biases=biases)
        return out

    monkeypatch.setattr(E, "_scan_dense", scan_then_break_the_second_pass)
    with pytest.raises(NonFiniteError, match=r"step 2: biases\[1\] is nan"):
        E.train_bp(net, x, y, seed=0, learning_rate=0.1, epochs=3, batch_size=10)
    assert len(passes) == 2  # stopped at once, not after the last pass


def test_the_data_layer_refuses_bad_paths_and_leaves_no_folders_behind(tmp_path):
    import lib.data as Data

    _raises_naming("split", Data.load_uci, "bostonHousing", True, data_dir=tmp_path)
    _raises_naming("data_dir", Data.data_home, "")
    _raises_naming("data_dir", Data.data_home, 3)
    for outside in ("../../x", "/etc/passwd", "a/../../x"):
        _raises_naming(
            "relpath", Data.fetch, "x", outside, "http://127.0.0.1:9/x", data_dir=tmp_path
        )
    with pytest.raises(Data.DatasetNotFoundError):  # nothing listens on port 9 of the loopback
        Data.fetch("x", "a/b/c.txt", "http://127.0.0.1:9/c.txt", data_dir=tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_python_m_lib_writes_where_the_chapters_read(monkeypatch, tmp_path):
    import lib.record as R

    root = R.project_root()
    assert R.default_results_dir() == root / "results"
    monkeypatch.chdir(tmp_path)  # from another folder, still the checkout's results/
    assert R.default_results_dir() == root / "results"


def test_the_toolkit_chapters_stored_table_of_contracts_is_current():
    """book/toolkit.ipynb stores a table of these contracts that nbval compares with a fresh run:
    recomputed here from that cell's own code, so that a change to a contract fails the unit tests
    with the fix to make (re-execute the chapter) instead of failing nbval later."""
    import json
    from pathlib import Path

    def text(lines):  # a notebook stores text as one string or as a list of lines
        return "".join(lines) if isinstance(lines, list) else lines

    root = Path(__file__).resolve().parent.parent
    cells = json.loads((root / "book" / "toolkit.ipynb").read_text())["cells"]
    (cell,) = [c for c in cells if "def contract_counts" in text(c.get("source", ""))]
    shown = {}
    scope = {"inspect": inspect, "Table": lambda rows, caption: shown.update(rows=rows)}
    source = text(cell["source"]).replace("from lib.record import Table\n", "")  # the fake above
    exec(compile(source, "toolkit.ipynb: contract_counts", "exec"), scope)
    stored = next(o for o in cell["outputs"] if o["output_type"] == "execute_result")
    lines = text(stored["data"]["text/plain"]).splitlines()[2:]  # caption, header, then rows
    table = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in lines}
    fresh = {r["module"]: [v for k, v in r.items() if k != "module"] for r in shown["rows"]}
    assert table == fresh, "re-execute the toolkit chapter: make execute CHAPTER=toolkit"
