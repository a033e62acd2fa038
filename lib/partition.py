# GENERATED FILE: do not edit. Source: book/partition.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""On Tracking the Partition Function (Desjardins et al. 2011), derived in book/partition.md.

RBMs and their tempered family, SML with parallel tempering, the log Z tracker (importance
sampling, bridge sampling and the Kalman filter over both), exact log Z by enumeration, AIS,
adaptive tempering, and the evaluation of a run against the exact log Z. The paper-scale
experiments and the claims are lib.partition_report.
"""

# %% book/partition.md
from __future__ import annotations

import dataclasses
import math
import time
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from scipy.special import erfc, erfcinv

from lib.toolkit import Array, Bool, Float, Function, Instance, Int, Key, Maybe, NonFiniteError
from lib.toolkit import constructor_signatures
from lib.toolkit import OneOf, add_to_class, checks
from lib.toolkit import check_array, restore_checkpoint, save_checkpoint
from lib.toolkit import Progress
from lib.toolkit import History, Seed, Trained, full_precision, renamed, seed_key


# %% book/partition.md
@checks(x=Array())
def softplus(x):
    """log(1 + e^x), stable; several times faster than jax.nn.softplus on CPU (no NaN handling)."""
    return jnp.maximum(x, 0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def check_binary(x, name: str, n_visible: int | None = None, dtype=jnp.float32):
    """Validate a matrix of 0/1 rows (any numeric dtype) and return it as a jax array of `dtype`."""
    shape = (None, n_visible) if n_visible else (None, None)
    return jnp.asarray(check_array(x, name, shape=shape, binary=True), dtype)


def check_betas(betas) -> jax.Array:
    """Validate inverse temperatures: strictly decreasing from beta_1 = 1 to beta_M = 0, M >= 2."""
    b = np.asarray(betas, dtype=np.float64)
    if b.ndim != 1 or b.size < 2:
        raise ValueError(
            f"betas must be a vector of at least two inverse temperatures, got shape {b.shape}"
        )
    if not np.isfinite(b).all():
        raise ValueError(f"betas must be finite, got {b}")
    if b[0] != 1.0 or b[-1] != 0.0:
        raise ValueError(
            f"betas must run from 1 (the model) to 0 (the tractable base), got {b[0]} ... {b[-1]}"
        )
    if not (np.diff(b) < 0).all():
        raise ValueError(f"betas must be strictly decreasing, got {b}")
    return jnp.asarray(b, jnp.float32)


@checks(n_temps=Int(2))
def linear_betas(n_temps: int) -> jax.Array:
    """n_temps inverse temperatures spaced linearly from 1 down to 0 (the paper's Table 1 runs)."""
    return check_betas(np.linspace(1.0, 0.0, n_temps))


@checks(x=Array(ndim=2), eps=Float(0, 0.5, low_open=True, high_open=True))
def log_odds_of_mean(x, eps: float = 1e-3) -> jax.Array:
    """logit of the column means of x, clipped to [eps, 1 - eps]: the visible-bias start of footnote
    4."""
    m = jnp.clip(jnp.mean(jnp.asarray(x, jnp.float32), 0), eps, 1 - eps)
    return jnp.log(m / (1 - m))


# %% book/partition.md
class RBM(nnx.Module):
    """Binary RBM with E(v, h) = -v'W h - c'h - b'v, W of shape (n_visible, n_hidden).

    Every method takes an inverse temperature beta (default 1) that scales W and c but not b
    (eq. pt-tempered); beta broadcasts against the batch dimensions, so one call evaluates M
    temperatures on an (M, N, n_visible) stack of particles.
    """

    @checks(
        n_visible=Int(1), n_hidden=Int(1), init_scale=Float(0), visible_bias=Maybe(Array(ndim=1))
    )
    def __init__(
        self,
        n_visible: int,
        n_hidden: int,
        *,
        rngs: nnx.Rngs,
        init_scale: float = 0.01,
        visible_bias=None,
        dtype=jnp.float32,
    ):
        self.W = nnx.Param(
            init_scale * jax.random.normal(rngs.params(), (n_visible, n_hidden), dtype)
        )
        b = (
            jnp.zeros(n_visible, dtype)
            if visible_bias is None
            else jnp.asarray(visible_bias, dtype)
        )
        if b.shape != (n_visible,):
            raise ValueError(f"visible_bias must have shape ({n_visible},), got {b.shape}")
        self.b = nnx.Param(b)
        self.c = nnx.Param(jnp.zeros(n_hidden, dtype))

    @property
    def n_visible(self) -> int:
        """The number of visible units."""
        return self.W.shape[0]

    @property
    def n_hidden(self) -> int:
        """The number of hidden units."""
        return self.W.shape[1]

    def hidden_input(self, v):
        """a(v) = v W + c; it does not depend on beta."""
        return v @ self.W[...] + self.c[...]

    def energy(self, v, h, beta=1.0):
        """E_beta(v, h) (...,): beta scales W and c, not b (eq. pt-tempered)."""
        beta = jnp.asarray(beta)
        return -beta * (jnp.sum(h * (v @ self.W[...]), -1) + h @ self.c[...]) - v @ self.b[...]

    def tempered_term(self, a, beta=1.0):
        """sum_j softplus(beta a_j): the beta-dependent part of -F_beta, from a = a(v)."""
        return jnp.sum(softplus(jnp.asarray(beta)[..., None] * a), -1)

    @full_precision
    def free_energy(self, v, beta=1.0):
        """F_beta(v) = -b'v - sum_j softplus(beta a_j(v))  (eq. pt-tempered)."""
        return -(v @ self.b[...]) - self.tempered_term(self.hidden_input(v), beta)

    def log_z_base(self):
        """zeta_M = log Z at beta = 0 = sum_i softplus(b_i) + n_hidden log 2  (eq. pt-base)."""
        return jnp.sum(softplus(self.b[...])) + self.n_hidden * math.log(2.0)

    def log_prob(self, v, log_z):
        """log p(v) = -F(v) - log Z, given log Z."""
        return -self.free_energy(v) - log_z


# %% book/partition.md
@add_to_class(RBM)
class _RBMSampling:
    def sample_hidden(self, a, key, beta=1.0):
        """h ~ p_beta(h | v) = Bernoulli(sigmoid(beta a)), given a = a(v)."""
        beta = jnp.asarray(beta)[..., None]
        return jax.random.bernoulli(key, jax.nn.sigmoid(beta * a)).astype(a.dtype)

    def sample_visible(self, h, key, beta=1.0):
        """v ~ p_beta(v | h) = Bernoulli(sigmoid(b + beta W h))."""
        beta = jnp.asarray(beta)[..., None]
        return jax.random.bernoulli(
            key, jax.nn.sigmoid(self.b[...] + beta * (h @ self.W[...].T))
        ).astype(h.dtype)

    def gibbs(self, v, key, beta=1.0, steps: int = 1):
        """`steps` sweeps v -> h -> v at inverse temperature beta; returns (v, a(v)), v keeping its
        dtype."""

        def sweep(carry, k):
            v, a = carry
            kh, kv = jax.random.split(k)
            v = self.sample_visible(self.sample_hidden(a, kh, beta), kv, beta).astype(v.dtype)
            return (v, self.hidden_input(v).astype(a.dtype)), None

        a = self.hidden_input(v)
        (v, a), _ = jax.lax.scan(sweep, (v, a), jax.random.split(key, steps))
        return v, a


# %% book/partition.md
@checks(n_bits=Int(0, 62), start=Int(0), count=Maybe(Int(1)))
def binary_codes(n_bits: int, start=0, count: int | None = None) -> jax.Array:
    """Rows start .. start+count-1 of the 2^n_bits binary codes; bit j of row r is (r >> j) & 1.

    Refuses to build all 2^n_bits codes above 2^24 (pass start and count to take them in chunks).
    """
    if count is None and n_bits > 24:
        raise ValueError(
            f"binary_codes would build all 2^{n_bits} codes (n_bits={n_bits}); above "
            "2^24 pass start and count"
        )
    count = 2**n_bits if count is None else count
    r = start + jnp.arange(count)
    return ((r[:, None] >> jnp.arange(n_bits)) & 1).astype(jnp.float32)


# softplus(t + u) = log1p(e^t e^u) where |t|, |u| <= this: e^(+-40) and their product, e^(+-80)
# at most, stay inside float32's normal range (1.2e-38 to 3.4e38)
_PRODUCT_BOUND = 40.0


@partial(jax.jit, static_argnames=("low_bits",))
def _chunk_log_sums(K, lin, other_bias, K_sum, other_sum, low_bits: int):
    """For each setting of the high bits: log sum over the low bits of lin.x + sum
    softplus(other_bias + x K) + sum softplus(other_sum + x K_sum), the first sum in product
    form (log1p(e^t e^u), for the columns within _PRODUCT_BOUND), the second as it stands."""
    n = K.shape[0]
    lo = binary_codes(low_bits)
    e_table = jnp.exp(lo @ K[:low_bits])  # (2^L, n_other), once
    table_sum = lo @ K_sum[:low_bits]
    lin_lo = lo @ lin[:low_bits]
    high = binary_codes(n - low_bits)  # (2^(n-L), n-L)

    def chunk(hbits):
        e_base = jnp.exp(hbits @ K[low_bits:] + other_bias)  # (n_other,)
        base_sum = hbits @ K_sum[low_bits:] + other_sum
        terms = jnp.sum(jnp.log1p(e_table * e_base), -1)
        terms += jnp.sum(softplus(table_sum + base_sum), -1)
        return jax.nn.logsumexp(lin_lo + hbits @ lin[low_bits:] + terms)

    return jax.lax.map(chunk, high)


def _product_columns(K, other, low_bits: int) -> np.ndarray:
    """The columns whose low-bit sums t and high-bit sums plus bias u all lie within
    _PRODUCT_BOUND for every code, from the sums of K's negative and positive entries."""
    K, other = np.asarray(K, np.float64), np.asarray(other, np.float64)
    lo, hi = K[:low_bits], K[low_bits:]
    t_min, t_max = np.minimum(lo, 0).sum(0), np.maximum(lo, 0).sum(0)
    u_min, u_max = other + np.minimum(hi, 0).sum(0), other + np.maximum(hi, 0).sum(0)
    return (np.minimum(t_min, u_min) >= -_PRODUCT_BOUND) & (
        np.maximum(t_max, u_max) <= _PRODUCT_BOUND
    )


@full_precision
@checks(rbm=Instance(RBM), beta=Float(0), low_bits=Int(1), max_bits=Int(1))
def exact_log_z(rbm: RBM, beta: float = 1.0, *, low_bits: int = 14, max_bits: int = 30) -> float:
    """log Z_beta, exactly (eq. pt-exact), enumerating the smaller layer in chunks of 2^low_bits
    codes."""
    W, b, c = rbm.W[...], rbm.b[...], rbm.c[...]
    beta = float(beta)
    if rbm.n_hidden <= rbm.n_visible:
        K, lin, other = beta * W.T, beta * c, b
    else:
        K, lin, other = beta * W, b, beta * c
    n = K.shape[0]
    if n > max_bits:
        raise ValueError(
            f"exact_log_z would enumerate 2^{n} states (the smaller layer has {n} units, the limit "
            f"is max_bits={max_bits}); use ais_log_z for a model this size"
        )
    low_bits = min(low_bits, n)
    cols = _product_columns(K, other, low_bits)
    chunks = _chunk_log_sums(K[:, cols], lin, other[cols], K[:, ~cols], other[~cols], low_bits)
    chunks = np.asarray(chunks, np.float64)
    m = chunks.max()
    return float(m + np.log(np.sum(np.exp(chunks - m))))


# %% book/partition.md
@checks(rbm=Instance(RBM), key=Key(), parity=OneOf(0, 1))
def swap_pass(rbm: RBM, v, a, betas, key, parity: int):
    """Propose swaps (i, i+1) for all i with i % 2 == parity, independently for each of the N
    chains.

    v: (M, N, n_visible) particles, a = a(v). Returns (v, a, acceptance probability of each pair
    and chain, shape (M-1, N), zero for pairs not proposed in this pass).
    """
    g_self = rbm.tempered_term(a, betas[:, None])
    g_up = rbm.tempered_term(a[:-1], betas[1:, None])  # G_{i+1}(x_i)
    g_down = rbm.tempered_term(a[1:], betas[:-1, None])  # G_i(x_{i+1})
    log_r = g_up + g_down - g_self[:-1] - g_self[1:]
    proposed = (jnp.arange(log_r.shape[0]) % 2 == parity)[:, None]
    accept = proposed & (jnp.log(jax.random.uniform(key, log_r.shape)) < log_r)
    from_next = jnp.pad(accept, ((0, 1), (0, 0)))[..., None]
    from_prev = jnp.pad(accept, ((1, 0), (0, 0)))[..., None]

    def move(x):
        return jnp.where(from_next, jnp.roll(x, -1, 0), jnp.where(from_prev, jnp.roll(x, 1, 0), x))

    return move(v), move(a), jnp.where(proposed, jnp.minimum(1.0, jnp.exp(log_r)), 0.0)


@checks(rbm=Instance(RBM), key=Key(), gibbs_steps=Int(1))
def pt_sweep(rbm: RBM, v, a, betas, key, gibbs_steps: int = 1):
    """Gibbs at every temperature, then the even and the odd swap pass. Returns (v, a, swap rate per
    pair)."""
    kg, k0, k1 = jax.random.split(key, 3)

    def sweep(carry, k):
        v, a = carry
        kh, kv = jax.random.split(k)
        v = rbm.sample_visible(rbm.sample_hidden(a, kh, betas[:, None]), kv, betas[:, None]).astype(
            v.dtype
        )
        return (v, rbm.hidden_input(v).astype(a.dtype)), None

    (v, a), _ = jax.lax.scan(sweep, (v, a), jax.random.split(kg, gibbs_steps))
    v, a, r0 = swap_pass(rbm, v, a, betas, k0, 0)
    v, a, r1 = swap_pass(rbm, v, a, betas, k1, 1)
    return v, a, jnp.mean(r0 + r1, -1)


# %% book/partition.md
@checks(
    swap_rate=Array(ndim=1),
    step=Float(0, 1, low_open=True),
    min_rate=Float(0, 1, low_open=True, high_open=True),
    max_rate=Float(0, 1, low_open=True, high_open=True),
)
def adapt_betas(
    betas, swap_rate, *, step: float = 0.5, min_rate: float = 0.01, max_rate: float = 0.99
) -> jax.Array:
    """Inverse temperatures moved towards equal swap rates (eq. pt-adapt).

    betas (M,): strictly decreasing from 1 to 0; swap_rate (M-1,): the mean acceptance of each
    neighbouring pair measured at these betas. Rates are clipped to [min_rate, max_rate] (a rate of
    0 or 1 carries no length). step in (0, 1]: the fraction of the way to the equal-rate placement.
    The ends stay at 1 and 0.
    """
    b = np.asarray(check_betas(betas), np.float64)
    rate = np.asarray(swap_rate, np.float64)
    if rate.shape != (b.size - 1,):
        raise ValueError(
            f"swap_rate must have one rate per neighbouring pair, shape ({b.size - 1},), got "
            f"{rate.shape}"
        )
    if not (np.isfinite(rate).all() and (rate >= 0).all() and (rate <= 1).all()):
        raise ValueError(f"swap rates must lie in [0, 1], got {rate}")
    if not 0 < step <= 1 or not 0 < min_rate < max_rate < 1:
        raise ValueError(
            f"need 0 < step <= 1 and 0 < min_rate < max_rate < 1, got {step}, {min_rate}, "
            f"{max_rate}"
        )
    length = 2.0 * erfcinv(np.clip(rate, min_rate, max_rate))
    cumulative = np.concatenate([[0.0], np.cumsum(length)])
    target = np.interp(np.linspace(0.0, cumulative[-1], b.size), cumulative, b)
    new = (1.0 - step) * b + step * target
    new[0], new[-1] = 1.0, 0.0
    return check_betas(new)


# %% book/partition.md
@checks(log_w=Array(finite=False), axis=Int())
def log_mean_exp(log_w, axis: int = -1):
    """(log of the mean of exp(log_w), its delta-method variance Var(w) / (N mean(w)^2)) along
    `axis`."""
    m = jax.lax.stop_gradient(jnp.max(log_w, axis, keepdims=True))
    w = jnp.exp(log_w - m)
    mean = jnp.mean(w, axis)
    var = jnp.var(w, axis) / (log_w.shape[axis] * mean**2)
    return jnp.squeeze(m, axis) + jnp.log(mean), var


# %% book/partition.md
@checks(d_lower=Array(), d_upper=Array())
def bridge_log_ratio(d_lower, d_upper, log_s):
    """Bridge-sampling estimate of log Z_{i+1} / Z_i (eq. pt-bridge) with Bennett's bridge.

    d_lower = log q~_{i+1}(x) - log q~_i(x) at N samples x ~ q_i; d_upper, the same at N samples
    x ~ q_{i+1}; log_s ~ log Z_{i+1} / Z_i, the current estimate. Returns (estimate, variance).
    """
    log_u = d_lower - jnp.logaddexp(log_s, d_lower)
    log_v = -jnp.logaddexp(log_s, d_upper)
    lu, var_u = log_mean_exp(log_u)
    lv, var_v = log_mean_exp(log_v)
    return lu - lv, var_u + var_v


# %% book/partition.md
class Tracker(NamedTuple):
    """Gaussian posterior over x_t = (zeta_1, ..., zeta_{M-1}, b_t); mean[0] is the tracked log
    Z."""

    mean: jax.Array
    cov: jax.Array


@checks(
    n_temps=Int(2), log_z0=Float(), var=Float(0, low_open=True), bias_var=Float(0, low_open=True)
)
def tracker_init(n_temps: int, log_z0, *, var: float = 1.0, bias_var: float = 1e-2) -> Tracker:
    """p(x_0): every zeta_i at log_z0 (exact when W = c = 0, close for a small random W), bias 0."""
    mean = jnp.concatenate([jnp.full(n_temps - 1, log_z0, jnp.float32), jnp.zeros(1, jnp.float32)])
    variances = jnp.concatenate(
        [jnp.full(n_temps - 1, var, jnp.float32), jnp.full(1, bias_var, jnp.float32)]
    )
    return Tracker(mean, jnp.diag(variances))


@checks(n_temps=Int(2))
def observation_matrices(n_temps: int):
    """(C_cur, C_prev, H) of eq. pt-ssm for M = n_temps, each (M-1, M), as numpy arrays."""
    k = n_temps - 1
    c_cur = np.zeros((k, k + 1), np.float32)
    c_cur[:, :k] = np.eye(k)
    c_cur[0, k] = 1.0  # b_t enters the beta = 1 weights only
    c_prev = np.zeros((k, k + 1), np.float32)
    c_prev[:, :k] = -np.eye(k)
    h = np.zeros((k, k + 1), np.float32)
    h[np.arange(k), np.arange(k)] = -1.0
    h[np.arange(k - 1), np.arange(1, k)] = 1.0
    return c_cur, c_prev, h


def _spd_inverse(a):
    return jax.scipy.linalg.cho_solve(
        jax.scipy.linalg.cho_factor(a, lower=True), jnp.eye(a.shape[0], dtype=a.dtype)
    )


@full_precision
@checks(tracker=Instance(Tracker))
def kalman_update(tracker: Tracker, o_dt, var_dt, o_db, var_db, log_z_base, process_var) -> Tracker:
    """One step of Figure 2 in precision form (eqs. pt-joint, pt-marginal, then the bridge term).

    o_dt, var_dt: importance-sampling observations and variances for temperatures 1..M-1;
    o_db, var_db: bridge observations of zeta_{i+1} - zeta_i, i = 1..M-1; log_z_base: zeta_M;
    process_var: the diagonal of Q (length M), +inf for no smoothness prior.
    """
    c_cur, c_prev, h = (jnp.asarray(m) for m in observation_matrices(o_dt.shape[0] + 1))
    mu = tracker.mean
    q = jnp.diag(1.0 / process_var)  # zero precision where the variance is inf
    prior_prec = _spd_inverse(tracker.cov)
    r = 1.0 / var_dt
    j11 = prior_prec + q + (c_prev.T * r) @ c_prev
    j12 = -q + (c_prev.T * r) @ c_cur
    j22 = q + (c_cur.T * r) @ c_cur
    # in deviations from the prior mean (x = mu + e): the same algebra, but no information vector of
    # size
    # P^-1 mu, whose float32 rounding (mu ~ log Z of hundreds, P^-1 ~ 1e5) would move the mean every
    # step
    r_dt = o_dt - (c_cur + c_prev) @ mu
    r_db = o_db.at[-1].add(-log_z_base) - h @ mu
    h1 = (c_prev.T * r) @ r_dt
    h2 = (c_cur.T * r) @ r_dt
    chol = jax.scipy.linalg.cho_factor(j11, lower=True)
    prec = j22 - j12.T @ jax.scipy.linalg.cho_solve(chol, j12)
    info = h2 - j12.T @ jax.scipy.linalg.cho_solve(chol, h1)
    s = 1.0 / var_db
    prec = prec + (h.T * s) @ h
    info = info + (h.T * s) @ r_db
    cov = _spd_inverse(0.5 * (prec + prec.T))
    return Tracker(mu + cov @ info, cov)


# %% book/partition.md
def ais_betas(
    counts: Sequence[int] = (1000, 10000, 10000), edges: Sequence[float] = (0.0, 0.5, 0.9, 1.0)
):
    """Piecewise-linear annealing schedule: counts[k] steps over [edges[k], edges[k+1]] (footnote
    5)."""
    if len(edges) != len(counts) + 1:
        raise ValueError(f"need len(edges) == len(counts) + 1, got {len(edges)} and {len(counts)}")
    for n in counts:
        Int(1).check(n, "counts")
    e = np.asarray(edges, np.float64)
    if not (np.isfinite(e).all() and e[0] == 0.0 and e[-1] == 1.0 and (np.diff(e) > 0).all()):
        raise ValueError(f"edges must rise strictly from 0 to 1, got {list(edges)}")
    parts = [
        np.linspace(lo, hi, n, endpoint=False) for lo, hi, n in zip(edges[:-1], edges[1:], counts)
    ]
    return jnp.asarray(np.concatenate(parts + [np.array([edges[-1]])]), jnp.float32)


class AISResult(NamedTuple):
    log_z: float
    lower: float  # log(mean w - 3 sd) + log Z_A; -inf when the interval reaches zero
    upper: float  # log(mean w + 3 sd) + log Z_A
    log_weights: np.ndarray


@partial(jax.jit, static_argnames=("graphdef", "n_runs"))
def _ais_log_weights(graphdef, params, base_bias, betas, key, n_runs):
    rbm = nnx.merge(graphdef, params)
    b, b0 = rbm.b[...], base_bias

    def body(carry, inp):
        v, log_w = carry
        beta_prev, beta, k = inp
        a = rbm.hidden_input(v)
        log_w = (
            log_w
            + (beta - beta_prev) * (v @ (b - b0))
            + rbm.tempered_term(a, beta)
            - rbm.tempered_term(a, beta_prev)
        )
        kh, kv = jax.random.split(k)
        h = rbm.sample_hidden(a, kh, beta)
        v = jax.random.bernoulli(
            kv, jax.nn.sigmoid((1 - beta) * b0 + beta * (b + h @ rbm.W[...].T))
        )
        return (v.astype(jnp.float32), log_w), None

    k0, k1 = jax.random.split(key)
    v0 = jax.random.bernoulli(k0, jax.nn.sigmoid(b0), (n_runs, b0.shape[0])).astype(jnp.float32)
    (_, log_w), _ = jax.lax.scan(
        body,
        (v0, jnp.zeros(n_runs)),
        (betas[:-1], betas[1:], jax.random.split(k1, betas.shape[0] - 1)),
    )
    return log_w


def check_ais_betas(betas) -> jax.Array:
    """An annealing schedule: a vector of at least two betas rising from 0 to 1, never falling."""
    b = np.asarray(betas, np.float64)
    if b.ndim != 1 or b.size < 2 or not np.isfinite(b).all():
        raise ValueError(
            f"betas must be a finite vector of at least two values, got shape {b.shape}"
        )
    if b[0] != 0.0 or b[-1] != 1.0 or (np.diff(b) < 0).any():
        raise ValueError(
            "betas must rise from 0 (the base model) to 1 (the RBM) without falling, "
            f"got {b[0]:g} ... {b[-1]:g} over {b.size} values"
        )
    return jnp.asarray(b, jnp.float32)


# %% book/partition.md
@full_precision
@checks(rbm=Instance(RBM), key=Key(), base_bias=Maybe(Array(ndim=1)), n_runs=Int(2))
def ais_log_z(rbm: RBM, key, *, base_bias=None, betas=None, n_runs: int = 100) -> AISResult:
    """log Z by AIS from the base-rate model exp(base_bias'v) (eq. pt-ais); base_bias defaults to
    b."""
    base_bias = rbm.b[...] if base_bias is None else jnp.asarray(base_bias, jnp.float32)
    if base_bias.shape != (rbm.n_visible,):
        raise ValueError(f"base_bias must have shape ({rbm.n_visible},), got {base_bias.shape}")
    betas = ais_betas() if betas is None else check_ais_betas(betas)
    graphdef, params = nnx.split(rbm)
    log_w = np.asarray(
        _ais_log_weights(graphdef, params, base_bias, betas, key, n_runs), np.float64
    )
    log_za = float(jnp.sum(softplus(base_bias))) + rbm.n_hidden * math.log(2.0)
    m = log_w.max()
    w = np.exp(log_w - m)
    mean, sd = w.mean(), w.std(ddof=1) / math.sqrt(n_runs)
    lower = log_za + m + math.log(mean - 3 * sd) if mean > 3 * sd else -math.inf
    return AISResult(
        log_za + m + math.log(mean), lower, log_za + m + math.log(mean + 3 * sd), log_w
    )


# %% book/partition.md
class SMLState(NamedTuple):
    params: nnx.State  # theta_t
    v: jax.Array  # particles X_t, (M, N, n_visible)
    log_q: jax.Array  # log q~_{i,t}(x_{i,t}) = -F_{i,t}(x_{i,t}), (M, N)
    tracker: Tracker


@checks(lr0=Float(0, low_open=True), alpha=Maybe(Float(0, low_open=True)))
def learning_rate(step, lr0: float, alpha: float | None):
    """eps_t = min(alpha eps_0 / (t + 1), eps_0) (Sec. 4); alpha = None holds eps_0 constant."""
    if alpha is None:
        return jnp.asarray(lr0, jnp.float32)
    return jnp.minimum(alpha * lr0 / (step + 1.0), lr0)


def _sml_loss(params, graphdef, v_data, v_model):
    rbm = nnx.merge(graphdef, params)
    return jnp.mean(rbm.free_energy(v_data)) - jnp.mean(rbm.free_energy(v_model))


# %% book/partition.md
@full_precision
def sml_pt_step(
    graphdef,
    state: SMLState,
    step,
    key,
    x_train,
    betas,
    *,
    lr0,
    alpha,
    batch_size,
    gibbs_steps,
    track: bool,
    bias_var_scale: float,
    min_var: float = 1e-6,
):
    """One SML-PT update and, with `track`, one tracker update. Returns (state, per-step record)."""
    kb, ks = jax.random.split(key)
    batch = x_train[jax.random.randint(kb, (batch_size,), 0, x_train.shape[0])].astype(jnp.float32)
    lr = learning_rate(step, lr0, alpha)
    grads = jax.grad(_sml_loss)(state.params, graphdef, batch, state.v[0])
    params = jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), state.params, grads)
    rbm = nnx.merge(graphdef, params)
    a_old = rbm.hidden_input(state.v)  # X_{t-1} under theta_t
    v, a, swap_rate = pt_sweep(rbm, state.v, a_old, betas, ks, gibbs_steps)
    record = {"swap_rate": swap_rate}
    if not track:
        return SMLState(params, v, state.log_q, state.tracker), record
    log_w = state.v @ rbm.b[...] + rbm.tempered_term(a_old, betas[:, None]) - state.log_q
    o_dt, var_dt = log_mean_exp(log_w[:-1])
    g_self = rbm.tempered_term(a, betas[:, None])
    d_lower = rbm.tempered_term(a[:-1], betas[1:, None]) - g_self[:-1]
    d_upper = g_self[1:] - rbm.tempered_term(a[1:], betas[:-1, None])
    zeta_m = rbm.log_z_base()
    zeta = jnp.concatenate([state.tracker.mean[:-1], zeta_m[None]])
    o_db, var_db = bridge_log_ratio(d_lower, d_upper, (zeta[1:] - zeta[:-1])[:, None])
    process_var = jnp.concatenate([jnp.full(o_dt.shape, jnp.inf), (bias_var_scale * lr)[None]])
    tracker = kalman_update(
        state.tracker,
        o_dt,
        jnp.maximum(var_dt, min_var),
        o_db,
        jnp.maximum(var_db, min_var),
        zeta_m,
        process_var,
    )
    record.update(
        log_z=tracker.mean[0],
        log_z_var=tracker.cov[0, 0],
        bias=tracker.mean[-1],
        is_obs=o_dt,
        is_var=var_dt,
        bridge_obs=o_db,
        bridge_var=var_db,
        bridge_log_z=zeta_m - jnp.sum(o_db),
    )
    return SMLState(params, v, v @ rbm.b[...] + g_self, tracker), record


# %% book/partition.md
@partial(
    jax.jit,
    static_argnames=(
        "graphdef",
        "n",
        "lr0",
        "alpha",
        "batch_size",
        "gibbs_steps",
        "track",
        "bias_var_scale",
    ),
)
def _sml_pt_chunk(
    graphdef,
    state,
    start,
    key,
    x_train,
    betas,
    n,
    lr0,
    alpha,
    batch_size,
    gibbs_steps,
    track,
    bias_var_scale,
):
    def body(state, t):
        return sml_pt_step(
            graphdef,
            state,
            t,
            jax.random.fold_in(key, t),
            x_train,
            betas,
            lr0=lr0,
            alpha=alpha,
            batch_size=batch_size,
            gibbs_steps=gibbs_steps,
            track=track,
            bias_var_scale=bias_var_scale,
        )

    return jax.lax.scan(body, state, start + jnp.arange(n))


@checks(rbm=Instance(RBM), n_chains=Int(1), key=Key(), init_var=Float(0, low_open=True))
def init_sml_state(rbm: RBM, betas, n_chains: int, key, *, init_var: float = 1.0) -> SMLState:
    """Particles from the beta = 0 model (independent Bernoulli(sigmoid(b))) at every
    temperature."""
    betas = check_betas(betas)
    v = jax.random.bernoulli(
        key, jax.nn.sigmoid(rbm.b[...]), (betas.shape[0], n_chains, rbm.n_visible)
    ).astype(jnp.float32)
    return SMLState(
        nnx.state(rbm, nnx.Param),
        v,
        -rbm.free_energy(v, betas[:, None]),
        tracker_init(betas.shape[0], rbm.log_z_base(), var=init_var),
    )


# %% book/partition.md
def _check_finite_state(state: SMLState, t: int, n: int, lr, alpha) -> None:
    """Raise NonFiniteError naming the first non-finite quantity (parameters, particles,
    tracker)."""
    quantities = {
        **{
            f"params{jax.tree_util.keystr(path)}": leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(state.params)[0]
        },
        "particles": state.v,
        "log_q": state.log_q,
        "tracker.mean": state.tracker.mean,
        "tracker.cov": state.tracker.cov,
    }
    for name, value in quantities.items():
        value = np.asarray(getattr(value, "value", value))
        if not np.isfinite(value).all():
            raise NonFiniteError(
                t,
                name,
                float(value[~np.isfinite(value)][0]),
                f"SML-PT diverged in steps {t - n + 1}..{t} (lr {lr}, "
                f"alpha {alpha}); lower the learning rate",
            )


# %% book/partition.md
@dataclasses.dataclass
class _SMLRun:
    """Where a train_sml_pt run stands: its state and temperatures, step t and seconds of
    training, the per-step records of its chunks, its evaluations, the best evaluation (valid_ll,
    step, params) and the evaluations since, whether it stopped early, its last checkpoint."""

    state: SMLState
    betas: jax.Array
    t: int
    best: tuple
    seconds: float = 0.0
    chunks: list = dataclasses.field(default_factory=list)
    evals: list = dataclasses.field(default_factory=list)
    since_best: int = 0
    stopped: bool = False

    def __post_init__(self):
        self.saved_at = self.t

    @classmethod
    def begin(cls, rbm: RBM, state, betas, n_chains: int, key, start: int, directory):
        """A run at step `start` from state (None: fresh chains), or from the latest checkpoint
        in directory."""
        if state is None:
            state = init_sml_state(rbm, betas, n_chains, jax.random.fold_in(key, 2**31 - 1))
        run = cls(state, betas, start, best=(-np.inf, start, state.params))
        if directory is not None:
            run.restore(directory)
        return run

    def advance(self, chunk, n: int) -> None:
        """n updates by chunk(state, t, betas, n) -> (state, record), timed."""
        began = time.perf_counter()
        self.state, record = chunk(self.state, self.t, self.betas, n)
        jax.block_until_ready(self.state)
        self.seconds += time.perf_counter() - began
        self.t += n
        self.chunks.append(jax.tree.map(np.asarray, record))

    def evaluate(self, model: RBM, track: bool, x_valid, evaluate) -> dict:
        """The evaluation row at step t (tracked log Z, validation likelihood, evaluate's)."""
        row, tracker = {"step": self.t, "seconds": self.seconds}, self.state.tracker
        if track:
            row.update(log_z=float(tracker.mean[0]), log_z_sd=float(np.sqrt(tracker.cov[0, 0])))
        if x_valid is not None and track:
            row["valid_ll"] = float(-jnp.mean(model.free_energy(x_valid))) - row["log_z"]
        if evaluate is not None:
            row.update(evaluate(model, self.state, self.t))
        self.evals.append(row)
        return row

    def note_valid(self, valid_ll: float, patience: int) -> None:
        """Early stopping: keep the best parameters; stop after `patience` evaluations without."""
        if valid_ll > self.best[0]:
            self.best, self.since_best = (valid_ll, self.t, self.state.params), 0
        else:
            self.since_best += 1
            self.stopped = self.since_best >= patience

    def history(self) -> dict:
        """The per-step records of all chunks so far, concatenated."""
        return {k: np.concatenate([c[k] for c in self.chunks]) for k in self.chunks[0]}


# %% book/partition.md
@add_to_class(_SMLRun)
class _SMLRunCheckpoint:
    def save(self, directory) -> None:
        """Checkpoint everything at step t."""
        self.saved_at, self.chunks = self.t, [self.history()]
        extra = dict(seconds=self.seconds, evals=self.evals, stopped=self.stopped)
        extra |= dict(best_step=self.best[1], since_best=self.since_best)
        extra |= dict(best_ll=self.best[0] if np.isfinite(self.best[0]) else None)
        extra["betas"] = [float(b) for b in np.asarray(self.betas)]
        trees = {"state": self.state, "best": self.best[2]}
        save_checkpoint(directory, self.t, trees, extra, arrays=self.chunks[0])

    def restore(self, directory) -> None:
        """Go on from the latest checkpoint in directory, if there is one."""
        restored = restore_checkpoint(directory, {"state": self.state, "best": self.best[2]})
        if restored is None:
            return
        self.saved_at, trees, extra = restored
        self.t, self.state, self.chunks = self.saved_at, trees["state"], [extra["arrays"]]
        self.seconds, self.evals, self.stopped = extra["seconds"], extra["evals"], extra["stopped"]
        best_ll = -np.inf if extra["best_ll"] is None else extra["best_ll"]
        self.best, self.since_best = (
            (best_ll, extra["best_step"], trees["best"]),
            extra["since_best"],
        )
        self.betas = check_betas(extra["betas"]) if "betas" in extra else self.betas


# %% book/partition.md
_SML_PT_CONTRACTS = dict(
    rbm=Instance(RBM),
    seed=Seed(),
    steps=Int(1),
    learning_rate=Float(0, low_open=True),
    alpha=Maybe(Float(0, low_open=True)),
    n_chains=Int(2),
    batch_size=Int(1),
    gibbs_steps=Int(1),
    track=Bool(),
    eval_every=Int(1),
    evaluate=Maybe(Function()),
    patience=Maybe(Int(1)),
    bias_var_scale=Float(0),
    start=Int(0),
    checkpoint_every=Int(1),
    adapt=Bool(),
    adapt_step=Float(0, 1, low_open=True),
    progress=Bool(),
)


def _sml_inputs(rbm: RBM, x_train, x_valid, betas, batch_size: int, patience, track: bool):
    """train_sml_pt's data and temperatures, checked: (x_train, x_valid, betas)."""
    x_train = check_binary(x_train, "x_train", rbm.n_visible, jnp.uint8)
    x_valid = None if x_valid is None else check_binary(x_valid, "x_valid", rbm.n_visible)
    betas = linear_betas(10) if betas is None else check_betas(betas)
    if batch_size > x_train.shape[0]:
        raise ValueError(
            f"batch_size ({batch_size}) must not exceed the {x_train.shape[0]} rows of x_train"
        )
    if patience is not None and (x_valid is None or not track):
        raise ValueError("early stopping (patience) needs x_valid and track=True")
    return x_train, x_valid, betas


# %% book/partition.md
@renamed(positional=("key",), key="seed", lr="learning_rate")
@full_precision
@checks(**_SML_PT_CONTRACTS)
def train_sml_pt(
    rbm: RBM,
    x_train,
    *,
    steps: int,
    learning_rate: float = 1e-3,
    alpha: float | None = None,
    betas=None,
    n_chains: int = 20,
    batch_size: int = 20,
    gibbs_steps: int = 1,
    track: bool = True,
    eval_every: int = 1000,
    evaluate=None,
    x_valid=None,
    patience: int | None = None,
    bias_var_scale: float = 1e-3,
    state: SMLState | None = None,
    start: int = 0,
    checkpoint_dir=None,
    checkpoint_every: int = 20_000,
    adapt: bool = False,
    adapt_step: float = 0.5,
    progress: bool = True,
    seed=0,
) -> Trained:
    """Train `rbm` by SML with parallel tempering (len(betas) temperatures), tracking log Z.

    Returns Trained(model, history): the final model (or the best one under early stopping), a new
    one; history holds per update swap_rate (one column per pair of neighbouring temperatures) and,
    with tracking, log_z, log_z_var, bias, is_obs, is_var, bridge_obs, bridge_var (the filter's
    observations and their variances) and bridge_log_z; its attributes are `evals` (a row per
    evaluation: step, seconds of training so far, tracked log Z and its sd, valid_ll, what
    `evaluate` adds), `state` (the chains, tracker and parameters after the last update: pass it
    back as `state=` to continue) and `best_step`. seed: an integer or a JAX key (Appendix B).

    Every `eval_every` updates: the tracked log Z and its sd are recorded; given x_valid, so is the
    tracked validation log-likelihood -mean F(x_valid) - zeta_1; evaluate(model, state, step) ->
    dict adds its own entries (exact log Z, AIS, ...). With `patience`, training stops after that
    many evaluations without a better validation likelihood and returns the best model.
    checkpoint_dir: save everything (chains, tracker, parameters, history) there at the first
    evaluation `checkpoint_every` updates after the last save, and resume from the latest
    checkpoint found there. adapt: after every evaluation, move the temperatures by
    `adapt_betas(..., step=adapt_step)` using the swap rates since the previous one; each
    evaluation row holds the betas of the next updates. progress: a report (toolkit `Progress`).
    """
    x_train, x_valid, betas = _sml_inputs(rbm, x_train, x_valid, betas, batch_size, patience, track)
    graphdef, _, rest = nnx.split(rbm, nnx.Param, ...)
    key, end = seed_key(seed), start + steps
    run = _SMLRun.begin(rbm, state, betas, n_chains, key, start, checkpoint_dir)
    settings = (learning_rate, alpha, batch_size, gibbs_steps, track, bias_var_scale)

    def chunk(s, t, b, n):
        return _sml_pt_chunk(graphdef, s, t, key, x_train, b, n, *settings)

    report = Progress(steps, "SML-PT", initial=run.t - start, enabled=progress)
    while run.t < end and not run.stopped:
        n = min(eval_every, end - run.t)
        run.advance(chunk, n)
        _check_finite_state(run.state, run.t, n, learning_rate, alpha)
        row = run.evaluate(nnx.merge(graphdef, run.state.params, rest), track, x_valid, evaluate)
        if adapt:
            run.betas = adapt_betas(run.betas, run.chunks[-1]["swap_rate"].mean(0), step=adapt_step)
            row["betas"] = [round(float(b), 6) for b in np.asarray(run.betas)]
        report.update(run.t - start, {k: v for k, v in row.items() if k in ("log_z", "valid_ll")})
        if patience is not None:
            run.note_valid(row["valid_ll"], patience)
        if checkpoint_dir is not None and (
            run.t - run.saved_at >= checkpoint_every or run.t >= end or run.stopped
        ):
            run.save(checkpoint_dir)
    report.close()
    best = patience is not None
    params, step = (run.best[2], run.best[1]) if best else (run.state.params, run.t)
    history = History(run.history(), evals=run.evals, state=run.state, best_step=step)
    return Trained(nnx.merge(graphdef, params, rest), history)


# %% book/partition.md
@renamed(positional=("key",), key="seed")
@checks(rbm=Instance(RBM), seed=Seed(), steps=Int(1), repeats=Int(1))
def time_sml_pt(
    rbm: RBM, x_train, *, steps: int = 1000, repeats: int = 2, seed=0, **kwargs
) -> dict:
    """Seconds per update of SML-PT alone and with the tracker: the best of `repeats` alternating
    runs of `steps` updates each, after one compiling run of each (kwargs: train_sml_pt's)."""
    seconds = {False: [], True: []}
    for r in range(repeats + 1):
        for track in (False, True):
            res = train_sml_pt(
                rbm,
                x_train,
                seed=seed,
                steps=steps,
                eval_every=steps,
                track=track,
                progress=False,
                **kwargs,
            )
            if r:
                seconds[track].append(res.history.evals[-1]["seconds"] / steps)
    train, both = min(seconds[False]), min(seconds[True])
    return {"train": train, "train_and_track": both, "overhead": both / train - 1}


# %% book/partition.md
def thin_history(history: dict, every: int) -> dict:
    """The per-step history of train_sml_pt, thinned: point values every `every` steps for the
    filter's outputs (log Z, its sd, the bias), window means of `every` steps for the noisy
    observations (the importance weights of beta = 1, the bridge-only log Z, the swap rates)."""
    n = (len(history["log_z"]) // every) * every
    window = lambda x: x[:n].reshape(n // every, every, *x.shape[1:]).mean(1)  # noqa: E731
    point = lambda x: x[every - 1 : n : every]  # noqa: E731
    return {
        "step": list(range(every, n + 1, every)),
        "log_z": point(history["log_z"]).tolist(),
        "log_z_sd": np.sqrt(point(history["log_z_var"])).tolist(),
        "bias": point(history["bias"]).tolist(),
        "is_obs_1": window(history["is_obs"][:, 0]).tolist(),
        "bridge_log_z": window(history["bridge_log_z"]).tolist(),
        "swap_rate": window(history["swap_rate"]).mean(0).tolist(),
    }


def exact_evaluator(x_test, *, base_bias, ais_every: int | None, ais_counts, ais_runs: int = 100):
    """evaluate(model, state, t) for train_sml_pt (Section 9): the exact log Z (eq. pt-exact) and
    the time it took, the test log-likelihood with the exact and with the tracked log Z, and every
    `ais_every` steps (never if None) AIS's log Z and 3-sd interval (from `base_bias`, with
    ais_betas(ais_counts), `ais_runs` runs). x_test: binary (n, n_visible)."""
    test = jnp.asarray(check_array(x_test, "x_test", binary=True, ndim=2), jnp.float32)

    def evaluate(model: RBM, state, t: int) -> dict:
        began = time.perf_counter()
        exact = exact_log_z(model)
        f_test = float(jnp.mean(model.free_energy(test)))
        out = {
            "exact_log_z": exact,
            "exact_seconds": time.perf_counter() - began,
            "test_ll_exact": -f_test - exact,
            "test_ll_tracked": -f_test - float(state.tracker.mean[0]),
        }
        if ais_every is not None and t % ais_every == 0:
            ais = ais_log_z(
                model,
                jax.random.key(t),
                base_bias=base_bias,
                betas=ais_betas(ais_counts),
                n_runs=ais_runs,
            )
            out.update(ais_log_z=ais.log_z, ais_lower=ais.lower, ais_upper=ais.upper)
        return out

    return evaluate


# %% book/partition.md
__all__ = [
    "RBM",
    "train_sml_pt",
    "sml_pt_step",
    "SMLState",
    "init_sml_state",
    "pt_sweep",
    "linear_betas",
    "adapt_betas",
    "learning_rate",
    "Tracker",
    "tracker_init",
    "kalman_update",
    "bridge_log_ratio",
    "exact_log_z",
    "ais_log_z",
    "ais_betas",
    "AISResult",
    "exact_evaluator",
    "thin_history",
    "time_sml_pt",
    "log_odds_of_mean",
    "log_mean_exp",
    "softplus",
    "binary_codes",
    "swap_pass",
    "observation_matrices",
    "check_binary",
    "check_betas",
    "check_ais_betas",
]
constructor_signatures(globals())  # help() and inspect.signature show __init__'s parameters
