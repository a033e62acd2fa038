"""lib.darn against independent oracles: exact enumeration, chi-square, closed-form gradients."""

import jax
import jax.flatten_util

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402
from scipy.stats import chisquare  # noqa: E402

import lib.darn as D  # noqa: E402
import lib.darn_report  # noqa: E402, F401  (registers darn-mnist and darn-uci)

ARCHITECTURES = {
    "one layer": dict(n_visible=5, n_hidden=3, n_deterministic=4),
    "no tanh, AR visible": dict(
        n_visible=5, n_hidden=3, n_deterministic=0, autoregressive_visible=True
    ),
    "two layers, skip, AR visible": dict(
        n_visible=5,
        n_hidden=[3, 2],
        n_deterministic=4,
        autoregressive_visible=True,
        skip_connections=True,
    ),
    "AR encoder": dict(
        n_visible=4, n_hidden=[3, 2], n_deterministic=3, autoregressive_encoder=True
    ),
}


def make(seed=0, dtype=jnp.float64, **kw):
    """A DARN with random non-zero lateral weights and biases (they start at zero)."""
    model = D.DARN(**kw, rngs=nnx.Rngs(seed), dtype=dtype)
    for i, (path, var) in enumerate(nnx.iter_graph(model)):
        if path and path[-1] in ("lateral", "bias") and isinstance(var, nnx.Param):
            var[...] = jax.random.normal(jax.random.key(seed * 1000 + i), var.shape, dtype)
    return model


def brute_force_log_prob(model, x):
    """log p(x) by summing exp(log_joint) over every code with plain Python loops over codes."""
    bits = sum(model.sizes[1:])
    out = []
    for xi in np.asarray(x):
        total = 0.0
        for code in range(2**bits):
            h = np.array([(code >> i) & 1 for i in range(bits)], np.float64)
            hs = D.split_layers(jnp.asarray(h)[None], model.sizes[1:])
            total += float(jnp.exp(model.log_joint(jnp.asarray(xi)[None], hs))[0])
        out.append(np.log(total))
    return np.array(out)


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_exact_likelihood_is_normalised_and_matches_brute_force(name):
    model = make(**ARCHITECTURES[name])
    X = D.all_binary(model.sizes[0], dtype=jnp.float64)
    log_px = D.exact_log_prob(model, X, chunk=4)
    assert abs(float(jax.scipy.special.logsumexp(log_px))) < 1e-10
    np.testing.assert_allclose(log_px[:6], brute_force_log_prob(model, X[:6]), rtol=1e-10)


def test_layer_is_autoregressive_and_normalised():
    layer = D.AutoregressiveBernoulli(7, 2, rngs=nnx.Rngs(0), dtype=jnp.float64)
    layer.lateral[...] = jax.random.normal(jax.random.key(0), (7, 7), jnp.float64)
    c = jnp.asarray([0.3, -1.2])
    J = jax.jacobian(lambda v: layer.logits(v, c))(jnp.ones(7))
    assert np.all(np.triu(np.asarray(J)) == 0)  # logit j ignores v_j .. v_n
    assert np.all(np.asarray(J)[np.tril_indices(7, -1)] != 0)
    total = jax.scipy.special.logsumexp(layer.log_prob(D.all_binary(7, dtype=jnp.float64), c))
    assert abs(float(total)) < 1e-12


def test_sampled_logits_are_the_logits_of_the_sample():
    layer = D.AutoregressiveBernoulli(6, 3, rngs=nnx.Rngs(1), dtype=jnp.float64)
    layer.lateral[...] = jax.random.normal(jax.random.key(2), (6, 6), jnp.float64)
    c = jax.random.normal(jax.random.key(3), (50, 3), jnp.float64)
    v, logits = layer.sample(jax.random.key(4), c)
    np.testing.assert_allclose(logits, layer.logits(v, c), rtol=1e-12)


@pytest.mark.parametrize("name", ["one layer", "two layers, skip, AR visible"])
def test_ancestral_samples_follow_the_exact_distribution(name):
    model = make(seed=3, dtype=jnp.float32, **ARCHITECTURES[name])
    n = 100_000
    x, _ = model.sample(jax.random.key(0), n)
    codes = np.asarray(x @ (2.0 ** jnp.arange(model.sizes[0]))).astype(int)
    p = np.exp(np.asarray(D.exact_log_prob(model, D.all_binary(model.sizes[0])), np.float64))
    counts = np.bincount(codes, minlength=len(p))
    assert chisquare(counts, n * p / p.sum()).pvalue > 1e-3


@pytest.mark.parametrize("name", ["one layer", "AR encoder"])
def test_description_length_is_minus_log_p_plus_kl(name):
    model = make(seed=4, **ARCHITECTURES[name])
    x = D.all_binary(model.sizes[0], dtype=jnp.float64)[::3]
    xs, hs = D.enumerate_codes(model, x)
    log_px = D.exact_log_prob(model, x)
    logq = model.encoder_log_prob(xs, hs)
    np.testing.assert_allclose(jnp.exp(jax.scipy.special.logsumexp(logq, -1)), 1.0, rtol=1e-12)
    kl = jnp.sum(jnp.exp(logq) * (logq - (model.log_joint(xs, hs) - log_px[:, None])), -1)
    np.testing.assert_allclose(D.expected_description_length(model, x), -log_px + kl, rtol=1e-10)
    assert np.all(kl > 0)
    # and the Monte Carlo estimate averages to it
    mc = jnp.mean(
        model.description_length(jnp.broadcast_to(x, (20_000, *x.shape)), jax.random.key(0)), 0
    )
    np.testing.assert_allclose(mc, D.expected_description_length(model, x), rtol=0.02)


def test_importance_sampling_converges_to_the_exact_likelihood():
    model = make(seed=5, **ARCHITECTURES["two layers, skip, AR visible"])
    x = D.all_binary(5, dtype=jnp.float64)[::5]
    exact = D.exact_log_prob(model, x)
    S = 100_000
    est = D.importance_log_prob(model, x, jax.random.key(0), num_samples=S, chunk=10_000)
    # delta method: sd(log p_hat) = sqrt(E_q[w^2] / p^2 - 1) / sqrt(S), with E_q[w^2] = sum_h p(x,
    # h)^2 / q(h | x)
    xs, hs = D.enumerate_codes(model, x)
    log_w2 = jax.scipy.special.logsumexp(
        2 * model.log_joint(xs, hs) - model.encoder_log_prob(xs, hs), -1
    )
    sd = np.sqrt(np.expm1(np.asarray(log_w2 - 2 * exact)) / S)
    assert np.all(np.abs(np.asarray(est - exact)) < 4 * sd)
    few = D.importance_estimate(model, x, jax.random.key(1), num_samples=2, repeats=200)
    assert few["mean"] < float(
        jnp.mean(exact)
    )  # Jensen: the log of an unbiased estimate is biased low


@pytest.mark.parametrize("h", [0, 1])
def test_binary_sample_gradient_is_appendix_a(h):
    """d/dlogit of g * h through the sampler equals g * p(1-p) / (2 q(h)), q(h) the sampled value's
    probability."""
    a = jnp.float64(0.7)
    p = jax.nn.sigmoid(a)
    u = jnp.float64(0.0 if h else 1.0)  # u = 0 forces h = 1, u = 1 forces h = 0
    assert float(D.binary_sample(a, u)) == h
    g = 2.5
    grad = jax.grad(lambda a_: g * D.binary_sample(a_, u))(a)
    q = p if h else 1 - p
    np.testing.assert_allclose(grad, g * p * (1 - p) / (2 * q), rtol=1e-12)


def test_estimator_mean_is_the_trapezoid_rule():
    """Quadratic f: unbiased. Cubic f: bias p(1-p) f'''/12 exactly."""
    a = jnp.float64(-0.4)
    p = float(jax.nn.sigmoid(a))

    def mean_estimate(f):
        per = {
            h: float(jax.grad(lambda a_: f(D.binary_sample(a_, jnp.float64(0.0 if h else 1.0))))(a))
            for h in (0, 1)
        }
        return p * per[1] + (1 - p) * per[0]

    quadratic = lambda h: 3 * h**2 - 2 * h + 1  # noqa: E731
    cubic = lambda h: 3 * h**3 - 2 * h + 1  # noqa: E731  f''' = 18
    np.testing.assert_allclose(
        mean_estimate(quadratic), p * (1 - p) * (quadratic(1.0) - quadratic(0.0)), rtol=1e-12
    )
    np.testing.assert_allclose(
        mean_estimate(cubic) - p * (1 - p) * (cubic(1.0) - cubic(0.0)),
        p * (1 - p) * 18 / 12,
        rtol=1e-12,
    )


def test_network_estimator_equals_exact_gradient_plus_trapezoid_error():
    """One hidden unit: the estimator averaged exactly over h = E_q[grad F] + dp * (trapezoid -
    difference)."""
    model = make(seed=6, n_visible=4, n_hidden=1, n_deterministic=3)
    x = jnp.asarray([[1.0, 0.0, 1.0, 1.0]])
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    flat = lambda tree: jax.flatten_util.ravel_pytree(tree)[0]  # noqa: E731
    exact = flat(
        jax.grad(lambda p: D.expected_description_length(nnx.merge(graphdef, p, rest), x)[0])(
            params
        )
    )

    keys = {}  # a key that samples h = 0 and one that samples h = 1
    for i in range(100):
        hs, _ = model.encode(x, jax.random.key(i))
        keys.setdefault(int(hs[0][0, 0]), jax.random.key(i))
    estimate = {
        h: flat(
            jax.grad(lambda p: nnx.merge(graphdef, p, rest).description_length(x, keys[h])[0])(
                params
            )
        )
        for h in (0, 1)
    }
    enc = model.encoder[0]
    logit = lambda p: (
        nnx.merge(graphdef, p, rest)
        .encoder[0]
        .out.context_logits(  # noqa: E731
            nnx.merge(graphdef, p, rest).encoder[0].context(x)
        )[0, 0]
    )
    prob = float(jax.nn.sigmoid(enc.out.context_logits(enc.context(x))[0, 0]))
    dp = flat(jax.grad(lambda p: jax.nn.sigmoid(logit(p)))(params))
    F = lambda h: (
        model.encoder_log_prob(x, [h[None, None]])[0] - model.log_joint(x, [h[None, None]])[0]
    )  # noqa: E731
    dF = jax.grad(F)
    trapezoid = (dF(jnp.float64(0.0)) + dF(jnp.float64(1.0))) / 2
    difference = F(jnp.float64(1.0)) - F(jnp.float64(0.0))
    mean = prob * estimate[1] + (1 - prob) * estimate[0]
    np.testing.assert_allclose(mean, exact + dp * (trapezoid - difference), rtol=1e-8, atol=1e-10)
    assert (
        abs(float(trapezoid - difference)) > 1e-3
    )  # the check is not vacuous: the estimator is biased here


def test_reinforce_is_unbiased():
    model = make(seed=7, **ARCHITECTURES["one layer"])
    x = D.all_binary(5, dtype=jnp.float64)[::7]
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    flat = lambda tree: jax.flatten_util.ravel_pytree(tree)[0]  # noqa: E731
    exact = flat(
        jax.grad(
            lambda p: jnp.mean(D.expected_description_length(nnx.merge(graphdef, p, rest), x))
        )(params)
    )
    b = D.expected_description_length(model, x)
    one = lambda k: flat(
        jax.grad(  # noqa: E731
            lambda p: jnp.mean(D.reinforce_surrogate(nnx.merge(graphdef, p, rest), x, k, b)[0])
        )(params)
    )
    g = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), 40_000))
    se = np.asarray(g.std(0)) / np.sqrt(len(g))
    assert np.all(np.abs(np.asarray(g.mean(0)) - np.asarray(exact)) < 5 * se + 1e-9)


@pytest.mark.slow
def test_training_lowers_the_description_length_and_keeps_the_best():
    rng = np.random.default_rng(0)
    protos = rng.random((4, 20)) < 0.5
    x = (protos[rng.integers(0, 4, 600)] ^ (rng.random((600, 20)) < 0.05)).astype(np.uint8)
    model = D.init_visible_bias(D.DARN(20, 4, 8, rngs=nnx.Rngs(0)), x)
    before = D.mean_description_length(model, x, jax.random.key(0))
    for estimator in ("darn", "reinforce"):
        trained, hist = D.train_darn(
            model,
            x[:500],
            steps=600,
            batch_size=50,
            learning_rate=3e-3,
            estimator=estimator,
            x_valid=x[500:],
            eval_every=200,
            progress=False,
        )
        after = D.mean_description_length(trained, x, jax.random.key(0))
        assert after < before - 2.0, (estimator, before, after)
        assert hist.best_step == hist["valid_step"][np.argmin(hist["valid"])]


def test_bad_input_is_refused():
    model = D.DARN(6, 2, 3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="binary"):
        D.exact_log_prob(model, np.full((2, 6), 0.5))
    with pytest.raises(ValueError, match=r"\(\.\.\., 6\)"):
        D.exact_log_prob(model, np.zeros((2, 5)))
    with pytest.raises(ValueError, match="finite"):
        D.mean_description_length(model, np.full((2, 6), np.nan), jax.random.key(0))
    with pytest.raises(ValueError, match="n_hidden"):
        D.DARN(6, [3, 0], rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="importance_log_prob"):
        D.exact_log_prob(D.DARN(6, 30, 0, rngs=nnx.Rngs(0)), np.zeros((1, 6)))
    with pytest.raises(ValueError, match="multiple"):
        D.importance_log_prob(
            model, np.zeros((1, 6)), jax.random.key(0), num_samples=150, chunk=100
        )
    with pytest.raises(ValueError, match="optimizer"):
        D.train_darn(model, np.zeros((10, 6)), steps=1, optimizer="sgd")
    with pytest.raises(ValueError, match="estimator"):
        D.train_darn(model, np.zeros((10, 6)), steps=1, estimator="straight-through")


def test_mixture_of_bernoullis_em_is_monotone_and_exact():
    rng = np.random.default_rng(1)
    protos = rng.random((3, 8)) < 0.5
    x = (protos[rng.integers(0, 3, 400)] ^ (rng.random((400, 8)) < 0.1)).astype(np.uint8)
    model, hist = D.fit_mixture_of_bernoullis(x, 4, steps=40, tol=0.0, dtype=jnp.float64)
    # EM climbs the penalised likelihood (the Beta prior shifts the optimum a little): the
    # likelihood
    # itself rises overall and never falls by more than a sliver
    assert hist["train"][-1] > hist["train"][0] + 1.0 and np.all(np.diff(hist["train"]) > -1e-3)
    # log p(x) against a direct evaluation
    mu = 1 / (1 + np.exp(-np.asarray(model.logits[...])))
    w = np.exp(np.asarray(model.log_weights[...]))
    X = np.asarray(D.all_binary(8, dtype=jnp.float64))
    direct = np.log(np.prod(mu[None] ** X[:, None] * (1 - mu[None]) ** (1 - X[:, None]), -1) @ w)
    np.testing.assert_allclose(model.log_prob(X), direct, rtol=1e-10)
    np.testing.assert_allclose(np.exp(direct).sum(), 1.0, rtol=1e-10)


@pytest.mark.parametrize("n", [19, 24])  # blocks of 8 pixels: the last one padded, or none
def test_nade_blocked_running_sum_matches_a_loop_with_its_gradient(n):
    nade = D.NADE(n, 5, rngs=nnx.Rngs(0), dtype=jnp.float64)
    keys = jax.random.split(jax.random.key(3), 4)
    nade.W[...], nade.V[...] = (jax.random.normal(k, (n, 5), jnp.float64) for k in keys[:2])
    nade.c[...] = jax.random.normal(keys[2], (5,), jnp.float64)
    x = (jax.random.uniform(keys[3], (2, 3, n)) < 0.5).astype(jnp.float64)

    def loop(W, V, c, x):
        return jnp.stack(
            [jnp.sum(V[j] * jax.nn.sigmoid(c + x[..., :j] @ W[:j]), -1) for j in range(n)], -1
        )

    args = (nade.W[...], nade.V[...], nade.c[...])
    np.testing.assert_allclose(nade.logits(x) - nade.b[...], loop(*args, x), rtol=1e-12)
    for block in (1, 5, 32):
        np.testing.assert_allclose(nade.logits(x, block=block), nade.logits(x), rtol=1e-12)
    g1 = nnx.grad(lambda m: jnp.sum(jnp.sin(m.logits(x) - m.b[...])))(nade)
    g2 = jax.grad(lambda *a: jnp.sum(jnp.sin(loop(*a, x))), argnums=(0, 1, 2))(*args)
    for a, b in zip((g1["W"][...], g1["V"][...], g1["c"][...]), g2):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_nade_is_autoregressive_normalised_and_matches_a_loop():
    nade = D.NADE(6, 4, rngs=nnx.Rngs(0), dtype=jnp.float64)
    nade.W[...] = jax.random.normal(jax.random.key(0), (6, 4), jnp.float64)
    nade.V[...] = jax.random.normal(jax.random.key(1), (6, 4), jnp.float64)
    nade.b[...] = jax.random.normal(jax.random.key(2), (6,), jnp.float64)
    x = jnp.asarray([1.0, 1, 0, 1, 0, 0])
    loop = [
        nade.b[j] + nade.V[j] @ jax.nn.sigmoid(nade.c[...] + x[:j] @ nade.W[:j]) for j in range(6)
    ]
    np.testing.assert_allclose(nade.logits(x), jnp.stack(loop), rtol=1e-12)
    J = np.asarray(jax.jacobian(nade.logits)(x))
    assert np.all(np.triu(J) == 0)
    assert (
        abs(float(jax.scipy.special.logsumexp(nade.log_prob(D.all_binary(6, dtype=jnp.float64)))))
        < 1e-12
    )


def test_maximum_likelihood_baselines_learn():
    rng = np.random.default_rng(2)
    x = (rng.random((500, 10)) < np.linspace(0.1, 0.9, 10)).astype(np.uint8)
    x[:, 9] = x[
        :, 4
    ]  # a dependence only an autoregressive model captures: worth H(x_4) = 0.69 nats
    for model in (D.AutoregressiveBernoulli(10, rngs=nnx.Rngs(0)), D.NADE(10, 8, rngs=nnx.Rngs(0))):
        trained, hist = D.train_likelihood(
            model,
            x[:400],
            steps=800,
            batch_size=50,
            learning_rate=1e-2,
            x_valid=x[400:],
            eval_every=200,
            progress=False,
        )
        marginal = -np.sum(
            np.log(np.where(x[400:], x[:400].mean(0), 1 - x[:400].mean(0))), 1
        ).mean()
        assert hist["valid"].min() < marginal - 0.4, (type(model).__name__, hist["valid"], marginal)


def test_sampling_cost_counts_weights_by_hand():
    model = D.DARN(7, [4, 3], 5, autoregressive_visible=True, rngs=nnx.Rngs(0))
    # dense: prior 3*2/2; layer 1: 3*5 + 5*4 + 4*3/2; visible: 4*5 + 5*7 + 7*6/2
    dense = 3 + (15 + 20 + 6) + (20 + 35 + 21)
    assert D.sampling_cost(model, jax.random.key(0), num=10)["dense"] == dense
    # every unit on: the sparse count reads every weight too
    for block in (model.prior, model.decoder[0].out, model.decoder[1].out):
        block.bias[...] = jnp.full(block.bias.shape, 50.0)
    cost = D.sampling_cost(model, jax.random.key(0), num=10)
    assert cost["sparse"] == dense and cost["active"] == 7
    # no tanh layer, every unit off: only the dense visible lateral... which reads nothing either
    off = D.DARN(6, 5, 0, rngs=nnx.Rngs(0))
    for block in (off.prior, off.decoder[0].out):
        block.bias[...] = jnp.full(block.bias.shape, -50.0)
    assert D.sampling_cost(off, jax.random.key(0), num=10)["sparse"] == 0.0


def test_sparsity_penalty_is_the_kl_to_the_target():
    probs = jnp.asarray([[0.05, 0.2], [0.05, 0.4]])
    rho = np.array([0.05, 0.3])
    expected = np.sum(0.05 * np.log(0.05 / rho) + 0.95 * np.log(0.95 / (1 - rho)))
    np.testing.assert_allclose(D.sparsity_penalty(probs, 0.05), expected, rtol=1e-6)
    assert float(D.sparsity_penalty(jnp.full((3, 4), 0.05), 0.05)) < 1e-6
    with pytest.raises(ValueError, match="sparsity_target"):
        D.train_darn(
            D.DARN(6, 2, 3, rngs=nnx.Rngs(0)), np.zeros((10, 6)), steps=1, sparsity_weight=1.0
        )


def test_patience_stops_after_that_many_evaluations_without_improvement():
    x = (np.random.default_rng(3).random((200, 6)) < 0.5).astype(np.float32)
    scores = iter(
        [5.0, 4.0, 4.5, 4.2, 4.1, 3.0, 2.0]
    )  # best at the 2nd, then three without improvement
    _, hist = D.fit_with_validation(
        D.NADE(6, 3, rngs=nnx.Rngs(0)),
        D.likelihood_loss,
        jnp.asarray(x),
        steps=700,
        batch_size=20,
        valid_fn=lambda m: next(scores),
        eval_every=100,
        patience=3,
        progress=False,
    )
    assert list(hist["valid_step"]) == [100, 200, 300, 400, 500] and hist.best_step == 200


@pytest.mark.slow
def test_paper_scale_experiments_run_and_record(data_dir, tmp_path, monkeypatch):
    """darn-mnist runs end to end on the real data (tiny settings, the first 5,000 / 1,000 / 1,000
    digits of the three splits) and writes its rows."""
    import lib.data
    from lib.record import run_experiment

    full = lib.data.load_binarized_mnist

    def first_digits(data_dir=None):
        s = full(data_dir)
        return s._replace(train=s.train[:5000], valid=s.valid[:1000], test=s.test[:1000])

    monkeypatch.setenv("LIB_DATA_DIR", str(data_dir))
    monkeypatch.setattr(lib.data, "load_binarized_mnist", first_digits)
    rec = run_experiment(
        "darn-mnist",
        "book",
        {
            "n_hidden": [3, 20],
            "steps": 200,
            "eval_every": 100,
            "mixture_components": [4],
            "is_samples": 10,
            "fdarn_hidden": [30],
            "deep": [[2, 5, 10]],
        },
        results_dir=tmp_path,
    )
    rows = {(r["model"], r.get("n_hidden", r.get("components"))): r for r in rec["rows"]}
    assert sorted(rows) == [("DARN", 3), ("DARN", 20), ("MoB", 4), ("deep DARN", 10), ("fDARN", 30)]
    assert rows[("DARN", 3)]["method"] == "exact" and rows[("DARN", 20)]["method"].startswith(
        "importance"
    )
    assert (
        rows[("fDARN", 30)]["method"].startswith("importance")
        and "test_log_prob" not in rows[("deep DARN", 10)]
    )
    for r in rec["rows"]:
        assert (
            -300 < r.get("test_log_prob", -100) < -60
        )  # nats per binarised MNIST digit, however briefly trained
        assert r["model"] == "MoB" or r["test_bound"] > -r.get("test_log_prob", 0.0)
    fd, deep = rows[("fDARN", 30)], rows[("deep DARN", 10)]
    assert (
        fd["n_deterministic"] == 0
        and 0 < fd["test_activity"] < 1
        and fd["weights_read"] < fd["weights_dense"]
    )
    assert (deep["layers"], deep["n_deterministic"]) == (2, 10) and 60 < deep["test_bound"] < 300


@pytest.mark.slow
def test_uci_experiment_runs_and_records(data_dir, tmp_path, monkeypatch):
    """darn-uci end to end on the real data (tiny settings): every model's row, each the best of
    its grid on validation. (Apart from the darn-mnist test, so that two workers share them.)"""
    from lib.record import run_experiment

    monkeypatch.setenv("LIB_DATA_DIR", str(data_dir))
    rec = run_experiment(
        "darn-uci",
        "book",
        {
            "datasets": ["mushrooms"],
            "epochs": 4,
            "eval_epochs": 2,
            "components": [2, 3],
            "darn_hidden": [4, 20],
            "darn_deterministic": [10],
            "nade_hidden": [10],
            "learning_rates": [1e-3, 3e-3],
            "is_samples": 10,
            "is_repeats": 2,
        },
        results_dir=tmp_path,
    )
    assert [r["model"] for r in rec["rows"]] == ["MoB", "FVSBN", "NADE", "DARN"]
    assert all(np.isfinite(r["test_log_prob"]) and r["test_log_prob"] < 0 for r in rec["rows"])
    mob, fvsbn, nade, darn = rec["rows"]
    assert [len(r["grid"]) for r in rec["rows"]] == [2, 2, 2, 4]
    for r in (mob, fvsbn, nade):  # the kept setting is the grid's best on validation log p
        assert r["valid_log_prob"] == max(g["valid_log_prob"] for g in r["grid"])
    assert darn["valid_bound"] == min(g["valid_bound"] for g in darn["grid"])
    # the selected DARN, trained again to evaluate it, is the same model (deterministic for a seed)
    assert darn["valid_bound_retrained"] == darn["valid_bound"]
    assert darn["method"] == ("exact" if darn["n_hidden"] <= 16 else "importance, S=10, 2 repeats")


@pytest.mark.parametrize(
    "stop_at", [250, 300]
)  # between validations (fit's checkpoints), at a validation
@pytest.mark.slow
def test_interrupted_training_resumes_to_the_uninterrupted_result(tmp_path, stop_at):
    """Validation every 100 steps, fit's checkpoints every 50, patience 2; interrupted at step
    `stop_at` (an exception in the loss's logging): resumed, the model, the history and the
    early-stopping choice of an uninterrupted run."""
    rng = np.random.default_rng(0)
    x = (rng.random((400, 10)) < 0.3).astype(np.float32)
    kwargs = dict(
        steps=600,
        batch_size=50,
        learning_rate=3e-3,
        x_valid=x[300:],
        eval_every=100,
        patience=2,
        progress=False,
        log_every=50,
        checkpoint_every=50,
    )

    def fresh():
        return D.DARN(10, 4, 6, rngs=nnx.Rngs(0))

    straight, hist = D.train_darn(fresh(), x[:300], **kwargs)
    folder = tmp_path / "ckpt"
    original = D.fit  # the toolkit's loop as lib.darn calls it; patched, it stops at stop_at

    def interrupting_fit(step, state, data, num_steps, **kw):
        if kw["first_step"] + kw["stop_after"] > stop_at:
            original(
                step, state, data, num_steps, **{**kw, "stop_after": stop_at - kw["first_step"]}
            )
            raise KeyboardInterrupt
        return original(step, state, data, num_steps, **kw)

    D.fit = interrupting_fit
    try:
        with pytest.raises(KeyboardInterrupt):
            D.train_darn(fresh(), x[:300], checkpoint_dir=folder, **kwargs)
    finally:
        D.fit = original
    assert (folder / "validated").is_dir() and (folder / "steps").is_dir()
    resumed, hist2 = D.train_darn(fresh(), x[:300], checkpoint_dir=folder, **kwargs)
    assert set(hist) == set(hist2)
    for name in hist:
        np.testing.assert_array_equal(hist2[name], hist[name], err_msg=name)
    for a, b in zip(jax.tree.leaves(nnx.state(resumed)), jax.tree.leaves(nnx.state(straight))):
        np.testing.assert_array_equal(a, b)
