"""Tests of lib.nram, and of its record (lib.nram_report, lib.nram_hard_report): gates against
their integer definitions, the machines against each other and a hand-written program, the loss
against a direct computation, gradients against finite differences, and each task generator
against a plain-Python solver of the task as Appendix A states it."""

import dataclasses
import itertools
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from lib import nram as N
from lib import nram_hard_report as H
from lib import nram_report as R
from lib.record import EXPERIMENTS

GATES = [m for m in N.MODULES if m not in ("READ", "WRITE")]


@pytest.mark.parametrize("name", GATES)
def test_gate_on_one_hot_inputs_is_the_integer_function(name):
    M = 7
    for a, b in itertools.product(range(M), repeat=2):
        out = np.asarray(
            N.module_dist(name, jax.nn.one_hot(a, M), jax.nn.one_hot(b, M), jnp.zeros(M))
        )
        expected = {
            "ZERO": 0,
            "ONE": 1,
            "TWO": 2,
            "INC": (a + 1) % M,
            "DEC": (a - 1) % M,
            "ADD": (a + b) % M,
            "SUB": (a - b) % M,
            "LESSTHAN": int(a < b),
            "LESSOREQUALTHAN": int(a <= b),
            "EQUALITYTEST": int(a == b),
            "MIN": min(a, b),
            "MAX": max(a, b),
        }[name]
        np.testing.assert_allclose(out, np.eye(M)[expected], atol=1e-6, err_msg=f"{name}({a}, {b})")
        assert int(N.module_int(name, a, b, M)) == expected


@pytest.mark.parametrize("name", GATES)
def test_gate_on_distributions_is_the_brute_force_sum_and_a_distribution(name):
    rng = np.random.default_rng(0)
    M, B = 9, 5
    a, b = rng.dirichlet(np.full(M, 0.5), size=(2, B))
    out = np.asarray(N.module_dist(name, jnp.asarray(a), jnp.asarray(b), jnp.zeros((B, M))))
    brute = np.zeros((B, M))
    for x, y in itertools.product(range(M), repeat=2):
        brute[:, N.module_int(name, x, y, M)] += a[:, x] * b[:, y]
    np.testing.assert_allclose(out, brute, atol=1e-6)
    assert out.min() > -1e-6 and np.allclose(out.sum(-1), 1, atol=1e-5)


def test_read_and_write_are_the_integer_machine_averaged_over_address_and_value():
    rng = np.random.default_rng(1)
    M = 6
    mem = rng.dirichlet(np.ones(M), size=M)
    p, a = rng.dirichlet(np.ones(M), size=2)
    read = sum(p[x] * mem[x] for x in range(M))
    written = np.zeros((M, M))
    for x, v in itertools.product(range(M), repeat=2):
        after = mem.copy()
        after[x] = np.eye(M)[v]
        written += p[x] * a[v] * after
    np.testing.assert_allclose(N.read(jnp.asarray(mem), jnp.asarray(p)), read, atol=1e-6)
    out = np.asarray(N.write(jnp.asarray(mem), jnp.asarray(p), jnp.asarray(a)))
    np.testing.assert_allclose(out, written, atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1, atol=1e-6)
    # the paper's matrix form (J - p) J^T . M + p a^T
    J = np.ones(M)
    np.testing.assert_allclose(out, np.outer(J - p, J) * mem + np.outer(p, a), atol=1e-6)


def test_clip_gradient_and_renormalise_backward():
    g = jax.grad(lambda x: jnp.sum(N.clip_gradient(x, 2.0) * jnp.array([1.0, -5.0, 3.0])))(
        jnp.ones(3)
    )
    np.testing.assert_allclose(g, [1.0, -2.0, 2.0])
    x = jnp.array([0.2, 0.3, -1e-9])
    np.testing.assert_allclose(N.renormalise(x), [0.4, 0.6, 0.0], atol=1e-7)
    np.testing.assert_allclose(
        jax.grad(lambda x: jnp.sum(N.renormalise(x) * jnp.arange(3.0)))(x), [0.0, 1.0, 2.0]
    )


def test_finish_probabilities_and_loss_against_a_direct_computation():
    rng = np.random.default_rng(2)
    T, B, M = 5, 3, 8
    x = rng.normal(size=(T, B))
    f = 1 / (1 + np.exp(-x))
    p = np.zeros((T, B))
    for t in range(T):
        alive = np.prod(1 - f[:t], 0)
        p[t] = alive * (f[t] if t < T - 1 else 1.0)
    np.testing.assert_allclose(N.finish_probabilities(jnp.asarray(x)), p, rtol=1e-5)
    np.testing.assert_allclose(p.sum(0), 1, rtol=1e-6)
    log_target = np.log(rng.uniform(0.01, 1, size=(T, B, M)))
    mask = rng.random((B, M)) < 0.4
    run = N.Run(
        jnp.asarray(log_target),
        jnp.zeros((T, B, M), jnp.int32),
        jnp.asarray(x),
        jnp.zeros((T, B)),
        jnp.zeros((T, B)),
    )
    direct = [
        -sum(p[t, b] * log_target[t, b, i] for t in range(T) for i in range(M) if mask[b, i])
        for b in range(B)
    ]
    np.testing.assert_allclose(N.nram_loss(run, jnp.asarray(mask)), direct, rtol=1e-5)
    np.testing.assert_array_equal(
        N.finish_step(jnp.asarray([[-1.0, 2.0, -1.0], [3.0, -1.0, -1.0], [1.0, -2.0, -1.0]])),
        [1, 0, 2],
    )  # the first f_t > 1/2, else the last step


def test_a_horizon_truncates_the_finish_probabilities_and_the_stopping_step():
    """The oracle: each run's p_t and stopping step computed from its first `horizon` logits alone,
    padded with zeros (p_t) after them."""
    rng = np.random.default_rng(5)
    T, B = 7, 6
    x = jnp.asarray(rng.normal(size=(T, B)))
    horizon = jnp.asarray([1, 2, 4, 7, 5, 3])
    p = N.finish_probabilities(x, horizon)
    stop = N.finish_step(x, horizon)
    for b in range(B):
        h = int(horizon[b])
        np.testing.assert_allclose(p[:h, b], N.finish_probabilities(x[:h, b]), rtol=1e-6)
        assert np.all(np.asarray(p[h:, b]) == 0) and int(stop[b]) == int(N.finish_step(x[:h, b]))
    np.testing.assert_allclose(p.sum(0), 1, rtol=1e-6)
    full = jnp.full((B,), T)  # the full horizon is the rule without one
    np.testing.assert_allclose(N.finish_probabilities(x, full), N.finish_probabilities(x))
    np.testing.assert_array_equal(N.finish_step(x, full), N.finish_step(x))


def test_extra_timesteps_give_each_training_example_its_own_horizon():
    config = N.TrainConfig(task="swap", memory_size=12, timesteps=3, max_difficulty=4, hidden=8)
    log = N._RunLog(dataclasses.replace(config, extra_timesteps=2), None)
    _, batches = log.batches(0, 40)
    assert batches["horizon"].shape == (40, config.batch_size)
    assert set(np.unique(batches["horizon"])) == {3, 4, 5}
    plain_d, plain = N._RunLog(config, None).batches(0, 40)
    horizon_d, _ = N._RunLog(dataclasses.replace(config, extra_timesteps=2), None).batches(0, 40)
    assert "horizon" not in plain and np.array_equal(plain_d, horizon_d)  # same examples
    with pytest.raises(ValueError, match="extra_timesteps"):
        N.TrainConfig(extra_timesteps=-1)
    run = N.train_nram(dataclasses.replace(config, extra_timesteps=2, steps=100, chunk=50))
    assert len(run.history["loss"]) == 2 and np.all(np.isfinite(run.history["loss"]))


SPEC = N.NRAMSpec(registers=4)


def test_hand_written_copy_program_solves_every_length_up_to_50_on_the_discrete_machine():
    policy = N.copy_program(SPEC)
    M = N.TASKS["copy"].min_memory(50)
    run = jax.jit(jax.vmap(lambda m: N.run_discrete(SPEC, policy, m, 60)))
    rng = np.random.default_rng(3)
    for n in range(1, 51):
        batch = N.make_batch("copy", [n] * 4, M, rng)
        out, steps = run(jnp.asarray(batch.memory))
        assert N.cell_errors(out, batch.target, batch.mask)[0] == 0, n
        np.testing.assert_array_equal(steps, n + 2)
    # too few timesteps: the machine is stopped before it has copied everything
    batch = N.make_batch("copy", [10] * 4, M, rng)
    out, steps = jax.vmap(lambda m: N.run_discrete(SPEC, policy, m, 6))(jnp.asarray(batch.memory))
    assert N.cell_errors(out, batch.target, batch.mask)[0] > 0 and np.all(np.asarray(steps) == 6)


def test_fuzzy_machine_runs_the_hand_written_program_like_the_discrete_one():
    policy = N.copy_program(SPEC)
    batch = N.make_batch("copy", [1, 2, 4, 6], 14, np.random.default_rng(4))
    run = N.run_fuzzy(SPEC, policy, jnp.asarray(batch.memory), jnp.asarray(batch.target), 9)
    out, _ = jax.vmap(lambda m: N.run_discrete(SPEC, policy, m, 9))(jnp.asarray(batch.memory))
    np.testing.assert_array_equal(N.run_output(run), out)
    assert np.all(np.asarray(N.nram_loss(run, jnp.asarray(batch.mask))) < 1e-3)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_hard_fuzzy_machine_equals_discrete_machine_for_a_random_controller(kind):
    """With argmax choices, the fuzzy machine holds one-hot values and must do what the integer
    machine does."""
    spec = N.NRAMSpec(N.MODULES * 2, registers=3)
    config = N.TrainConfig(registers=3, repeats=2, controller=kind, hidden=16)
    controller = N.make_controller(config, nnx.Rngs(5))
    batch = N.make_batch("swap", [3, 4, 5, 6, 7, 8], 12, np.random.default_rng(5))
    memory = jnp.asarray(batch.memory)
    run = N.run_fuzzy(
        spec, controller, memory, memory, 7, carry=controller.initial_carry(6), hard=True
    )

    def policy(bits, carry):
        logits, carry = controller(bits[None], jax.tree.map(lambda c: c[None], carry))
        return logits[0], jax.tree.map(lambda c: c[0], carry)

    carry0 = jax.tree.map(lambda c: c[0], controller.initial_carry(1))
    out, steps = jax.vmap(lambda m: N.run_discrete(spec, policy, m, 7, carry0))(memory)
    np.testing.assert_array_equal(N.run_output(run), out)
    np.testing.assert_array_equal(N.finish_step(run.finish_logits) + 1, steps)
    assert not np.array_equal(
        np.asarray(out), batch.memory
    )  # the random circuit did write something


@pytest.mark.slow
def test_gradient_of_the_loss_matches_finite_differences():
    with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():
        spec = N.NRAMSpec(registers=3)
        controller = N.MLPController(spec, 8, rngs=nnx.Rngs(6))
        graphdef, params = nnx.split(controller)
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), params)
        batch = N.make_batch("copy", [2, 3], 8, np.random.default_rng(6))
        memory, target, mask = (jnp.asarray(x) for x in batch)

        def loss(params):
            run = N.run_fuzzy(
                spec, nnx.merge(graphdef, params), memory, target, 4, clip=1e9, dtype=jnp.float64
            )
            return jnp.mean(N.nram_loss(run, mask)) - 0.01 * jnp.mean(jnp.sum(run.entropy, 0))

        grad = jax.grad(loss)(params)
        rng = np.random.default_rng(7)
        direction = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape)), params)
        h = 1e-5
        # noqa: E731
        shifted = lambda s: loss(jax.tree.map(lambda p, d: p + s * h * d, params, direction))
        fd = (shifted(1) - shifted(-1)) / (2 * h)
        analytic = sum(
            jnp.sum(g * d) for g, d in zip(jax.tree.leaves(grad), jax.tree.leaves(direction))
        )
        np.testing.assert_allclose(float(analytic), float(fd), rtol=1e-5)


def _solve(task, memory):
    """A plain-Python solver of each task from Appendix A's description: cell -> expected value."""
    m, M = [int(v) for v in memory], len(memory)
    if task == "access":
        return {0: m[m[0]]}
    if task == "increment":
        out, i = {}, 0
        while m[i] != 0:
            out[i], i = m[i] + 1, i + 1
        return out
    if task in ("copy", "reverse"):
        p = m[0]
        A = m[1:p]
        return {p + i: (A[::-1] if task == "reverse" else A)[i] for i in range(len(A))}
    if task == "swap":
        p, q = m[0], m[1]
        return {p: m[q], q: m[p]}
    if task == "permutation":
        a = m[0]
        return {1 + i: m[a + m[1 + i]] for i in range(a - 1)}
    if task == "listk":
        node = m[0]
        for _ in range(m[1]):
            node = m[node]
        return {2: m[node + 1]}
    if task == "listsearch":
        node = m[0]
        while m[node + 1] != m[1]:
            node = m[node]
        return {2: node}
    if task == "merge":

        def array(start):
            out = []
            while m[start] != M - 1:
                out.append(m[start])
                start += 1
            return out

        A, B, merged = array(m[0]), array(m[1]), []
        while A or B:
            merged.append((A if A and (not B or A[0] <= B[0]) else B).pop(0))
        return {m[2] + i: v for i, v in enumerate(merged)}
    if task == "walkbst":
        node, i = m[0], 2
        while m[i] != 0:
            node = m[node + 1] if m[i] == 1 else m[node + 2]
            i += 1
        return {1: m[node]}
    raise AssertionError(task)


def _is_bst(memory, node, low, high):
    if node == 0:
        return True
    v = memory[node]
    return (
        low < v < high
        and _is_bst(memory, memory[node + 1], low, v)
        and _is_bst(memory, memory[node + 2], v, high)
    )


@pytest.mark.parametrize("task", sorted(N.TASKS))
def test_generators_match_a_plain_solver_of_the_task(task):
    rng = np.random.default_rng(8)
    for n in [1, 2, 3, 5, 8, 13]:
        M = N.TASKS[task].min_memory(n) + int(rng.integers(0, 4))
        for _ in range(20):
            ex = N.TASKS[task].generate(n, M, rng)
            assert ex.memory.shape == ex.target.shape == ex.mask.shape == (M,)
            assert ex.memory.min() >= 0 and ex.memory.max() < M and ex.target.max() < M
            expected = _solve(task, ex.memory)
            assert sorted(np.flatnonzero(ex.mask)) == sorted(expected), (task, n, ex)
            assert all(ex.target[c] == v for c, v in expected.items())
            np.testing.assert_array_equal(ex.target[~ex.mask], ex.memory[~ex.mask])
            if task == "walkbst":
                assert _is_bst(ex.memory, ex.memory[0], 0, M)
            if task in ("listk", "listsearch"):  # a list of n nodes ending in NULL
                node, count = ex.memory[0], 0
                while node != 0:
                    node, count = ex.memory[node], count + 1
                assert count == n


def test_curriculum_sampling_follows_appendix_b():
    cur = N.Curriculum(10)
    cur.level = 3
    d = cur.sample(np.random.default_rng(9), 200_000)
    # P(d = D + e) = 0.65 * 2^-(e+1) + the uniform draws that land there
    for e in range(3):
        uniform = 0.25 * sum(0.5 ** (k + 1) / (3 + k) for k in range(e, 7)) + 0.25 * 0.5**7 / 10 * (
            3 + e <= 10
        )
        expected = 0.65 * 0.5 ** (e + 1) + uniform + 0.1 / 10
        assert abs((d == 3 + e).mean() - expected) < 0.006, e
    assert not cur.update(100, 0.05)  # min_gap not reached
    assert cur.update(300, 0.05) and cur.level == 4
    assert not cur.update(900, 0.5)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="needs a tape of at least 21"):
        N.make_batch("copy", [10], 20, np.random.default_rng(0))
    with pytest.raises(ValueError, match="task must be one of"):
        N.make_batch("sort", [1], 20, np.random.default_rng(0))
    with pytest.raises(ValueError, match="timesteps must be an integer >= 1"):
        N.run_fuzzy(
            SPEC,
            N.copy_program(SPEC),
            jnp.zeros((1, 8), jnp.int32),
            jnp.zeros((1, 8), jnp.int32),
            0,
        )
    with pytest.raises(ValueError, match="modules must be names"):
        N.NRAMSpec(("READ", "JUMP"))
    with pytest.raises(ValueError, match="can only use the registers and earlier modules"):
        N.program_logits(SPEC, {"READ": "WRITE"}, ["r1"] * 4, False)
    with pytest.raises(ValueError, match="needs memory_size >= 31"):
        N.train_nram(N.TrainConfig(memory_size=20, max_difficulty=15))


@pytest.mark.parametrize("name", ["ADD", "SUB"])
def test_circular_add_and_sub_backward_equals_autodiff_of_the_direct_sum(name):
    """The hand-written adjoints (correlations) against autodiff of the plain M^2 sums."""
    rng = np.random.default_rng(10)
    M = 7
    a, b, w = (jnp.asarray(x) for x in rng.normal(size=(3, 4, M)))
    shift = np.array(
        [[(c - x) % M if name == "ADD" else (x - c) % M for x in range(M)] for c in range(M)]
    )

    def direct(a, b):
        return jnp.stack(
            [sum(a[..., x] * b[..., shift[c, x]] for x in range(M)) for c in range(M)], -1
        )

    fast = N.circular_add if name == "ADD" else N.circular_sub
    np.testing.assert_allclose(fast(a, b), direct(a, b), atol=1e-5)
    g_fast = jax.grad(lambda a, b: jnp.sum(w * fast(a, b)), argnums=(0, 1))(a, b)
    g_direct = jax.grad(lambda a, b: jnp.sum(w * direct(a, b)), argnums=(0, 1))(a, b)
    for x, y in zip(g_fast, g_direct):
        np.testing.assert_allclose(x, y, atol=1e-5)


def test_trace_of_the_hand_written_program_reads_and_writes_where_it_should():
    n = 4
    ex = N.make_batch("copy", [n], 10, np.random.default_rng(11))
    rows = N.trace(SPEC, N.copy_program(SPEC), ex.memory[0], 10)
    assert len(rows) == n + 2 and rows[-1]["finish"] and not any(r["finish"] for r in rows[:-1])
    assert [r["read"] for r in rows] == list(range(n + 2))
    A = ex.memory[0, 1 : n + 1]
    assert [r["write"] for r in rows[1 : n + 1]] == [
        (n + i, int(A[i - 1])) for i in range(1, n + 1)
    ]
    text = N.format_trace(rows)
    assert text.count("\n") == n + 1 and text.splitlines()[-1].endswith("finish")
    # the circuit of a main step: READ(r3), ADD(r3, r2), WRITE(ADD, READ), INC(r3)
    args, outs = N.circuit_choices(SPEC, rows[2]["logits"])
    index = {m: 4 + i for i, m in enumerate(N.MODULES)}
    assert args[0] == [2] and args[N.MODULES.index("ADD")] == [2, 1]
    assert args[N.MODULES.index("WRITE")] == [index["ADD"], index["READ"]]
    assert outs == [index["LESSOREQUALTHAN"], 1, index["INC"], 3]
    # every READ and WRITE of a step, and the finish probability: the hand-written program's
    # finish logit is +-large, so the probability is 0 before the last step and 1 there
    assert all(r["reads"] == [r["read"]] and r["writes"] == [r["write"]] for r in rows)
    np.testing.assert_allclose(
        [r["finish_probability"] for r in rows], [0.0] * (n + 1) + [1.0], atol=1e-9
    )
    # the step is compiled once per machine and tape length, not once per call
    before = N._discrete_step._cache_size()
    again = N.trace(SPEC, N.copy_program(SPEC), ex.memory[0], 10)
    assert N._discrete_step._cache_size() == before
    assert [r["writes"] for r in again] == [r["writes"] for r in rows]


def test_trace_with_the_modules_twice_records_both_reads_and_writes_and_plots():
    """A random controller on a machine with every module twice: each row has two READ addresses
    and two WRITEs, each equal to what a replay of the step's argmax circuit gives; plot_trace
    shows each memory value at (cell, timestep), frames the READ cells and fills the written
    ones (the plot where matplotlib is installed: the floor's environment has none)."""
    spec = N.NRAMSpec(N.MODULES * 2, 3)
    controller = N.MLPController(spec, 16, rngs=nnx.Rngs(4))
    ex = N.make_batch("copy", [3], 9, np.random.default_rng(2))
    rows = N.trace(spec, N.controller_policy(controller), ex.memory[0], 5)
    reads = [i for i, m in enumerate(spec.modules) if m == "READ"]
    for row in rows:
        assert len(row["reads"]) == len(row["writes"]) == 2
        args, _ = N.circuit_choices(spec, row["logits"])
        # replay the argmax circuit on integers: values = registers then each gate's output
        values, memory = list(row["registers"]), row["memory"].copy()
        got_reads, got_writes = [], []
        for i, m in enumerate(spec.modules):
            x = [values[a] for a in args[i]]
            if m == "READ":
                got_reads.append(int(x[0]))
                values.append(memory[x[0]])
            elif m == "WRITE":
                got_writes.append((int(x[0]), int(x[1])))
                memory[x[0]] = x[1]
                values.append(0)
            else:
                x += [0] * (2 - len(x))
                values.append(int(N.module_int(m, x[0], x[1], len(memory))))
        assert row["reads"] == got_reads and row["writes"] == got_writes and reads
        assert 0 <= row["finish_probability"] <= 1
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = R.plot_trace(rows, cells=range(9))
    texts = {
        (round(t.get_position()[0], 1), round(t.get_position()[1], 1)): t.get_text()
        for t in ax.texts
    }
    for t, row in enumerate(rows):
        assert all(texts[(float(c), float(t))] == str(row["memory"][c]) for c in range(9))
    framed = sum(1 for p in ax.patches if not p.get_fill())
    filled = sum(1 for p in ax.patches if p.get_fill())
    assert framed == sum(len(set(r["reads"])) for r in rows)
    assert filled == sum(len({p for p, _ in r["writes"]}) for r in rows)
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="cells"):
        R.plot_trace(rows, cells=[9])
    with pytest.raises(ValueError, match="rows"):
        R.plot_trace([])


@pytest.mark.slow
def test_training_stops_with_the_first_non_finite_step(monkeypatch):
    """An optimizer whose first update is NaN (a NaN learning rate is refused by TrainConfig
    itself)."""
    import optax

    from lib.toolkit import NonFiniteError

    monkeypatch.setattr(N, "make_optimizer", lambda config: optax.scale(float("nan")))
    N._compiled_chunk_fn.cache_clear()  # compile with the patched optimizer
    try:
        with pytest.raises(NonFiniteError, match="step 1: loss is nan"):
            N.train_nram(N.TrainConfig(task="copy", steps=50, chunk=50), progress=False)
    finally:
        N._compiled_chunk_fn.cache_clear()
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0, got nan"):
        N.TrainConfig(task="copy", learning_rate=float("nan"))


# a short Access run that learns something in 190 steps (keep-best and resume tests)
SHORT_ACCESS = N.TrainConfig(
    task="access",
    memory_size=8,
    timesteps=3,
    max_difficulty=2,
    steps=190,
    chunk=10,
    min_gap=20,
    hidden=16,
    learning_rate=0.05,
)


@pytest.mark.slow
def test_keep_best_returns_the_controller_of_the_best_chunk():
    """The selected controller is the one a run stopped at the selected step ends with (training is
    deterministic), and the selected step is the best chunk by (level, -error), the latest on
    ties."""
    config = SHORT_ACCESS
    result = N.train_nram(config, progress=False)
    h = result.history
    assert result.history.selected_step < config.steps  # this run's last chunk is not its best
    keys = [(lv, -e) for lv, e in zip(h["level"], h["error_level"])]
    best = max(range(len(keys)), key=lambda i: (keys[i], i))
    assert result.history.selected_step == h["step"][best]
    shorter = N.train_nram(
        dataclasses.replace(config, steps=result.history.selected_step, keep_best=False),
        progress=False,
    )
    assert shorter.history.selected_step == result.history.selected_step
    chosen, stopped = (
        nnx.state(c, nnx.Param) for c in (result.model, shorter.history.final_controller)
    )
    for x, y in zip(jax.tree.leaves(chosen), jax.tree.leaves(stopped)):
        np.testing.assert_array_equal(x, y)
    last = N.train_nram(dataclasses.replace(config, keep_best=False), progress=False)
    assert last.history.selected_step == config.steps
    for x, y in zip(
        jax.tree.leaves(nnx.state(last.model, nnx.Param)),
        jax.tree.leaves(nnx.state(result.history.final_controller, nnx.Param)),
    ):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_a_controller_saved_as_text_loads_back_identical(kind):
    config = N.TrainConfig(controller=kind, hidden=8)
    controller = N.make_controller(config, nnx.Rngs(3))
    loaded = N.load_controller(config, N.controller_text(controller))
    for x, y in zip(
        jax.tree.leaves(nnx.state(controller, nnx.Param)),
        jax.tree.leaves(nnx.state(loaded, nnx.Param)),
    ):
        np.testing.assert_array_equal(x, y)
    bits = jnp.asarray(np.random.default_rng(0).integers(0, 2, (2, config.registers)), jnp.float32)
    np.testing.assert_array_equal(
        controller(bits, controller.initial_carry(2))[0], loaded(bits, loaded.initial_carry(2))[0]
    )
    fresh = N.make_controller(config, nnx.Rngs(4))  # a different initialisation really differs
    assert not np.array_equal(
        fresh(bits, fresh.initial_carry(2))[0], controller(bits, controller.initial_carry(2))[0]
    )
    with pytest.raises(ValueError, match="saved parameters have shapes"):
        N.load_controller(dataclasses.replace(config, hidden=9), N.controller_text(controller))


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_init_scale_multiplies_the_read_out_weights_and_so_the_first_logits(kind):
    config = N.TrainConfig(controller=kind, hidden=8)
    base = N.make_controller(config, nnx.Rngs(3))
    sharp = N.make_controller(dataclasses.replace(config, init_scale=4.0), nnx.Rngs(3))
    for (path, x), (_, y) in zip(
        nnx.to_flat_state(nnx.state(base, nnx.Param)),
        nnx.to_flat_state(nnx.state(sharp, nnx.Param)),
    ):
        scale = 4.0 if path == ("out", "kernel") else 1.0
        np.testing.assert_allclose(np.asarray(y[...]), scale * np.asarray(x[...]), rtol=1e-6)
    bits = jnp.ones((2, config.registers), jnp.float32)
    # the read-out is linear with a zero bias at initialisation: the logits scale with it
    np.testing.assert_allclose(
        sharp(bits, sharp.initial_carry(2))[0],
        4.0 * base(bits, base.initial_carry(2))[0],
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="init_scale"):
        N.TrainConfig(init_scale=0.0)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_finish_bias_sets_only_the_finish_logit_and_so_the_first_stopping_probability(kind):
    config = N.TrainConfig(task="listk", controller=kind, hidden=8, registers=2)
    base = N.make_controller(config, nnx.Rngs(3))
    late = N.make_controller(dataclasses.replace(config, finish_bias=-3.0), nnx.Rngs(3))
    bits = jnp.asarray([[1.0, 1.0], [0.0, 1.0]], jnp.float32)
    shift = late(bits, late.initial_carry(2))[0] - base(bits, base.initial_carry(2))[0]
    finish = config.spec().layout.finish
    expected = np.zeros(shift.shape, np.float32)
    expected[:, finish] = -3.0 - np.asarray(base.out.bias[...])[finish]  # Flax's bias starts at 0
    np.testing.assert_allclose(shift, expected, atol=1e-5)
    # a bias alone, zero read-out weights: the machine stops at each step w.p. sigmoid(-3), so it
    # reaches step t with probability (1 - f)^(t - 1) (closed form of Sec. 3.3)
    late.out.kernel[...] = jnp.zeros_like(late.out.kernel[...])
    memory = np.zeros((1, 7), np.int32)
    run = N.run_fuzzy(config.spec(), late, memory, memory, 5, carry=late.initial_carry(1))
    f = 1 / (1 + np.exp(3.0))
    p = np.asarray(N.finish_probabilities(run.finish_logits))[:, 0]
    np.testing.assert_allclose(p[:4], [f * (1 - f) ** t for t in range(4)], rtol=1e-5)
    assert abs(p[4] - (1 - f) ** 4) < 1e-6
    with pytest.raises(ValueError, match="finish_bias"):
        N.TrainConfig(finish_bias=float("nan"))


@pytest.mark.slow
def test_evaluate_scores_the_hand_written_program_perfect_and_too_few_steps_wrong():
    config = N.TrainConfig(task="copy", memory_size=16, timesteps=12, max_difficulty=5)
    assert N.scaled_size(config, 5) == (16, 12) and N.scaled_size(config, 12) == (39, 29)
    program = N.PolicyController(N.copy_program(config.spec()))
    for n, mixed in ((3, False), (5, False), (12, False), (12, True)):
        e = N.evaluate(program, config, n, examples=40, seed=n, mixed=mixed)
        assert e["error"] == 0 and e["error_discrete"] == 0 and e["agreement"] == 1, e
        assert e["mixed"] is mixed and (e["memory_size"], e["timesteps"]) == N.scaled_size(
            config, n
        )
    # with 4 timesteps the program sets up, then copies one cell per step: 3 cells of 5, 2/5 wrong
    short = N.evaluate(program, dataclasses.replace(config, timesteps=4), 5, examples=20)
    assert short["error"] == pytest.approx(2 / 5) and short["error_discrete"] == pytest.approx(
        2 / 5
    )


@pytest.mark.slow
def test_nram_hard_experiment_end_to_end():
    rows = H.run_nram_hard(
        {
            "tasks": ["permutation"],
            "seeds": [3, 0],
            "settings": [{"hidden": 16}],
            "steps": 50,
            "figure3": [8],
            "test_examples": 20,
        }
    )
    assert [r["seed"] for r in rows] == [3, 0]  # the two seeds trained side by side, in order
    row = rows[1]
    assert row["task"] == "permutation" and row["setting"] == {"hidden": 16}
    config = N.TrainConfig(**row["train_config"])
    assert config.seed == 0
    assert config.hidden == 16 and config.steps == 50
    assert (
        0 <= row["train_error"] <= 1
        and [p["n"] for p in row["figure3"]] == [8]
        and row["figure3"][0]["mixed"]
    )
    assert row["figure3"][0]["memory_size"] >= N.TASKS["permutation"].min_memory(8)
    controller = N.load_controller(
        config, row["controller"]
    )  # the stored controller is the evaluated one
    again = N.evaluate(controller, config, config.max_difficulty, examples=1000, seed=1, mixed=True)
    assert again["error"] == row["train_error"]


@pytest.mark.slow
def test_nram_hard_setting_init_from_starts_from_a_stored_hard_controller(tmp_path, monkeypatch):
    """run_nram_hard's setting "init_from" starts every seed from the controller that
    results/nram/nram-hard.<part>.json keeps (stored_controller with experiment "nram-hard"):
    runs whose steps hardly move the parameters end at it; the easy tasks' file is not read."""
    config = dataclasses.replace(R.HARD_CONFIGS["permutation"], hidden=16)
    stored = N.make_controller(config, nnx.Rngs(11))
    row = {"train_config": dataclasses.asdict(config), "controller": N.controller_text(stored)}
    folder = tmp_path / "nram"
    folder.mkdir()
    record = {"rows": [{"task": "permutation", "seed": 5, **row}]}
    (folder / "nram-hard.donor.json").write_text(json.dumps(record))
    monkeypatch.setenv("LIB_RESULTS_DIR", str(tmp_path))
    got = R.stored_controller("permutation", "donor", 5, experiment="nram-hard")
    assert N.controller_text(got) == N.controller_text(stored)
    with pytest.raises(FileNotFoundError, match="nram.donor.json is missing"):
        R.stored_controller("permutation", "donor", 5)
    with pytest.raises(ValueError, match=r"nram-hard.donor.json has 0 rows .* seed 4"):
        R.stored_controller("permutation", "donor", 4, experiment="nram-hard")
    setting = {
        "hidden": 16,
        "learning_rate": 1e-9,
        "noise_eta": 0.0,
        "init_from": {"part": "donor", "seed": 5},
    }
    rows = H.run_nram_hard(
        {
            "tasks": ["permutation"],
            "seeds": [0, 1],
            "settings": [setting],
            "steps": 20,
            "figure3": [8],
            "test_examples": 10,
        }
    )
    assert [r["seed"] for r in rows] == [0, 1]
    for row in rows:
        assert row["setting"] == setting and row["train_config"]["learning_rate"] == 1e-9
        kept = N.load_controller(N.TrainConfig(**row["train_config"]), row["controller"])
        for x, y in zip(_params(kept), _params(stored)):
            np.testing.assert_allclose(x, y, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [0, 2])
def test_an_interrupted_training_resumes_to_the_uninterrupted_result(tmp_path, extra):
    """Checkpoints every 60 steps, interrupted at step 150: resumed from step 120, the same
    controllers, curriculum and history as a run that was never interrupted; with horizons too
    (extra_timesteps, whose random stream the checkpoint keeps)."""
    config = dataclasses.replace(SHORT_ACCESS, extra_timesteps=extra)
    straight = N.train_nram(config, progress=False)

    def interrupt(row):
        if row["step"] == 150:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        N.train_nram(
            config, progress=False, log=interrupt, checkpoint_dir=tmp_path, checkpoint_every=60
        )
    assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [60, 120]
    resumed = N.train_nram(config, progress=False, checkpoint_dir=tmp_path, checkpoint_every=60)
    assert (
        resumed.history.level == straight.history.level
        and resumed.history.selected_step == straight.history.selected_step
    )
    for name in straight.history:
        np.testing.assert_array_equal(resumed.history[name], straight.history[name], err_msg=name)
    for a, b in (
        (resumed.model, straight.model),
        (resumed.history.final_controller, straight.history.final_controller),
    ):
        assert N.controller_text(a) == N.controller_text(b)


def _params(controller):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(controller, nnx.Param))]


@pytest.mark.slow
def test_training_from_a_given_controller_starts_from_its_parameters(tmp_path, monkeypatch):
    """init: runs whose steps hardly move the parameters (learning rate 1e-9, no gradient noise)
    end at init's parameters, not at a fresh controller's, alone or side by side, and leave init
    as it was; a controller of another kind is refused. stored_controller reads the controller a
    results file keeps for a task and seed, and run_nram's setting "init_from" starts from it."""
    config = dataclasses.replace(SHORT_ACCESS, steps=20, learning_rate=1e-9, noise_eta=0.0)
    donor = N.make_controller(dataclasses.replace(config, init_scale=4.0), nnx.Rngs(7))
    text = N.controller_text(donor)
    runs = [
        N.train_nram(config, init=donor, progress=False),
        *N.train_nram_seeds(config, [0, 1], init=donor, progress=False),
    ]
    for run in runs:
        for x, y in zip(_params(run.history.final_controller), _params(donor)):
            np.testing.assert_allclose(x, y, atol=1e-6)
    fresh = N.make_controller(config, nnx.Rngs(config.seed))  # where a run without init starts
    assert max(np.abs(x - y).max() for x, y in zip(_params(fresh), _params(donor))) > 0.1
    assert N.controller_text(donor) == text
    with pytest.raises(ValueError, match="init must be a controller of this config"):
        N.train_nram(dataclasses.replace(config, controller="lstm"), init=donor, progress=False)
    with pytest.raises(TypeError, match="init"):
        N.train_nram(config, init="controller", progress=False)

    book = R.BOOK_CONFIGS["access"]
    stored = N.make_controller(book, nnx.Rngs(7))
    folder = tmp_path / "nram"
    folder.mkdir()
    row = {"train_config": dataclasses.asdict(book), "controller": N.controller_text(stored)}
    record = {"rows": [{"task": "access", "seed": 3, **row}, {"task": "copy", "seed": 3, **row}]}
    (folder / "nram.donor.json").write_text(json.dumps(record))
    monkeypatch.setenv("LIB_RESULTS_DIR", str(tmp_path))
    assert N.controller_text(R.stored_controller("access", "donor", 3)) == N.controller_text(stored)
    with pytest.raises(ValueError, match=r"0 rows of task 'access' and seed 4"):
        R.stored_controller("access", "donor", 4)
    with pytest.raises(FileNotFoundError, match="nram.elsewhere.json is missing"):
        R.stored_controller("access", "elsewhere", 3)
    setting = {"learning_rate": 1e-9, "noise_eta": 0.0, "init_from": {"part": "donor", "seed": 3}}
    (row,) = R.run_nram(
        {
            "scale": "book",
            "tasks": ["access"],
            "seeds": [0],
            "steps": 20,
            "setting": setting,
            "test_lengths": [5],
            "test_examples": 10,
        }
    )
    assert row["setting"] == setting and row["train_config"]["learning_rate"] == 1e-9
    kept = N.load_controller(N.TrainConfig(**row["train_config"]), row["controller"])
    for x, y in zip(_params(kept), _params(stored)):
        np.testing.assert_allclose(x, y, atol=1e-6)
    # side by side, every seed starts from it too
    rows = R.run_nram(
        {
            "scale": "book",
            "tasks": ["access"],
            "seeds": [0, 1],
            "steps": 20,
            "setting": setting,
            "side_by_side": True,
            "test_lengths": [5],
            "test_examples": 10,
        }
    )
    assert [r["seed"] for r in rows] == [0, 1]
    for row in rows:
        kept = N.load_controller(N.TrainConfig(**row["train_config"]), row["controller"])
        for x, y in zip(_params(kept), _params(stored)):
            np.testing.assert_allclose(x, y, atol=1e-6)


@pytest.mark.slow
def test_run_nram_side_by_side_gives_the_rows_of_seeds_one_by_one():
    """run_nram's side_by_side: the same rows as the seeds trained one after another (the same
    seeds, configs, curricula and selected steps; losses and errors up to rounding, as
    train_nram_seeds against train_nram), and each row's train_seconds the run's share."""
    config = {
        "scale": "book",
        "tasks": ["access"],
        "seeds": [2, 0],
        "steps": 100,
        "setting": {"memory_size": 8, "max_difficulty": 4, "chunk": 20},
        "test_lengths": [5],
        "test_examples": 50,
    }
    alone = R.run_nram({**config, "side_by_side": False})
    together = R.run_nram({**config, "side_by_side": True})
    assert [r["seed"] for r in together] == [r["seed"] for r in alone] == [2, 0]
    for a, b in zip(together, alone):
        assert a.keys() == b.keys()
        for key in ("task", "setting", "train_config", "final_level", "selected_step"):
            assert a[key] == b[key], key
        np.testing.assert_array_equal(a["history"]["level"], b["history"]["level"])
        np.testing.assert_allclose(a["history"]["loss"], b["history"]["loss"], rtol=1e-3)
        assert abs(a["error_at_max_length"] - b["error_at_max_length"]) <= 0.05
        assert [g["n"] for g in a["generalisation"]] == [g["n"] for g in b["generalisation"]]
    assert together[0]["train_seconds"] == together[1]["train_seconds"] > 0


def test_draw_settings_is_reproducible_and_rejects_bad_spaces():
    space = {"hidden": [8, 16, 32], "registers": [4, 5]}
    a, b = R.draw_settings(space, 50, 3), R.draw_settings(space, 50, 3)
    assert a == b and len(a) == 50 and a != R.draw_settings(space, 50, 4)
    assert {s["hidden"] for s in a} == {8, 16, 32} and {s["registers"] for s in a} == {4, 5}
    for bad in ({"hiden": [8]}, {"seed": [1]}, {"hidden": []}):
        with pytest.raises(ValueError):
            R.draw_settings(bad, 2, 0)


@pytest.mark.slow
def test_nram_search_experiment_end_to_end():
    space = {"hidden": [8, 16]}
    rows = R.run_nram_search(
        {
            "task": "access",
            "count": 3,
            "settings": [2, 0],
            "seeds": [0, 1],
            "search_seed": 1,
            "steps": 50,
            "space": space,
            "examples": 20,
        }
    )
    drawn = R.draw_settings(space, 3, 1)
    # settings 2 and 0 of the three drawn, each with seed offsets 0 and 1: seeds i and i + 1000
    assert [(r["setting_index"], r["seed"]) for r in rows] == [(2, 2), (2, 1002), (0, 0), (0, 1000)]
    assert [r["setting"] for r in rows] == [drawn[2], drawn[2], drawn[0], drawn[0]]
    for r in rows:
        assert r["max_level"] == R.NRAM_CONFIGS["access"].max_difficulty
        assert (
            1 <= r["final_level"] <= r["max_level"]
            and 0 <= r["error"] <= 1
            and 0 <= r["discrete_error"] <= 1
        )
        assert r["history"]["step"] == [50]
        # the stored controller is the evaluated one: the same error on the same examples
        config = N.TrainConfig(**r["train_config"])
        assert config.seed == r["seed"] and config.hidden == r["setting"]["hidden"]
        again = N.evaluate(
            N.load_controller(config, r["controller"]),
            config,
            config.max_difficulty,
            examples=20,
            seed=r["seed"] + 1,
        )
        assert again["error"] == r["error"]
    # a seed trained beside another is the seed trained alone (train_nram_seeds' contract)
    alone = N.train_nram(N.TrainConfig(**rows[1]["train_config"]), progress=False)
    assert alone.history.level == rows[1]["final_level"]
    np.testing.assert_allclose(alone.history["loss"], rows[1]["history"]["loss"], rtol=1e-4)
    with pytest.raises(ValueError, match="settings"):
        R.run_nram_search(
            {
                **{"task": "access", "count": 2, "settings": [2], "seeds": [0]},
                "search_seed": 0,
                "steps": 50,
                "space": space,
                "examples": 5,
            }
        )


def test_search_space_adds_the_tasks_own_fields():
    assert R.search_space("access") == R.SEARCH_SPACE
    swap = R.search_space("swap")
    assert swap == {**R.SEARCH_SPACE, **R.TASK_SEARCH_SPACE["swap"]}
    assert swap["extra_timesteps"] == [0, 4] and swap["timesteps"] == [6, 8, 10]
    assert R.search_space("permutation")["init_scale"] == [1.0, 4.0]
    # every field is one draw_settings accepts
    for task in N.TASKS:
        assert len(R.draw_settings(R.search_space(task), 3, 0)) == 3
    with pytest.raises(ValueError, match="task"):
        R.search_space("sort")
    # the paper preset draws from the task's space
    assert EXPERIMENTS["nram-search"].presets["paper"]["space"] is None


@pytest.mark.slow
def test_nram_search_of_a_hard_task_measures_mixed_lengths():
    space = {"hidden": [8]}
    config = {
        "task": "permutation",
        "count": 1,
        "settings": [0],
        "seeds": [0],
        "search_seed": 0,
        "steps": 20,
        "space": space,
        "examples": 30,
    }
    (row,) = R.run_nram_search(config)
    run = N.TrainConfig(**row["train_config"])
    # the hard task's paper configuration (HARD_CONFIGS), with the drawn setting
    assert run == dataclasses.replace(R.HARD_CONFIGS["permutation"], steps=20, hidden=8, seed=0)
    assert row["mixed"] and row["max_level"] == R.HARD_CONFIGS["permutation"].max_difficulty
    # the error is that of lengths drawn uniformly up to the top (Table 1 for the hard tasks)
    again = N.evaluate(
        N.load_controller(run, row["controller"]), run, 6, examples=30, seed=1, mixed=True
    )
    assert again["error"] == row["error"] and again["mixed"]
    with pytest.raises(ValueError, match="task"):
        R.run_nram_search({**config, "task": "sort"})


@pytest.mark.slow
def test_hand_written_swap_program_solves_swap_on_both_machines():
    """An independent check of the Swap layout (Appendix A): a program written from the task's
    description."""
    for registers in (4, 6):
        config = dataclasses.replace(R.NRAM_CONFIGS["swap"], registers=registers)
        program = N.PolicyController(R.swap_program(config.spec()))
        for n in (1, 3, 20):
            e = N.evaluate(program, config, n, examples=50, seed=n)
            assert e["error"] == 0 and e["error_discrete"] == 0 and e["agreement"] == 1, (
                registers,
                n,
                e,
            )
    # with 4 timesteps cell p, written in the fifth, is right only where A[p] happened to equal A[q]
    short = dataclasses.replace(R.NRAM_CONFIGS["swap"], timesteps=4)
    e = N.evaluate(N.PolicyController(R.swap_program(short.spec())), short, 5, examples=50)
    assert 0.4 < e["error"] <= 0.5


def test_program_logits_names_the_gates_of_repeated_modules():
    """The gate "READ:2" is the second READ (position 14 of the modules twice), "ADD" the first ADD:
    the chosen logit of each gate's input sits where circuit_layout puts that gate and value."""
    spec = N.NRAMSpec(N.MODULES * 2, 4)
    R, layout = spec.registers, spec.layout
    first_add, second_read = N.MODULES.index("ADD"), len(N.MODULES)
    logits = N.program_logits(
        spec, {"READ:2": "ADD", "ADD:2": ("READ:2", "r3")}, ["r1"] * R, False, scale=7.0
    )
    start, size = layout.args[second_read][0]
    assert size == R + second_read and np.flatnonzero(logits[start : start + size]).tolist() == [
        R + first_add
    ]
    (a, _), (b, _) = layout.args[len(N.MODULES) + first_add]
    assert logits[a + R + second_read] == 7.0 and logits[b + 2] == 7.0
    # "READ" and "READ:1" are one gate; a third READ is not in the spec
    same = N.program_logits(spec, {"READ:1": "r2"}, ["r1"] * R, False)
    assert np.array_equal(same, N.program_logits(spec, {"READ": "r2"}, ["r1"] * R, False))
    with pytest.raises(ValueError, match="names gate 0 twice"):
        N.program_logits(spec, {"READ": "r2", "READ:1": "r3"}, ["r1"] * R, False)
    with pytest.raises(ValueError, match="not in the spec"):
        N.program_logits(spec, {"READ:3": "r2"}, ["r1"] * R, False)
    with pytest.raises(ValueError, match="'NAME:k' for its k-th gate"):
        N.program_logits(spec, {"WRITE": ("r1", "ADD:3")}, ["r1"] * R, False)


def _discrete_runs(spec, policy, batch, timesteps):
    """The discretised machine on every tape of `batch`: (final memories, steps run), as numpy."""
    memory, steps = jax.vmap(lambda m: N.run_discrete(spec, policy, m, timesteps))(
        jnp.asarray(batch.memory)
    )
    return np.asarray(memory), np.asarray(steps)


def _assert_exact_on_both_machines(policy, config, lengths):
    """The policy's fuzzy and discretised machines exact, and agreeing, at each length."""
    program = N.PolicyController(policy)
    for n in lengths:
        e = N.evaluate(program, config, n, examples=20, seed=n)
        assert e["error"] == 0 and e["error_discrete"] == 0 and e["agreement"] == 1, (n, e)


def test_hand_written_permutation_program_solves_every_length_up_to_50():
    """An independent check of the Permutation layout (Appendix A) and of the repeated modules:
    the discretised machine writes A[P[i]] into cell i + 1 for every n up to 50 (one batch, on a
    tape of 101 cells) and finishes after n + 1 timesteps; the fuzzy machine agrees."""
    lengths = np.arange(1, 51)
    for registers in (3, 5):
        spec = N.NRAMSpec(N.MODULES * 2, registers)
        policy = H.permutation_program(spec)
        batch = N.make_batch("permutation", lengths, 101, np.random.default_rng(registers))
        memory, steps = _discrete_runs(spec, policy, batch, 105)
        for n, tape, out, t in zip(lengths, batch.memory, memory, steps):
            P, A = tape[1 : n + 1], tape[n + 1 : 2 * n + 1]
            assert np.array_equal(out[1 : n + 1], A[P]) and t == n + 1, (registers, n)
    config = dataclasses.replace(R.HARD_CONFIGS["permutation"], repeats=2)
    _assert_exact_on_both_machines(H.permutation_program(config.spec()), config, (1, 6))
    with pytest.raises(ValueError, match="two READ and two WRITE gates"):
        H.permutation_program(N.NRAMSpec(registers=4))
    with pytest.raises(ValueError, match="at least 3 registers"):
        H.permutation_program(N.NRAMSpec(N.MODULES * 2, 2))


def test_hand_written_listk_program_solves_every_length_up_to_50():
    """An independent check of the ListK layout (Appendix A): the discretised machine puts into
    cell 2 the value found by following the list from cell 0 for the number of hops in cell 1 (a
    walk written here), for every length up to 50 (one batch, on a tape of 103 cells), and
    finishes after k + 3 timesteps; the fuzzy machine agrees."""
    lengths = np.arange(1, 51)
    for registers in (4, 6):
        spec = N.NRAMSpec(registers=registers)
        batch = N.make_batch("listk", lengths, 103, np.random.default_rng(registers))
        memory, steps = _discrete_runs(spec, H.listk_program(spec), batch, 60)
        for tape, out, t in zip(batch.memory, memory, steps):
            node, k = tape[0], tape[1]
            for _ in range(k):
                node = tape[node]
            assert out[2] == tape[node + 1] and t == k + 3, (registers, k)
    config = R.HARD_CONFIGS["listk"]
    _assert_exact_on_both_machines(H.listk_program(config.spec()), config, (1, 10))
    with pytest.raises(ValueError, match="at least 4 registers"):
        H.listk_program(N.NRAMSpec(registers=3))


def _walk(tape, node, steps):
    """The nodes met from `node` following tape[node + step] for each step (a list's next pointer
    is step 0, a tree's children steps 1 and 2)."""
    nodes = [int(node)]
    for step in steps:
        nodes.append(int(tape[nodes[-1] + step]))
    return nodes


def test_hand_written_permutation_program_with_the_modules_once():
    """The discretised machine writes A[P[i]] into cell i + 1 for every n up to 50 (tape 101, 2n + 1
    timesteps: it never stops); the fuzzy machine agrees at Table 1's lengths."""
    lengths = np.arange(1, 51)
    for registers in (4, 5):
        spec = N.NRAMSpec(registers=registers)
        batch = N.make_batch("permutation", lengths, 101, np.random.default_rng(registers))
        memory, steps = _discrete_runs(spec, H.hard_program("permutation", spec), batch, 101)
        for n, tape, out, t in zip(lengths, batch.memory, memory, steps):
            P, A = tape[1 : n + 1], tape[n + 1 : 2 * n + 1]
            assert np.array_equal(out[1 : n + 1], A[P]) and t == 101, (registers, n)
        short = N.make_batch("permutation", [6] * 20, 13, np.random.default_rng(0))
        memory, _ = _discrete_runs(spec, H.hard_program("permutation", spec), short, 12)
        assert np.any((memory != short.target) & short.mask)  # 2n + 1 = 13 timesteps are needed
    config = R.HARD_CONFIGS["permutation"]
    _assert_exact_on_both_machines(H.hard_program("permutation", config.spec()), config, (1, 6))


def test_hand_written_listsearch_program_stops_at_the_first_match():
    """The discretised machine puts into cell 2 the address of the first node, from cell 0 on,
    whose value is cell 1's, and stops after 2j + 4 timesteps for a match at the j-th node."""
    lengths = np.arange(1, 51)
    for registers in (4, 6):
        spec = N.NRAMSpec(registers=registers)
        batch = N.make_batch("listsearch", lengths, 103, np.random.default_rng(registers))
        memory, steps = _discrete_runs(spec, H.hard_program("listsearch", spec), batch, 110)
        for n, tape, out, t in zip(lengths, batch.memory, memory, steps):
            nodes = _walk(tape, tape[0], [0] * (n - 1))
            j = next(i for i, node in enumerate(nodes) if tape[node + 1] == tape[1])
            assert out[2] == nodes[j] and t == 2 * j + 4, (registers, n)
    config = R.HARD_CONFIGS["listsearch"]
    _assert_exact_on_both_machines(H.hard_program("listsearch", config.spec()), config, (1, 6))


def test_hand_written_walkbst_program_walks_the_path():
    """The discretised machine puts into cell 1 the key at the end of the path of cells 2.. (1 left,
    2 right, 0 its end) from the root in cell 0, and stops after 2k + 3 timesteps for k steps."""
    lengths = np.arange(1, 51)
    spec = N.NRAMSpec(registers=4)
    batch = N.make_batch("walkbst", lengths, 203, np.random.default_rng(1))
    memory, steps = _discrete_runs(spec, H.hard_program("walkbst", spec), batch, 110)
    longest = 0
    for tape, out, t in zip(batch.memory, memory, steps):
        k = int(np.argmax(tape[2:] == 0))
        end = _walk(tape, tape[0], tape[2 : 2 + k])[-1]
        assert out[1] == tape[end] and t == 2 * k + 3, k
        longest = max(longest, k)
    assert longest >= 6  # walks of many steps among them
    config = R.HARD_CONFIGS["walkbst"]
    _assert_exact_on_both_machines(H.hard_program("walkbst", config.spec()), config, (1, 10))


def test_hard_program_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="task"):
        H.hard_program("merge", R.HARD_CONFIGS["merge"].spec())
    with pytest.raises(ValueError, match="at least 4 registers"):
        H.hard_program("listsearch", N.NRAMSpec(registers=3))


def test_time_machines_times_both_machines_and_rejects_bad_budgets():
    """benchmarks/nram_inference.py's timer, which the chapter's Section 7 reads the results of."""
    import importlib.util
    from pathlib import Path

    bench = Path(__file__).resolve().parent.parent / "benchmarks"
    sys.path.insert(0, str(bench))  # its `common`
    spec_ = importlib.util.spec_from_file_location("nram_inference", bench / "nram_inference.py")
    nram_inference = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(nram_inference)
    spec = N.NRAMSpec(registers=4)
    rows = nram_inference.time_machines(
        spec, N.copy_program(spec), (20, 60), timesteps=10, min_seconds=0.0, min_repeats=2
    )
    assert [r["M"] for r in rows] == [20, 60]
    assert all(
        0 < r["discrete_seconds_per_step"] < 1 and 0 < r["fuzzy_seconds_per_step"] < 1 for r in rows
    )
    with pytest.raises(ValueError, match="min_repeats"):
        nram_inference.time_machines(spec, N.copy_program(spec), (20,), min_repeats=0)


DETERMINISM_SCRIPT = """
import hashlib, json, sys
import numpy as np
import optax
import lib.nram as N

config = N.TrainConfig(task="copy", memory_size=8, timesteps=6, max_difficulty=3, steps=60,
                       chunk=20, min_gap=20, hidden=16, learning_rate=0.05, seed=3)
result = N.train_nram(config, progress=False)
history = {k: np.asarray(v).tolist() for k, v in result.history.items()}
digest = hashlib.sha256(N.controller_text(result.history.final_controller).encode()).hexdigest()
print(json.dumps({"history": history, "controller": digest}))
"""


@pytest.mark.slow
def test_training_with_a_seed_is_bit_for_bit_the_same_in_two_processes():
    """Two executions of a chapter are two processes: the same seed must give the same curve and
    controller (no dependence on hashing, thread scheduling or compilation caches)."""
    import json
    import os
    import subprocess
    import sys

    runs = []
    for hash_seed in ("1", "2"):  # also across Python's string hashing
        out = subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONHASHSEED=hash_seed),
            check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]


SIDE_BY_SIDE = dataclasses.replace(SHORT_ACCESS, steps=100, chunk=20, learning_rate=0.01)


@pytest.mark.slow
def test_seeds_trained_side_by_side_match_each_seed_alone_and_resume(tmp_path):
    """train_nram_seeds against train_nram seed by seed: the same data, curriculum and selection;
    the numbers up to rounding (vmapped products round differently, and Adam's normalised steps
    let a rounding difference in a near-zero gradient move a parameter by up to the learning
    rate, so parameters are compared to a few learning rates). Then stopped after 60 steps with a
    checkpoint and continued to 100: the straight runs bit for bit (the same compiled program on
    the same stacked shapes)."""
    seeds = [0, 3, 1]
    together = N.train_nram_seeds(SIDE_BY_SIDE, seeds, progress=False)
    lr = SIDE_BY_SIDE.learning_rate
    for seed, got in zip(seeds, together):
        alone = N.train_nram(dataclasses.replace(SIDE_BY_SIDE, seed=seed), progress=False)
        np.testing.assert_array_equal(got.history["step"], alone.history["step"])
        np.testing.assert_array_equal(got.history["level"], alone.history["level"])
        np.testing.assert_allclose(got.history["loss"], alone.history["loss"], rtol=1e-3)
        np.testing.assert_allclose(got.history["error"], alone.history["error"], atol=0.02)
        assert (
            got.history.level == alone.history.level
            and got.history.selected_step == alone.history.selected_step
        )
        for a, b in (
            (got.model, alone.model),
            (got.history.final_controller, alone.history.final_controller),
        ):
            for x, y in zip(
                jax.tree.leaves(nnx.state(a, nnx.Param)), jax.tree.leaves(nnx.state(b, nnx.Param))
            ):
                np.testing.assert_allclose(x, y, atol=3 * lr)
    # a seed's first batch and initial parameters are its own: the first chunk's loss differs
    assert len({float(r.history["loss"][0]) for r in together}) == len(seeds)

    first = dataclasses.replace(SIDE_BY_SIDE, steps=60)
    N.train_nram_seeds(first, seeds, progress=False, checkpoint_dir=tmp_path, checkpoint_every=40)
    assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [40, 60]
    resumed = N.train_nram_seeds(
        SIDE_BY_SIDE, seeds, progress=False, checkpoint_dir=tmp_path, checkpoint_every=40
    )
    for a, b in zip(resumed, together):
        assert (
            a.history.level == b.history.level
            and a.history.selected_step == b.history.selected_step
        )
        for name in b.history:
            np.testing.assert_array_equal(a.history[name], b.history[name], err_msg=name)
        assert N.controller_text(a.model) == N.controller_text(b.model)
        assert N.controller_text(a.history.final_controller) == N.controller_text(
            b.history.final_controller
        )


@pytest.mark.parametrize(
    "seeds, message",
    [([], "non-empty"), ([1, 1], "distinct"), ([-1], ">= 0"), ([True], ">= 0"), ("01", "list")],
)
def test_train_nram_seeds_rejects_bad_seeds(seeds, message):
    with pytest.raises(ValueError, match=message) as err:
        N.train_nram_seeds(SIDE_BY_SIDE, seeds, progress=False)
    assert "seeds" in str(err.value)


def test_exponential_noise_has_variance_eta_decay_to_the_t_and_is_used_when_set():
    """Monte Carlo: the noise added at step t over 200,000 coordinates has mean 0 and variance
    eta * decay^t (4 standard errors), a fresh key each step; the optimizer takes it only when
    noise_decay is set, and the polynomial schedule stays optax.add_noise's."""
    eta, decay, n = 0.3, 0.9, 200_000
    tx = N.exponential_noise(eta, decay, seed=3)
    zeros = {"a": jnp.zeros((n // 2,)), "b": jnp.zeros((n // 4, 2))}
    state = tx.init(zeros)
    previous = None
    for t in range(4):
        out, state = tx.update(zeros, state)
        x = np.concatenate([np.ravel(out["a"]), np.ravel(out["b"])])
        var = eta * decay**t
        assert abs(x.mean()) < 4 * np.sqrt(var / n)
        assert abs(x.var() - var) < 4 * var * np.sqrt(2 / n)
        assert previous is None or not np.allclose(x, previous)
        previous = x
    # make_optimizer: clipping, then this noise when noise_decay is set (optax's otherwise), Adam
    grads = {"w": jnp.zeros((8,))}
    for noise_decay, kind in (
        (0.5, type(state)),
        (None, type(optax.add_noise(0.1, 0.55, 0).init(grads))),
    ):
        config = N.TrainConfig(noise_eta=0.3, noise_decay=noise_decay)
        assert type(N.make_optimizer(config).init(grads)[1]) is kind
    with pytest.raises(ValueError, match="decay"):
        N.exponential_noise(0.1, 1.5, 0)
    with pytest.raises(ValueError, match="noise_decay"):
        N.TrainConfig(noise_decay=0.0)


def test_the_value_entropy_of_a_run_is_that_of_the_registers_a_circuit_writes():
    """Closed form: a circuit that sets r1 to an even mixture of the ZERO and ONE gates (and every
    other register to ONE) leaves r1 with entropy log 2 and the others with none, at every step;
    a register set to a mixture of w and 1 - w has the binary entropy of w."""
    spec = N.NRAMSpec(registers=3)
    layout, R, V = spec.layout, spec.registers, spec.num_values
    zero, one = R + spec.modules.index("ZERO"), R + spec.modules.index("ONE")
    for w in (0.5, 0.2):
        outs = np.full((R, V), -1e4, np.float32)
        outs[0, zero], outs[0, one] = np.log(w), np.log(1 - w)
        outs[1:, one] = 0.0
        logits = np.zeros(layout.size, np.float32)
        logits[layout.outs : layout.finish] = outs.ravel()
        logits[layout.finish] = -5.0
        policy = lambda bits, carry: (jnp.broadcast_to(logits, (bits.shape[0], layout.size)), carry)
        batch = N.make_batch("access", [2, 3], 8, np.random.default_rng(0))
        run = N.run_fuzzy(spec, policy, jnp.asarray(batch.memory), jnp.asarray(batch.target), 3)
        expected = -(w * np.log(w) + (1 - w) * np.log(1 - w))
        np.testing.assert_allclose(run.value_entropy, np.full((3, 2), expected), rtol=1e-5)


def test_a_value_entropy_penalty_sharpens_the_registers():
    """From the same start and data, training with value_entropy > 0 ends with registers of lower
    summed entropy over the run than without, and the penalty is refused below 0."""
    base = dataclasses.replace(SHORT_ACCESS, steps=60, entropy=0.0, noise_eta=0.0, keep_best=False)
    batch = N.make_batch("access", [2] * 16, base.memory_size, np.random.default_rng(0))
    memory, target = jnp.asarray(batch.memory), jnp.asarray(batch.target)
    spread = {}
    for mu in (0.0, 0.1):
        result = N.train_nram(dataclasses.replace(base, value_entropy=mu), progress=False)
        run = N.run_fuzzy(base.spec(), result.model, memory, target, base.timesteps)
        spread[mu] = float(jnp.mean(jnp.sum(run.value_entropy, 0)))
    assert spread[0.1] < spread[0.0], spread
    with pytest.raises(ValueError, match="value_entropy"):
        N.TrainConfig(value_entropy=-0.1)


def test_a_negative_entropy_coefficient_sharpens_the_circuits_and_a_positive_one_blurs_them():
    """The entropy term's sign: from the same start and data, training with lambda_0 < 0 ends with
    circuits of lower summed entropy than with lambda_0 = 0, and lambda_0 > 0 with higher."""
    base = dataclasses.replace(
        SHORT_ACCESS, steps=60, entropy_decay=1.0, noise_eta=0.0, keep_best=False
    )
    batch = N.make_batch("access", [2] * 16, base.memory_size, np.random.default_rng(0))
    memory, target = jnp.asarray(batch.memory), jnp.asarray(batch.target)
    spread = {}
    for coefficient in (-0.05, 0.0, 0.05):
        result = N.train_nram(dataclasses.replace(base, entropy=coefficient), progress=False)
        controller = result.model
        run = N.run_fuzzy(
            base.spec(),
            controller,
            memory,
            target,
            base.timesteps,
            carry=controller.initial_carry(16),
        )
        spread[coefficient] = float(jnp.mean(jnp.sum(run.entropy, 0)))
    assert spread[-0.05] < spread[0.0] < spread[0.05], spread
