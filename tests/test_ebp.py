"""Tests of lib.ebp against Monte Carlo, finite differences, float64 closed forms and dense
references."""

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import log_ndtr as log_ndtr64

from lib import ebp as E
from lib import ebp_report as R


def random_net(sizes, seed=0, scale=0.6):
    """Fields drawn (out, in) and stored (in, out), the library's layout; out_in undoes it."""
    rng = np.random.default_rng(seed)
    return E.EBPNet(
        tuple(
            jnp.asarray(rng.normal(0, scale, (o, i)).T, jnp.float32)
            for i, o in zip(sizes[:-1], sizes[1:])
        ),
        tuple(jnp.asarray(rng.normal(0, 0.5, o), jnp.float32) for o in sizes[1:]),
    )


def out_in(field, dtype=np.float32):
    """A field as the paper writes W: (out, in), numpy."""
    return np.asarray(field, dtype).T


def test_init_stores_in_out_the_network_it_always_drew():
    """Fields are stored (in, out) but drawn (out, in) as before the layout changed, so a key gives
    the network it gave then (the results files' runs)."""
    key = jax.random.key(3)
    net = E.init_ebp(key, [7, 5, 2], kind="real")
    for k, i, o, h in zip(jax.random.split(key, 2), (7, 5), (5, 2), net.fields):
        drawn = (np.asarray(jax.random.uniform(k, (o, i))) - 0.5) * math.sqrt(12 / i)
        assert h.shape == (i, o)
        np.testing.assert_allclose(np.asarray(h), drawn.T, rtol=1e-6)


@pytest.mark.parametrize("kind", E.KINDS)
def test_forward_moments_match_monte_carlo_of_sampled_networks(kind):
    rng = np.random.default_rng(1)
    K, n = 300, 20000
    net = random_net([K, 4], seed=2)
    x = jnp.asarray(rng.normal(size=(1, K)), jnp.float32)
    _, (mu,), (var,), mean_v = E.ebp_forward(net, x, kind, extra_var=0.0)
    h = out_in(net.fields[0])
    w = (
        np.where(rng.random((n, 4, K)) < 1 / (1 + np.exp(-2 * h)), 1.0, -1.0)
        if kind == "binary"
        else h + rng.normal(size=(n, 4, K))
    )
    u = (w @ np.asarray(x)[0] + np.asarray(net.biases[0])) / math.sqrt(K + 1)
    np.testing.assert_allclose(np.asarray(mu[0]), u.mean(0), atol=5 * np.sqrt(u.var(0) / n).max())
    np.testing.assert_allclose(np.asarray(var[0]), u.var(0), rtol=0.05)
    np.testing.assert_allclose(np.asarray(mean_v[0]), np.sign(u).mean(0), atol=0.03)


def test_hidden_layer_variance_matches_monte_carlo():
    """Second layer: inputs are independent signs with the given means (the mean-field
    assumption)."""
    rng = np.random.default_rng(3)
    K, n = 200, 20000
    net = random_net([5, K, 3], seed=4)
    m = rng.uniform(-0.9, 0.9, K)
    for kind in E.KINDS:
        h = out_in(net.fields[1])
        wm = np.tanh(h) if kind == "binary" else h
        second = 1.0 if kind == "binary" else h**2 + 1
        var = (np.sum(second * np.ones_like(h), 1) - (m**2) @ (wm**2).T) / (K + 1)
        v = np.where(rng.random((n, K)) < (1 + m) / 2, 1.0, -1.0)
        w = (
            np.where(rng.random((n, 3, K)) < 1 / (1 + np.exp(-2 * h)), 1.0, -1.0)
            if kind == "binary"
            else h + rng.normal(size=(n, 3, K))
        )
        u = np.einsum("nok,nk->no", w, v) / math.sqrt(K + 1)
        np.testing.assert_allclose(var, u.var(0), rtol=0.05)
        # and the library computes the same expression from <v>
        x = jnp.zeros((1, 5))
        net2 = E.EBPNet(net.fields, net.biases)
        inputs, mus, variances, _ = E.ebp_forward(net2, x, kind, extra_var=0.0)
        m2 = np.asarray(inputs[1][0])
        expect = (np.sum(second * np.ones_like(h), 1) - (m2**2) @ (wm**2).T) / (K + 1)
        np.testing.assert_allclose(np.asarray(variances[1][0]), expect, rtol=1e-5)


def test_output_delta_against_float64_and_its_limit():
    z = np.concatenate([np.linspace(-30, 30, 61), [-1e3, 1e3]])
    for y in (1.0, -1.0):
        mu, var = y * z * 2.0, np.full_like(z, 4.0)  # sigma = 2, so y mu / sigma = z
        ours = np.asarray(
            E.output_delta(jnp.asarray(mu, jnp.float32), jnp.asarray(var, jnp.float32), y)
        )
        assert np.isfinite(ours).all()
        exact = y * np.exp(-0.5 * z**2 - 0.5 * np.log(2 * np.pi) - log_ndtr64(z)) / 2.0
        np.testing.assert_allclose(
            ours, exact, rtol=2e-3, atol=1e-30
        )  # float32: -z^2/2 - log Phi(z) cancels
        limit = np.asarray(E.asymptotic_output_delta(jnp.asarray(mu), jnp.asarray(var), y))
        far = z < -8
        np.testing.assert_allclose(ours[far], limit[far], rtol=0.02)
        # a confidently wrong output is pushed towards y: the sign of the update is the label's
        assert np.all(np.sign(ours[far]) == y)


def test_authors_binary_fallback_has_the_wrong_sign_for_negative_labels():
    mu, var, y = 50.0, 1.0, -1.0  # confidently +, label -
    ours = float(E.output_delta(jnp.float32(mu), jnp.float32(var), y))
    authors = y * (-mu / var)  # Binary_EBP_minibatch.m: Y .* (-mu/var)
    assert ours < 0 < authors


def test_backward_deltas_are_derivatives_of_the_log_marginal_likelihood():
    """Delta_{l-1} = d ln Phi(y mu_L / sigma_L) / d mu_{l-1} with the sigmas held fixed (finite
    differences)."""
    net = random_net([6, 40, 1], seed=5, scale=0.8)
    x = jnp.asarray(np.random.default_rng(6).normal(size=(1, 6)), jnp.float32)
    y = jnp.ones((1, 1))
    for kind in E.KINDS:
        inputs, mus, variances, _ = E.ebp_forward(net, x, kind)
        w2 = out_in(E.weight_mean(net.fields[1], kind), np.float64)
        b2 = np.asarray(net.biases[1], np.float64)
        s1, s2 = (
            np.sqrt(np.asarray(variances[0][0], np.float64)),
            math.sqrt(float(variances[1][0, 0])),
        )

        def log_p(mu1):
            m1 = 2 * 0.5 * (1 + np.vectorize(math.erf)(mu1 / s1 / math.sqrt(2))) - 1
            mu2 = (w2 @ m1 + b2) / math.sqrt(41)
            return float(log_ndtr64(mu2[0] / s2))

        mu1 = np.asarray(mus[0][0], np.float64)
        eps = 1e-5
        fd = np.array(
            [(log_p(mu1 + eps * e) - log_p(mu1 - eps * e)) / (2 * eps) for e in np.eye(40)]
        )
        d_out = E.output_delta(mus[1], variances[1], y)
        density = np.exp(-0.5 * (mu1 / s1) ** 2) / (math.sqrt(2 * math.pi) * s1)
        ours = 2 / math.sqrt(41) * density * (np.asarray(d_out) @ w2)[0]
        np.testing.assert_allclose(ours, fd, rtol=1e-3, atol=1e-7)


def test_single_layer_field_update_is_the_bayes_update_to_first_order():
    """A perceptron with binary weights: the exact Gaussian-approximation marginal likelihood with
    one weight clamped, ln Phi(y mu(W_j) / sigma(W_j)), changes by 2 * (field increment) between W_j
    = -1 and +1."""
    K = 2000
    rng = np.random.default_rng(7)
    net = E.EBPNet((jnp.asarray(rng.normal(0, 0.3, (K, 1)), jnp.float32),), (jnp.zeros(1),))
    x = jnp.asarray(np.sign(rng.normal(size=(1, K))), jnp.float32)
    y = jnp.asarray([[1.0]])
    new = E.ebp_update(net, x, y, "binary", extra_var=0.0)
    dh = out_in(new.fields[0] - net.fields[0])[0]
    h, xv = out_in(net.fields[0], np.float64)[0], np.asarray(x, np.float64)[0]
    m = np.tanh(h)
    mu_all, var_all = m @ xv, np.sum((1 - m**2) * xv**2)
    for j in rng.choice(K, 20, replace=False):

        def lp(wj):
            mu = (mu_all - m[j] * xv[j] + wj * xv[j]) / math.sqrt(K + 1)
            var = (var_all - (1 - m[j] ** 2) * xv[j] ** 2) / (K + 1)
            return log_ndtr64(mu / math.sqrt(var))

        exact = 0.5 * (lp(1.0) - lp(-1.0))
        assert abs(dh[j] - exact) < 0.05 * abs(exact) + 1e-6


def test_no_nan_for_inputs_of_extreme_magnitude():
    rng = np.random.default_rng(8)
    x = jnp.asarray(rng.normal(size=(10, 50)) * 1e4, jnp.float32)
    y = jnp.asarray(np.sign(rng.normal(size=(10, 1))), jnp.float32)
    for kind in E.KINDS:
        net = E.init_ebp(jax.random.key(0), [50, 8, 1], kind=kind)
        for _ in range(20):
            net = E.ebp_update(net, x, y, kind)
        assert all(bool(jnp.isfinite(h).all()) for h in net.fields)
        assert bool(jnp.isfinite(E.ebp_p(net, x, kind)).all())


def _coo_rows(x, rows, width):
    """The oracle: scipy's own row selection and COO conversion, padded with zeros."""
    coo = x[np.asarray(rows)].tocoo()
    pad = width - coo.nnz
    return {
        "idx": np.concatenate([coo.col, np.zeros(pad, int)]).astype(np.int32),
        "val": np.concatenate([coo.data, np.zeros(pad)]).astype(np.float32),
        "row": np.concatenate([coo.row, np.zeros(pad, int)]).astype(np.int32),
    }


def test_sparse_batches_and_sparse_rows_are_scipys_rows_padded():
    rng = np.random.default_rng(4)
    dense = (rng.random((53, 40)) < 0.1) * rng.normal(size=(53, 40))
    dense[7] = 0  # a row with no nonzeros
    x = sp.csr_array(dense)
    order = rng.permutation(53)
    got = E.sparse_batches(x, order, 5)
    batches = order[:50].reshape(10, 5)
    width = max(int(np.diff(x.indptr)[b].sum()) for b in batches)
    for k, b in enumerate(batches):
        want = _coo_rows(x, b, width)
        for name in ("idx", "val", "row"):
            np.testing.assert_array_equal(getattr(got, name)[k], want[name], err_msg=name)
            assert getattr(got, name).dtype == want[name].dtype
    assert got.n == 5 and got.idx.shape == (10, width)
    every = np.arange(53)
    for rows, w, want in (
        (order[:9], None, _coo_rows(x, order[:9], x[order[:9]].nnz)),
        (order[:9], 60, _coo_rows(x, order[:9], 60)),
        (None, None, _coo_rows(x, every, x.nnz)),  # all rows by default
    ):
        one = E.sparse_rows(x, rows, w)
        for name in ("idx", "val", "row"):
            np.testing.assert_array_equal(getattr(one, name), want[name], err_msg=name)
        assert one.n == (53 if rows is None else 9)
    with pytest.raises(ValueError, match="do not fit in width 3"):
        E.sparse_rows(x, order[:9], 3)


def test_sparse_and_dense_inputs_train_the_same_network():
    rng = np.random.default_rng(9)
    dense = (rng.random((60, 300)) < 0.05) * rng.integers(1, 20, (60, 300))
    y = np.sign(rng.normal(size=60)).astype(int)
    for kind in E.KINDS:
        a, _ = E.train_ebp(
            E.init_ebp(jax.random.key(0), [300, 7, 1], kind=kind),
            dense.astype(float),
            y,
            seed=1,
            epochs=2,
        )
        b, _ = E.train_ebp(
            E.init_ebp(jax.random.key(0), [300, 7, 1], kind=kind),
            sp.csr_array(dense.astype(float)),
            y,
            seed=1,
            epochs=2,
        )
        for u, v in zip(a.fields, b.fields):
            np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-4, atol=1e-5)
    a, _ = E.train_bp(
        E.init_ebp(jax.random.key(0), [300, 7, 1], kind="real"),
        dense.astype(float),
        y,
        seed=1,
        learning_rate=0.01,
    )
    b, _ = E.train_bp(
        E.init_ebp(jax.random.key(0), [300, 7, 1], kind="real"),
        sp.csr_array(dense.astype(float)),
        y,
        seed=1,
        learning_rate=0.01,
    )
    np.testing.assert_allclose(
        np.asarray(a.fields[0]), np.asarray(b.fields[0]), rtol=1e-4, atol=1e-6
    )


def test_ebp_learns_a_teacher_sign_network():
    rng = np.random.default_rng(10)
    M = 200
    teacher = np.sign(rng.normal(size=M))
    x = rng.normal(size=(3000, M))
    y = np.sign(x @ teacher).astype(int)
    net, hist = E.train_ebp(
        E.init_ebp(jax.random.key(0), [M, 1], kind="binary"),
        x[:2500],
        y[:2500],
        seed=1,
        epochs=2,
        x_valid=x[2500:],
        y_valid=y[2500:],
    )
    assert hist["EBP-P"][-1] < 0.1
    assert np.mean(np.sign(out_in(net.fields[0])[0]) == teacher) > 0.9


def test_bad_input_is_refused():
    net = E.init_ebp(jax.random.key(0), [5, 3, 1], kind="binary")
    x = np.zeros((4, 5))
    with pytest.raises(ValueError, match="-1 or \\+1"):
        E.train_ebp(net, x, np.array([0, 1, 1, 0]), seed=0)
    with pytest.raises(ValueError, match="features"):
        E.train_ebp(net, np.zeros((4, 6)), np.ones(4), seed=0)
    with pytest.raises(ValueError, match="finite"):
        E.train_ebp(net, np.full((4, 5), np.nan), np.ones(4), seed=0)
    with pytest.raises(ValueError, match="finite"):
        E.train_ebp(net, sp.csr_array(np.full((4, 5), np.inf)), np.ones(4), seed=0)
    with pytest.raises(ValueError, match="kind"):
        E.train_ebp(net, x, np.ones(4), seed=0, kind="ternary")
    with pytest.raises(ValueError, match="contradicts the network, whose weights are binary"):
        E.train_ebp(net, x, np.ones(4), kind="real")
    with pytest.raises(ValueError, match="contradicts"):
        E.ebp_p(net, x, "real")
    with pytest.raises(ValueError, match="rows"):
        E.train_ebp(net, x, np.ones(3), seed=0)
    with pytest.raises(ValueError, match="loss"):
        E.train_bp(net, x, np.ones(4), seed=0, learning_rate=0.1, loss="hinge")


def test_folds_and_summary():
    train, test = E.fold_indices(1943, 7)
    assert (
        len(np.intersect1d(train, test)) == 0
        and len(train) + len(test) == 1943
        and test[-1] == 1942
    )
    rows = [
        {
            "task": "t",
            "fold": f,
            "method": m,
            "epoch": e,
            "EBP-P": 0.1 * e + 0.01 * f,
            "EBP-D": 0.2,
            "seconds_per_epoch": 1,
        }
        for f in range(2)
        for m in ("Real EBP", "Binary EBP")
        for e in (1, 2)
    ]
    rows += [
        {
            "task": "t",
            "fold": f,
            "method": f"BP ce {lr}",
            "epoch": 1,
            "BP": lr,
            "clipped BP": 0.5,
            "seconds_per_epoch": 1,
        }
        for f in range(2)
        for lr in (0.3, 0.2)
    ]
    s = R.summarise_ebp_text(rows)["t"]
    assert s["Real EBP-P"][0] == pytest.approx(100 * 0.105) and s["Real EBP-P"][2] == 2
    assert s["BP setting"] == "BP ce 0.2" and s["BP"][0] == pytest.approx(20.0)


@pytest.mark.skipif(not os.environ.get("LIB_DATA_DIR"), reason="LIB_DATA_DIR not set")
@pytest.mark.slow
def test_ebp_text_experiment_end_to_end():
    from lib.record import EXPERIMENTS

    config = dict(
        EXPERIMENTS["ebp-text"].presets["book"],
        tasks=["reuters_I654_I65"],
        epochs=1,
        bp_losses=["ce", "mse"],
        bp_learning_rates=[0.1],
    )
    rows = R.run_ebp_text(config)
    assert {r["method"] for r in rows} == {"Real EBP", "Binary EBP", "BP ce 0.1", "BP mse 0.1"}
    s = R.summarise_ebp_text(rows)["reuters_I654_I65"]
    assert s["Real EBP-P"][0] < 35 and s["Binary EBP-P"][0] < 35
    with pytest.raises(ValueError, match="bp_losses"):
        R.run_ebp_text(dict(config, bp_losses=["hinge"]))


def test_ensemble_of_sampled_networks_matches_the_forward_mean_and_the_map_network():
    rng = np.random.default_rng(11)
    K = 400
    x = jnp.asarray(rng.normal(size=(3, K)), jnp.float32)
    for kind in E.KINDS:
        net = E.EBPNet(
            (jnp.asarray(rng.normal(0, 0.5, (K, 1)), jnp.float32),), (jnp.asarray([0.3]),)
        )
        vote = np.asarray(E.ebp_ensemble(net, x, kind, jax.random.key(0), n_networks=4000))
        # one layer, large fan-in: the mean output sign over sampled networks is <v_L> of eq. 4.1
        np.testing.assert_allclose(
            vote, np.asarray(E.ebp_p(net, x, kind, extra_var=0.0)), atol=0.05
        )
    # nearly deterministic binary posteriors: every sampled network is the MAP network of EBP-D
    sure = E.EBPNet(
        (
            jnp.asarray(np.sign(rng.normal(size=(K, 5))) * 20, jnp.float32),
            jnp.asarray(np.sign(rng.normal(size=(5, 1))) * 20, jnp.float32),
        ),
        (jnp.zeros(5), jnp.zeros(1)),
    )
    vote = np.asarray(E.ebp_ensemble(sure, x, "binary", jax.random.key(1), n_networks=8))
    np.testing.assert_array_equal(vote, np.sign(np.asarray(E.ebp_d(sure, x, "binary"))))


def test_bp_update_is_a_gradient_step_on_the_written_out_loss():
    rng = np.random.default_rng(12)
    net = E.init_ebp(jax.random.key(0), [6, 4, 1], kind="real")
    x = jnp.asarray(rng.normal(size=(5, 6)), jnp.float32)
    y = jnp.asarray(np.sign(rng.normal(size=(5, 1))), jnp.float32)
    for loss in ("ce", "mse"):

        def written_out(params):
            w1, b1, w2, b2 = params
            f = jnp.tanh(x @ w1 + b1) @ w2 + b2  # fields are (in, out)
            return (
                jnp.mean(jnp.log1p(jnp.exp(-y * f)))
                if loss == "ce"
                else jnp.mean((jnp.tanh(f) - y) ** 2)
            )

        params = (net.fields[0], net.biases[0], net.fields[1], net.biases[1])
        grads = jax.grad(written_out)(params)
        new = E.bp_update(net, x, y, 0.1, loss)
        for got, p, g in zip(
            (new.fields[0], new.biases[0], new.fields[1], new.biases[1]), params, grads
        ):
            np.testing.assert_allclose(
                np.asarray(got), np.asarray(p - 0.1 * g), rtol=1e-5, atol=1e-6
            )


def test_one_vs_rest_and_the_class_error():
    labels = np.array([0, 2, 1, 2])
    y = E.one_vs_rest(labels, 3)
    assert (
        y.shape == (4, 3)
        and (y == np.array([[1, -1, -1], [-1, -1, 1], [-1, 1, -1], [-1, -1, 1]])).all()
    )
    out = np.array([[0.9, 0.1, -2.0], [0.5, 0.2, 0.4], [-1.0, -0.5, -0.9], [-3.0, -2.0, -1.0]])
    # argmax per row: 0 (right), 0 (wrong), 1 (right, though every output is negative), 2 (right)
    assert E.error_rate(out, y) == pytest.approx(
        sum(o.argmax() != c for o, c in zip(out, labels)) / 4
    )
    assert E.error_rate(out, y) == pytest.approx(0.25)
    # labels that are not one class per row keep the sign rule: any wrong sign is an error
    multi = np.array([[1, 1, -1], [-1, -1, -1]])
    assert E.error_rate(np.array([[1.0, 2.0, -1.0], [-1.0, 0.5, -1.0]]), multi) == pytest.approx(
        0.5
    )
    with pytest.raises(ValueError, match="integers in 0..2"):
        E.one_vs_rest([0, 3], 3)


def test_a_ten_class_network_learns_a_teacher_with_one_output_per_class():
    """Multi-output EBP: a random linear teacher's argmax class is learned well above chance."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3000, 40)).astype(np.float32)
    labels = (x @ rng.normal(size=(40, 4))).argmax(1)
    y = E.one_vs_rest(labels, 4)
    for kind in E.KINDS:
        _, history = E.train_ebp(
            E.init_ebp(jax.random.key(0), [40, 60, 4], kind=kind),
            x[:2500],
            y[:2500],
            seed=1,
            epochs=3,
            x_valid=x[2500:],
            y_valid=y[2500:],
        )
        assert history["EBP-P"][-1] < 0.25, (kind, history)  # chance is 0.75


@pytest.mark.skipif(not os.environ.get("LIB_DATA_DIR"), reason="LIB_DATA_DIR not set")
@pytest.mark.slow
def test_ebp_mnist_experiment_end_to_end():
    from lib.record import EXPERIMENTS

    rows = R.run_ebp_mnist(
        dict(
            EXPERIMENTS["ebp-mnist"].presets["book"],
            hidden=[[50]],
            epochs=1,
            bp_learning_rates=[0.1],
        )
    )
    by = {r["method"]: r for r in rows}
    assert len(rows) == 3 and set(by) == {"Real EBP", "Binary EBP", "BP ce 0.1"}
    assert all(r["hidden"] == [50] and r["epoch"] == 1 for r in rows)
    assert (
        by["Real EBP"]["EBP-P"] < 0.15
        and by["Binary EBP"]["EBP-P"] < 0.2
        and by["BP ce 0.1"]["BP"] < 0.2
    )


def test_interrupted_passes_resume_to_the_uninterrupted_network(tmp_path):
    """Checkpointed after every pass and stopped in the third (an exception in the evaluation): the
    resumed run restores pass 2 and ends with the network and per-pass errors of an uninterrupted
    run."""
    rng = np.random.default_rng(0)
    x = np.sign(
        rng.normal(size=(600, 41))
    )  # an odd number of +-1 inputs: the teacher's sum is never 0
    y = np.sign(x @ np.sign(rng.normal(size=41))).astype(int)
    net0 = E.init_ebp(jax.random.key(0), [41, 5, 1], kind="binary")
    args = (x[:500], y[:500], ("ebp", "binary", 1.0))
    kwargs = dict(epochs=4, batch_size=10, x_valid=x[500:], y_valid=y[500:], seed=1)

    def evaluate(net, xt, yt):
        return {"EBP-P": E.error_rate(E.ebp_p(net, xt), yt)}

    def stop_in_third(net, xt, yt):
        if stop_in_third.calls == 2:
            raise KeyboardInterrupt
        stop_in_third.calls += 1
        return evaluate(net, xt, yt)

    stop_in_third.calls = 0
    straight, hist = E.online_passes(net0, *args, evaluate=evaluate, **kwargs)
    with pytest.raises(KeyboardInterrupt):
        E.online_passes(net0, *args, evaluate=stop_in_third, checkpoint_dir=tmp_path, **kwargs)
    assert max(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == 2
    resumed, hist2 = E.online_passes(
        net0, *args, evaluate=evaluate, checkpoint_dir=tmp_path, **kwargs
    )
    assert hist2.rows() == hist.rows() and len(hist["epoch"]) == 4
    for a, b in zip(jax.tree.leaves(resumed), jax.tree.leaves(straight)):
        np.testing.assert_array_equal(a, b)


def _full_arow(x, y, r, epochs):
    """AROW with a full covariance (Crammer, Kulesza & Dredze 2009, Fig. 1), transcribed with
    dense matrices: the oracle for the diagonal version where the two agree."""
    mu, sigma = np.zeros(x.shape[1]), np.eye(x.shape[1])
    for _ in range(epochs):
        for xi, yi in zip(x, y):
            margin = yi * mu @ xi
            if margin < 1:
                beta = 1 / (xi @ sigma @ xi + r)
                mu = mu + (1 - margin) * beta * yi * sigma @ xi
                sigma = sigma - beta * np.outer(sigma @ xi, xi @ sigma)
    return mu, sigma


def test_arow_matches_full_covariance_arow_where_the_diagonal_is_exact():
    """With one nonzero feature per example (and no bias), Sigma x x^T Sigma touches one diagonal
    entry: full AROW keeps Sigma diagonal, and the diagonal version must agree with it."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n, m = 60, 7
    cols, vals = rng.integers(0, m, n), rng.normal(size=n) * 2
    dense = np.zeros((n, m))
    dense[np.arange(n), cols] = vals
    y = np.where(rng.random(n) < 0.5, -1, 1)
    for r in (0.1, 1.0, 10.0):
        want_mu, want_sigma = _full_arow(dense, y, r, epochs=2)
        assert np.allclose(want_sigma, np.diag(np.diag(want_sigma)))
        for x in (dense, sp.csr_array(dense)):
            (mu, sigma), _ = E.train_arow(x, y, r=r, epochs=2, bias=False)
            np.testing.assert_allclose(mu, want_mu, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(sigma, np.diag(want_sigma), rtol=1e-10, atol=1e-12)


def test_arow_update_moves_the_margin_by_the_closed_form_and_learns_a_separable_problem():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 5))
    for r in (0.5, 3.0):
        (mu, _), _ = E.train_arow(x, [1], r=r, epochs=1)
        v = x[0] @ x[0] + 1  # Sigma = I, the bias feature included
        assert mu[:5] @ x[0] + mu[5] == pytest.approx(
            v / (v + r), rel=1e-12
        )  # m + (1 - m) v/(v + r)
    w = rng.normal(size=20)
    x = rng.normal(size=(400, 20))
    y = np.where(x @ w > 0, 1, -1)
    (mu, _), history = E.train_arow(
        x[:300], y[:300], r=1.0, epochs=3, x_valid=x[300:], y_valid=y[300:]
    )
    assert list(history["epoch"]) == [1, 2, 3]
    assert history["AROW"][-1] == E.arow_error(mu, x[300:], y[300:]) < 0.1
    # seeded: each pass in a new random order, still a separating rule
    (shuffled, _), _ = E.train_arow(x[:300], y[:300], r=1.0, epochs=3, seed=0)
    assert not np.allclose(shuffled, mu) and E.arow_error(shuffled, x[300:], y[300:]) < 0.1
    brute = np.mean(np.where(x[300:] @ mu[:20] + mu[20] >= 0, 1, -1) != y[300:])
    assert E.arow_error(mu, x[300:], y[300:]) == brute
    import scipy.sparse as sp  # the sparse rows' path, with the bias: the dense path's result

    x[rng.random(x.shape) < 0.7] = 0
    dense = E.train_arow(x, y, r=2.0, epochs=2)
    sparse = E.train_arow(sp.csr_array(x), y, r=2.0, epochs=2)
    for a, b in zip(dense.model, sparse.model):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_arow_refuses_bad_arguments_naming_them():
    x, y = np.ones((3, 2)), np.array([1, -1, 1])
    for kwargs, name in (
        (dict(r=0.0), "r"),
        (dict(r=-1.0), "r"),
        (dict(r=1.0, epochs=0), "epochs"),
        (dict(r=1.0, x_valid=x), "y_valid"),
    ):
        with pytest.raises((TypeError, ValueError), match=name):
            E.train_arow(x, y, **kwargs)
    with pytest.raises(ValueError, match="y"):
        E.train_arow(x, y[:2], r=1.0)
    with pytest.raises(ValueError, match="mu"):
        E.arow_error(np.zeros(5), x, y)


def test_predict_labels_are_the_labels_error_rate_scores():
    """predict_labels against error_rate, the scorer written independently: the share of labels that
    differ from y is the error rate of the same outputs, for one output and for classes."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(200, 8)).astype(np.float32)
    for kind in E.KINDS:
        net = E.init_ebp(jax.random.key(0), [8, 6, 1], kind=kind)
        y = np.where(rng.random(200) < 0.5, 1, -1)
        for method, out in (("EBP-P", E.ebp_p(net, x)), ("EBP-D", E.ebp_d(net, x))):
            got = E.predict_labels(net, x, method=method)
            assert set(np.unique(got)) <= {-1, 1} and got.shape == (200,)
            # error_rate counts an output of exactly 0 (a binary sign network's tie) as an error;
            # predict_labels reads it as +1
            decided = np.asarray(out)[:, 0] != 0
            assert (got[~decided] == 1).all()
            assert np.mean(got[decided] != y[decided]) == pytest.approx(
                E.error_rate(np.asarray(out)[decided], y[decided])
            )
        wide = E.init_ebp(jax.random.key(1), [8, 6, 4], kind=kind)
        classes = rng.integers(0, 4, 200)
        got = E.predict_labels(wide, x)
        assert np.mean(got != classes) == pytest.approx(
            E.error_rate(E.ebp_p(wide, x), E.one_vs_rest(classes, 4))
        )
