"""lib.toolkit: input checks, presets, the training loop (NaN stop, resume), NNX steps,
experiments."""

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import lib.record as R
import lib.toolkit as T


# ---------------------------------------------------------------- input checks


def test_check_array_accepts_good_input():
    x = np.zeros((4, 3), np.float32)
    assert T.check_array(x, "x", ndim=2, shape=(None, 3), dtype="floating", binary=True) is x
    for x in (np.eye(3, dtype=np.uint8), np.eye(3, dtype=bool), np.eye(3, dtype=np.int8)):
        assert T.check_array(x, "x", binary=True) is x


@pytest.mark.parametrize(
    "kwargs, x, message",
    [
        ({"ndim": 2}, np.zeros(3), "x must have 2 dimensions, got shape (3,)"),
        ({"shape": (None, 4)}, np.zeros((2, 3)), "x must have shape (*, 4), got (2, 3)"),
        ({"dtype": "integer"}, np.zeros(2), "x must have a integer dtype, got float64"),
        ({}, np.array([1.0, np.inf]), "x must be finite, got inf at index (1,)"),
        ({"binary": True}, np.array([0, 2]), "x must be binary (0 or 1), got 2 at index (1,)"),
        (
            {"binary": True},
            np.array([[0, 1], [3, 1]], np.uint8),  # unsigned: checked by the maximum
            "x must be binary (0 or 1), got 3 at index (1, 0)",
        ),
        (
            {"binary": True},
            np.array([0.0, -1.0]),
            "x must be binary (0 or 1), got -1.0 at index (1,)",
        ),
    ],
)
def test_check_array_names_the_argument(kwargs, x, message):
    with pytest.raises(ValueError) as err:
        T.check_array(x, "x", **kwargs)
    assert str(err.value) == message


def test_check_array_under_jit_checks_shapes_only():
    f = jax.jit(lambda x: T.check_array(x, "x", shape=(2,), binary=True) * 2)
    assert (f(jnp.array([0.5, 1.0])) == jnp.array([1.0, 2.0])).all()  # values unknown when tracing
    with pytest.raises(ValueError, match="shape"):
        f(jnp.zeros(3))


# ---------------------------------------------------------------- presets and seeds


def test_preset_follows_the_environment(monkeypatch):
    monkeypatch.delenv("LIB_PRESET", raising=False)
    assert T.preset(book={"n": 1}, paper={"n": 2}) == {"n": 1}
    monkeypatch.setenv("LIB_PRESET", "paper")
    assert T.preset(book={"n": 1}, paper={"n": 2}) == {"n": 2}
    monkeypatch.setenv("LIB_PRESET", "huge")
    with pytest.raises(ValueError, match="LIB_PRESET must be one of"):
        T.preset(book={"n": 1}, paper={"n": 2})
    with pytest.raises(ValueError, match="same keys"):
        T.preset(book={"n": 1}, paper={"m": 2}, name="book")


def test_make_rngs_is_deterministic_and_checks_the_seed():
    a, b = T.make_rngs(3, dropout=1), T.make_rngs(3, dropout=1)
    assert (jax.random.key_data(a.params()) == jax.random.key_data(b.params())).all()
    assert (jax.random.key_data(a.dropout()) != jax.random.key_data(T.make_rngs(3).params())).any()
    with pytest.raises(ValueError, match="seed must be an integer"):
        T.make_rngs(1.5)


def test_add_to_class_behaves_as_one_class_body():
    """Oracle: the same methods written in one class body."""

    class Whole:
        def __init__(self, a):
            self.a = a

        def plus(self, b):
            return self.a + b

        @property
        def double(self):
            return 2 * self.a

        @staticmethod
        def const():
            return 7

        @classmethod
        def name(cls):
            return cls.__name__

        def __call__(self, x):
            return self.a * x

    class Split:
        def __init__(self, a):
            self.a = a

    @T.add_to_class(Split)
    class _Rest:
        def plus(self, b):
            return self.a + b

        @property
        def double(self):
            return 2 * self.a

        @staticmethod
        def const():
            return 7

        @classmethod
        def name(cls):
            return cls.__name__

        def __call__(self, x):
            return self.a * x

    w, s = Whole(3), Split(3)
    assert (w.plus(2), w.double, w.const(), w(5)) == (s.plus(2), s.double, s.const(), s(5))
    assert Split.name() == "Split" and Whole.name() == "Whole"
    assert {"plus", "double", "const", "name", "__call__"} <= set(vars(Split))
    assert Split.plus.__qualname__.endswith("Split.plus")
    assert Split.double.fget.__qualname__.endswith("Split.double")
    with pytest.raises(TypeError, match="Split already defines __init__"):

        @T.add_to_class(Split)
        class _Clash:
            def __init__(self, a):
                pass

    @T.add_to_class(Split)  # running the same cell again replaces what it added
    class _Again:
        def plus(self, b):
            return self.a - b

    assert Split(3).plus(2) == 1


# ---------------------------------------------------------------- the training loop


def quadratic_step(state, batch, key):
    """Gradient descent on 0.5 |w - batch|^2 plus a little noise from the key."""
    w = state
    grad = w - batch + 0.01 * jax.random.normal(key, w.shape)
    w = w - 0.1 * grad
    return w, {"loss": 0.5 * jnp.sum((w - batch) ** 2)}


def test_fit_runs_and_records_every_step():
    data = lambda t: jnp.full(3, 2.0)  # noqa: E731
    res = T.fit(
        quadratic_step,
        jnp.zeros(3),
        data,
        250,
        key=jax.random.key(0),
        log_every=100,
        progress=False,
    )
    assert np.allclose(res.state, 2.0, atol=0.05)
    assert list(res.history["step"]) == list(range(250)) and res.history["loss"].shape == (250,)
    assert res.start_step == 0


def test_fit_in_chunks_compiles_the_step_once_and_equals_one_call():
    """fit called chunk by chunk (first_step, stop_after) traces a step function once per state
    structure, and reaches the state of one uninterrupted call; a new function is traced anew."""
    traces = []

    def step(state, batch, key):
        traces.append(1)  # runs when jax traces the step, not when the compiled step runs
        new = jax.tree.map(lambda w: quadratic_step(w, batch, key)[0], state)
        return new, {"loss": sum(jnp.sum((w - batch) ** 2) for w in jax.tree.leaves(new))}

    data = lambda t: jnp.full(3, 2.0)  # noqa: E731
    kw = dict(key=jax.random.key(0), log_every=10, progress=False)
    state = jnp.zeros(3)
    for first in range(0, 60, 20):
        state = T.fit(step, state, data, 60, first_step=first, stop_after=20, **kw).state
    assert len(traces) == 1
    T.fit(step, {"w": jnp.zeros(3)}, data, 10, **kw)  # another structure
    assert len(traces) == 2
    whole = T.fit(lambda s, b, k: step(s, b, k), jnp.zeros(3), data, 60, **kw).state
    assert len(traces) == 3  # another function
    assert np.array_equal(np.asarray(state), np.asarray(whole))


def test_fit_stops_at_the_first_nonfinite_step():
    def step(w, batch, key):
        t = batch
        loss = jnp.where(t >= 37, jnp.nan, 1.0)
        return w + 1, {"loss": loss, "other": jnp.float32(0.0)}

    with pytest.raises(T.NonFiniteError) as err:
        T.fit(
            step,
            jnp.zeros(()),
            lambda t: jnp.int32(t),
            1000,
            key=jax.random.key(0),
            log_every=100,
            progress=False,
        )
    assert err.value.step == 37 and err.value.name == "loss"
    assert str(err.value).startswith("step 37: loss is nan (not finite); training stopped.")


def test_fit_checkpoints_and_resumes_bit_for_bit(tmp_path):
    key = jax.random.key(1)
    data = lambda t: jnp.sin(jnp.arange(3.0) + t)  # noqa: E731
    kw = dict(
        key=key, log_every=10, checkpoint_dir=tmp_path / "ck", checkpoint_every=40, progress=False
    )
    first = T.fit(quadratic_step, jnp.zeros(3), data, 200, stop_after=130, **kw)
    assert len(first.history["loss"]) == 130
    resumed = T.fit(quadratic_step, jnp.zeros(3), data, 200, **kw)
    assert resumed.start_step == 120  # the latest checkpoint: at most one interval of work lost
    straight = T.fit(quadratic_step, jnp.zeros(3), data, 200, key=key, log_every=10, progress=False)
    assert np.array_equal(np.asarray(resumed.state), np.asarray(straight.state))
    assert np.array_equal(resumed.history["loss"], straight.history["loss"])
    again = T.fit(quadratic_step, jnp.zeros(3), data, 200, **kw)  # already done: nothing to run
    assert again.start_step == 200 and np.array_equal(
        np.asarray(again.state), np.asarray(straight.state)
    )


def test_fit_rejects_bad_settings():
    with pytest.raises(ValueError, match="multiple of log_every"):
        T.fit(
            quadratic_step,
            jnp.zeros(3),
            lambda t: 0.0,
            10,
            key=jax.random.key(0),
            log_every=3,
            checkpoint_dir="/tmp/x",
            checkpoint_every=5,
            progress=False,
        )
    with pytest.raises(ValueError, match="num_steps"):
        T.fit(quadratic_step, jnp.zeros(3), lambda t: 0.0, -1, key=jax.random.key(0))


def test_minibatches_visit_every_example_once_per_epoch():
    x = jnp.arange(20)
    data = T.minibatches({"x": x, "y": -x}, 5, key=jax.random.key(0))
    epoch0 = np.concatenate([np.asarray(data(t)["x"]) for t in range(4)])
    epoch1 = np.concatenate([np.asarray(data(t)["x"]) for t in range(4, 8)])
    assert sorted(epoch0) == list(range(20)) == sorted(epoch1)
    assert not np.array_equal(epoch0, epoch1)
    assert np.array_equal(np.asarray(data(2)["y"]), -np.asarray(data(2)["x"]))
    assert np.array_equal(np.asarray(data(6)["x"]), epoch1[10:15])  # a function of t alone
    with pytest.raises(ValueError, match="batch_size"):
        T.minibatches(x, 21, key=jax.random.key(0))
    with pytest.raises(ValueError, match="first dimension"):
        T.minibatches((x, x[:5]), 2, key=jax.random.key(0))


def test_nnx_step_matches_finite_differences():
    model = T.SoftmaxRegression(4, 3, rngs=T.make_rngs(0))
    rng = np.random.default_rng(0)
    model.linear.kernel[...] = jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)
    x = jnp.asarray(rng.normal(size=(8, 4)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 8), jnp.int32)
    lr = 1e-3
    tx = optax.sgd(lr)
    graphdef, state = T.nnx_train_state(model, tx)
    new_state, metrics = T.nnx_step(graphdef, tx, T.softmax_loss)(state, (x, y), jax.random.key(0))
    grad = (state.params["linear"]["kernel"][...] - new_state.params["linear"]["kernel"][...]) / lr

    xs, ys = np.asarray(x, np.float64), np.asarray(y)
    bias = np.asarray(state.params["linear"]["bias"][...], np.float64)

    def loss_at(kernel):  # the mean cross-entropy in float64 numpy: an independent oracle
        logits = xs @ kernel + bias
        m = logits.max(1, keepdims=True)
        logz = (m + np.log(np.exp(logits - m).sum(1, keepdims=True)))[:, 0]
        return float(np.mean(logz - logits[np.arange(len(ys)), ys]))

    k0 = np.asarray(state.params["linear"]["kernel"][...], np.float64)
    eps = 1e-5
    for i, j in [(0, 0), (2, 1), (3, 2)]:
        kp, km = k0.copy(), k0.copy()
        kp[i, j] += eps
        km[i, j] -= eps
        fd = (loss_at(kp) - loss_at(km)) / (2 * eps)
        assert abs(fd - float(grad[i, j])) < 1e-3 * max(1.0, abs(fd)), (i, j, fd, float(grad[i, j]))
    assert abs(loss_at(k0) - float(metrics["loss"])) < 1e-5
    assert set(metrics) == {"loss", "accuracy", "grad_norm"}


def test_flat_step_equals_the_step_on_the_pytree_and_checks_the_structure():
    model = T.SoftmaxRegression(4, 3, rngs=T.make_rngs(0))
    tx = optax.adam(1e-2)
    graphdef, state = T.nnx_train_state(model, tx)
    step = T.nnx_step(graphdef, tx, T.softmax_loss)
    rng = np.random.default_rng(0)
    batch = (
        jnp.asarray(rng.normal(size=(8, 4)), jnp.float32),
        jnp.asarray(rng.integers(0, 3, 8), jnp.int32),
    )
    flat = T.FlatStep(step, state)
    leaves, tree_state = flat.flatten(state), state
    for t in range(3):
        leaves, m_flat = flat(leaves, batch, jax.random.key(t))
        tree_state, m_tree = jax.jit(step)(tree_state, batch, jax.random.key(t))
    assert jax.tree.structure(flat.unflatten(leaves)) == jax.tree.structure(state)
    for a, b in zip(jax.tree.leaves(flat.unflatten(leaves)), jax.tree.leaves(tree_state)):
        np.testing.assert_array_equal(a, b)
    assert float(m_flat["loss"]) == float(m_tree["loss"])
    changes = T.FlatStep(lambda s, b, k: ((s, s), {}), {"w": jnp.zeros(2)})
    with pytest.raises(ValueError, match="the step changed the structure of the state"):
        changes([jnp.zeros(2)], None, jax.random.key(0))


def test_flat_step_at_derives_step_key_inside_the_step_bit_for_bit():
    """flat.at(leaves, batch, key, t) (what fit calls) against the eager key step_key(key, t)
    passed to flat(...): the same numbers, for a step whose update depends on its key."""

    def noisy(state, batch, key):
        w = state["w"] + batch * jax.random.normal(key, state["w"].shape)
        return {"w": w}, {"norm": jnp.linalg.norm(w)}

    flat = T.FlatStep(noisy, {"w": jnp.zeros(5)})
    key, batch = jax.random.key(7), jnp.float32(0.5)
    at, eager = [jnp.zeros(5)], [jnp.zeros(5)]
    for t in (0, 1, 2, 1000):
        at, m_at = flat.at(at, batch, key, t)
        eager, m_eager = flat(eager, batch, T.step_key(key, t))
        np.testing.assert_array_equal(at[0], eager[0])
        assert float(m_at["norm"]) == float(m_eager["norm"])
    assert not np.array_equal(at[0], jnp.zeros(5))  # the key moved the state


# ---------------------------------------------------------------- experiments and results files


def test_run_experiment_writes_a_results_file_with_provenance(tmp_path):
    @R.experiment("test-sum", chapter="testing", book={"n": 3}, paper={"n": 1000})
    def run_sum(config):
        """Sums 0..n-1."""
        return [{"n": config["n"], "sum": sum(range(config["n"]))}]

    try:
        rec = R.run_experiment("test-sum", "paper", {"n": 4}, results_dir=tmp_path)
        saved = json.loads((tmp_path / "testing" / "test-sum.json").read_text())
        for field in (
            "command",
            "git_commit",
            "started",
            "wall_seconds",
            "device",
            "versions",
            "config",
            "rows",
        ):
            assert field in saved, field
        assert saved["rows"] == [{"n": 4, "sum": 6}] and saved["config"] == {"n": 4}
        assert (
            saved["reduced"] is True
            and saved["preset"] == "paper"
            and "--set n=4" in saved["command"]
        )
        assert saved["deviations"] == {"n": {"preset": 1000, "run": 4}} and saved["selection"] == {}
        assert "git_diff" not in saved and "git_diff_sha256" in saved
        assert (
            saved["versions"]["jax"] == jax.__version__
            and saved["device"]["platform"] == jax.devices()[0].platform
        )
        assert rec["path"].endswith("test-sum.json")
        with pytest.raises(ValueError, match="unknown settings"):
            R.run_experiment("test-sum", "book", {"m": 1}, results_dir=tmp_path)
        with pytest.raises(ValueError, match="no experiment 'nope'"):
            R.run_experiment("nope")
        piece = R.run_experiment("test-sum", "paper", {"n": 5}, results_dir=tmp_path, part="big-n")
        assert piece["path"].endswith("test-sum.big-n.json") and piece["part"] == "big-n"
        assert "--part big-n" in piece["command"]
        assert R.load_results("testing", "test-sum", tmp_path, part="big-n")["rows"] == [
            {"n": 5, "sum": 10}
        ]
        assert R.load_results("testing", "test-sum", tmp_path)["rows"] == [
            {"n": 4, "sum": 6}
        ]  # not overwritten
        with pytest.raises(ValueError, match="part must be"):
            R.run_experiment("test-sum", "paper", results_dir=tmp_path, part="../x")
    finally:
        R.EXPERIMENTS.pop("test-sum", None)


def test_git_state_is_dirty_for_changed_code_not_for_changed_results(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    (tmp_path / "results").mkdir()
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "r.json").write_text("{}\n")
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    sha = subprocess.run(
        git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert R._git_state(tmp_path) == {"git_commit": sha, "git_diff_sha256": None}
    (tmp_path / "results" / "r.json").write_text('{"rows": []}\n')  # a rerun rewrote a results file
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert R._git_state(tmp_path) == {"git_commit": sha, "git_diff_sha256": None}
    (tmp_path / "code.py").write_text("x = 2\n")
    state = R._git_state(tmp_path)
    assert state["git_commit"] == sha + "-dirty" and "+x = 2" in state["git_diff"]
    assert state["git_diff_sha256"] == hashlib.sha256(state["git_diff"].encode()).hexdigest()


def test_a_dirty_record_is_resolved_to_the_later_commit_whose_diff_it_hashed(tmp_path):
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("migrate", root / "tools" / "migrate_results.py")
    migrate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migrate)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]

    def commit(text):
        (tmp_path / "code.py").write_text(text)
        subprocess.run(git + ["add", "."], check=True)
        subprocess.run(git + ["commit", "-qm", text], check=True)
        return subprocess.run(
            git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()

    subprocess.run(git + ["init", "-q"], check=True)
    old = commit("x = 1\n")
    (tmp_path / "code.py").write_text("x = 2\n")
    state = R._git_state(tmp_path)  # a run at `old` with x = 2 not yet committed
    record = {"git_commit": state["git_commit"], "git_diff_sha256": state["git_diff_sha256"]}
    other = commit("x = 3\n")
    assert migrate.resolve_commit(record, tmp_path) == record  # no commit has that code
    new = commit("x = 2\n")
    assert migrate.resolve_commit(record, tmp_path) == {
        "git_commit": new,
        "git_diff_sha256": None,
        "git_commit_resolved": {"from": old + "-dirty", "diff_sha256": record["git_diff_sha256"]},
    }
    assert new != other
    clean = {"git_commit": new, "git_diff_sha256": None}
    assert migrate.resolve_commit(clean, tmp_path) == clean
    # a clean run that resumed one begun at the dirty tree: the first commit is resolved too
    first = {"first_commit": old + "-dirty", "first_diff_sha256": record["git_diff_sha256"]}
    resumed = {**clean, "resumed": {**first, "units_reused": ["a"]}}
    assert migrate.resolve_commit(resumed, tmp_path) == {
        **clean,
        "resumed": {
            "first_commit": new,
            "first_diff_sha256": None,
            "units_reused": ["a"],
            "first_commit_resolved": {
                "from": old + "-dirty",
                "diff_sha256": first["first_diff_sha256"],
            },
        },
    }
    unknown = {**clean, "resumed": {"first_commit": old + "-dirty", "first_diff_sha256": None}}
    assert migrate.resolve_commit(unknown, tmp_path) == unknown  # no hash: nothing to resolve


def test_compare_to_preset_tells_a_part_from_a_reduced_run():
    preset = {
        "datasets": ["a", "b"],
        "splits": "all",
        "models": ["SGP", "DGP 2"],
        "steps": 10,
        "seed": 0,
        "schedules": [[0.01, 1e3], [0.001, 1e5]],
    }
    picked = {
        "datasets": ["b"],
        "splits": [3],
        "models": ["DGP 2"],
        "seed": 4,
        "schedules": [[0.001, 100000]],
    }
    assert R.compare_to_preset(preset, dict(preset, **picked)) == (picked, {})
    reduced = dict(preset, steps=5, models=["SGP 9"])
    reduced.pop("seed")
    assert R.compare_to_preset(preset, reduced) == (
        {},
        {
            "models": {"preset": ["SGP", "DGP 2"], "run": ["SGP 9"]},
            "seed": {"preset": 0, "run": "absent"},
            "steps": {"preset": 10, "run": 5},
        },
    )


def test_python_m_lib_lists_and_reports_errors():
    out = subprocess.run([sys.executable, "-m", "lib"], capture_output=True, text=True)
    assert out.returncode == 0 and "toolkit-mnist-softmax" in out.stdout and "paper" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 100  # readable at 100 columns
    for name, exp in R.EXPERIMENTS.items():  # every experiment, with its whole description
        assert name in out.stdout
        assert " ".join(exp.description.split()[-3:]) in " ".join(out.stdout.split()), name
    helped = subprocess.run([sys.executable, "-m", "lib", "--help"], capture_output=True, text=True)
    text = " ".join(helped.stdout.split())
    assert "book (the default)" in text and "--quiet" in text, helped.stdout
    bad = subprocess.run([sys.executable, "-m", "lib", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no experiment 'nope'" in bad.stderr
    for setting, expected in (
        ("steps=-5", "steps must be an integer >= 1"),
        ("steps=abc", 'got "abc"'),
        ("seed=1.5", "seed must be an integer >= 0"),
    ):
        bad = subprocess.run(
            [sys.executable, "-m", "lib", "toolkit-mnist-softmax", "--set", setting],
            capture_output=True,
            text=True,
        )  # refused before anything runs or is written
        assert bad.returncode == 2 and expected in bad.stderr, bad.stderr


def test_every_committed_results_record_has_settings_the_cli_accepts():
    """Each results file's configuration passes check_settings, so its recorded command reruns."""
    import importlib

    import lib

    for module in lib.MODULES:
        importlib.import_module(f"lib.{module}")
    checked = 0
    root = Path(__file__).resolve().parent.parent
    for path in sorted((root / "results").glob("*/*.json")):
        record = json.loads(path.read_text())
        exp = R.EXPERIMENTS.get(record.get("experiment"))
        if exp is None or record.get("preset") not in exp.presets:
            continue
        preset = exp.presets[record["preset"]]
        config = {k: v for k, v in record["config"].items() if k in preset}
        try:
            R.check_settings(record["experiment"], exp.presets, config, exp.lists)
        except ValueError as err:
            raise AssertionError(f"{path.relative_to(root)}: {err}") from None
        checked += 1
    assert checked >= 90  # all but the benchmarks


def test_the_paper_scale_queue_is_valid(tmp_path):
    """tools/queue.json: registered experiments, settings the CLI accepts, no part twice."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("queue_tool", root / "tools" / "run_queue.py")
    queue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(queue)
    entries = queue.load_queue()
    assert len({e["part"] for e in entries}) == len(entries) > 0
    done = [e for e in entries if queue.results_file(e).exists()]
    assert all(queue.results_file(e).parent.name == e["chapter"] for e in entries)
    assert len(queue.pending(entries)) == len(entries) - len(done)
    stale = [e["part"] for e in done if queue.handoff_file(e).exists()]
    assert not stale, f"finished parts whose handoff is still committed: {stale}"
    bad = json.loads((root / "tools" / "queue.json").read_text())[:1]
    bad[0]["set"] = {"no_such_setting": 1}
    (tmp_path / "queue.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="has no"):
        queue.load_queue(tmp_path / "queue.json")


def test_a_parts_checkpoints_cross_sessions_in_its_handoff_file(tmp_path):
    """--stow packs the latest step of each unit with the run's records; unstow puts them back,
    never over a checkpoint folder that is there, and refuses a tarball that writes elsewhere."""
    import importlib.util
    import tarfile

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("queue_tool", root / "tools" / "run_queue.py")
    queue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(queue)
    entry = {"experiment": "nram-hard", "part": "x", "chapter": "nram"}
    assert queue.stow(entry, tmp_path) is None  # nothing to pack
    folder = queue.checkpoint_dir(entry, tmp_path)
    files = {
        "run.json": "{}",
        "units/a.json": "[]",
        "checkpoints/u/1000/state/d": "old",
        "checkpoints/u/2000/state/d": "new",
        "checkpoints/u/2000/extra/metadata": "{}",
        "checkpoints/v/500/state/d": "only",
        # a unit with a folder per kind of checkpoint (train_darn's validated/ and steps/)
        "checkpoints/w/steps/300/state/d": "old",
        "checkpoints/w/steps/400/state/d": "new",
        "checkpoints/w/validated/300/state/d": "new",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    packed = queue.stow(entry, tmp_path)
    assert packed == tmp_path / "results/.handoff/nram/nram-hard.x.tgz"
    shutil.rmtree(tmp_path / "results" / ".checkpoints")
    assert queue.unstow(entry, tmp_path)
    back = {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }
    assert back == {k: v for k, v in files.items() if v != "old"}
    (folder / "run.json").write_text('{"later": 1}')
    assert not queue.unstow(entry, tmp_path)  # this session's folder stays
    assert (folder / "run.json").read_text() == '{"later": 1}'
    shutil.rmtree(tmp_path / "results" / ".checkpoints")
    (tmp_path / "evil").write_text("x")
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(tmp_path / "evil", arcname="lib/evil")
    with pytest.raises(ValueError, match="outside"):
        queue.unstow(entry, tmp_path)
    assert not (tmp_path / "lib").exists()


def test_legacy_parts_run_again_with_the_command_their_record_states(tmp_path):
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("queue_tool", root / "tools" / "run_queue.py")
    queue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(queue)
    text = (
        'python -m lib nram-search --preset paper --set space={"registers": [2, 3], "repeats":'
        " [2]} --set count=8 --set ard=false --part few"
    )
    entry = {
        "experiment": "nram-search",
        "set": {"space": {"registers": [2, 3], "repeats": [2]}, "count": 8, "ard": False},
        "preset": "paper",
        "part": "few",
    }
    assert queue.split_command(text) == entry
    assert "python " + " ".join(queue.command(entry)[1:]) == text  # the same command again
    assert queue.split_command("python -m lib nram --set task=swap")["set"] == {"task": "swap"}
    for bad in ("python -m lib", "python -m lib a b", "python -m lib a --fresh"):
        with pytest.raises(ValueError):
            queue.split_command(bad)
    (tmp_path / "results" / "nram").mkdir(parents=True)
    legacy = {"command": text, "git_diff_note": "not known", "rows": []}
    (tmp_path / "results" / "nram" / "nram-search.few.json").write_text(json.dumps(legacy))
    clean = {**legacy, "git_diff_note": None, "command": text.replace("few", "clean")}
    (tmp_path / "results" / "nram" / "nram-search.clean.json").write_text(json.dumps(clean))
    assert queue.legacy(tmp_path) == [{**entry, "chapter": "nram"}]
    filled = {**legacy, "migrated": {"by": "tools/migrate_results.py", "filled": {"seeds": [0]}}}
    (tmp_path / "results" / "nram" / "nram-search.few.json").write_text(json.dumps(filled))
    again = {**entry, "set": {**entry["set"], "seeds": [0]}, "chapter": "nram"}
    assert queue.legacy(tmp_path) == [again]  # the settings added since, at the record's values
    (tmp_path / "results" / "nram" / "nram-search.elsewhere.json").write_text(json.dumps(legacy))
    with pytest.raises(ValueError, match="writes"):
        queue.legacy(tmp_path)


def test_settings_are_checked_against_the_presets_types_and_ranges():
    presets = {
        "book": {
            "steps": 100,
            "seed": 0,
            "lr": 0.01,
            "splits": [0],
            "names": ["a"],
            "flag": False,
            "seeds": None,
            "space": {"h": [8]},
        },
        "paper": {
            "steps": 1000,
            "seed": 0,
            "lr": 0.001,
            "splits": "all",
            "names": ["a", "b"],
            "flag": True,
            "seeds": [0, 1],
            "space": {"h": [8, 16]},
        },
    }
    good = {
        "steps": 5,
        "seed": 3,
        "lr": 1,
        "splits": [2, 3],
        "names": ["c"],
        "flag": True,
        "seeds": None,
        "space": {"h": [4]},
    }
    for key, value in good.items():
        R.check_settings("x", presets, {key: value})
    R.check_settings("x", presets, {"names": [], "splits": []})  # a part may run none of a grid
    R.check_settings("x", presets, {"steps": [5, 6]}, lists=("steps",))  # widths of layers, say
    for value in ([0], [], [5, 2.5]):
        with pytest.raises(ValueError, match="or a non-empty list of such"):
            R.check_settings("x", presets, {"steps": value}, lists=("steps",))
    with pytest.raises(ValueError, match="must be an integer"):
        R.check_settings("x", presets, {"steps": [5]})  # a list only where the experiment says
    with pytest.raises(ValueError, match=r"lists names settings it lacks: \['width'\]"):
        R.experiment("x", chapter="t", book={"steps": 1}, paper={"steps": 2}, lists=("width",))
    bad = {
        "steps": [0, -5, True, 2.5, "abc", None],
        "seed": [-1, 1.5],
        "lr": [0, -0.1, float("nan"), "x"],
        "splits": ["some", [1.5], 3],
        "names": ["a", [1]],
        "flag": [1, "yes"],
        "seeds": [[0.5]],
        "space": [[8]],
    }
    for key, values in bad.items():
        for value in values:
            with pytest.raises(ValueError, match=f"setting {key} must be"):
                R.check_settings("x", presets, {key: value})


@pytest.mark.slow
def test_python_m_lib_runs_an_experiment(tmp_path, data_dir):
    cmd = [
        sys.executable,
        "-m",
        "lib",
        "toolkit-mnist-softmax",
        "--preset",
        "book",
        "--set",
        "steps=20",
        "--results-dir",
        str(tmp_path),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rec = json.loads((tmp_path / "toolkit" / "toolkit-mnist-softmax.json").read_text())
    assert rec["reduced"] and rec["config"]["steps"] == 20 and len(rec["rows"]) == 10
    assert 0.5 < rec["rows"][-1]["test_accuracy"] <= 1.0


# ---------------------------------------------------------------- several devices

MESH_SCRIPT = r"""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import jax, numpy as np, optax
jax.config.update("jax_enable_x64", True)
from flax import nnx
from lib.toolkit import fit, minibatches, nnx_step, nnx_train_state
from lib.toolkit import data_mesh, replicated, shard_batch, step_key
from lib.dgp import build_dgp
from lib.darn import DARN, darn_loss
assert jax.device_count() == 4, jax.devices()
rng = np.random.default_rng(0)
x = rng.normal(size=(512, 3)); y = np.sin(x.sum(1, keepdims=True)) + 0.1 * rng.normal(size=(512, 1))
bits = (rng.random((512, 12)) < 0.3).astype(np.float32)

def dgp():
    model = build_dgp(x, y, 2, num_inducing=16)
    return model, (x, y), lambda m, b, k: (-m.elbo(b[0], b[1], k, 1) / 512, {})

def darn():
    return DARN(12, 5, 8, rngs=nnx.Rngs(0)), bits, darn_loss

worst = {}
for name, make in (("dgp", dgp), ("darn", darn)):
    runs = []
    for devices in (jax.devices()[:1], None):
        model, arrays, loss = make()
        tx = optax.adam(0.01)
        graphdef, state = nnx_train_state(model, tx)
        step = nnx_step(graphdef, tx, loss)
        data = minibatches(arrays, 128, key=jax.random.key(1))
        runs.append(fit(step, state, data, 20, key=jax.random.key(2), log_every=5, progress=False,
                        mesh=data_mesh(devices)))
    one, four = runs
    assert len(one.history["loss"]) == 20
    leaf = jax.tree.leaves(four.state.params)[0]
    assert len(leaf.sharding.device_set) == 4 and leaf.sharding.is_fully_replicated, leaf.sharding
    worst[name + "_loss"] = float(np.max(np.abs(one.history["loss"] - four.history["loss"])))
    gap = lambda a, b: float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
    diffs = jax.tree.map(gap, one.state.params, four.state.params)
    worst[name + "_params"] = max(jax.tree.leaves(diffs))
    # the compiled step splits the batch: each device computes on its rows and the gradients
    # are all-reduced
    mesh = data_mesh()
    key = jax.device_put(step_key(jax.random.key(2), 0), replicated(mesh))
    state_on = jax.device_put(state, replicated(mesh))
    lowered = jax.jit(step).lower(state_on, shard_batch(data(0), mesh), key)
    hlo = lowered.compile().as_text()
    worst[name + "_allreduce"] = "all-reduce" in hlo
# mesh="auto": all four devices when the batch divides among them, else one device and a warning
import warnings
import jax.numpy as jnp
count = lambda s, b, k: (s + b.sum(), {"loss": b.sum()})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    quiet = dict(key=jax.random.key(0), progress=False, log_every=1)
    odd = fit(count, jnp.zeros(()), lambda t: np.ones(6), 2, **quiet)
    even = fit(count, jnp.zeros(()), lambda t: np.ones(8), 2, **quiet)
warned = ["do not divide among 4 devices" in str(w.message) for w in caught]
worst["auto_fallback_warned"] = sum(warned)
worst["auto_devices"] = [len(odd.state.sharding.device_set), len(even.state.sharding.device_set)]
worst["auto_sums"] = [float(odd.state), float(even.state)]
# full-batch training: a batch of the same arrays every step is placed on the devices once
import lib.toolkit as T
placed = []
T.shard_batch = lambda batch, mesh, _place=T.shard_batch: placed.append(1) or _place(batch, mesh)
whole = np.arange(8.0)
same = fit(count, jnp.zeros(()), lambda t: whole, 5, **quiet)
worst["placements_same"] = len(placed)
fresh = fit(count, jnp.zeros(()), lambda t: whole + 0.0, 5, **quiet)
worst["placements_fresh"] = len(placed) - worst["placements_same"]
worst["full_batch_sums"] = [float(same.state), float(fresh.state)]
print(worst)
import json; print("RESULT", json.dumps(worst))
"""


@pytest.mark.slow
def test_data_parallel_training_matches_one_device(root):
    """DGP 2 and DARN, 20 steps on 4 virtual CPU devices: the losses and parameters of 1 device."""
    out = subprocess.run(
        [sys.executable, "-c", MESH_SCRIPT], capture_output=True, text=True, cwd=root, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    worst = json.loads(out.stdout.split("RESULT", 1)[1])
    assert worst["dgp_allreduce"] and worst["darn_allreduce"], worst
    assert worst["dgp_loss"] < 1e-9 and worst["dgp_params"] < 1e-9, worst  # float64
    assert worst["darn_loss"] < 1e-4 and worst["darn_params"] < 1e-4, worst  # float32
    assert worst["auto_fallback_warned"] == 1 and worst["auto_devices"] == [1, 4], worst
    assert worst["auto_sums"] == [12.0, 16.0], worst
    assert worst["placements_same"] == 1 and worst["placements_fresh"] == 5, worst
    assert worst["full_batch_sums"] == [140.0, 140.0], worst


def test_shard_batch_refuses_a_batch_the_devices_do_not_divide():
    mesh = T.data_mesh()
    with pytest.raises(ValueError, match="cannot be split over"):
        T.shard_batch(np.zeros(()), mesh)
    placed = T.shard_batch({"x": np.arange(6.0).reshape(3, 2)}, T.data_mesh(jax.devices()[:1]))
    np.testing.assert_array_equal(placed["x"], np.arange(6.0).reshape(3, 2))
    with pytest.raises(ValueError, match="mesh must be"):
        T.fit(
            quadratic_step,
            jnp.zeros(2),
            lambda t: jnp.ones(2),
            1,
            key=jax.random.key(0),
            mesh="all",
            progress=False,
        )


def test_streamed_minibatches_read_a_memmap_and_visit_every_row_once_per_epoch(tmp_path):
    x = np.arange(40.0).reshape(20, 2)
    file = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float64, shape=x.shape)
    file[:] = x
    file.flush()
    on_disk = np.load(tmp_path / "x.npy", mmap_mode="r")
    key = jax.random.key(3)
    streamed = T.minibatches(on_disk, 6, key=key, stream=True)
    epochs = []
    for t in range(9):  # three batches per epoch, across epoch boundaries
        a = streamed(t)
        assert isinstance(a, np.ndarray) and a.shape == (6, 2)
        assert np.all(np.diff(a[:, 0]) > 0)  # rows in file order
        np.testing.assert_array_equal(a[:, 1] - a[:, 0], 1.0)  # whole rows of x
        if t % 3 == 0:
            epochs.append([])
        epochs[-1] += (a[:, 0] // 2).astype(int).tolist()
    for seen in epochs:  # 18 of the 20 rows, each once; another choice each epoch
        assert len(seen) == len(set(seen)) == 18
    assert len({tuple(seen) for seen in epochs}) == 3  # a new order each epoch
    again = T.minibatches(on_disk, 6, key=key, stream=True)
    np.testing.assert_array_equal(again(4), streamed(4))  # a function of (key, t)
    result = T.fit(
        lambda s, b, k: (s + b.sum(), {"loss": b.sum()}),
        jnp.zeros(()),
        streamed,
        3,
        key=key,
        progress=False,
        log_every=1,
    )
    np.testing.assert_allclose(result.state, sum(streamed(t).sum() for t in range(3)))


# ---------------------------------------------------------------- resumable experiments


def test_run_unit_stores_results_and_refuses_another_configuration(tmp_path):
    calls = []

    @R.experiment(
        "test-units", chapter="testing", book={"n": 3, "fail_at": -1}, paper={"n": 3, "fail_at": -1}
    )
    def run_units(config):
        rows = []
        for i in range(config["n"]):

            def compute(checkpoint_dir, i=i):
                calls.append(i)
                assert checkpoint_dir is not None and checkpoint_dir.name.startswith(f"unit_{i}-")
                if i == config["fail_at"]:
                    raise KeyboardInterrupt  # an interruption in the middle of unit i
                return {"i": i, "square": np.float32(i * i), "pair": (i, i)}

            rows.append(R.run_unit(f"unit {i}", compute))
        return rows

    try:
        with pytest.raises(KeyboardInterrupt):
            R.run_experiment("test-units", "book", {"fail_at": 2}, results_dir=tmp_path)
        assert calls == [0, 1, 2]
        calls.clear()
        with pytest.raises(ValueError, match="another configuration"):
            R.run_experiment("test-units", "book", {"fail_at": 1}, results_dir=tmp_path)
        # the same configuration, now not interrupted (fail_at is part of it: patch the stored one)
        run_json = tmp_path / ".checkpoints" / "testing" / "test-units" / "run.json"
        about = json.loads(run_json.read_text())
        about["config"]["fail_at"] = -1
        run_json.write_text(json.dumps(about))
        rec = R.run_experiment("test-units", "book", {"fail_at": -1}, results_dir=tmp_path)
        assert calls == [2]  # units 0 and 1 came from the store
        assert rec["resumed"]["units_reused"] == ["unit 0", "unit 1"]
        # the interrupted run's device is kept: a run resumed on another machine says both
        assert rec["resumed"]["first_device"] == about["device"] == R.provenance()["device"]
        assert rec["rows"] == [{"i": i, "square": float(i * i), "pair": [i, i]} for i in range(3)]
        assert not run_json.parent.exists()  # removed once the results file is written
        calls.clear()
        fresh = R.run_experiment("test-units", "book", results_dir=tmp_path)
        assert calls == [0, 1, 2] and fresh["resumed"] is None and fresh["rows"] == rec["rows"]
    finally:
        R.EXPERIMENTS.pop("test-units", None)
    assert R.run_unit("outside", lambda d: {"dir": d}) == {"dir": None}


@pytest.mark.slow
def test_killed_experiment_resumes_to_the_same_parameters(tmp_path, root, data_dir):
    """python -m lib killed with SIGKILL mid-run, started again: the parameters of an uninterrupted
    run."""
    import os
    import signal
    import time

    command = [
        sys.executable,
        "-m",
        "lib",
        "toolkit-mnist-softmax",
        "--preset",
        "book",
        "--set",
        "steps=6000",
        "--set",
        "batch_size=50",
    ]
    env = {**os.environ, "LIB_DATA_DIR": str(data_dir)}
    killed, straight = tmp_path / "killed", tmp_path / "straight"
    run_folder = killed / ".checkpoints" / "toolkit" / "toolkit-mnist-softmax" / "checkpoints"
    proc = subprocess.Popen(
        command + ["--results-dir", str(killed)],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen = []
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        seen = sorted(int(p.name) for p in run_folder.glob("softmax-*/*") if p.name.isdigit())
        if seen and seen[-1] >= 1800:
            break
        time.sleep(0.05)
    assert proc.poll() is None, (
        "the run ended before it could be interrupted: " + proc.stderr.read().decode()[-2000:]
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "toolkit" / "toolkit-mnist-softmax.json").exists()
    for folder in (killed, straight):
        out = subprocess.run(
            command + ["--results-dir", str(folder)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-3000:]
    resumed = json.loads((killed / "toolkit" / "toolkit-mnist-softmax.json").read_text())
    uninterrupted = json.loads((straight / "toolkit" / "toolkit-mnist-softmax.json").read_text())
    restored = resumed["resumed"]["checkpoints_restored"]["softmax"]
    assert (
        restored >= seen[-1] >= 1800
    )  # at most the work since the last checkpoint (600 steps) was lost
    assert uninterrupted["resumed"] is None
    assert (
        resumed["rows"] == uninterrupted["rows"]
    )  # every row, with the parameters' digest, bit for bit
    assert len({row["params_sha256"] for row in resumed["rows"]}) == 10


# ---------------------------------------------------------------- threads of the CPU's LAPACK


def _blas_threads():
    from threadpoolctl import threadpool_info

    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_importing_the_toolkit_runs_scipys_lapack_on_one_thread():
    import scipy

    before = _blas_threads()
    changed = T.set_lapack_threads(2)
    assert changed, f"scipy's own BLAS was not found among {list(before)}"
    assert all(Path(scipy.__file__).parent.name in p or "scipy.libs" in p for p in changed)
    assert all(_blas_threads()[p] == min(2, os.cpu_count()) for p in changed)
    others = {p: n for p, n in before.items() if p not in changed}
    assert T.set_lapack_threads(1) == changed
    after = _blas_threads()
    assert all(after[p] == 1 for p in changed)
    assert {p: after[p] for p in others} == others  # numpy's BLAS is left alone
    with pytest.raises(ValueError, match="positive integer"):
        T.set_lapack_threads(0)


def test_lapack_threads_follow_the_environment(root):
    probe = (
        "import scipy.linalg\nfrom threadpoolctl import threadpool_info\n"
        "print([i['num_threads'] for i in threadpool_info() if 'scipy.libs' in i['filepath']])"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    }

    def threads(value, library):
        run_env = dict(env, LIB_LAPACK_THREADS=value)
        out = subprocess.run(
            [sys.executable, "-c", ("import lib.toolkit\n" if library else "") + probe],
            capture_output=True,
            text=True,
            cwd=root,
            env=run_env,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    untouched = threads("keep", library=False)  # scipy on its own
    assert threads("keep", library=True) == untouched
    assert threads("1", library=True) == "[1]"
    out = subprocess.run(
        [sys.executable, "-c", "import lib.toolkit"],
        capture_output=True,
        text=True,
        cwd=root,
        env=dict(env, LIB_LAPACK_THREADS="none"),
    )
    assert out.returncode != 0 and "LIB_LAPACK_THREADS must be" in out.stderr


def test_table_renders_rows_as_html_and_aligned_text():
    rows = [{"model": "SGP", "ll": 1.23456}, {"model": "DGP 2", "ll": None}]
    table = R.Table(rows, formats={"ll": ".2f"}, caption="cap")
    assert repr(table).splitlines() == ["cap", "model    ll", "  SGP  1.23", "DGP 2      "]
    html = table._repr_html_()
    assert "<caption>cap</caption>" in html and "<td>1.23</td>" in html and "<th>model</th>" in html
    assert R.Table([[1, "a<b"]], columns=["n", "s"])._repr_html_().count("a&lt;b") == 1
    # numpy scalars (a float32 mean, say) take the column's format as Python floats do
    assert repr(R.Table([{"p": np.float32(0.523074)}], formats={"p": ".2f"})).splitlines()[1] == (
        "0.52"
    )


def test_require_results_names_the_missing_file(tmp_path):
    (tmp_path / "ch").mkdir()
    (tmp_path / "ch" / "exp.part.json").write_text('{"rows": [1]}')
    assert R.require_results("ch", "exp", part="part", results_dir=tmp_path) == {"rows": [1]}
    with pytest.raises(FileNotFoundError, match=r"results/ch/exp.other.json is missing"):
        R.require_results("ch", "exp", part="other", results_dir=tmp_path)


def test_run_kind_tells_paper_runs_parts_and_reduced_runs():
    assert R.run_kind({"preset": "paper", "selection": {}, "deviations": {}}) == "paper run"
    part = {"preset": "paper", "selection": {"splits": [0]}, "deviations": {}}
    reduced = {"preset": "paper", "selection": {}, "deviations": {"steps": {}, "ard": {}}}
    assert R.run_kind(part) == "part of the paper run"
    assert R.run_kind(reduced) == "reduced run (ard, steps)"


def test_glue_outside_a_notebook_does_nothing():
    assert R.glue("x", np.float64(0.5)) is None


def test_progress_writes_lines_to_a_file_and_is_quiet_when_asked(capsys, monkeypatch):
    """Output that is not a terminal gets one line per interval (step, metrics, minutes) and a
    last line; set_progress(False) and LIB_PROGRESS=0 silence every report."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.delenv("LIB_PROGRESS", raising=False)
    monkeypatch.setattr(T, "_interactive", lambda: False)
    step = jax.jit(lambda s, b, k: (s + b, {"loss": s + b}))
    try:
        T.set_progress(True, every_seconds=1e-9)  # a line at every log_every boundary
        T.fit(
            step,
            jnp.zeros(()),
            lambda t: jnp.ones(()),
            6,
            key=jax.random.key(0),
            log_every=2,
            desc="demo",
        )
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines[0].startswith("demo: 2/6, loss 2; ") and lines[0].endswith(" min"), lines
        assert [line.split(",")[0] for line in lines] == [
            "demo: 2/6",
            "demo: 4/6",
            "demo: 6/6",
            "demo: 6/6",
        ]
        T.set_progress(False)
        T.fit(step, jnp.zeros(()), lambda t: jnp.ones(()), 6, key=jax.random.key(0), log_every=2)
        assert capsys.readouterr().err == ""
        T.set_progress(None)
        monkeypatch.setenv("LIB_PROGRESS", "0")
        assert not T.progress_enabled()
        with T.Progress(3, "x") as report:
            report.update(3, {"a": 1.0})
        assert capsys.readouterr().err == ""
    finally:
        T.set_progress(None)
    with pytest.raises(ValueError, match="every_seconds"):
        T.set_progress(True, every_seconds=0)


def test_results_are_read_from_the_checkout_the_environment_or_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv("LIB_RESULTS_DIR", raising=False)
    assert R.results_root() == R.project_root() / "results"
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "x.json").write_text('{"rows": [1]}')
    monkeypatch.setenv("LIB_RESULTS_DIR", str(tmp_path))
    assert R.results_root() == tmp_path.resolve()
    assert R.load_results("demo", "x") == {"rows": [1]}
    monkeypatch.delenv("LIB_RESULTS_DIR")
    monkeypatch.setattr(R, "project_root", lambda: None)  # outside a checkout: the package's copy
    packaged = R.results_root()
    assert packaged is None or packaged.name == "_results"


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="no /proc/cpuinfo here")
def test_provenance_names_the_host_cpu_and_its_vector_extensions():
    """The oracle: the first processor's lines of /proc/cpuinfo, read here by hand."""
    text = open("/proc/cpuinfo").read()
    name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if "model name" in line)
    flags = next(
        line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")
    )
    device = R.provenance()["device"]
    assert device["cpu"] == name
    assert device["vector_isa"] == [f for f in ("avx", "avx2", "fma", "avx512f") if f in flags] + [
        f for f in ("avx512_bf16", "avx512_fp16", "amx_tile") if f in flags
    ]


def test_provenance_records_how_float32_products_were_computed():
    assert R.provenance()["device"]["matmul_precision"] == str(
        jax.config.jax_default_matmul_precision or "default"
    )
    with jax.default_matmul_precision("highest"):
        assert R.provenance()["device"]["matmul_precision"] == "highest"


def test_where_run_names_the_devices_a_resumed_record_ran_on():
    from lib.record import device_name, where_run

    cpu, gpu = {"platform": "cpu", "cpus": 2}, {"platform": "gpu", "kind": "NVIDIA H200"}
    assert device_name(cpu) == "CPU (2 cores)" and device_name(gpu) == "NVIDIA H200"
    assert (
        where_run({"device": gpu}) == where_run({"device": gpu, "resumed": None}) == "NVIDIA H200"
    )

    def resumed(units, steps, first):
        return {"units_reused": units, "checkpoints_restored": steps, "first_device": first}

    same = {"device": cpu, "resumed": resumed(["a", "b"], {}, cpu)}
    assert where_run(same) == "CPU (2 cores), resumed (2 unit(s) whole)"
    moved = {"device": cpu, "resumed": resumed([], {"u": 7000, "v": 7000, "w": 500}, gpu)}
    assert where_run(moved) == "NVIDIA H200 (to step 500, 7000), then CPU (2 cores)"
    unknown = {"device": gpu, "resumed": resumed(["a"], {"u": 13000}, None)}
    assert where_run(unknown) == "an earlier run (1 unit(s) whole; to step 13000), then NVIDIA H200"


def test_checkpoint_steps_names_the_latest_checkpoint_of_every_folder(tmp_path):
    """What run_unit records as restored: per folder, the step restore_checkpoint resumes from."""
    assert T.checkpoint_steps(tmp_path / "none") == {}
    state = {"w": jnp.arange(3.0)}
    for folder, step in (("", 3), ("", 5), ("sub", 7), ("sub/deeper", 2)):
        T.save_checkpoint(tmp_path / folder, step, state, {"step": step})
    (tmp_path / "9.orbax-checkpoint-tmp-1").mkdir()  # a save that never finished
    (tmp_path / "empty").mkdir()
    found = T.checkpoint_steps(tmp_path)
    assert found == {"": 5, "sub": 7, "sub/deeper": 2}
    for folder, step in found.items():  # the oracle: what restoring each folder gives
        assert T.restore_checkpoint(tmp_path / folder, state)[0] == step


def test_the_records_old_home_still_imports_with_a_deprecation_warning():
    """lib.record's names imported from lib.toolkit (before 0.2) warn and give the same objects;
    lib.toolkit itself does not import the record."""
    code = "import sys, lib.toolkit; assert 'lib.record' not in sys.modules"
    root = Path(__file__).resolve().parent.parent
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0
    with pytest.warns(DeprecationWarning, match="lib.record.require_results"):
        from lib.toolkit import require_results
    assert require_results is R.require_results
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        T.nothing


def test_every_public_class_shows_its_constructors_parameters():
    """inspect.signature (and help) of each public class of lib gives its __init__'s parameters,
    not a metaclass's (*args, **kwargs) (Flax NNX; toolkit.constructor_signatures); an instance
    keeps its own signature."""
    import importlib
    import inspect

    import lib

    checked = 0
    for name in lib.MODULES:
        module = importlib.import_module(f"lib.{name}")
        for attr in module.__all__:
            cls = getattr(module, attr)
            init = getattr(cls, "__init__", None)
            if not isinstance(cls, type) or not inspect.isfunction(init):
                continue  # builtins' and C types' constructors have no Python signature
            want = list(inspect.signature(init).parameters)[1:]
            assert list(inspect.signature(cls).parameters) == want, f"lib.{name}.{attr}"
            checked += 1
    assert checked >= 20
    from flax import nnx

    import lib.darn as D

    model = D.AutoregressiveBernoulli(3, 0, autoregressive=True, rngs=nnx.Rngs(0))
    assert "__signature__" not in vars(model) and not hasattr(model, "__signature__")


def test_history_is_a_dict_of_arrays_with_attributes_and_rows():
    from lib.toolkit import History

    h = History({"step": [1, 2, 3], "loss": np.array([0.5, 0.25, 0.125])}, best_step=2)
    assert all(isinstance(v, np.ndarray) for v in h.values()) and h.best_step == 2
    assert h.rows() == [dict(step=s, loss=l) for s, l in zip([1, 2, 3], [0.5, 0.25, 0.125])]
    assert h.rows("loss") == [{"loss": 0.5}, {"loss": 0.25}, {"loss": 0.125}]
    with pytest.warns(DeprecationWarning, match="history.best_step"):
        assert h["best_step"] == 2  # where trainers kept it before
    with pytest.raises(KeyError):
        h["missing"]
    with pytest.raises(ValueError, match="different lengths"):
        History({"a": [1], "b": [1, 2]}).rows()


def test_seed_key_is_jax_key_of_the_integer_and_keeps_a_key():
    from lib.toolkit import seed_key

    for s in (0, 7, np.int64(3)):
        assert (
            jax.random.key_data(seed_key(s)) == jax.random.key_data(jax.random.key(int(s)))
        ).all()
    k = jax.random.key(5)
    assert seed_key(k) is k
    for bad in (-1, 1.5, "0", True):
        with pytest.raises(ValueError, match="seed"):
            seed_key(bad)


def test_renamed_maps_old_keywords_and_positionals_and_refuses_both():
    from lib.toolkit import renamed

    @renamed(positional=("key",), key="seed", lr="learning_rate")
    def f(x, *, learning_rate=1.0, seed=0):
        return x, learning_rate, seed

    assert f(1, learning_rate=2, seed=3) == (1, 2, 3)
    with pytest.warns(DeprecationWarning, match="use learning_rate="):
        assert f(1, lr=2) == (1, 2, 0)
    with pytest.warns(DeprecationWarning, match="use seed="):
        assert f(1, 9) == (1, 1.0, 9)
    with pytest.raises(TypeError, match="both"):
        f(1, lr=2, learning_rate=2)
    with pytest.raises(TypeError, match="positional"):
        f(1, 2, 3)
    assert list(inspect.signature(f).parameters) == ["x", "learning_rate", "seed"]


def test_put_global_places_a_tree_like_device_put_keys_included():
    """One process: put_global is jax.device_put (its path across processes runs in
    tests/test_distributed.py)."""
    from lib.toolkit import data_mesh, put_global, replicated

    tree = {"w": jnp.arange(4.0), "key": jax.random.key(3), "n": np.int32(2)}
    placed = put_global(tree, replicated(data_mesh()))
    np.testing.assert_array_equal(placed["w"], tree["w"])
    assert (jax.random.key_data(placed["key"]) == jax.random.key_data(tree["key"])).all()
    assert placed["w"].sharding.is_equivalent_to(replicated(data_mesh()), 1)
