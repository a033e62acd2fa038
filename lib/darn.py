# GENERATED FILE: do not edit. Source: book/darn.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""Deep AutoRegressive Networks (Gregor et al. 2014), derived in book/darn.md.

DARN: autoregressive binary stochastic layers with deterministic tanh layers, the encoder and
the description-length bound, trained by the gradient of the paper's Appendix A or by
REINFORCE; exact log p by enumeration and importance-sampled log p; the baselines of Tables 1-2
(mixtures of Bernoullis by EM, FVSBN, NADE). The paper-scale experiments and the claims are
lib.darn_report.
"""

# %% book/darn.md
from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lib.toolkit import Array, Bool, Float, Function, Instance, Int, Key, Maybe, OneOf
from lib.toolkit import constructor_signatures
from lib.toolkit import Progress, add_to_class, check_array, checks, fit, minibatches
from lib.toolkit import nnx_model, nnx_step, nnx_train_state, restore_checkpoint, save_checkpoint
from lib.toolkit import History, Seed, Trained, renamed, seed_key


# %% book/darn.md
@checks(v=Array(), logits=Array())
def bernoulli_log_prob(v, logits):
    """sum_j log Bernoulli(v_j | sigmoid(logits_j)) over the last axis (eq. darn-prior), stably."""
    try:
        np.broadcast_shapes(jnp.shape(v), jnp.shape(logits))
    except ValueError:
        raise ValueError(
            f"logits must have the shape of v (or one that broadcasts with it): v has shape "
            f"{tuple(jnp.shape(v))}, logits {tuple(jnp.shape(logits))}"
        ) from None
    return jnp.sum(v * logits - jax.nn.softplus(logits), -1)


@checks(n=Int(1))
def strictly_lower(n: int, dtype=jnp.float32):
    """(n, n) mask, one where column i < row j: row j of a lateral matrix sees v_1..v_{j-1} only."""
    return jnp.tril(jnp.ones((n, n), dtype), -1)


def _hard_sample(logits, u):
    return jax.lax.stop_gradient((u < jax.nn.sigmoid(logits)).astype(logits.dtype))


# %% book/darn.md
class AutoregressiveBernoulli(nnx.Module):
    """p(v | c) = prod_j Bernoulli(v_j | sigmoid(b_j + (c W)_j + (v A^T)_j)), A strictly lower
    triangular.

    size: n units; context_size: width of c (0: no context, e.g. the top prior of eq. darn-prior);
    autoregressive=False drops A (the encoder of eq. 6). Section 1.
    """

    @checks(size=Int(1), context_size=Int(0), autoregressive=Bool())
    def __init__(
        self,
        size: int,
        context_size: int = 0,
        *,
        autoregressive: bool = True,
        rngs: nnx.Rngs,
        dtype=jnp.float32,
    ):
        self.size, self.context_size, self.autoregressive = size, context_size, autoregressive
        self.bias = nnx.Param(jnp.zeros((size,), dtype))
        init = nnx.initializers.lecun_normal()
        self.weight = (
            nnx.Param(init(rngs.params(), (context_size, size), dtype)) if context_size else None
        )
        self.lateral = nnx.Param(jnp.zeros((size, size), dtype)) if autoregressive else None

    def lateral_matrix(self):
        """A with its diagonal and upper triangle masked to zero."""
        A = self.lateral[...]
        return A * strictly_lower(self.size, A.dtype)

    def context_logits(self, context=None):
        """b + c W: the part of the logits that does not depend on v; (..., size)."""
        if self.weight is None:
            return self.bias[...]
        return context @ self.weight[...] + self.bias[...]

    def logits(self, v, context=None):
        """All logits of a given v (..., size) at once: one product with the triangular matrix."""
        out = self.context_logits(context)
        return out + v @ self.lateral_matrix().T if self.autoregressive else out + jnp.zeros_like(v)

    def log_prob(self, v, context=None):
        """log p(v | context) (...,), summed over the units."""
        return bernoulli_log_prob(v, self.logits(v, context))

    def sample(self, key, context=None, *, shape=(), pathwise: bool = False):
        """Draw v (..., size) and return it with its logits; unit j waits for units 1..j-1
        (lax.scan).

        shape: batch shape when there is no context. pathwise: use binary_sample (Section 5).
        """
        base = self.context_logits(context)
        base = jnp.broadcast_to(
            base, jnp.broadcast_shapes(base.shape[:-1], tuple(shape)) + (self.size,)
        )
        u = jax.random.uniform(key, base.shape, base.dtype)
        draw = binary_sample if pathwise else _hard_sample
        if not self.autoregressive:
            return draw(base, u), base
        A = self.lateral_matrix()

        def unit(v, j):
            a_j = base[..., j] + v @ A[j]
            return v.at[..., j].set(draw(a_j, u[..., j])), a_j

        v, a = jax.lax.scan(unit, jnp.zeros_like(base), jnp.arange(self.size))
        return v, jnp.moveaxis(a, 0, -1)


# %% book/darn.md
class ConditionalBernoulli(nnx.Module):
    """One conditional of eq. darn-deep: d = tanh(inputs U + c) (eq. 9; skipped if hidden=0), then
    AutoregressiveBernoulli(v | d) (eq. 10)."""

    @checks(size=Int(1), input_size=Int(1), hidden=Int(0), autoregressive=Bool())
    def __init__(
        self,
        size: int,
        input_size: int,
        hidden: int = 0,
        *,
        autoregressive: bool,
        rngs: nnx.Rngs,
        dtype=jnp.float32,
    ):
        self.hidden = (
            nnx.Linear(input_size, hidden, rngs=rngs, param_dtype=dtype, dtype=dtype)
            if hidden
            else None
        )
        self.out = AutoregressiveBernoulli(
            size, hidden or input_size, autoregressive=autoregressive, rngs=rngs, dtype=dtype
        )

    def context(self, inputs):
        """The input to the output layer: tanh of the hidden layer, or the inputs without one."""
        return inputs if self.hidden is None else jnp.tanh(self.hidden(inputs))

    def log_prob(self, v, inputs):
        """log p(v | inputs) (...,)."""
        return self.out.log_prob(v, self.context(inputs))

    def sample(self, key, inputs, *, pathwise: bool = False):
        """Draw v given the inputs; returns (v, logits) as the output layer's sample."""
        return self.out.sample(key, self.context(inputs), pathwise=pathwise)


def _module_list(modules):
    # nnx.List (flax >= 0.12) makes the list a pytree child; older flax takes a plain list
    return nnx.List(modules) if hasattr(nnx, "List") else list(modules)


def _conditionals(sizes, input_sizes, hidden: int, autoregressive, *, rngs, dtype):
    """One ConditionalBernoulli per (size, input size, autoregressive), as a list of modules."""
    return _module_list(
        [
            ConditionalBernoulli(n, n_in, hidden, autoregressive=ar, rngs=rngs, dtype=dtype)
            for n, n_in, ar in zip(sizes, input_sizes, autoregressive)
        ]
    )


# %% book/darn.md
class DARN(nnx.Module):
    """Deep AutoRegressive Network (Section 2): encoder q(h | x), autoregressive prior p(h^(L)),
    decoder conditionals p(h^(l) | h^(l+1)).

    n_visible: data width; n_hidden: stochastic widths (n1, ..., nL) or one int; n_deterministic:
    tanh units in every conditional (0: none). The representation h is the list [h1, ..., hL], each
    (..., n_l).
    """

    @checks(
        n_visible=Int(1),
        n_deterministic=Int(0),
        autoregressive_visible=Bool(),
        autoregressive_encoder=Bool(),
        skip_connections=Bool(),
    )
    def __init__(
        self,
        n_visible: int,
        n_hidden: int | Sequence[int],
        n_deterministic: int = 100,
        *,
        autoregressive_visible: bool = False,
        autoregressive_encoder: bool = False,
        skip_connections: bool = False,
        rngs: nnx.Rngs,
        dtype=jnp.float32,
    ):
        n_hidden = (n_hidden,) if isinstance(n_hidden, (int, np.integer)) else tuple(n_hidden)
        if not n_hidden:
            raise ValueError("n_hidden must be a positive integer or a non-empty sequence of them")
        for n in n_hidden:
            Int(1).check(n, "n_hidden")
        s = self.sizes = (int(n_visible), *(int(n) for n in n_hidden))
        self.skip_connections = skip_connections
        L = len(n_hidden)
        dec_in = [sum(s[l + 1 :]) if skip_connections else s[l + 1] for l in range(L)]
        enc_in = [sum(s[:k]) if skip_connections else s[k - 1] for k in range(1, L + 1)]
        self.prior = AutoregressiveBernoulli(s[L], 0, autoregressive=True, rngs=rngs, dtype=dtype)
        self.decoder = _conditionals(
            s[:L],
            dec_in,
            n_deterministic,
            [l > 0 or autoregressive_visible for l in range(L)],
            rngs=rngs,
            dtype=dtype,
        )
        self.encoder = _conditionals(
            s[1:], enc_in, n_deterministic, [autoregressive_encoder] * L, rngs=rngs, dtype=dtype
        )

    @property
    def dtype(self):
        """The dtype of the parameters (and of the codes the model draws)."""
        return self.prior.bias[...].dtype

    def _decoder_inputs(self, h, l):  # h = [x, h1, ..., hL]
        return jnp.concatenate(h[l + 1 :], -1) if self.skip_connections else h[l + 1]

    def _encoder_inputs(self, h, k):
        return jnp.concatenate(h[:k], -1) if self.skip_connections else h[k - 1]


# %% book/darn.md
@add_to_class(DARN)
class _DARNDistributions:
    def check_x(self, x, name: str = "x"):
        """x must be binary, finite, of shape (..., n_visible); returned as an array of the model's
        dtype."""
        x = check_array(x, name, binary=True)
        if x.ndim < 1 or x.shape[-1] != self.sizes[0]:
            raise ValueError(
                f"{name} must have shape (..., {self.sizes[0]}) (n_visible), got {tuple(x.shape)}"
            )
        return jnp.asarray(x, self.dtype)

    def check_h(self, hs, batch_shape):
        """Raise ValueError unless hs holds one code per stochastic layer, each of its width."""
        if len(hs) != len(self.sizes) - 1:
            raise ValueError(
                f"the representation must hold {len(self.sizes) - 1} layers, got {len(hs)}"
            )
        for l, (h, n) in enumerate(zip(hs, self.sizes[1:]), start=1):
            if h.shape[-1] != n:
                raise ValueError(f"layer h{l} must have width {n}, got shape {tuple(h.shape)}")

    def encode(self, x, key, *, pathwise: bool = False, return_logits: bool = False):
        """h ~ q(h | x) layer by layer (eq. 8): returns [h1, ..., hL] and log q(h | x), shape
        x.shape[:-1] (and the list of the layers' logits if return_logits)."""
        h, logq, all_logits = [x], 0.0, []
        for k, (block, key_k) in enumerate(
            zip(self.encoder, jax.random.split(key, len(self.encoder))), start=1
        ):
            h_k, logits = block.sample(key_k, self._encoder_inputs(h, k), pathwise=pathwise)
            logq = logq + bernoulli_log_prob(h_k, logits)
            h.append(h_k)
            all_logits.append(logits)
        return (h[1:], logq, all_logits) if return_logits else (h[1:], logq)

    def encoder_log_prob(self, x, hs):
        """log q(h | x) of a given representation."""
        h = [x, *hs]
        return sum(
            block.log_prob(h[k], self._encoder_inputs(h, k))
            for k, block in enumerate(self.encoder, 1)
        )

    def log_prior(self, hs):
        """log p(h) = log p(h^(L)) + sum_{1 <= l < L} log p(h^(l) | h^(l+1))."""
        h = [None, *hs]
        out = self.prior.log_prob(h[-1])
        for l in range(1, len(hs)):
            out = out + self.decoder[l].log_prob(h[l], self._decoder_inputs(h, l))
        return out

    def log_likelihood(self, x, hs):
        """log p(x | h) (eq. 3)."""
        return self.decoder[0].log_prob(x, self._decoder_inputs([x, *hs], 0))

    def log_joint(self, x, hs):
        """log p(x, h)."""
        return self.log_prior(hs) + self.log_likelihood(x, hs)


# %% book/darn.md
@add_to_class(DARN)
class _DARNCoding:
    def description_length(self, x, key, *, pathwise: bool = True):
        """One-sample estimate of the expected description length (eq. 15), in nats, per example:
        log q(h | x) - log p(x, h) with h ~ q(h | x). pathwise: the gradient of Appendix A (Section
        5)."""
        hs, logq = self.encode(x, key, pathwise=pathwise)
        return logq - self.log_joint(x, hs)

    def sample(self, key, num: int):
        """Ancestral sampling (Section 3): x (num, n_visible) and [h1, ..., hL], top layer first."""
        L = len(self.sizes) - 1
        keys = jax.random.split(key, L + 1)
        h = [None] * (L + 1)
        h[L], _ = self.prior.sample(keys[L], shape=(num,))
        for l in range(L - 1, -1, -1):
            h[l], _ = self.decoder[l].sample(keys[l], self._decoder_inputs(h, l))
        return h[0], h[1:]


# %% book/darn.md
@checks(n=Int(0, 62), start=Int(0), count=Maybe(Int(1)))
def all_binary(n: int, start: int = 0, count: int | None = None, dtype=jnp.float32):
    """Codes start .. start+count-1 of the 2^n binary vectors (bit i of code r in column i); (count,
    n)."""
    if count is None and n > 24:
        raise ValueError(
            f"all_binary would build all 2^{n} codes (n={n}); above 2^24 pass start and count"
        )
    count = 2**n if count is None else count
    idx = start + jnp.arange(count)
    return ((idx[:, None] >> jnp.arange(n)) & 1).astype(dtype)


@checks(h=Array())
def split_layers(h, sizes: Sequence[int]) -> list:
    """Cut the columns of h (..., sum(sizes)) into the layers [h1, ..., hL]."""
    if sum(sizes) != h.shape[-1]:
        raise ValueError(f"sizes must add up to the width of h ({h.shape[-1]}), got {list(sizes)}")
    cuts = np.cumsum([0, *sizes])
    return [h[..., a:b] for a, b in zip(cuts[:-1], cuts[1:])]


@checks(terms=Function(), num_chunks=Int(1), size=Int(1))
def chunked_logsumexp(terms, num_chunks: int, size: int, dtype):
    """logsumexp over every chunk c = 0..num_chunks-1 of terms(c), an array (size, C), along its
    last axis: a running maximum and sum in lax.scan, so one chunk is in memory at a time."""

    def add(carry, c):
        t = terms(c)
        m = jnp.maximum(carry[0], jnp.max(t, -1))
        return (m, carry[1] * jnp.exp(carry[0] - m) + jnp.sum(jnp.exp(t - m[:, None]), -1)), None

    init = (jnp.full((size,), -jnp.inf, dtype), jnp.zeros((size,), dtype))
    (m, s), _ = jax.lax.scan(add, init, jnp.arange(num_chunks))
    return m + jnp.log(s)


@checks(model=Instance(DARN), x=Array(), chunk=Int(1), batch=Int(1))
def exact_log_prob(model: DARN, x, *, chunk: int = 4096, batch: int = 1000):
    """log p(x) = logsumexp over all 2^(n1+...+nL) representations of log p(x, h) (Section 3); x (N,
    n_x) -> (N,).

    Refuses above 24 hidden bits (use importance_log_prob).
    """
    x = model.check_x(x)
    bits = sum(model.sizes[1:])
    if bits > 24:
        raise ValueError(
            f"exact_log_prob would enumerate 2^{bits} representations; above 2^24 use "
            "importance_log_prob"
        )
    chunk = min(chunk, 2**bits)
    if 2**bits % chunk:
        raise ValueError(f"chunk must divide the 2^{bits} codes (a power of two), got {chunk}")
    graphdef, state = nnx.split(model)
    return jnp.concatenate(
        [
            _exact_log_prob_batch(graphdef, state, x[i : i + batch], chunk)
            for i in range(0, x.shape[0], batch)
        ]
    )


# %% book/darn.md
@partial(jax.jit, static_argnums=(0, 3))
def _exact_log_prob_batch(graphdef, state, xb, chunk):
    model = nnx.merge(graphdef, state)
    bits = sum(model.sizes[1:])
    visible = model.decoder[0]
    shift = xb @ visible.out.lateral_matrix().T if visible.out.autoregressive else None

    def log_joint(c):  # log p(x, h) for the batch and the codes of chunk c: (B, C)
        hs = split_layers(all_binary(bits, c * chunk, chunk, model.dtype), model.sizes[1:])
        prior = model.log_prior(hs)  # (C,): once per code, not per datum
        logits = visible.out.context_logits(
            visible.context(model._decoder_inputs([None, *hs], 0))
        )  # (C, n_x)
        if shift is None:
            lj = xb @ logits.T - jnp.sum(jax.nn.softplus(logits), -1)
        else:
            lj = bernoulli_log_prob(xb[:, None], logits[None] + shift[:, None])
        return lj + prior

    return chunked_logsumexp(log_joint, 2**bits // chunk, xb.shape[0], xb.dtype)


# %% book/darn.md
@checks(model=Instance(DARN), x=Array())
def expected_description_length(model: DARN, x):
    """Exact E_q[log q(h | x) - log p(x, h)] (eq. darn-free-energy, nats) by enumerating every h; x
    (N, n_x) -> (N,).

    For small models (at most 16 hidden bits): the oracle of the gradient estimators (Section 5).
    """
    x = model.check_x(x)
    bits = sum(model.sizes[1:])
    if bits > 16:
        raise ValueError(
            f"expected_description_length enumerates 2^{bits} representations; at most 2^16"
        )
    xs, hs = enumerate_codes(model, x)
    logq = model.encoder_log_prob(xs, hs)
    return jnp.sum(jnp.exp(logq) * (logq - model.log_joint(xs, hs)), -1)


@checks(model=Instance(DARN), x=Array(ndim=2))
def enumerate_codes(model: DARN, x):
    """Every image of x (N, n_x) paired with every code: xs (N, 2^bits, n_x) and the layers hs,
    each (N, 2^bits, n_l).

    Refuses more than 2^22 rows (N 2^bits): an oracle for small models.
    """
    bits = sum(model.sizes[1:])
    if x.shape[0] * 2**bits > 2**22:
        raise ValueError(
            f"enumerate_codes would build {x.shape[0]} x 2^{bits} rows; the bound is "
            "2^22 (use exact_log_prob, which enumerates in chunks)"
        )
    H = all_binary(sum(model.sizes[1:]), dtype=x.dtype)
    xs = jnp.broadcast_to(x[:, None], (x.shape[0], H.shape[0], x.shape[-1]))
    return xs, split_layers(jnp.broadcast_to(H, (x.shape[0], *H.shape)), model.sizes[1:])


# %% book/darn.md
@jax.custom_vjp
def binary_sample(logits, u):
    """h = 1[u < sigmoid(logits)] whose gradient is eq. darn-estimator (Appendix A, Section 5).

    Backward: dL/dlogits = dL/dh * p(1-p) / (2 q(h)) = dL/dh * sigmoid((1 - 2h) logits) / 2,
    with q(h) the probability of the sampled value. u: uniforms of the same shape (no gradient).
    """
    return (u < jax.nn.sigmoid(logits)).astype(logits.dtype)


def _binary_sample_fwd(logits, u):
    h = binary_sample(logits, u)
    return h, (logits, h)


def _binary_sample_bwd(residuals, g):
    logits, h = residuals
    return g * jax.nn.sigmoid((1 - 2 * h) * logits) / 2, jnp.zeros_like(h)


binary_sample.defvjp(_binary_sample_fwd, _binary_sample_bwd)


# %% book/darn.md
@checks(probs=Array(), target=Float(0, 1, low_open=True, high_open=True))
def sparsity_penalty(probs, target: float):
    """fDARN's penalty (Section 9): sum_j KL(Bernoulli(target) || Bernoulli(mean activity of unit
    j)).

    probs (..., n): the encoder's q(h_j = 1 | x) over a batch; the mean is over all leading axes.
    """
    rho = jnp.clip(jnp.mean(probs.reshape(-1, probs.shape[-1]), 0), 1e-6, 1 - 1e-6)
    return jnp.sum(
        target * jnp.log(target / rho) + (1 - target) * jnp.log((1 - target) / (1 - rho))
    )


@checks(
    model=Instance(DARN),
    key=Key(),
    sparsity_target=Maybe(Float(0, 1, low_open=True, high_open=True)),
    sparsity_weight=Float(0),
)
def darn_loss(
    model: DARN, x, key, *, sparsity_target: float | None = None, sparsity_weight: float = 0.0
):
    """Mean one-sample description length (nats), differentiated with Appendix A's estimator.

    With sparsity_weight > 0, adds the fDARN penalty (Section 9) on every stochastic layer's mean
    activity.
    """
    x = model.check_x(x)
    hs, logq, logits = model.encode(x, key, pathwise=True, return_logits=True)
    F = jnp.mean(logq - model.log_joint(x, hs))
    activity = jnp.mean(
        jnp.concatenate([jnp.mean(jax.nn.sigmoid(a).reshape(-1, a.shape[-1]), 0) for a in logits])
    )
    if not sparsity_weight:
        return F, {"activity": activity}
    penalty = sum(sparsity_penalty(jax.nn.sigmoid(a), sparsity_target) for a in logits)
    return F + sparsity_weight * penalty, {"description_length": F, "activity": activity}


@checks(model=Instance(DARN), key=Key())
def reinforce_surrogate(model: DARN, x, key, baseline):
    """Per-example surrogate F + sg(F - b) log q(h | x) whose gradient is the REINFORCE estimate,
    and F.

    baseline: b(x), broadcastable to x.shape[:-1] (no gradient flows into it here).
    """
    x = model.check_x(x)
    hs, logq = model.encode(x, key, pathwise=False)
    F = logq - model.log_joint(x, hs)
    return F + jax.lax.stop_gradient(F - baseline) * logq, F


class Reinforce(nnx.Module):
    """A DARN and its REINFORCE baseline b(x) = x w + c, trained together by `reinforce_loss`."""

    @checks(model=Instance(DARN))
    def __init__(self, model: DARN, *, rngs: nnx.Rngs):
        self.model = model
        self.baseline = nnx.Linear(
            model.sizes[0],
            1,
            kernel_init=nnx.initializers.zeros,
            rngs=rngs,
            param_dtype=model.dtype,
            dtype=model.dtype,
        )


@checks(wrapped=Instance(Reinforce), key=Key())
def reinforce_loss(wrapped: Reinforce, x, key):
    """Surrogate for the DARN's parameters plus the baseline's squared error; metric F is the
    bound."""
    b = wrapped.baseline(x)[..., 0]
    surrogate, F = reinforce_surrogate(wrapped.model, x, key, jax.lax.stop_gradient(b))
    return jnp.mean(surrogate) + jnp.mean((jax.lax.stop_gradient(F) - b) ** 2), {
        "description_length": jnp.mean(F)
    }


# %% book/darn.md
@checks(model=Instance(DARN), x=Array(), key=Key(), num_samples=Int(1), chunk=Int(1), batch=Int(1))
def importance_log_prob(
    model: DARN, x, key, *, num_samples: int = 1000, chunk: int = 100, batch: int = 100
):
    """Eq. darn-is: log (1/S sum_s p(x, h_s) / q(h_s | x)), h_s ~ q(h | x); x (N, n_x) -> (N,)."""
    x = model.check_x(x)
    chunk = min(chunk, num_samples)
    if num_samples % chunk:
        raise ValueError(f"num_samples ({num_samples}) must be a multiple of chunk ({chunk})")
    graphdef, state = nnx.split(model)
    starts = range(0, x.shape[0], batch)
    keys = jax.random.split(key, len(starts))
    return jnp.concatenate(
        [
            _importance_batch(graphdef, state, x[i : i + batch], k, num_samples, chunk)
            for i, k in zip(starts, keys)
        ]
    )


@partial(jax.jit, static_argnums=(0, 4, 5))
def _importance_batch(graphdef, state, xb, key, num_samples, chunk):
    model = nnx.merge(graphdef, state)
    xs = jnp.broadcast_to(xb, (chunk, *xb.shape))

    def log_weights(c):  # log p(x, h_s) - log q(h_s | x) for chunk c of the samples: (B, chunk)
        hs, logq = model.encode(xs, jax.random.fold_in(key, c))
        return (model.log_joint(xs, hs) - logq).T

    return chunked_logsumexp(log_weights, num_samples // chunk, xb.shape[0], xb.dtype) - math.log(
        num_samples
    )


@checks(model=Instance(DARN), key=Key(), num_samples=Int(1), repeats=Int(2))
def importance_estimate(
    model: DARN, x, key, *, num_samples: int = 1000, repeats: int = 10, **kwargs
) -> dict:
    """Mean test log-likelihood by eq. darn-is, repeated: {"mean", "ci95", "repeats"} (nats per
    example).

    ci95 is 1.96 standard errors of the mean over the repeats (as the paper reports).
    """
    if repeats < 2:
        raise ValueError(f"repeats must be at least 2 to give an interval, got {repeats}")
    means = np.array(
        [
            float(jnp.mean(importance_log_prob(model, x, k, num_samples=num_samples, **kwargs)))
            for k in jax.random.split(key, repeats)
        ]
    )
    return {
        "mean": float(means.mean()),
        "ci95": float(1.96 * means.std(ddof=1) / np.sqrt(repeats)),
        "repeats": means.tolist(),
    }


# %% book/darn.md
@checks(model=Instance(DARN))
def init_visible_bias(model: DARN, x_train) -> DARN:
    """Set the visible layer's biases to logit(mean of x_train), clipped to [1e-3, 1 - 1e-3]."""
    x_train = model.check_x(x_train, "x_train")
    mean = jnp.clip(jnp.mean(x_train, 0), 1e-3, 1 - 1e-3)
    model.decoder[0].out.bias[...] = jnp.log(mean / (1 - mean)).astype(model.dtype)
    return model


@checks(model=Instance(DARN), key=Key(), num_samples=Int(1), batch=Int(1))
def mean_description_length(
    model: DARN, x, key, *, num_samples: int = 1, batch: int = 1000
) -> float:
    """Monte Carlo estimate of the mean of eq. darn-free-energy over the rows of x, in nats."""
    x = model.check_x(x)
    graphdef, state = nnx.split(model)
    total = 0.0
    for i in range(0, x.shape[0], batch):
        total += float(
            _description_length_sum(
                graphdef, state, x[i : i + batch], jax.random.fold_in(key, i), num_samples
            )
        )
    return total / x.shape[0]


@partial(jax.jit, static_argnums=(0, 4))
def _description_length_sum(graphdef, state, xb, key, num_samples):
    model = nnx.merge(graphdef, state)
    xs = jnp.broadcast_to(xb, (num_samples, *xb.shape))
    return jnp.sum(model.description_length(xs, key, pathwise=False)) / num_samples


# %% book/darn.md
OPTIMIZERS = {
    "adam": lambda lr: __import__("optax").adam(lr),
    "rmsprop": lambda lr: __import__("optax").rmsprop(
        lr, decay=0.95, eps=1e-4, centered=True, momentum=0.9
    ),
}


# %% book/darn.md
_LOOP_CONTRACTS = dict(
    steps=Int(1),
    batch_size=Int(1),
    learning_rate=Float(0, low_open=True),
    optimizer=OneOf(*OPTIMIZERS),
    eval_every=Int(1),
    patience=Maybe(Int(1)),
    seed=Seed(),
    progress=Bool(),
    log_every=Int(1),
    checkpoint_every=Int(1),
)


def _restore_validated(directory: Path, state):
    """(step, history, state, best) from the latest checkpoint in directory, or None; best is
    (score, step, state) of the best validation so far."""
    restored = restore_checkpoint(directory, {"state": state, "best": state})
    if restored is None:
        return None
    t, trees, extra = restored
    score = math.inf if extra["best_valid"] is None else extra["best_valid"]
    return t, extra["history"], trees["state"], (score, extra["best_step"], trees["best"])


def _save_validated(directory: Path, t: int, state, best, history: dict, stopped: bool):
    """Checkpoint a run with validation at step t (see _restore_validated)."""
    extra = {
        "history": {**history, "stopped": stopped},
        "best_step": best[1],
        "best_valid": best[0] if math.isfinite(best[0]) else None,
    }
    save_checkpoint(directory, t, {"state": state, "best": best[2]}, extra)


def _patience_spent(scores: list, patience: int | None) -> bool:
    """Whether the last `patience` validation scores brought no improvement on the best."""
    return patience is not None and len(scores) - 1 - int(np.argmin(scores)) >= patience


# %% book/darn.md
@checks(
    target=Instance(nnx.Module),
    loss_fn=Function(),
    x_train=Array(ndim=2),
    valid_fn=Maybe(Function()),
    **_LOOP_CONTRACTS,
)
def fit_with_validation(
    target: nnx.Module,
    loss_fn,
    x_train,
    *,
    steps: int,
    batch_size: int = 100,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    valid_fn=None,
    eval_every: int = 5000,
    patience: int | None = None,
    seed=0,
    progress: bool = True,
    log_every: int = 100,
    desc: str = "train",
    checkpoint_dir=None,
    checkpoint_every: int = 1000,
    keep_best: bool = True,
) -> Trained:
    """Train target on minibatches of x_train, keeping the parameters with the lowest valid_fn
    (Section 7; keep_best=False: the last parameters, the validation curve only recorded).

    loss_fn(module, batch, key) -> (loss, metrics); valid_fn(module) -> float, measured every
    eval_every steps (None: no validation, the last parameters are returned); patience: stop after
    that many measurements without improvement. Returns Trained(module, history): a new module,
    and the training metrics with history["valid_step"], history["valid"] and history.best_step.
    checkpoint_dir: checkpoint every `checkpoint_every` steps and after each validation there, and
    resume from the latest checkpoint found there (the result is that of an uninterrupted run).
    """
    if batch_size > len(x_train):
        raise ValueError(
            f"batch_size ({batch_size}) must not exceed the {len(x_train)} rows of x_train"
        )
    tx = OPTIMIZERS[optimizer](learning_rate)
    graphdef, state = nnx_train_state(target, tx)
    step, key = nnx_step(graphdef, tx, loss_fn), seed_key(seed)
    data = minibatches(x_train, batch_size, key=jax.random.fold_in(key, 1))
    history, best, t = {"valid_step": [], "valid": []}, (math.inf, steps, state), 0
    every = eval_every if valid_fn is not None else steps
    validated = steps_dir = None  # the state after each validation; fit's, in between
    if checkpoint_dir is not None:
        validated, steps_dir = Path(checkpoint_dir) / "validated", Path(checkpoint_dir) / "steps"
        restored = _restore_validated(validated, state)
        t, history, state, best = restored or (t, history, state, best)
    stopped = bool(history.pop("stopped", False))
    loop = dict(desc=desc, progress=progress, log_every=log_every, stop_after=every)
    loop |= dict(checkpoint_dir=steps_dir, checkpoint_every=checkpoint_every)
    while t < steps and not stopped:
        result = fit(step, state, data, steps, key=key, first_step=t, **loop)
        for name, values in result.history.items():
            history.setdefault(name, []).extend(values.tolist())
        state, t = result.state, min(t + every, steps)
        if valid_fn is not None:
            valid = float(valid_fn(nnx_model(graphdef, state)))
            history["valid_step"].append(t)
            history["valid"].append(valid)
            best = (valid, t, state) if valid < best[0] else best
            stopped = _patience_spent(history["valid"], patience)
        if validated is not None:
            _save_validated(validated, t, state, best, history, stopped)
    keep = valid_fn is not None and keep_best
    model = nnx_model(graphdef, best[2] if keep else state)
    return Trained(model, History(history, best_step=best[1] if keep else t))


# %% book/darn.md
def optimal_prior_kl(means, log_std):
    """KL(Q || P) of eq. darn-weight-noise at the optimal prior, (kl, mu_P, sigma_P^2): Q the
    diagonal Gaussian of the weights, P one Gaussian for all of them. means, log_std: the means
    and log standard deviations, arrays or lists of arrays of matching shapes (a model's
    parameters, summed leaf by leaf: no copy of them all into one array)."""
    means, log_std = jax.tree.leaves(means), jax.tree.leaves(log_std)
    if not means or [jnp.shape(m) for m in means] != [jnp.shape(s) for s in log_std]:
        raise ValueError(
            "means and log_std must be arrays of the same shapes, got "
            f"{[jnp.shape(m) for m in means]} and {[jnp.shape(s) for s in log_std]}"
        )
    size = sum(jnp.size(m) for m in means)
    mu_p = sum(jnp.sum(m) for m in means) / size
    var_p = sum(jnp.sum(jnp.exp(2 * s) + (m - mu_p) ** 2) for m, s in zip(means, log_std)) / size
    return 0.5 * size * jnp.log(var_p) - sum(jnp.sum(s) for s in log_std), mu_p, var_p


# %% book/darn.md
class WeightNoise(nnx.Module):
    """Adaptive weight noise (Graves 2011) on `model`: a diagonal Gaussian posterior over every
    parameter. The means are the model's own parameters; log_std[i] is the log standard deviation
    of the i-th of them (in jax.tree order). n_data: the training set's size, over which the
    weights' description length is shared. init_std: every standard deviation at the start."""

    @checks(model=Instance(nnx.Module), n_data=Int(1), init_std=Float(0, low_open=True))
    def __init__(self, model: nnx.Module, *, n_data: int, init_std: float = 0.01):
        self.model, self.n_data = model, int(n_data)
        means = jax.tree.leaves(nnx.state(model, nnx.Param))
        self.log_std = _module_list(
            [nnx.Param(jnp.full_like(m, math.log(init_std))) for m in means]
        )

    def sample(self, key) -> nnx.Module:
        """A copy of the model with weights mu + sigma * eps, eps ~ N(0, I), one eps per weight."""
        graphdef, params, rest = nnx.split(self.model, nnx.Param, ...)
        means, treedef = jax.tree.flatten(params)
        keys = jax.random.split(key, len(means))
        noisy = [
            m + jnp.exp(s[...]) * jax.random.normal(k, m.shape, m.dtype)
            for m, s, k in zip(means, self.log_std, keys)
        ]
        return nnx.merge(graphdef, jax.tree.unflatten(treedef, noisy), rest)

    def weight_cost(self):
        """KL(Q || P) in nats at the optimal prior: the description length of the weights."""
        means = jax.tree.leaves(nnx.state(self.model, nnx.Param))
        return optimal_prior_kl(means, [s[...] for s in self.log_std])[0]


@checks(wrapped=Instance(WeightNoise), key=Key())
def weight_noise_loss(wrapped: WeightNoise, x, key, **penalty):
    """Eq. darn-weight-noise per example: darn_loss of a network drawn from Q (penalty: its
    sparsity keywords) plus KL / n_data; metrics: description_length, weight_cost, activity."""
    k_weights, k_codes = jax.random.split(key)
    loss, metrics = darn_loss(wrapped.sample(k_weights), x, k_codes, **penalty)
    cost = wrapped.weight_cost() / wrapped.n_data
    return loss + cost, {"description_length": loss, **metrics, "weight_cost": cost}


# %% book/darn.md
def _darn_objective(model, estimator, sparsity: dict, weight_noise_std, n_data: int, seed):
    """(the module fit trains, its loss): the DARN itself, or wrapped with its REINFORCE baseline
    or its weight noise."""
    if sparsity["sparsity_weight"] and not (
        sparsity["sparsity_target"] is not None and estimator == "darn"
    ):
        raise ValueError(
            "a sparsity penalty needs sparsity_target in (0, 1) and estimator 'darn', got "
            f"sparsity_target={sparsity['sparsity_target']!r}, estimator={estimator!r}"
        )
    if weight_noise_std is not None:
        if estimator != "darn":
            raise ValueError(
                f"weight noise (weight_noise_std={weight_noise_std!r}) needs estimator 'darn', "
                f"got {estimator!r}"
            )
        noisy = WeightNoise(model, n_data=n_data, init_std=weight_noise_std)
        return noisy, partial(weight_noise_loss, **sparsity)
    if estimator == "darn":
        return model, partial(darn_loss, **sparsity)
    return Reinforce(model, rngs=nnx.Rngs(seed_key(seed))), reinforce_loss


# %% book/darn.md
@checks(
    model=Instance(DARN),
    estimator=OneOf("darn", "reinforce"),
    sparsity_target=Maybe(Float(0, 1, low_open=True, high_open=True)),
    sparsity_weight=Float(0),
    valid_samples=Int(1),
    weight_noise_std=Maybe(Float(0, low_open=True)),
    keep_best=Bool(),
    **_LOOP_CONTRACTS,
)
def train_darn(
    model: DARN,
    x_train,
    *,
    steps: int,
    batch_size: int = 100,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    estimator: str = "darn",
    x_valid=None,
    eval_every: int = 5000,
    patience: int | None = None,
    sparsity_target: float | None = None,
    sparsity_weight: float = 0.0,
    valid_samples: int = 1,
    weight_noise_std: float | None = None,
    keep_best: bool = True,
    seed=0,
    progress: bool = True,
    log_every: int = 100,
    checkpoint_dir=None,
    checkpoint_every: int = 1000,
) -> Trained:
    """Minimise the description length of x_train (Sections 4-5); returns Trained(model,
    history), the model a new one (see fit_with_validation). seed: an integer or a JAX key.

    estimator: "darn" (Appendix A) or "reinforce" (learned baseline). With x_valid, the validation
    description length is measured every eval_every steps (the mean over valid_samples codes per
    row, always with the same key) and the best parameters are returned (patience: stop after that
    many measurements without improvement).
    sparsity_target, sparsity_weight: the fDARN penalty (Section 9; estimator "darn" only).
    weight_noise_std: train with adaptive weight noise (WeightNoise, eq. darn-weight-noise;
    estimator "darn" only), every standard deviation starting there; the model returned is the
    mean network.
    keep_best: False returns the last parameters even with x_valid (whose curve is then recorded).
    checkpoint_dir, checkpoint_every: checkpoint there and resume from it (see fit_with_validation).
    """
    x_train = model.check_x(x_train, "x_train")
    sparsity = dict(sparsity_target=sparsity_target, sparsity_weight=sparsity_weight)
    target, loss = _darn_objective(model, estimator, sparsity, weight_noise_std, len(x_train), seed)
    unwrap = (lambda m: m) if target is model else (lambda m: m.model)  # noqa: E731
    valid_fn = None
    if x_valid is not None:
        x_valid, valid_key = model.check_x(x_valid, "x_valid"), _valid_key(seed)

        def valid_fn(m):
            return mean_description_length(unwrap(m), x_valid, valid_key, num_samples=valid_samples)

    trained, history = fit_with_validation(
        target,
        loss,
        x_train,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        optimizer=optimizer,
        valid_fn=valid_fn,
        eval_every=eval_every,
        patience=patience,
        seed=seed,
        progress=progress,
        log_every=log_every,
        desc=f"DARN ({estimator})",
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        keep_best=keep_best,
    )
    return Trained(unwrap(trained), history)


# %% book/darn.md
def _valid_key(seed) -> jax.Array:
    """The key of the validation codes: key(seed + 1) for an integer seed, else folded in."""
    if isinstance(seed, (int, np.integer)):
        return jax.random.key(int(seed) + 1)
    return jax.random.fold_in(seed_key(seed), 1_000_001)


# %% book/darn.md
class MixtureOfBernoullis(nnx.Module):
    """p(x) = sum_k pi_k prod_j Bernoulli(x_j | mu_kj), fitted by `fit_mixture_of_bernoullis` (EM,
    Section 8)."""

    @checks(log_weights=Array(ndim=1), logits=Array(ndim=2))
    def __init__(self, log_weights, logits):
        self.log_weights = nnx.Param(jnp.asarray(log_weights))  # (K,) log pi
        self.logits = nnx.Param(jnp.asarray(logits))  # (K, D) logit mu

    def component_log_probs(self, x):
        """log pi_k + log p(x | k): (..., K)."""
        return _component_log_probs(self.log_weights[...], self.logits[...], x)

    def log_prob(self, x, *, batch: int = 1000):
        """Exact log p(x) (N,), in batches of rows."""
        x = check_array(x, "x", binary=True, shape=(None, self.logits.shape[1]))
        x = jnp.asarray(x, self.logits[...].dtype)
        return jnp.concatenate(
            [
                _mixture_log_prob(self.log_weights[...], self.logits[...], x[i : i + batch])
                for i in range(0, x.shape[0], batch)
            ]
        )


def _component_log_probs(log_weights, logits, x):
    return x @ logits.T - jnp.sum(jax.nn.softplus(logits), -1) + log_weights


@jax.jit
def _mixture_log_prob(log_weights, logits, x):
    return jax.scipy.special.logsumexp(_component_log_probs(log_weights, logits, x), -1)


# %% book/darn.md
@renamed(max_iterations="steps")
@checks(
    num_components=Int(1),
    steps=Int(1),
    alpha=Float(0, low_open=True),
    tol=Float(0),
    seed=Seed(),
    batch=Int(1),
    progress=Bool(),
)
def fit_mixture_of_bernoullis(
    x_train,
    num_components: int,
    *,
    x_valid=None,
    steps: int = 200,
    alpha: float = 1.0,
    tol: float = 1e-3,
    seed=0,
    batch: int = 5000,
    dtype=jnp.float32,
    progress: bool = True,
) -> Trained:
    """EM for a mixture of Bernoullis (Section 8); returns Trained(model, history): the train and
    valid log-likelihoods per EM step (history["train"], history["valid"]). batch: rows per
    E-step computation (memory, not a minibatch: every EM step sees all the data). progress: report
    the iterations (toolkit `Progress`).

    Stops after `steps` EM steps, when the training log-likelihood gains less than tol nats per
    example, or (with x_valid) when the validation log-likelihood falls; returns the parameters of
    the best validation iteration.
    """
    x = jnp.asarray(check_array(x_train, "x_train", binary=True, ndim=2), dtype)
    if not 1 <= num_components:
        raise ValueError(f"num_components must be positive, got {num_components}")
    N, D = x.shape
    K = num_components
    key = seed_key(seed)
    start = x[jax.random.choice(key, N, (K,), replace=N < K)]
    mu = 0.5 * start + 0.25 + 0.1 * jax.random.uniform(jax.random.fold_in(key, 1), (K, D), dtype)
    model = MixtureOfBernoullis(jnp.full((K,), -math.log(K), dtype), jnp.log(mu) - jnp.log1p(-mu))

    @jax.jit
    def statistics(log_weights, logits, xb):
        comp = _component_log_probs(log_weights, logits, xb)
        lse = jax.scipy.special.logsumexp(comp, -1, keepdims=True)
        r = jnp.exp(comp - lse)
        return jnp.sum(lse), jnp.sum(r, 0), r.T @ xb

    history = {"train": [], "valid": []}
    best = (-math.inf, model.log_weights[...], model.logits[...])
    report = Progress(steps, f"EM, {K} components", enabled=progress)
    for _ in range(steps):
        ll, Nk, Sx = 0.0, 0.0, 0.0
        for i in range(0, N, batch):
            a, b, c = statistics(model.log_weights[...], model.logits[...], x[i : i + batch])
            ll, Nk, Sx = ll + a, Nk + b, Sx + c
        # the log-likelihood of the parameters before this M-step
        history["train"].append(float(ll) / N)
        mu = (Sx + alpha) / (Nk[:, None] + 2 * alpha)
        model.log_weights[...] = jnp.log(Nk + 1e-10) - jnp.log(N + K * 1e-10)
        model.logits[...] = jnp.log(mu) - jnp.log1p(-mu)
        if x_valid is not None:
            history["valid"].append(float(jnp.mean(model.log_prob(x_valid))))
            if history["valid"][-1] > best[0]:
                best = (history["valid"][-1], model.log_weights[...], model.logits[...])
            elif len(history["valid"]) > 2 and history["valid"][-1] < history["valid"][-2]:
                break
        report.update(len(history["train"]), {"train": history["train"][-1]})
        if len(history["train"]) > 1 and history["train"][-1] - history["train"][-2] < tol:
            break
    report.close()
    if x_valid is not None:
        model.log_weights[...], model.logits[...] = best[1], best[2]
    return Trained(model, History(history))


# %% book/darn.md
class NADE(nnx.Module):
    """NADE (Larochelle & Murray 2011): p(x_j = 1 | x_<j) = sigmoid(b_j + V_j . sigmoid(c + W[:, :j]
    x_<j)) (Section 8)."""

    @checks(n_visible=Int(1), n_hidden=Int(1))
    def __init__(self, n_visible: int, n_hidden: int, *, rngs: nnx.Rngs, dtype=jnp.float32):
        self.W = nnx.Param(
            0.01 * jax.random.normal(rngs.params(), (n_visible, n_hidden), dtype)
        )  # row i: W[:, i]
        self.V = nnx.Param(0.01 * jax.random.normal(rngs.params(), (n_visible, n_hidden), dtype))
        self.b = nnx.Param(jnp.zeros((n_visible,), dtype))
        self.c = nnx.Param(jnp.zeros((n_hidden,), dtype))

    def logits(self, x, *, block: int = 8):
        """All D conditional logits of x (..., D): the running sum over the pixels, `block` pixels
        at a time."""
        if not (isinstance(block, int) and block >= 1):
            raise ValueError(f"block must be a positive integer, got {block!r}")
        W, V = self.W[...], self.V[...]
        D, H = W.shape
        n = -(-D // block)
        pad = n * block - D  # zero pixels and weights at the end change no logit
        xb = jnp.moveaxis(
            jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]).reshape(*x.shape[:-1], n, block), -2, 0
        )
        Wb, Vb = (jnp.pad(a, ((0, pad), (0, 0))).reshape(n, block, H) for a in (W, V))
        strict = jnp.tril(
            jnp.ones((block, block), W.dtype), -1
        )  # pixel j of a block sees pixels i < j of it

        # recompute a block's (..., block, H) activations in the backward pass, not store them
        @jax.checkpoint
        def one_block(
            total, inputs
        ):  # total: c + the sum of x_i W_i over the pixels of the earlier blocks
            xk, Wk, Vk = inputs
            pre = total[..., None, :] + jnp.einsum("ji,...i,ih->...jh", strict, xk, Wk)
            return total + xk @ Wk, jnp.sum(jax.nn.sigmoid(pre) * Vk, -1)

        start = jnp.broadcast_to(self.c[...], (*x.shape[:-1], H)).astype(W.dtype)
        _, out = jax.lax.scan(one_block, start, (xb.astype(W.dtype), Wb, Vb))
        return jnp.moveaxis(out, 0, -2).reshape(*x.shape[:-1], n * block)[..., :D] + self.b[...]

    def log_prob(self, x):
        """Exact log p(x) (N,)."""
        return bernoulli_log_prob(x, self.logits(x))


@checks(x=Array())
def likelihood_loss(model, x, key):
    """Mean negative log-likelihood, for models with an exact log_prob (FVSBN, NADE)."""
    return -jnp.mean(model.log_prob(x)), {}


# %% book/darn.md
@checks(model=Instance(nnx.Module), **_LOOP_CONTRACTS)
def train_likelihood(
    model: nnx.Module,
    x_train,
    *,
    steps: int,
    batch_size: int = 100,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    x_valid=None,
    eval_every: int = 5000,
    patience: int | None = None,
    seed=0,
    progress: bool = True,
    log_every: int = 100,
    checkpoint_dir=None,
    checkpoint_every: int = 1000,
) -> Trained:
    """Maximum likelihood for FVSBN (an AutoregressiveBernoulli) or NADE, with early stopping on
    x_valid (Section 8); returns Trained(model, history), as fit_with_validation."""
    x_train = jnp.asarray(check_array(x_train, "x_train", binary=True, ndim=2), jnp.float32)
    valid_fn = None
    if x_valid is not None:
        x_valid = jnp.asarray(check_array(x_valid, "x_valid", binary=True, ndim=2), jnp.float32)
        valid_fn = jax.jit(lambda m: -jnp.mean(m.log_prob(x_valid)))
    return fit_with_validation(
        model,
        likelihood_loss,
        x_train,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        optimizer=optimizer,
        valid_fn=valid_fn,
        eval_every=eval_every,
        patience=patience,
        seed=seed,
        progress=progress,
        log_every=log_every,
        desc=type(model).__name__,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
    )


# %% book/darn.md
@checks(model=Instance(DARN), key=Key(), num=Int(1))
def sampling_cost(model: DARN, key, num: int = 1000) -> dict:
    """Weights read by ancestral sampling (Section 9): {"dense": all of them, "sparse": the mean
    over `num` samples when only the columns of active binary units are read, "active": mean active
    units}."""
    x, hs = model.sample(key, num)
    h = [np.asarray(x), *map(np.asarray, hs)]
    L = len(hs)

    def lateral(v):  # an autoregressive layer: active unit i feeds the n - 1 - i units after it
        n = v.shape[1]
        return n * (n - 1) / 2, float(np.mean(v @ (n - 1 - np.arange(n))))

    dense, sparse = lateral(h[L])
    for l in range(L - 1, -1, -1):
        block = model.decoder[l]
        inputs = np.concatenate(h[l + 1 :], 1) if model.skip_connections else h[l + 1]
        n_in, width = (
            inputs.shape[1],
            (block.hidden.out_features if block.hidden is not None else None),
        )
        n_out = h[l].shape[1]
        active = float(np.mean(inputs.sum(1)))
        if width is None:  # binary inputs straight into the logits
            dense, sparse = dense + n_in * n_out, sparse + active * n_out
        else:  # binary inputs into the tanh layer, then a dense product
            dense, sparse = (
                dense + n_in * width + width * n_out,
                sparse + active * width + width * n_out,
            )
        if block.out.autoregressive:
            d, s_ = lateral(h[l])
            dense, sparse = dense + d, sparse + s_
    return {
        "dense": int(dense),
        "sparse": sparse,
        "active": float(np.mean(sum(v.sum(1) for v in h[1:]))),
    }


# %% book/darn.md
__all__ = [
    "DARN",
    "Reinforce",
    "ConditionalBernoulli",
    "AutoregressiveBernoulli",
    "NADE",
    "MixtureOfBernoullis",
    "train_darn",
    "WeightNoise",
    "weight_noise_loss",
    "optimal_prior_kl",
    "train_likelihood",
    "fit_mixture_of_bernoullis",
    "fit_with_validation",
    "darn_loss",
    "reinforce_loss",
    "likelihood_loss",
    "binary_sample",
    "bernoulli_log_prob",
    "exact_log_prob",
    "importance_log_prob",
    "importance_estimate",
    "expected_description_length",
    "mean_description_length",
    "sampling_cost",
    "sparsity_penalty",
    "init_visible_bias",
    "OPTIMIZERS",
    "all_binary",
    "chunked_logsumexp",
    "enumerate_codes",
    "reinforce_surrogate",
    "split_layers",
    "strictly_lower",
]
constructor_signatures(globals())  # help() and inspect.signature show __init__'s parameters
