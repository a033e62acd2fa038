"""Adaptive weight noise (lib.darn.WeightNoise) against independent oracles: the KL minimised by a
numerical optimiser, its gradient with the prior held fixed, Monte Carlo moments of the draws."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

import lib.darn as D  # noqa: E402


def general_kl(means, log_std, mu_p, log_var_p):
    """KL(N(means, exp(2 log_std)) || N(mu_p, exp(log_var_p))), summed, written out."""
    var, var_p = jnp.exp(2 * log_std), jnp.exp(log_var_p)
    return jnp.sum(0.5 * log_var_p - log_std + (var + (means - mu_p) ** 2) / (2 * var_p) - 0.5)


def test_optimal_prior_kl_is_the_kl_at_the_prior_a_numerical_optimiser_finds():
    rng = np.random.default_rng(0)
    means = jnp.asarray(rng.normal(0.3, 0.8, 57))
    log_std = jnp.asarray(rng.normal(-2.0, 0.7, 57))
    kl, mu_p, var_p = D.optimal_prior_kl(means, log_std)
    found = minimize(
        lambda p: float(general_kl(means, log_std, p[0], p[1])),
        x0=np.array([0.0, 0.0]),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20_000},
    )
    np.testing.assert_allclose([float(mu_p), float(np.log(var_p))], found.x, atol=1e-5)
    np.testing.assert_allclose(float(kl), found.fun, rtol=1e-9)
    np.testing.assert_allclose(float(kl), float(general_kl(means, log_std, mu_p, jnp.log(var_p))))


def test_the_short_forms_gradient_is_the_gradient_with_the_prior_held_fixed():
    """The envelope theorem: the optimal prior moves with (means, log_std) but adds no gradient."""
    rng = np.random.default_rng(1)
    means = jnp.asarray(rng.normal(0.0, 0.5, 40))
    log_std = jnp.asarray(rng.normal(-1.5, 0.5, 40))
    _, mu_p, var_p = D.optimal_prior_kl(means, log_std)
    short = jax.grad(lambda m, s: D.optimal_prior_kl(m, s)[0], argnums=(0, 1))(means, log_std)
    fixed = jax.grad(lambda m, s: general_kl(m, s, mu_p, jnp.log(var_p)), argnums=(0, 1))(
        means, log_std
    )
    for a, b in zip(short, fixed):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)


def test_optimal_prior_kl_of_a_list_of_arrays_is_that_of_their_concatenation():
    rng = np.random.default_rng(7)
    means = [jnp.asarray(rng.normal(size=s)) for s in ((3, 4), (5,), (2, 2, 2))]
    log_std = [jnp.asarray(rng.normal(-1, 0.3, size=m.shape)) for m in means]
    flat = [jnp.concatenate([a.ravel() for a in x]) for x in (means, log_std)]
    for a, b in zip(D.optimal_prior_kl(means, log_std), D.optimal_prior_kl(*flat)):
        np.testing.assert_allclose(float(a), float(b), rtol=1e-12)


def test_optimal_prior_kl_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="same shapes"):
        D.optimal_prior_kl(jnp.zeros(3), jnp.zeros(4))
    with pytest.raises(ValueError, match="same shapes"):
        D.optimal_prior_kl([jnp.zeros(3)], [jnp.zeros(3), jnp.zeros(1)])


def test_draws_have_the_posterior_means_and_standard_deviations():
    model = D.DARN(5, 3, 4, rngs=nnx.Rngs(0), dtype=jnp.float64)
    noise = D.WeightNoise(model, n_data=10, init_std=0.1)
    rng = np.random.default_rng(2)
    for s in noise.log_std:  # a different standard deviation for every weight
        s[...] = jnp.asarray(rng.normal(-2.0, 0.5, s[...].shape))
    means = jax.tree.leaves(nnx.state(model, nnx.Param))
    stds = [np.exp(np.asarray(s[...])) for s in noise.log_std]
    graphdef, state = nnx.split(noise)

    @jax.jit
    def draw(key):
        return jax.tree.leaves(nnx.state(nnx.merge(graphdef, state).sample(key), nnx.Param))

    n = 4000
    draws = [draw(k) for k in jax.random.split(jax.random.key(3), n)]
    for i, (m, s) in enumerate(zip(means, stds)):
        w = np.stack([np.asarray(d[i]) for d in draws])
        z = (w.mean(0) - np.asarray(m)) / (s / np.sqrt(n))
        assert np.abs(z).max() < 5, f"parameter {i}: mean off by {np.abs(z).max():.1f} SE"
        np.testing.assert_allclose(w.std(0), s, rtol=0.1)
    # the draw leaves the model (the means) as it was
    for a, b in zip(means, jax.tree.leaves(nnx.state(model, nnx.Param))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_loss_is_the_noisy_networks_description_length_plus_the_weight_cost_per_example():
    model = D.DARN(5, 3, 4, rngs=nnx.Rngs(0), dtype=jnp.float64)
    noise = D.WeightNoise(model, n_data=40, init_std=0.05)
    x = jnp.asarray((np.random.default_rng(4).random((8, 5)) < 0.4), jnp.float64)
    key = jax.random.key(5)
    loss, metrics = D.weight_noise_loss(noise, x, key)
    k_weights, k_codes = jax.random.split(key)
    F, _ = D.darn_loss(noise.sample(k_weights), x, k_codes)
    flat = jnp.concatenate([m.ravel() for m in jax.tree.leaves(nnx.state(model, nnx.Param))])
    log_std = jnp.full(flat.shape, np.log(0.05))
    _, mu_p, var_p = D.optimal_prior_kl(flat, log_std)
    kl = general_kl(flat, log_std, mu_p, jnp.log(var_p))
    np.testing.assert_allclose(float(metrics["description_length"]), float(F), rtol=1e-12)
    np.testing.assert_allclose(float(metrics["weight_cost"]), float(kl) / 40, rtol=1e-9)
    np.testing.assert_allclose(float(loss), float(F) + float(kl) / 40, rtol=1e-12)


def test_train_darn_with_weight_noise_returns_the_mean_network():
    rng = np.random.default_rng(6)
    x = (rng.random((240, 6)) < 0.3).astype(np.float32)
    model = D.DARN(6, 3, 4, rngs=nnx.Rngs(0))
    trained, history = D.train_darn(
        model,
        x[:200],
        steps=200,
        x_valid=x[200:],
        eval_every=100,
        weight_noise_std=0.05,
        keep_best=False,
        seed=0,
        progress=False,
    )
    assert isinstance(trained, D.DARN)
    assert history.best_step == 200 and list(history["valid_step"]) == [100, 200]
    cost = history["weight_cost"]
    assert cost.shape == (200,) and np.all(cost > 0)
    np.testing.assert_allclose(history["loss"], history["description_length"] + cost, rtol=1e-5)
    with pytest.raises(ValueError, match="needs estimator 'darn'"):
        D.train_darn(
            model, x, steps=10, weight_noise_std=0.05, estimator="reinforce", progress=False
        )
