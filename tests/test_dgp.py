"""lib.dgp against independent oracles: exact GP marginal likelihood, dense formulas, Monte
Carlo."""

import jax
import jax.flatten_util

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy.stats import multivariate_normal  # noqa: E402

import lib.dgp as G  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def exact_posterior_sgp(rng, n=15, d=2, noise=0.07, whiten=False):
    x = rng.normal(size=(n, d))
    y = np.sin(2 * x[:, :1]) + 0.1 * rng.normal(size=(n, 1))
    kern = G.RBF(d, 0.9, 1.1)
    layer = G.SVGPLayer(kern, jnp.asarray(x), 1, jitter=1e-10, whiten=whiten)
    K = np.asarray(kern(jnp.asarray(x), jnp.asarray(x)))
    C = K + noise * np.eye(n)
    m = K @ np.linalg.solve(C, y)
    S = K - K @ np.linalg.solve(C, K) + 1e-12 * np.eye(n)
    if whiten:  # v = L^{-1} u
        L = np.asarray(layer._chol())
        m = np.linalg.solve(L, m)
        S = np.linalg.solve(L, np.linalg.solve(L, S).T).T
    layer.q_mu[...] = jnp.asarray(m)
    layer.q_sqrt[...] = jnp.asarray(np.linalg.cholesky(S)[None])
    lik = G.Gaussian(noise)
    lik.raw_variance[...] = G.softplus_inverse(noise - 1e-6)
    return G.DeepGP([layer], lik, n), x, y, multivariate_normal(np.zeros(n), C).logpdf(y[:, 0])


@pytest.mark.parametrize("whiten", [False, True])
def test_elbo_equals_exact_log_marginal_likelihood(rng, whiten):
    model, x, y, exact = exact_posterior_sgp(rng, whiten=whiten)
    elbo = float(model.elbo(jnp.asarray(x), jnp.asarray(y), jax.random.key(0)))
    assert abs(elbo - exact) < 1e-5


def test_elbo_is_below_exact_for_other_posteriors(rng):
    model, x, y, exact = exact_posterior_sgp(rng)
    model.layers[0].q_mu[...] = model.layers[0].q_mu[...] + 0.1
    assert float(model.elbo(jnp.asarray(x), jnp.asarray(y), jax.random.key(0))) < exact - 1e-3


def test_marginals_and_kl_match_dense_formulas(rng):
    M, N, P = 6, 9, 3
    Gm = rng.normal(size=(M + N, M + N))
    K = Gm @ Gm.T + 0.1 * np.eye(M + N)
    Kzz, Kzx, Kxx = K[:M, :M], K[:M, M:], K[M:, M:]
    q_mu, q_sqrt = rng.normal(size=(M, P)), np.tril(rng.normal(size=(P, M, M)))
    L = np.linalg.cholesky(Kzz)
    mean, var = G.conditional_marginals(
        jnp.asarray(L),
        jnp.asarray(Kzx.T),
        jnp.asarray(np.diag(Kxx)),
        jnp.asarray(q_mu),
        jnp.asarray(q_sqrt),
        whiten=False,
    )
    alpha = np.linalg.solve(Kzz, Kzx)
    kl = 0.0
    for p in range(P):
        S = q_sqrt[p] @ q_sqrt[p].T
        np.testing.assert_allclose(mean[:, p], alpha.T @ q_mu[:, p], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(
            var[:, p], np.diag(Kxx - alpha.T @ (Kzz - S) @ alpha), rtol=1e-8, atol=1e-8
        )
        kl += 0.5 * (
            np.trace(np.linalg.solve(Kzz, S))
            + q_mu[:, p] @ np.linalg.solve(Kzz, q_mu[:, p])
            - M
            + np.linalg.slogdet(Kzz)[1]
            - np.linalg.slogdet(S)[1]
        )
    assert np.isclose(float(G.gauss_kl(jnp.asarray(q_mu), jnp.asarray(q_sqrt), jnp.asarray(L))), kl)
    kl_white = sum(
        0.5
        * (
            np.sum(q_sqrt[p] ** 2)
            + q_mu[:, p] @ q_mu[:, p]
            - M
            - np.linalg.slogdet(q_sqrt[p] @ q_sqrt[p].T)[1]
        )
        for p in range(P)
    )
    assert np.isclose(float(G.gauss_kl(jnp.asarray(q_mu), jnp.asarray(q_sqrt))), kl_white)


def test_whitened_and_plain_layers_give_the_same_predictive(rng):
    Z, x = jnp.asarray(rng.normal(size=(7, 2))), jnp.asarray(rng.normal(size=(11, 2)))
    white = G.SVGPLayer(G.RBF(2, 0.8), Z, 3, whiten=True)
    white.q_mu[...] = jnp.asarray(rng.normal(size=(7, 3)))
    white.q_sqrt[...] = jnp.asarray(np.tril(rng.normal(size=(3, 7, 7))) * 0.3)
    plain = G.SVGPLayer(G.RBF(2, 0.8), Z, 3, whiten=False)
    L = white._chol()
    plain.q_mu[...] = L @ white.q_mu[...]
    plain.q_sqrt[...] = jnp.einsum("ij,pjk->pik", L, jnp.tril(white.q_sqrt[...]))
    for a, b in zip(white(x), plain(x)):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert np.isclose(white.kl(), plain.kl())


def test_samples_match_the_analytic_marginal_for_one_layer(rng):
    """L = 1: the predictive mixture of S samples is the layer's Gaussian marginal exactly."""
    Z, x = jnp.asarray(rng.normal(size=(5, 2))), jnp.asarray(rng.normal(size=(4, 2)))
    layer = G.SVGPLayer(G.RBF(2), Z, 1, q_sqrt_scale=0.4)
    layer.q_mu[...] = jnp.asarray(rng.normal(size=(5, 1)))
    model = G.DeepGP([layer], G.Gaussian(0.1), 10)
    m, v = model.predict_y(x, jax.random.key(0), 7)
    m1, v1 = layer(x)
    np.testing.assert_allclose(m, m1, rtol=1e-10)
    np.testing.assert_allclose(v, v1 + model.likelihood.variance, rtol=1e-8)


def test_two_layer_samples_have_the_inner_marginals(rng):
    """Monte Carlo: the draws of eq. (15) at layer 1 have the layer's analytic mean and variance."""
    Z = jnp.asarray(rng.normal(size=(6, 2)))
    inner = G.SVGPLayer(G.RBF(2, 0.8), Z, 2, np.eye(2), q_sqrt_scale=0.5)
    inner.q_mu[...] = jnp.asarray(rng.normal(size=(6, 2)))
    outer = G.SVGPLayer(G.RBF(2), Z, 1)
    outer.q_mu[...] = jnp.ones((6, 1))
    model = G.DeepGP([inner, outer], G.Gaussian(0.1), 10)
    x = jnp.asarray(rng.normal(size=(3, 2)))
    S = 20000
    mean, var = model.propagate(x, jax.random.key(1), S)  # last layer's marginals given sampled f^1
    # E[mean of layer 2] estimated two ways: from propagate, and by integrating f^1 ~ N(mu1, var1)
    # ourselves
    mu1, var1 = inner(x)
    f1 = mu1[None] + jnp.sqrt(var1)[None] * jax.random.normal(jax.random.key(2), (S,) + mu1.shape)
    m2, _ = outer(f1.reshape(-1, 2))
    a, b = np.asarray(mean[..., 0]), np.asarray(m2.reshape(S, 3))
    se = np.sqrt(a.var(0) / S + b.var(0) / S)
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 5 * se)


def test_log_density_is_the_mixture(rng):
    Z = jnp.asarray(rng.normal(size=(5, 1)))
    model = G.DeepGP(
        [G.SVGPLayer(G.RBF(1), Z, 1, np.eye(1), q_sqrt_scale=0.3), G.SVGPLayer(G.RBF(1), Z, 1)],
        G.Gaussian(0.2),
        10,
    )
    x, y = jnp.asarray(rng.normal(size=(4, 1))), jnp.asarray(rng.normal(size=(4, 1)))
    key = jax.random.key(5)
    m, v = model.propagate(x, key, 30)
    s2 = v + model.likelihood.variance
    brute = np.log(
        np.mean(np.exp(-0.5 * np.log(2 * np.pi * s2) - 0.5 * (y[None] - m) ** 2 / s2), 0)
    )
    np.testing.assert_allclose(model.log_density(x, y, key, 30), brute, rtol=1e-10)


@pytest.mark.slow
def test_elbo_mean_does_not_depend_on_the_minibatch_size(rng):
    from flax import nnx

    x = rng.normal(size=(40, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(40, 1))
    model = G.build_dgp(x, y, 2, num_inducing=8, inner_q_sqrt_scale=0.3)
    graphdef, state = nnx.split(model)
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    @jax.jit
    def estimates(idx, keys):  # one bound estimate per (minibatch, key)
        return jax.vmap(lambda i, k: nnx.merge(graphdef, state).elbo(xj[i], yj[i], k))(idx, keys)

    full = estimates(jnp.tile(jnp.arange(40), (400, 1)), jax.random.split(jax.random.key(0), 400))
    idx = jnp.stack(
        [
            jax.random.choice(k, 40, (8,), replace=False)
            for k in jax.random.split(jax.random.key(1), 4000)
        ]
    )
    mini = estimates(idx, jax.random.split(jax.random.key(2), 4000))
    se = np.sqrt(np.var(mini) / 4000 + np.var(full) / 400)
    assert abs(float(mini.mean()) - float(full.mean())) < 5 * se
    assert np.var(mini) > np.var(full)  # the minibatch adds noise, not bias


def test_build_dgp_mean_functions_and_widths(rng):
    x = rng.normal(size=(50, 5))
    y = rng.normal(size=(50, 1))
    narrow = G.build_dgp(x, y, 3, num_inducing=10, inner_width=2)
    W = np.asarray(narrow.layers[0].mean_W[...])
    assert W.shape == (5, 2) and np.allclose(W.T @ W, np.eye(2))  # orthonormal PCA directions
    assert narrow.layers[1].mean_W[...].shape == (2, 2) and np.allclose(
        narrow.layers[1].mean_W[...], np.eye(2)
    )
    assert narrow.layers[-1].mean_W is None and narrow.layers[-1].num_outputs == 1
    np.testing.assert_allclose(
        narrow.layers[1].Z[...], narrow.layers[0].Z[...] @ W
    )  # Z follows the mean function
    wide = G.build_dgp(x, y, 2, num_inducing=10, inner_width=7)
    assert np.allclose(wide.layers[0].mean_W[...], np.concatenate([np.eye(5), np.zeros((5, 2))], 1))
    same = G.build_dgp(x, y, 2, num_inducing=10)
    assert np.allclose(same.layers[0].mean_W[...], np.eye(5))
    # inner layers start almost deterministic, the last one at its prior
    assert float(jnp.max(jnp.abs(same.layers[0].q_sqrt[...]))) < 1e-4
    assert float(jnp.max(jnp.abs(same.layers[1].q_sqrt[...]))) > 0.1


def test_training_improves_the_bound_and_standardizer_roundtrip(rng):
    x = rng.uniform(-2, 2, size=(60, 1))
    y = 3.0 + 2.0 * np.sin(2 * x) + 0.1 * rng.normal(size=(60, 1))
    std = G.Standardizer.fit(x, y)
    xs, ys = std.x(x), std.y(y)
    assert np.allclose(xs.mean(0), 0) and np.allclose(ys.std(0), 1)
    model = G.build_dgp(xs, ys, 1, num_inducing=10, whiten=True)
    trained, hist = G.train_dgp(model, xs, ys, steps=500, progress=False)
    assert hist["loss"][-20:].mean() < hist["loss"][:20].mean() - 0.5
    ev = G.evaluate_dgp(trained, std, x, y[:, 0], num_samples=5)
    assert ev["rmse"] < 0.2 and ev["test_log_likelihood"] > -0.5  # the noise is 0.1


def test_safe_cholesky_recovers_with_more_jitter():
    K = jnp.ones((4, 4)) - 1e-9 * jnp.eye(4)  # eigenvalues -1e-9 (x3) and 4: not positive definite
    assert bool(jnp.any(jnp.isnan(jnp.linalg.cholesky(K + 1e-12 * jnp.eye(4)))))
    L = G.safe_cholesky(K, 1e-12, retries=12)
    assert not bool(jnp.any(jnp.isnan(L))) and np.allclose(L @ L.T, K, atol=1e-6)


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("uses", ["both", "L only", "inverse only"])
def test_cholesky_factors_gradient_matches_autodiff_and_finite_differences(rng, batch, uses):
    """eq. dgp-chol-grad against differentiating safe_cholesky and the triangular solve, and
    against central differences; "L only" / "inverse only" leave the other cotangent a symbolic
    zero."""
    from jax.scipy.linalg import solve_triangular

    X = jnp.asarray(rng.normal(size=batch + (9, 6)))
    c_L, c_W = (jnp.asarray(rng.normal(size=batch + (6, 6))) for _ in range(2))

    def reference(K, jitter):
        L = G.safe_cholesky(K, jitter)
        return L, solve_triangular(L, jnp.broadcast_to(jnp.eye(6), K.shape), lower=True)

    def loss(factors, X):
        L, W = factors(jnp.swapaxes(X, -1, -2) @ X, 1e-8)
        terms = {"both": (L, W), "L only": (L,), "inverse only": (W,)}[uses]
        return sum(
            jnp.sum(jnp.sin(F) * c)
            for F, c in zip(terms, (c_L, c_W) if uses != "inverse only" else (c_W,))
        )

    ours = jax.grad(lambda X: loss(G.cholesky_factors, X))(X)
    auto = jax.grad(lambda X: loss(reference, X))(X)
    np.testing.assert_allclose(ours, auto, rtol=1e-9, atol=1e-11)
    direction = jnp.asarray(rng.normal(size=X.shape))
    h = 1e-6
    fd = (
        loss(G.cholesky_factors, X + h * direction) - loss(G.cholesky_factors, X - h * direction)
    ) / (2 * h)
    assert np.isclose(fd, jnp.sum(ours * direction), rtol=1e-6)
    L, W = G.cholesky_factors(jnp.swapaxes(X, -1, -2) @ X, 1e-8)
    np.testing.assert_allclose(W @ L, np.broadcast_to(np.eye(6), L.shape), atol=1e-10)


def test_cholesky_factors_keep_the_retries_out_of_the_gradient():
    """A matrix that needs more jitter: the factors are those of the jittered matrix, and the
    gradient is that of the factorised matrix (the jitter is a constant)."""
    K = jnp.ones((4, 4)) - 1e-9 * jnp.eye(4)
    L, W = G.cholesky_factors(K, 1e-12, 12)
    assert not bool(jnp.any(jnp.isnan(L))) and np.allclose(L @ L.T, K, atol=1e-6)
    jittered = K + 1e-12 * 10.0 ** np.arange(13)[
        np.argmax(
            [
                not bool(jnp.any(jnp.isnan(jnp.linalg.cholesky(K + 1e-12 * 10.0**i * jnp.eye(4)))))
                for i in range(13)
            ]
        )
    ] * jnp.eye(4)
    np.testing.assert_allclose(L, jnp.linalg.cholesky(jittered), rtol=1e-12)
    g = jax.grad(lambda K: jnp.sum(G.cholesky_factors(K, 1e-12, 12)[0] ** 3))(K)
    added = jittered - K
    g_ref = jax.grad(lambda K: jnp.sum(jnp.linalg.cholesky(K + added) ** 3))(K)
    np.testing.assert_allclose(0.5 * (g_ref + g_ref.T), g, rtol=1e-6)


def test_bad_inputs_are_reported(rng):
    x = rng.normal(size=(20, 3))
    y = rng.normal(size=(20, 1))
    model = G.build_dgp(x, y, 2, num_inducing=5)
    with pytest.raises(ValueError, match=r"x must have shape \(\*, 3\), got \(4, 2\)"):
        model.elbo(jnp.zeros((4, 2)), jnp.zeros((4, 1)), jax.random.key(0))
    with pytest.raises(ValueError, match=r"y must have 2 dimensions, got shape \(20,\)"):
        model.elbo(jnp.asarray(x), jnp.asarray(y[:, 0]), jax.random.key(0))
    with pytest.raises(ValueError, match=r"y must have shape \(4, 1\)"):
        model.log_density(jnp.asarray(x[:4]), jnp.zeros((4, 2)), jax.random.key(0), 3)
    with pytest.raises(ValueError, match="x must be finite"):
        G.build_dgp(np.full((5, 3), np.nan), y[:5], 1)
    with pytest.raises(ValueError, match="same number of rows"):
        G.build_dgp(x, y[:5], 1)
    with pytest.raises(ValueError, match="num_layers"):
        G.build_dgp(x, y, 0)
    with pytest.raises(ValueError, match="layer 0 has 3 outputs but layer 1 takes 2"):
        G.DeepGP(
            [G.SVGPLayer(G.RBF(3), x[:4], 3), G.SVGPLayer(G.RBF(2), x[:4, :2], 1)], G.Gaussian(), 20
        )
    with pytest.raises(ValueError, match="model must be one of"):
        G.run_uci_model("energy", "DGP 9", 0, steps=1)


@pytest.mark.parametrize("whiten,per_output", [(False, False), (True, False), (False, True)])
def test_gradient_of_the_bound_matches_finite_differences(rng, whiten, per_output):
    from flax import nnx

    x = rng.normal(size=(12, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(12, 1))
    model = G.build_dgp(
        x,
        y,
        2,
        num_inducing=5,
        inner_q_sqrt_scale=0.2,
        whiten=whiten,
        per_output_kernels=per_output,
    )
    assert model.layers[0].Z[...].shape == ((2, 5, 2) if per_output else (5, 2))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    key = jax.random.key(
        0
    )  # a fixed key: the estimate is a deterministic function of the parameters

    @jax.jit  # one compilation for the 24 evaluations of the finite differences
    def f(v):
        return nnx.merge(graphdef, unravel(v), rest).elbo(jnp.asarray(x), jnp.asarray(y), key)

    grad = jax.grad(f)(flat)
    for i in np.random.default_rng(1).choice(flat.size, 12, replace=False):
        e = jnp.zeros_like(flat).at[i].set(1e-6)
        fd = (f(flat + e) - f(flat - e)) / 2e-6
        assert abs(float(fd) - float(grad[i])) < 1e-5 * max(1.0, abs(float(fd))), (
            i,
            float(fd),
            float(grad[i]),
        )


@pytest.mark.parametrize("per_output", [False, True])
def test_quadratic_forms_and_their_gradient(rng, per_output):
    P, M, N = 3, 5, 7
    Bh = rng.normal(size=(P, M, M))
    B = jnp.asarray(Bh + np.swapaxes(Bh, 1, 2))  # symmetric, indefinite like S - K
    A = jnp.asarray(rng.normal(size=(P, N, M) if per_output else (N, M)))
    plain = "pnm,pmk,pnk->np" if per_output else "nm,pmk,nk->np"
    dense = np.einsum(plain, A, B, A)
    assert np.allclose(G.quadratic_forms(B, A), dense)
    w = jnp.asarray(rng.normal(size=(N, P)))
    ours = jax.grad(lambda B, A: jnp.sum(w * G.quadratic_forms(B, A)), argnums=(0, 1))(B, A)
    auto = jax.grad(lambda B, A: jnp.sum(w * jnp.einsum(plain, A, B, A)), argnums=(0, 1))(B, A)
    for a, b in zip(ours, auto):
        assert np.allclose(a, b, atol=1e-12)
    e = np.zeros(A.shape)
    e[..., 4, 2] = 1e-6
    fd = (
        jnp.sum(w * G.quadratic_forms(B, A + e)) - jnp.sum(w * G.quadratic_forms(B, A - e))
    ) / 2e-6
    assert abs(float(fd) - float(jnp.sum(ours[1][..., 4, 2]))) < 1e-6


def test_map_rows_pads_and_drops(rng):
    x = jnp.asarray(rng.normal(size=(23, 3)))
    fn = lambda v: (jnp.sum(v**2, 1), v[:, :2] * 3.0)  # noqa: E731
    for rows in (1, 4, 7, 23, 50):
        a, b = G.map_rows(fn, x, rows)
        assert a.shape == (23,) and b.shape == (23, 2)
        assert np.allclose(a, fn(x)[0]) and np.allclose(b, fn(x)[1])


def test_sum_rows_value_and_gradient_against_the_plain_sum(rng):
    params = {"w": jnp.asarray(rng.normal(size=(3, 4))), "b": jnp.asarray(rng.normal(size=4))}
    x = jnp.asarray(rng.normal(size=(23, 3)))
    labels = jnp.asarray(rng.integers(0, 4, size=23))

    def fn(p, d):  # a log-softmax likelihood per row: rows independent, integer labels
        v, k = d
        logits = jnp.tanh(v @ p["w"]) + p["b"]
        return jnp.take_along_axis(jax.nn.log_softmax(logits), k[:, None], 1)[:, 0]

    plain = lambda p, v: jnp.sum(fn(p, (v, labels)))  # noqa: E731
    value, grads = jax.value_and_grad(plain, argnums=(0, 1))(params, x)
    for rows in (1, 4, 7, 23, 50):
        ours = lambda p, v: G.sum_rows(fn, p, (v, labels), rows)  # noqa: E731
        v1, g1 = jax.jit(jax.value_and_grad(ours, argnums=(0, 1)))(params, x)
        assert np.isclose(v1, value, rtol=1e-12) and np.isclose(ours(params, x), value)
        for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(grads)):
            assert np.allclose(a, b, rtol=1e-10, atol=1e-13)
    # data's gradient, scaled by the cotangent, through a second use of the sum
    twice = lambda v: 3.0 * G.sum_rows(fn, params, (v, labels), 4)  # noqa: E731
    assert np.allclose(jax.grad(twice)(x), 3.0 * grads[1], atol=1e-13)


@pytest.mark.parametrize("classes", [None, 3])
def test_elbo_is_the_propagated_estimate_whatever_the_chunks(rng, classes):
    """The bound summed chunk by chunk (sum_rows) against its definition from `propagate`: the same
    value and gradient, for a Gaussian and a robust-max likelihood (integer labels)."""
    from flax import nnx

    x = rng.normal(size=(41, 3))
    if classes is None:
        y, likelihood = np.sin(x.sum(1, keepdims=True)), None
    else:
        y, likelihood = rng.integers(0, classes, size=(41, 1)), G.RobustMax(classes)
    model = G.build_dgp(x, y, 2, num_inducing=5, whiten=True, likelihood=likelihood)
    x, y, key = jnp.asarray(x), jnp.asarray(y), jax.random.key(2)

    def defined(m):
        mean, var = m.propagate(x, key, 2)
        expected = jnp.mean(m.likelihood.variational_expectations(mean, var, y[None]), 0)
        return m.num_data / x.shape[0] * jnp.sum(expected) - m.kl()

    v0, g0 = nnx.value_and_grad(defined)(model)
    for rows in (1000, 6):
        for layer in model.layers:
            layer.chunk_size = rows
        v1, g1 = nnx.value_and_grad(lambda m: m.elbo(x, y, key, 2))(model)
        assert np.isclose(v1, v0, rtol=1e-12)
        for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g0)):
            assert np.allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("whiten", [False, True])
def test_layer_does_not_depend_on_chunk_size(rng, whiten):
    from flax import nnx

    x = jnp.asarray(rng.normal(size=(37, 2)))
    layer = G.SVGPLayer(
        G.RBF(2, 0.7, 1.3),
        rng.normal(size=(6, 2)),
        3,
        rng.normal(size=(2, 3)),
        whiten=whiten,
        q_sqrt_scale=0.4,
        noise_variance=1e-3,
    )
    layer.q_mu[...] = jnp.asarray(rng.normal(size=(6, 3)))
    w = jnp.asarray(rng.normal(size=(37, 3)))

    def value_and_grads(rows):
        layer.chunk_size = rows
        g, st = nnx.split(layer)
        f = lambda st: (
            jnp.sum(w * jnp.log(nnx.merge(g, st)(x)[1])) + jnp.sum(w * nnx.merge(g, st)(x)[0])
        )  # noqa: E731
        return jax.value_and_grad(f)(st)

    (v0, g0), (v1, g1) = value_and_grads(1000), value_and_grads(5)
    assert np.isclose(v0, v1, rtol=1e-12)
    for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
        assert np.allclose(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="chunk_size must be an integer >= 1"):
        G.SVGPLayer(G.RBF(2), np.zeros((3, 2)), 1, chunk_size=0)


def test_classification_likelihoods_against_monte_carlo():
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    mu, s2 = (
        np.array([0.3, -1.0, 1.2, 0.1]),
        np.array([0.5, 2.0, 0.05, 0.02]),
    )  # wide and narrow together
    f = mu + np.sqrt(s2) * rng.standard_normal((500_000, 4))
    bern = G.Bernoulli()
    for label in (0, 1):
        mc = np.mean(norm.logcdf((2 * label - 1) * f), 0)
        ve = bern.variational_expectations(
            jnp.asarray(mu), jnp.asarray(s2), jnp.full(4, float(label))
        )
        assert np.allclose(ve, mc, atol=4e-3), (label, ve, mc)
    p1 = bern.predict_mean_and_var(jnp.asarray(mu), jnp.asarray(s2))[0]
    assert np.allclose(p1, np.mean(norm.cdf(f), 0), atol=3e-3)
    rmax = G.RobustMax(
        4, epsilon=0.01, quadrature_points=100
    )  # the default 20 in the bound is off by 0.05 here
    wins = np.bincount(np.argmax(f, 1), minlength=4) / len(f)
    P = np.asarray(rmax.win_probabilities(jnp.asarray(mu), jnp.asarray(s2)))
    assert np.allclose(P, wins, atol=3e-3) and np.isclose(P.sum(), 1.0, atol=1e-3)
    probs = np.asarray(rmax.predict_mean_and_var(jnp.asarray(mu), jnp.asarray(s2))[0])
    assert np.isclose(probs.sum(), 1.0, atol=1e-3)
    for label in range(4):
        y = jnp.asarray([label])
        ve = float(rmax.variational_expectations(jnp.asarray(mu), jnp.asarray(s2), y))
        expect = wins[label] * np.log(0.99) + (1 - wins[label]) * np.log(0.01 / 3)
        assert abs(ve - expect) < 0.03, (label, ve, expect)
        assert np.isclose(
            float(rmax.predict_log_density(jnp.asarray(mu), jnp.asarray(s2), y)),
            np.log(probs[label]),
        )


@pytest.mark.slow
def test_robustmax_classifier_trains_and_checks_labels(rng):
    x = rng.normal(size=(120, 2))
    y = (np.arctan2(x[:, 1], x[:, 0]) > 0).astype(np.int32)[:, None] + (x[:, 0] > 1).astype(
        np.int32
    )[:, None]
    model = G.build_dgp(x, y, 2, num_inducing=10, likelihood=G.RobustMax(3))
    assert model.layers[-1].num_outputs == 3
    model, hist = G.train_dgp(model, x, y, steps=150, progress=False)
    assert np.mean(hist["loss"][-10:]) < np.mean(hist["loss"][:10])
    res = G.evaluate_classifier(model, x, y, num_samples=5)
    assert res["test_accuracy"] > 0.8 and res["test_log_likelihood"] > np.log(1 / 3)
    # the mixture's density of the label is the mixture's probability of that class
    key = jax.random.key(4)
    probs = np.asarray(model.predict_y(jnp.asarray(x[:30]), key, 7)[0])
    logd = np.asarray(model.log_density(jnp.asarray(x[:30]), jnp.asarray(y[:30]), key, 7))
    assert np.allclose(logd, np.log(probs[np.arange(30), y[:30, 0]]), atol=1e-10)
    bern = G.build_dgp(x, (y > 0).astype(np.float64), 1, num_inducing=10, likelihood=G.Bernoulli())
    bern, _ = G.train_dgp(bern, x, (y > 0).astype(np.float64), steps=100, progress=False)
    assert (
        G.evaluate_classifier(bern, x, (y > 0).astype(np.float64), num_samples=3)["test_accuracy"]
        > 0.8
    )
    with pytest.raises(ValueError, match=r"y must hold labels in \{0, \.\.\., 2\}, got 3"):
        G.build_dgp(x, np.full((120, 1), 3), 1, likelihood=G.RobustMax(3))
    with pytest.raises(ValueError, match=r"y must be binary \(0 or 1\), got 0.5"):
        G.build_dgp(x, np.full((120, 1), 0.5), 1, likelihood=G.Bernoulli())
    with pytest.raises(ValueError, match="num_classes"):
        G.RobustMax(1)


@pytest.mark.parametrize("whiten", [False, True])
def test_per_output_layer_is_p_single_output_layers(rng, whiten):
    P, M, D = 3, 5, 2
    x = jnp.asarray(rng.normal(size=(17, D)))
    Z = rng.normal(size=(P, M, D))
    ls, var = [0.6, 1.0, 1.7], [0.8, 1.3, 2.0]
    kern = G.RBF(D, batch=P)
    kern.raw_lengthscales[...] = G.softplus_inverse(
        jnp.asarray(np.repeat(np.array(ls)[:, None], D, 1))
    )
    kern.raw_variance[...] = G.softplus_inverse(jnp.asarray(var))
    W = rng.normal(size=(D, P))
    layer = G.SVGPLayer(kern, Z, P, W, whiten=whiten, noise_variance=1e-3, chunk_size=6)
    layer.q_mu[...] = jnp.asarray(rng.normal(size=(M, P)))
    layer.q_sqrt[...] = jnp.asarray(np.tril(rng.normal(size=(P, M, M))) * 0.3)
    mean, v = layer(x)
    kl = 0.0
    for p in range(P):  # the oracle: P separate layers with one output each (the shared code path)
        single = G.SVGPLayer(
            G.RBF(D, ls[p], var[p]), Z[p], 1, W[:, p : p + 1], whiten=whiten, noise_variance=1e-3
        )
        single.q_mu[...] = layer.q_mu[...][:, p : p + 1]
        single.q_sqrt[...] = layer.q_sqrt[...][p : p + 1]
        m1, v1 = single(x)
        assert np.allclose(mean[:, p], m1[:, 0]) and np.allclose(v[:, p], v1[:, 0])
        kl += float(single.kl())
    assert np.isclose(float(layer.kl()), kl)
    with pytest.raises(ValueError, match="one kernel per output"):
        G.SVGPLayer(G.RBF(D, batch=2), Z[0], P)


@pytest.mark.slow
def test_float32_model_stays_float32_and_agrees_with_float64(rng):
    x = rng.normal(size=(40, 3))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(40, 1))
    m64 = G.build_dgp(x, y, 2, num_inducing=8, inner_q_sqrt_scale=0.1)
    m32 = G.build_dgp(
        x.astype(np.float32), y.astype(np.float32), 2, num_inducing=8, inner_q_sqrt_scale=0.1
    )
    from flax import nnx

    assert all(v.dtype == jnp.float32 for v in jax.tree.leaves(nnx.state(m32, nnx.Param)))
    key = jax.random.key(0)
    e64 = float(m64.elbo(jnp.asarray(x), jnp.asarray(y), key))
    e32 = m32.elbo(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), key)
    assert e32.dtype == jnp.float32 and abs(float(e32) - e64) < 1e-3 * abs(e64)
    mean, var = jnp.zeros((4, 3), jnp.float32), jnp.ones((4, 3), jnp.float32)
    for lik, y in (
        (G.Bernoulli(), jnp.ones((4, 3), jnp.int32)),
        (G.RobustMax(3), jnp.zeros((4, 1), jnp.int32)),
    ):
        assert (
            lik.variational_expectations(mean, var, y).dtype == jnp.float32
        )  # no float64 constants leak in


def test_normal_cdf_keeps_relative_precision_in_the_tail():
    from scipy.stats import norm

    z = np.linspace(-37.0, 8.0, 901)
    assert np.allclose(
        np.asarray(G.normal_cdf(jnp.asarray(z))) / norm.cdf(z), 1.0, rtol=0, atol=1e-11
    )


def test_gradient_step_flops_match_the_count_of_the_products():
    """SGP (one output, whitened): alpha = T k(Z, x) and B alpha cost 2 M^2 N each forward, and the
    backward pass twice the forward: about 12 M^2 N in all, linear in N; the layers' chunking is
    left as it was."""
    rng = np.random.default_rng(0)
    M = 100
    for N in (1000, 3000):
        x = rng.standard_normal((N, 3))
        y = np.sin(x.sum(1, keepdims=True))
        model = G.build_dgp(x, y, 1, num_inducing=M, whiten=True)
        flops = G.gradient_step_flops(model, x, y)
        assert 10 * M**2 * N < flops < 16 * M**2 * N, (N, flops / (M**2 * N))
        assert all(layer.chunk_size is None for layer in model.layers)


@pytest.mark.parametrize("batch", [None, 3])
def test_kernel_diagonal_and_correlation_with_given_parameters(rng, batch):
    """RBF.diag is the diagonal of the kernel matrix, and with a given variance that of the kernel
    with that variance; correlation with given lengthscales is the kernel with them over its
    variance: the forms a layer's marginals use, against the kernel matrix itself."""
    D = 3
    x1, x2 = jnp.asarray(rng.normal(size=(5, D))), jnp.asarray(rng.normal(size=(4, D)))
    kern = G.RBF(D, 0.8, 1.4, batch=batch)
    other = G.RBF(D, 1.3, 0.6, batch=batch)
    for k in (kern, other):
        full = np.asarray(k(x1, x1))
        diag = np.diagonal(full, axis1=-2, axis2=-1)
        np.testing.assert_allclose(np.asarray(k.diag(x1)), diag.T, rtol=1e-12)
    np.testing.assert_allclose(
        np.asarray(kern.diag(x1, other.variance)), np.asarray(other.diag(x1)), rtol=1e-12
    )
    np.testing.assert_allclose(
        np.asarray(kern.correlation(x1, x2, other.lengthscales)) * 0.6,
        np.asarray(other(x1, x2)),
        rtol=1e-12,
    )


@pytest.mark.parametrize("batch", [None, 3])
def test_shared_lengthscale_kernel_is_the_ard_kernel_with_equal_lengthscales(rng, batch):
    """ard=False (GPflow 1's default) is the ARD kernel whose lengthscales are all the shared one,
    checked against the squared-exponential formula written out; a model built with it has one
    lengthscale per kernel."""
    D = 4
    x1, x2 = rng.normal(size=(5, D)), rng.normal(size=(6, D))
    shared = G.RBF(D, 0.7, 1.3, batch=batch, ard=False)
    assert shared.lengthscales.shape == ((1,) if batch is None else (batch, 1))
    k = np.asarray(shared(jnp.asarray(x1), jnp.asarray(x2)))
    direct = 1.3 * np.exp(-0.5 * ((x1[:, None, :] - x2[None, :, :]) ** 2).sum(-1) / 0.7**2)
    np.testing.assert_allclose(
        k, direct if batch is None else np.broadcast_to(direct, (batch, 5, 6)), rtol=1e-12
    )
    x, y = rng.normal(size=(40, D)), rng.normal(size=(40, 1))
    dgp = G.build_dgp(x, y, 2, num_inducing=8, ard=False)
    assert all(layer.kernel.lengthscales.shape == (1,) for layer in dgp.layers)
    assert np.isfinite(float(dgp.elbo(jnp.asarray(x), jnp.asarray(y), jax.random.key(0))))
