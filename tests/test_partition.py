"""Tests of lib.partition against independent oracles (enumeration, dense Gaussian algebra, Monte
Carlo)."""

import itertools
import math
import statistics

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lib import partition as P
from lib import partition_report as R


def tiny_rbm(n_visible=6, n_hidden=4, seed=0, scale=1.0):
    rbm = P.RBM(n_visible, n_hidden, rngs=nnx.Rngs(seed), init_scale=scale)
    k1, k2 = jax.random.split(jax.random.key(seed + 100))
    rbm.b[...] = jax.random.normal(k1, (n_visible,), jnp.float32)
    rbm.c[...] = jax.random.normal(k2, (n_hidden,), jnp.float32)
    return rbm


def all_states(n):
    return np.array(list(itertools.product([0, 1], repeat=n)), np.float64)


def brute_force(rbm, beta):
    """log Z, free energies and p(v) by summing exp(-E) over both layers, in float64, with the
    energy written out from the definition (tempered: beta scales W and c, not b)."""
    W, b, c = (np.asarray(x, np.float64) for x in (rbm.W[...], rbm.b[...], rbm.c[...]))
    V, H = all_states(W.shape[0]), all_states(W.shape[1])
    neg_e = beta * (V @ W @ H.T + (H @ c)[None, :]) + (V @ b)[:, None]
    m = neg_e.max()
    log_z = m + math.log(np.exp(neg_e - m).sum())
    free = -(np.log(np.exp(neg_e - m).sum(1)) + m)
    return log_z, free, V, H, neg_e


@pytest.mark.parametrize("beta", [1.0, 0.55, 0.0])
def test_exact_log_z_and_free_energy_against_both_layers_enumerated(beta):
    rbm = tiny_rbm(7, 5)
    log_z, free, V, _, _ = brute_force(rbm, beta)
    assert abs(P.exact_log_z(rbm, beta, low_bits=3) - log_z) < 1e-4
    np.testing.assert_allclose(
        np.asarray(rbm.free_energy(jnp.asarray(V, jnp.float32), beta)), free, atol=2e-5
    )
    if beta == 0.0:
        assert abs(float(rbm.log_z_base()) - log_z) < 1e-4


def test_exact_log_z_enumerates_the_smaller_layer_and_refuses_huge_ones():
    rbm = tiny_rbm(4, 9)  # visible layer enumerated
    log_z, *_ = brute_force(rbm, 1.0)
    assert abs(P.exact_log_z(rbm, low_bits=2) - log_z) < 1e-4
    big = P.RBM(40, 35, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="ais_log_z"):
        P.exact_log_z(big)


def test_exact_log_z_in_product_form_and_as_softplus_against_enumeration():
    """Columns within the product form's bounds and columns outside them (visible biases of
    +-60) in one model, against both layers enumerated in float64, to float32's precision."""
    rbm = tiny_rbm(8, 6)
    rbm.b[...] = rbm.b[...].at[:3].set(jnp.array([60.0, -60.0, 45.0]))
    K = rbm.W[...].T
    cols = P._product_columns(K, rbm.b[...], 3)
    np.testing.assert_array_equal(cols, [False] * 3 + [True] * 5)
    for beta in (1.0, 0.3):
        log_z, *_ = brute_force(rbm, beta)
        assert abs(P.exact_log_z(rbm, beta, low_bits=3) - log_z) < 1e-6 * abs(log_z)


def test_gibbs_conditionals_match_the_joint():
    rbm = tiny_rbm(5, 3)
    beta = 0.7
    _, _, V, H, neg_e = brute_force(rbm, beta)
    joint = np.exp(neg_e - neg_e.max())
    joint /= joint.sum()
    # p(h_j = 1 | v) and p(v_i = 1 | h) from the joint table vs the module's logits
    a = np.asarray(rbm.hidden_input(jnp.asarray(V, jnp.float32)))
    p_h = (joint @ H) / joint.sum(1, keepdims=True)
    np.testing.assert_allclose(p_h, 1 / (1 + np.exp(-beta * a)), atol=1e-5)
    logits_v = np.asarray(rbm.b[...]) + beta * H @ np.asarray(rbm.W[...]).T
    p_v = (V.T @ joint).T / joint.sum(0)[:, None]
    np.testing.assert_allclose(p_v, 1 / (1 + np.exp(-logits_v)), atol=1e-5)


def test_parallel_tempering_leaves_the_product_distribution_invariant():
    """Start N chains at every temperature exactly from q_i (sampled from the enumerated table), run
    one PT sweep, and compare the visible histograms at every temperature with q_i (chi-square)."""
    rbm = tiny_rbm(4, 3, seed=3)
    betas = jnp.asarray([1.0, 0.6, 0.3, 0.0])
    n = 40000
    rng = np.random.default_rng(0)
    starts, probs = [], []
    for beta in np.asarray(betas):
        _, free, V, _, _ = brute_force(rbm, float(beta))
        p = np.exp(-free - (-free).max())
        p /= p.sum()
        probs.append(p)
        starts.append(V[rng.choice(len(p), size=n, p=p)])
    v = jnp.asarray(np.stack(starts), jnp.float32)
    v, a, rate = P.pt_sweep(rbm, v, rbm.hidden_input(v), betas, jax.random.key(1), gibbs_steps=1)
    assert np.all(np.asarray(rate) > 0.05)
    codes = np.asarray(v) @ (2 ** np.arange(3, -1, -1))
    for i, p in enumerate(probs):
        counts = np.bincount(codes[i].astype(int), minlength=16)
        chi2 = np.sum((counts - n * p) ** 2 / (n * p))
        assert chi2 < 45.0, (i, chi2)  # 15 dof: p < 1e-4 under the null


def test_importance_and_bridge_estimates_are_consistent_and_shrink_with_n():
    rbm_a = tiny_rbm(6, 4, seed=1)
    rbm_b = tiny_rbm(6, 4, seed=1)
    rbm_b.W[...] = rbm_b.W[...] + 0.1 * jax.random.normal(
        jax.random.key(9), rbm_b.W.shape, jnp.float32
    )
    za, fa, V, _, _ = brute_force(rbm_a, 1.0)
    zb, fb, _, _, _ = brute_force(rbm_b, 1.0)
    pa = np.exp(-fa - za)
    rng = np.random.default_rng(0)
    errors = {}
    for n in (20, 2000):
        est = []
        for _ in range(300):
            x = jnp.asarray(V[rng.choice(len(pa), size=n, p=pa)], jnp.float32)
            lw = rbm_a.free_energy(x) - rbm_b.free_energy(x)
            est.append(float(P.log_mean_exp(lw)[0]))
        errors[n] = np.asarray(est) - (zb - za)
    # the mean of the weights is unbiased: exp of the estimate averages to the ratio
    assert (
        abs(np.mean(np.exp(errors[2000])) - 1)
        < 3 * np.std(np.exp(errors[2000])) / math.sqrt(300) + 1e-3
    )
    assert np.std(errors[2000]) < 0.2 * np.std(errors[20])
    # bridge between two temperatures of one model
    z1, f1, *_ = brute_force(rbm_a, 1.0)
    z2, f2, *_ = brute_force(rbm_a, 0.5)
    p1, p2 = np.exp(-f1 - z1), np.exp(-f2 - z2)
    est = []
    for _ in range(300):
        x1 = jnp.asarray(V[rng.choice(len(p1), size=500, p=p1)], jnp.float32)
        x2 = jnp.asarray(V[rng.choice(len(p2), size=500, p=p2)], jnp.float32)
        d_lower = rbm_a.free_energy(x1, 1.0) - rbm_a.free_energy(x1, 0.5)
        d_upper = rbm_a.free_energy(x2, 1.0) - rbm_a.free_energy(x2, 0.5)
        est.append(P.bridge_log_ratio(d_lower, d_upper, jnp.float32(z2 - z1)))
    values = np.array([float(e[0]) for e in est])
    variances = np.array([float(e[1]) for e in est])
    assert abs(values.mean() - (z2 - z1)) < 4 * values.std() / math.sqrt(300) + 1e-3
    # the delta-method variance predicts the spread across repetitions
    assert 0.5 < variances.mean() / values.var() < 2.0


def dense_filter(mu0, p0, q, obs, m):
    """p(x_T | all observations) by conditioning the joint Gaussian of x_0..x_T in float64."""
    c_cur, c_prev, h = (np.asarray(x, np.float64) for x in P.observation_matrices(m))
    d = m
    t_max = len(obs)
    n = d * (t_max + 1)
    prec = np.zeros((n, n))
    info = np.zeros(n)
    p0i = np.linalg.inv(p0)
    prec[:d, :d] += p0i
    info[:d] += p0i @ mu0
    qi = np.linalg.inv(q)
    for t, (o_dt, v_dt, o_db, v_db, z) in enumerate(obs, start=1):
        prv, cur = slice(d * (t - 1), d * t), slice(d * t, d * (t + 1))
        prec[prv, prv] += qi
        prec[cur, cur] += qi
        prec[prv, cur] -= qi
        prec[cur, prv] -= qi
        a = np.zeros((m - 1, n))
        a[:, cur], a[:, prv] = c_cur, c_prev
        prec += a.T @ np.diag(1 / v_dt) @ a
        info += a.T @ (o_dt / v_dt)
        bmat = np.zeros((m - 1, n))
        bmat[:, cur] = h
        o = o_db.copy()
        o[-1] -= z
        prec += bmat.T @ np.diag(1 / v_db) @ bmat
        info += bmat.T @ (o / v_db)
    cov = np.linalg.inv(prec)
    mean = cov @ info
    return mean[-d:], cov[-d:, -d:]


@pytest.mark.parametrize("sigma_z", [0.3, math.inf])
def test_kalman_filter_equals_dense_conditioning(sigma_z):
    m, t_max = 4, 6
    rng = np.random.default_rng(0)
    mu0 = rng.normal(size=m)
    p0 = np.diag(rng.uniform(0.5, 2.0, size=m))
    q_diag = np.array([sigma_z**2] * (m - 1) + [0.01])
    obs = [
        (
            rng.normal(size=m - 1),
            rng.uniform(0.01, 0.2, m - 1),
            rng.normal(size=m - 1),
            rng.uniform(0.01, 0.2, m - 1),
            float(rng.normal()),
        )
        for _ in range(t_max)
    ]
    tr = P.Tracker(jnp.asarray(mu0, jnp.float32), jnp.asarray(p0, jnp.float32))
    for o_dt, v_dt, o_db, v_db, z in obs:
        tr = P.kalman_update(
            tr,
            *(jnp.asarray(x, jnp.float32) for x in (o_dt, v_dt, o_db, v_db, z)),
            jnp.asarray(q_diag, jnp.float32),
        )
    q_dense = np.diag(np.minimum(q_diag, 1e8))
    mean, cov = dense_filter(mu0, p0, q_dense, obs, m)
    np.testing.assert_allclose(np.asarray(tr.mean), mean, atol=2e-4 if sigma_z < 1 else 2e-3)
    np.testing.assert_allclose(np.asarray(tr.cov), cov, atol=2e-4 if sigma_z < 1 else 2e-3)


def test_kalman_filter_in_float32_follows_a_float64_covariance_filter_over_a_long_run():
    """At training's scale (log Z in the hundreds, importance variances ~1e-5, 20,000 steps) the
    float32 filter must not drift from a float64 filter written in covariance form (Kalman gains, no
    precisions)."""
    m, steps = 6, 20000
    rng = np.random.default_rng(1)
    zeta = np.linspace(250.0, 0.0, m)  # zeta_1..zeta_M, constant; zeta_M = 0 is the known one
    v_dt, v_db = np.full(m - 1, 1e-5), np.full(m - 1, 0.5)
    o_dt = rng.normal(size=(steps, m - 1)) * np.sqrt(v_dt)
    o_db = np.diff(zeta)[None] + rng.normal(size=(steps, m - 1)) * np.sqrt(v_db)
    q = np.r_[np.full(m - 1, np.inf), 1e-7]
    mu0, p0 = np.r_[zeta[:-1] + 0.5, 0.0], np.diag(np.r_[np.full(m - 1, 1.0), 1e-2])

    def step32(tr, o):
        tr = P.kalman_update(
            tr,
            o[0],
            jnp.asarray(v_dt, jnp.float32),
            o[1],
            jnp.asarray(v_db, jnp.float32),
            jnp.float32(0.0),
            jnp.asarray(q, jnp.float32),
        )
        return tr, tr.mean[0]

    tr0 = P.Tracker(jnp.asarray(mu0, jnp.float32), jnp.asarray(p0, jnp.float32))
    _, path32 = jax.jit(
        lambda t: jax.lax.scan(
            step32, t, (jnp.asarray(o_dt, jnp.float32), jnp.asarray(o_db, jnp.float32))
        )
    )(tr0)
    c_cur, c_prev, h = (np.asarray(x, np.float64) for x in P.observation_matrices(m))
    qf = np.diag(np.minimum(q, 1e6))
    mean, cov, path64 = mu0.copy(), p0.copy(), []
    for t in range(steps):
        jm, jc = np.r_[mean, mean], np.block([[cov, cov], [cov, cov + qf]])  # (x_{t-1}, x_t)
        a = np.hstack([c_prev, c_cur])
        gain = jc @ a.T @ np.linalg.inv(a @ jc @ a.T + np.diag(v_dt))
        jm, jc = jm + gain @ (o_dt[t] - a @ jm), jc - gain @ a @ jc
        mean, cov = jm[m:], jc[m:, m:]
        gain = cov @ h.T @ np.linalg.inv(h @ cov @ h.T + np.diag(v_db))
        mean, cov = mean + gain @ (o_db[t] - h @ mean), cov - gain @ h @ cov
        path64.append(mean[0])
    path32, path64 = np.asarray(path32), np.asarray(path64)
    assert np.abs(path64 - zeta[0]).max() < 1.0  # the float64 filter itself tracks the truth
    np.testing.assert_allclose(path32, path64, atol=0.02)


def test_ais_agrees_with_exact_log_z():
    rbm = tiny_rbm(8, 5, seed=2)
    exact = P.exact_log_z(rbm)
    res = P.ais_log_z(
        rbm,
        jax.random.key(0),
        base_bias=jnp.zeros(8),
        betas=P.ais_betas((200, 1000, 1000)),
        n_runs=400,
    )
    assert res.lower <= exact <= res.upper
    assert abs(res.log_z - exact) < 0.05


def test_learning_rate_schedule():
    assert float(P.learning_rate(0, 0.01, 1e3)) == pytest.approx(0.01)
    assert float(P.learning_rate(999, 0.01, 1e3)) == pytest.approx(0.01)
    assert float(P.learning_rate(9999, 0.01, 1e3)) == pytest.approx(1e-3)
    assert float(P.learning_rate(123456, 0.01, None)) == pytest.approx(0.01)


@pytest.mark.parametrize("adapt", [False, True])
@pytest.mark.slow
def test_tracker_follows_exact_log_z_while_training_a_small_rbm(adapt):
    """A 12-hidden RBM on 64 random binary 16-pixel patterns: the tracked log Z stays close to the
    exact one while SML-PT changes it by several nats; also when the temperatures move (adapt)."""
    rng = np.random.default_rng(0)
    protos = rng.random((4, 16)) < 0.5
    x = (protos[rng.integers(0, 4, 512)] ^ (rng.random((512, 16)) < 0.05)).astype(np.uint8)
    rbm = P.RBM(16, 12, rngs=nnx.Rngs(0), visible_bias=P.log_odds_of_mean(x))
    z0 = P.exact_log_z(rbm)
    res = P.train_sml_pt(
        rbm,
        x,
        seed=0,
        steps=3000,
        learning_rate=0.02,
        alpha=1e3,
        eval_every=500,
        betas=P.linear_betas(6),
        n_chains=20,
        adapt=adapt,
        evaluate=lambda model, state, t: {"exact": P.exact_log_z(model)},
    )
    errors = [abs(r["log_z"] - r["exact"]) for r in res.history.evals]
    assert res.history.evals[-1]["exact"] - z0 > 3.0
    assert max(errors) < 0.5, errors
    if adapt:  # the temperatures moved, and stayed valid
        betas = [np.asarray(r["betas"]) for r in res.history.evals]
        assert np.abs(betas[-1] - np.linspace(1, 0, 6)).max() > 0.02
        for b in betas:
            P.check_betas(b)
    else:
        assert "betas" not in res.history.evals[-1]


def test_adapt_betas_equalises_rates_of_its_model_and_checks_input():
    """eq. pt-adapt as the oracle: rates erfc(length / 2), with the length of an interval the
    integral of a spread 1 + 40 beta^3 over it, become equal under repeated full steps (each step
    assumes the spread constant on the old intervals, so it converges rather than lands); the ends
    stay put."""
    from scipy.special import erfc

    def rates(b):
        F = lambda beta: beta + 10.0 * beta**4  # noqa: E731  (the integral of the spread)
        b = np.asarray(b, np.float64)
        return erfc((F(b[:-1]) - F(b[1:])) / 2)

    b = P.linear_betas(8)
    assert np.ptp(rates(b)) > 0.5
    spreads = []
    for _ in range(4):
        b = P.adapt_betas(b, rates(b), step=1.0)
        spreads.append(np.ptp(rates(b)))
    assert spreads[-1] < 0.005 and all(a > b for a, b in zip(spreads, spreads[1:]))
    assert float(b[0]) == 1.0 and float(b[-1]) == 0.0
    # equal rates are already a fixed point; a half step moves half way
    even = P.adapt_betas(b, np.full(7, 0.5), step=1.0)
    np.testing.assert_allclose(P.adapt_betas(b, np.full(7, 0.5), step=1.0), even)
    half = P.adapt_betas(P.linear_betas(8), rates(P.linear_betas(8)), step=0.5)
    full = P.adapt_betas(P.linear_betas(8), rates(P.linear_betas(8)), step=1.0)
    np.testing.assert_allclose(
        half, (np.asarray(full) + np.asarray(P.linear_betas(8))) / 2, atol=1e-6
    )
    with pytest.raises(ValueError, match="one rate per neighbouring pair"):
        P.adapt_betas(P.linear_betas(8), np.full(8, 0.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        P.adapt_betas(P.linear_betas(8), np.full(7, 1.5))
    with pytest.raises(ValueError, match="step"):
        P.adapt_betas(P.linear_betas(8), np.full(7, 0.5), step=0.0)


def test_bad_input_is_refused():
    rbm = P.RBM(6, 3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="binary"):
        P.train_sml_pt(rbm, np.full((10, 6), 0.5), seed=0, steps=1)
    with pytest.raises(ValueError, match="shape"):
        P.train_sml_pt(rbm, np.zeros((10, 5)), seed=0, steps=1)
    with pytest.raises(ValueError, match="decreasing"):
        P.check_betas([1.0, 0.2, 0.5, 0.0])
    with pytest.raises(ValueError, match="from 1"):
        P.check_betas([0.9, 0.0])
    with pytest.raises(ValueError, match="n_chains must be an integer >= 2"):
        P.train_sml_pt(rbm, np.zeros((10, 6)), seed=0, steps=1, n_chains=1)


@pytest.mark.slow
def test_early_stopping_returns_the_best_tracked_validation_point():
    rng = np.random.default_rng(1)
    protos = rng.random((3, 12)) < 0.5
    # noqa: E731
    make = lambda n: (protos[rng.integers(0, 3, n)] ^ (rng.random((n, 12)) < 0.1)).astype(np.uint8)
    x_train, x_valid = make(40), make(200)  # a tiny training set, so validation peaks
    rbm = P.RBM(12, 10, rngs=nnx.Rngs(0), visible_bias=P.log_odds_of_mean(x_train))
    res = P.train_sml_pt(
        rbm,
        x_train,
        seed=0,
        steps=6000,
        learning_rate=0.05,
        eval_every=200,
        betas=P.linear_betas(5),
        x_valid=x_valid,
        patience=3,
    )
    valid = [r["valid_ll"] for r in res.history.evals]
    best = int(np.argmax(valid))
    assert res.history.best_step == res.history.evals[best]["step"]
    assert len(valid) - 1 - best <= 3  # stopped at most `patience` evaluations later
    # the returned model is the best one: its exact validation likelihood is the recorded best up to
    # tracking error
    exact = float(
        -jnp.mean(res.model.free_energy(jnp.asarray(x_valid, jnp.float32)))
    ) - P.exact_log_z(res.model)
    assert abs(exact - valid[best]) < 0.5
    with pytest.raises(ValueError, match="x_valid"):
        P.train_sml_pt(rbm, x_train, seed=0, steps=10, patience=2)


def test_time_sml_pt_reports_both_variants():
    rbm = P.RBM(8, 4, rngs=nnx.Rngs(0))
    x = (np.random.default_rng(0).random((50, 8)) < 0.5).astype(np.uint8)
    out = P.time_sml_pt(rbm, x, seed=0, steps=20, repeats=1, betas=P.linear_betas(3))
    assert out["train"] > 0 and out["train_and_track"] > 0
    assert out["overhead"] == pytest.approx(out["train_and_track"] / out["train"] - 1)


@pytest.fixture
def data_dir_set(monkeypatch):
    import os

    if not os.environ.get("LIB_DATA_DIR"):
        pytest.skip("LIB_DATA_DIR not set")


@pytest.mark.slow
def test_partition_mnist_experiment_end_to_end(data_dir_set):
    from lib.record import EXPERIMENTS

    config = dict(
        EXPERIMENTS["partition-mnist"].presets["book"],
        n_hidden=12,
        steps=400,
        eval_every=200,
        ais_every=400,
        ais_counts=[50, 200, 200],
        ais_runs=20,
        trace_every=50,
        timing_steps=50,
        schedules=[[0.01, 1e3]],
    )
    rows = R.run_partition_mnist(config)
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [200, 400]
    assert all(abs(r["log_z"] - r["exact_log_z"]) < 0.5 for r in evals)
    assert evals[-1]["ais_lower"] - 0.1 < evals[-1]["exact_log_z"] < evals[-1]["ais_upper"] + 0.1
    trace = next(r for r in rows if r["kind"] == "trace")
    assert len(trace["step"]) == len(trace["log_z"]) == len(trace["bridge_log_z"]) == 8
    assert len(trace["swap_rate"]) == 9
    assert {"train", "train_and_track", "overhead"} <= set(
        next(r for r in rows if r["kind"] == "timing")
    )


@pytest.mark.slow
def test_partition_uci_and_large_experiments_end_to_end(data_dir_set):
    from lib.record import EXPERIMENTS

    small_ais = dict(ais_counts=[50, 300, 300], ais_runs=20)
    rows = R.run_partition_uci(
        dict(
            EXPERIMENTS["partition-uci"].presets["book"],
            n_hidden=[16],
            epochs=6,
            eval_epochs=2,
            patience=1,
            **small_ais,
        )
    )
    chosen = next(r for r in rows if r["kind"] == "chosen")
    assert (
        chosen["dataset"] == "dna"
        and chosen["test_ll_ais_low"] <= chosen["test_ll_ais"] <= chosen["test_ll_ais_high"]
    )
    assert (
        abs(chosen["test_ll_tracked"] - chosen["test_ll_ais"]) < 2.0
    )  # a nearly independent model: both agree
    assert len(chosen["swap_rate"]) == 9 and all(
        0.0 <= r <= 1.0 for r in chosen["swap_rate"]
    )  # 10 temperatures
    rows = R.run_partition_large(
        dict(
            EXPERIMENTS["partition-large"].presets["book"],
            n_hidden=20,
            steps=200,
            eval_every=100,
            trace_every=50,
            **small_ais,
        )
    )
    final = next(r for r in rows if r["kind"] == "final")
    assert abs(final["test_ll_tracked"] - final["test_ll_ais"]) < 2.0
    with pytest.raises(ValueError, match="unknown dataset"):
        R.run_partition_large(
            dict(EXPERIMENTS["partition-large"].presets["book"], datasets=["cifar"])
        )


def test_rbm_gibbs_leaves_the_model_invariant_and_log_prob_normalises():
    rbm = tiny_rbm(4, 3, seed=5)
    for beta in (1.0, 0.5):
        log_z, free, V, _, _ = brute_force(rbm, beta)
        p = np.exp(-free - log_z)
        if beta == 1.0:  # log p(v) = -F(v) - log Z sums to one over all v
            lp = np.asarray(rbm.log_prob(jnp.asarray(V, jnp.float32), P.exact_log_z(rbm)))
            assert abs(np.exp(lp.astype(np.float64)).sum() - 1) < 1e-4
        n = 40000
        start = jnp.asarray(V[np.random.default_rng(0).choice(16, size=n, p=p)], jnp.float32)
        v, a = rbm.gibbs(start, jax.random.key(3), beta, steps=2)
        np.testing.assert_allclose(np.asarray(a), np.asarray(rbm.hidden_input(v)), atol=1e-5)
        counts = np.bincount(
            (np.asarray(v) @ (2 ** np.arange(3, -1, -1))).astype(int), minlength=16
        )
        assert np.sum((counts - n * p) ** 2 / (n * p)) < 45.0  # 15 dof: p < 1e-4 under the null


def test_an_interrupted_training_resumes_to_the_uninterrupted_result(tmp_path):
    """Checkpointed every 400 updates and stopped at update 1000 (an exception in the evaluation):
    the resumed run restores update 800 and ends with the chains, tracker, parameters and history of
    an uninterrupted run, with early stopping's bookkeeping carried across."""
    rng = np.random.default_rng(1)
    protos = rng.random((3, 12)) < 0.5
    # noqa: E731
    make = lambda n: (protos[rng.integers(0, 3, n)] ^ (rng.random((n, 12)) < 0.1)).astype(np.uint8)
    x_train, x_valid = make(40), make(200)
    kwargs = dict(
        steps=2000,
        learning_rate=0.05,
        eval_every=200,
        betas=P.linear_betas(5),
        x_valid=x_valid,
        patience=20,
    )

    def run(**more):
        rbm = P.RBM(12, 10, rngs=nnx.Rngs(0), visible_bias=P.log_odds_of_mean(x_train))
        return P.train_sml_pt(rbm, x_train, seed=0, **kwargs, **more)

    straight = run()

    def stop_at_1000(model, state, t):
        if t == 1000:
            raise KeyboardInterrupt
        return {}

    with pytest.raises(KeyboardInterrupt):
        run(checkpoint_dir=tmp_path, checkpoint_every=400, evaluate=stop_at_1000)
    assert max(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == 800
    resumed = run(checkpoint_dir=tmp_path, checkpoint_every=400)
    assert resumed.history.best_step == straight.history.best_step
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in resumed.history.evals] == [
        {k: v for k, v in r.items() if k != "seconds"} for r in straight.history.evals
    ]
    for a, b in zip(
        jax.tree.leaves((resumed.history.state, dict(resumed.history))),
        jax.tree.leaves((straight.history.state, dict(straight.history))),
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(
        jax.tree.leaves(nnx.state(resumed.model)), jax.tree.leaves(nnx.state(straight.model))
    ):
        np.testing.assert_array_equal(a, b)


def test_thin_history_keeps_points_and_window_means():
    """thin_history against loops: point values at every k-th step, means of each window of k."""
    rng = np.random.default_rng(3)
    T, k, M = 23, 5, 4
    history = {
        "log_z": rng.normal(size=T),
        "log_z_var": rng.uniform(0.1, 1.0, size=T),
        "bias": rng.normal(size=T),
        "is_obs": rng.normal(size=(T, M)),
        "bridge_log_z": rng.normal(size=T),
        "swap_rate": rng.uniform(size=(T, M - 1)),
    }
    out = P.thin_history(history, k)
    n = T // k
    assert out["step"] == [k * (i + 1) for i in range(n)]
    for i in range(n):
        at, window = k * (i + 1) - 1, slice(k * i, k * (i + 1))
        assert out["log_z"][i] == pytest.approx(history["log_z"][at])
        assert out["log_z_sd"][i] == pytest.approx(math.sqrt(history["log_z_var"][at]))
        assert out["bias"][i] == pytest.approx(history["bias"][at])
        assert out["is_obs_1"][i] == pytest.approx(history["is_obs"][window, 0].mean())
        assert out["bridge_log_z"][i] == pytest.approx(history["bridge_log_z"][window].mean())
    swap = np.mean([history["swap_rate"][k * i : k * (i + 1)].mean(0) for i in range(n)], 0)
    np.testing.assert_allclose(out["swap_rate"], swap, rtol=1e-12)


def test_exact_evaluator_against_brute_force():
    """The evaluation callback of train_sml_pt: exact log Z and test log-likelihoods against the
    enumeration of both layers, the tracked one from the state's tracker, AIS only every
    `ais_every` steps (never with None) and then bracketing the exact value."""
    from types import SimpleNamespace

    rbm = tiny_rbm(6, 4, seed=2)
    x = np.random.default_rng(0).integers(0, 2, size=(30, 6))
    log_z, free, V, _, _ = brute_force(rbm, 1.0)
    index = {tuple(v): i for i, v in enumerate(V.astype(int))}
    mean_ll = -np.mean([free[index[tuple(v)]] for v in x])
    state = SimpleNamespace(tracker=SimpleNamespace(mean=jnp.asarray([log_z + 0.25])))
    evaluate = P.exact_evaluator(
        x, base_bias=jnp.zeros(6), ais_every=10, ais_counts=[50, 200, 200], ais_runs=50
    )
    out = evaluate(rbm, state, 5)
    assert out["exact_log_z"] == pytest.approx(log_z, abs=1e-4)
    assert out["test_ll_exact"] == pytest.approx(mean_ll - log_z, abs=1e-4)
    assert out["test_ll_tracked"] == pytest.approx(mean_ll - log_z - 0.25, abs=1e-4)
    assert "ais_log_z" not in out and out["exact_seconds"] >= 0
    out = evaluate(rbm, state, 10)
    assert out["ais_lower"] - 0.05 < log_z < out["ais_upper"] + 0.05
    never = P.exact_evaluator(x, base_bias=jnp.zeros(6), ais_every=None, ais_counts=[5, 5, 5])
    assert "ais_log_z" not in never(rbm, state, 10)
    with pytest.raises(ValueError, match="x_test"):
        P.exact_evaluator(x + 2, base_bias=jnp.zeros(6), ais_every=10, ais_counts=[5, 5, 5])


def _uci_row(kind, valid, kf, ais, n_hidden=500, lr0=0.01, alpha=1e4, width=0.6):
    return {
        "kind": kind,
        "n_hidden": n_hidden,
        "lr0": lr0,
        "alpha": alpha,
        "valid_ll_tracked": valid,
        "test_ll_tracked": kf,
        "test_ll_ais": ais,
        "test_ll_ais_low": ais - width / 2,
        "test_ll_ais_high": ais + width / 2,
    }


def _uci_records(seed_setting=None):
    grid, wide, s1, s2 = R._uci_sources("toy")
    seed = dict(seed_setting or {})
    return {
        grid: {"rows": [_uci_row("candidate", -10.0, -9.0, -9.5, n_hidden=100)]},
        wide: {"rows": [_uci_row("candidate", -8.0, -7.0, -7.4)]},
        # a seed run with a better validation value than the grid's: it must not be chosen
        s1: {"rows": [_uci_row(k, -1.0, -7.4, -8.0, **seed) for k in ("candidate", "chosen")]},
        s2: {"rows": [_uci_row(k, -9.0, -6.9, -7.1, **seed) for k in ("candidate", "chosen")]},
    }


def test_table1_records_choose_from_the_grid_and_band_from_the_seeds():
    records = _uci_records()
    assert R._chosen(records, "test_ll_tracked") == -7.0  # the wide grid's, not seed 1's
    for key, values in (
        ("test_ll_tracked", [-7.0, -7.4, -6.9]),
        ("test_ll_ais", [-7.4, -8.0, -7.1]),
    ):
        assert R._run_spread(records, key) == pytest.approx(statistics.stdev(values))
    kalman = R._tolerance("Kalman", 0.9, R._chosen, seeds=True)["tolerance"](records)
    assert kalman == pytest.approx(2 * math.sqrt(2) * statistics.stdev([-7.0, -7.4, -6.9]))
    ais = R._tolerance("AIS", 0.9, R._chosen, seeds=True)["tolerance"](records)
    sd = statistics.stdev([-7.4, -8.0, -7.1])  # paper 3 sd 0.9, ours 0.6 wide (3 sd each side)
    assert ais == pytest.approx(2 * math.sqrt(0.3**2 + 0.1**2 + 2 * sd**2))
    assert R._tolerance("AIS", 0.9, R._chosen)["tolerance"](records) == pytest.approx(
        2 * math.hypot(0.3, 0.1)
    )


def test_table1_band_refuses_seed_runs_of_another_setting():
    with pytest.raises(ValueError, match="not the chosen setting"):
        R._run_spread(_uci_records({"lr0": 0.001}), "test_ll_tracked")
    grid, wide, *_ = R._uci_sources("toy")
    alone = {p: r for p, r in _uci_records().items() if p in (grid, wide)}
    with pytest.raises(ValueError, match="needs the seed runs"):
        R._run_spread(alone, "test_ll_tracked")
