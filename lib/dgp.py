# GENERATED FILE: do not edit. Source: book/dgp.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""Doubly stochastic variational inference for deep GPs (Salimbeni & Deisenroth 2017), derived
in book/dgp.md.

Sparse variational GP layers (the marginals, their whitened form, the KL term), the deep GP's
doubly stochastic bound with its custom Cholesky gradient, training and evaluation, one UCI
model on one split and the MNIST classifier's evaluation. The paper-scale experiments and the
claims are lib.dgp_report.
"""

# %% book/dgp.md
from __future__ import annotations

import functools
import math
import time
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.custom_derivatives import SymbolicZero
from jax.scipy.linalg import solve_triangular
from scipy.cluster.vq import kmeans2

from lib.data import load_mnist, load_uci
from lib.toolkit import Array, Bool, Float, Function, Instance, Int, Maybe, OneOf
from lib.toolkit import constructor_signatures
from lib.toolkit import FlatStep, check_array, checks, fit, minibatches, nnx_model, nnx_step
from lib.toolkit import History, Seed, Trained, add_to_class, nnx_train_state, seed_key
from lib.toolkit import full_precision


# %% book/dgp.md
@jax.custom_vjp
def quadratic_forms(B, A):
    """v[n, p] = a_pn^T B[p] a_pn for symmetric B (P, M, M); returns (N, P).

    A (N, M): row n is a_n, the same for every p (shared kernel): one (N, M) x (M, P M) product; or
    A (P, N, M), one a_pn per output (per-output kernels): a batched product. The gradient uses B's
    symmetry (eq. dgp-quadform-grad): one more product.
    """
    return _quadratic_forms_fwd(B, A)[0]


def _quadratic_forms_fwd(B, A):
    P, M, _ = B.shape
    # the barriers keep XLA:CPU (jax 0.12) from fusing the sum into the product, which can run it 3x
    # slower; the sums over m are batched products (einsum), which XLA:CPU runs faster than the
    # same sums as a multiply and a reduction
    if A.ndim == 2:  # C[n, p, :] = B_p a_n: the P blocks side by side, (M, P M)
        C = jax.lax.optimization_barrier(A @ jnp.swapaxes(B, 0, 1).reshape(M, P * M)).reshape(
            -1, P, M
        )
        return jnp.einsum("npm,nm->np", C, A), (A, C)
    C = jax.lax.optimization_barrier(A @ B)  # (P, N, M)
    return jnp.sum(C * A, -1).T, (A, C)


def _quadratic_forms_bwd(residuals, g):
    A, C = residuals
    if A.ndim == 2:
        P, M = C.shape[1:]
        G = (g[:, :, None] * A[:, None, :]).reshape(-1, P * M)  # G[n, (p, m)] = g_np a_nm
        dB = jnp.swapaxes((A.T @ G).reshape(M, P, M), 0, 1)  # sum_n g_np a_n a_n^T
        dA = 2.0 * jnp.einsum("np,npm->nm", g, C)  # 2 sum_p g_np B_p a_n, one pass over C
    else:
        G = g.T[:, :, None] * A
        dB = jnp.swapaxes(A, 1, 2) @ G
        dA = 2.0 * g.T[:, :, None] * C
    return dB, dA


quadratic_forms.defvjp(_quadratic_forms_fwd, _quadratic_forms_bwd)


def marginal_operators(Kzz_chol, q_sqrt, whiten: bool, Kzz_chol_inv=None):
    """T and B (P, M, M) of eq. dgp-quadform: alpha = T k(Z, x), var_p = k(x, x) + alpha^T B_p
    alpha.

    Kzz_chol: lower Cholesky factor of K_ZZ, (M, M) shared by the outputs or (P, M, M) one per
    output; T has the same shape. q_sqrt (P, M, M): lower triangular factors R_p of the inducing
    covariances (of u, or of v when whitened). Kzz_chol_inv: L^{-1} if already known (a layer
    gets it from `cholesky_factors`), else computed here by a triangular solve.
    """
    M = Kzz_chol.shape[-1]
    eye = jnp.broadcast_to(jnp.eye(M, dtype=Kzz_chol.dtype), Kzz_chol.shape)
    Linv = (
        solve_triangular(Kzz_chol, eye, lower=True) if Kzz_chol_inv is None else Kzz_chol_inv
    )  # O(M^3), once
    R = jnp.tril(q_sqrt)
    S = R @ jnp.swapaxes(R, -1, -2)
    if whiten:
        return Linv, S - eye
    return jnp.swapaxes(Linv, -1, -2) @ Linv, S - Kzz_chol @ jnp.swapaxes(Kzz_chol, -1, -2)


def marginals_from_operators(T, B, Kxz, kxx_diag, q_mu):
    """Means (N, P) and variances (N, P) of eq. dgp-quadform.

    T (M, M) and Kxz = k(x, Z) (N, M) for a shared kernel, or T (P, M, M) and Kxz (P, N, M) per
    output; B (P, M, M); kxx_diag (N,) or (N, P); q_mu (M, P).
    """
    A = Kxz @ jnp.swapaxes(T, -1, -2)  # row n is alpha(x_n)
    mean = A @ q_mu if A.ndim == 2 else jnp.einsum("pnm,mp->np", A, q_mu)
    kdiag = kxx_diag[:, None] if kxx_diag.ndim == 1 else kxx_diag
    return mean, kdiag + quadratic_forms(B, A)


# %% book/dgp.md
@checks(
    Kzz_chol=Array(ndim=2),
    Kxz=Array(ndim=2),
    kxx_diag=Array(ndim=1),
    q_mu=Array(ndim=2),
    q_sqrt=Array(ndim=3),
    whiten=Bool(),
)
def conditional_marginals(Kzz_chol, Kxz, kxx_diag, q_mu, q_sqrt, whiten: bool):
    """Marginal means and variances of q(f_i) for one sparse GP layer (eq. dgp-marginals,
    dgp-whitened).

    Kzz_chol (M, M): lower Cholesky factor of K_ZZ. Kxz = k(x, Z) (N, M). kxx_diag (N,): k(x_i,
    x_i). q_mu (M, P): the inducing means (of u - m(Z), or of v when whitened). q_sqrt (P, M, M):
    lower triangular factors of the inducing covariances, one per output. Returns (mean (N, P), var
    (N, P)), without the mean function m(x).
    """
    T, B = marginal_operators(Kzz_chol, q_sqrt, whiten)
    return marginals_from_operators(T, B, Kxz, kxx_diag, q_mu)


# %% book/dgp.md
@checks(
    q_mu=Array(ndim=2), q_sqrt=Array(ndim=3), Kzz_chol=Maybe(Array()), Kzz_chol_inv=Maybe(Array())
)
def gauss_kl(q_mu, q_sqrt, Kzz_chol=None, Kzz_chol_inv=None):
    """Sum over outputs of KL[N(q_mu[:, p], R_p R_p^T) || N(0, K)] (eq. dgp-kl).

    q_mu (M, P); q_sqrt (P, M, M) lower triangular; Kzz_chol (M, M) or (P, M, M) lower Cholesky
    factor of K, or None for K = I (whitened). Kzz_chol_inv: L^{-1} if known; L^{-1} R is then a
    product instead of a triangular solve.
    """
    M, P = q_mu.shape
    R = jnp.tril(q_sqrt)
    logdet_S = 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diagonal(R, axis1=1, axis2=2))))

    def solve(rhs):  # L^{-1} rhs
        return (
            solve_triangular(Kzz_chol, rhs, lower=True)
            if Kzz_chol_inv is None
            else Kzz_chol_inv @ rhs
        )

    if Kzz_chol is None:
        trace_plus_maha = jnp.sum(R**2) + jnp.sum(q_mu**2)
        logdet_K = 0.0
    elif Kzz_chol.ndim == 2:  # shared by the outputs: one solve with all P M + P right-hand sides
        rhs = jnp.concatenate([jnp.swapaxes(R, 0, 1).reshape(M, P * M), q_mu], 1)
        trace_plus_maha = jnp.sum(solve(rhs) ** 2)
        logdet_K = P * 2.0 * jnp.sum(jnp.log(jnp.diagonal(Kzz_chol)))
    # (P, M, M), one factor per output: a batched solve (single-threaded per batch in jax 0.12)
    else:
        trace_plus_maha = jnp.sum(solve(R) ** 2) + jnp.sum(solve(q_mu.T[:, :, None]) ** 2)
        logdet_K = 2.0 * jnp.sum(jnp.log(jnp.diagonal(Kzz_chol, axis1=1, axis2=2)))
    return 0.5 * (trace_plus_maha - M * P + logdet_K - logdet_S)


# %% book/dgp.md
@checks(y=Array())
def softplus_inverse(y):
    """x with softplus(x) = y, for y > 0 (numerically stable for large y)."""
    y = jnp.asarray(y)
    return y + jnp.log(-jnp.expm1(-y))


@checks(x1=Array(ndim=2), x2=Array(ndim=2), lengthscales=Array(), variance=Float(0, low_open=True))
def rbf(x1, x2, lengthscales, variance):
    """RBF kernel matrix (N1, N2) between x1 (N1, D) and x2 (N2, D) (Section 2)."""
    if x2.shape[-1] != x1.shape[-1]:
        raise ValueError(
            f"x2 must have the {x1.shape[-1]} columns of x1, got shape {tuple(x2.shape)}"
        )
    if jnp.ndim(lengthscales) and jnp.shape(lengthscales)[-1] not in (1, x1.shape[-1]):
        raise ValueError(
            f"lengthscales must hold one value or one per input dimension ({x1.shape[-1]}), "
            f"got shape {tuple(jnp.shape(lengthscales))}"
        )
    a, b = x1 / lengthscales, x2 / lengthscales
    sq = jnp.sum(a**2, -1)[:, None] + jnp.sum(b**2, -1)[None, :] - 2.0 * a @ b.T
    return variance * jnp.exp(-0.5 * jnp.maximum(sq, 0.0))


# %% book/dgp.md
class RBF(nnx.Module):
    """Squared-exponential kernel with one lengthscale per input dimension (ARD, the paper's
    kernel).

    batch: None for one kernel, or P for P independent kernels (one per output of a layer, as
    GPyTorch's deep GP); then x1 is (P, M, D) or (M, D) and the result is (P, M, N).
    ard=False: one lengthscale shared by all input dimensions (GPflow 1's default, which the
    authors' public notebook used; see the reproduction report).
    """

    @checks(
        input_dim=Int(1),
        lengthscale=Float(0, low_open=True),
        variance=Float(0, low_open=True),
        batch=Maybe(Int(1)),
        ard=Bool(),
    )
    def __init__(
        self,
        input_dim: int,
        lengthscale: float = 1.0,
        variance: float = 1.0,
        dtype=jnp.float64,
        batch: int | None = None,
        ard: bool = True,
    ):  # the contracts above refuse a dimension below 1, a scale <= 0 and a batch below 1
        self.input_dim = input_dim
        self.batch = batch
        lead = () if batch is None else (batch,)
        self.ard = ard
        self.raw_lengthscales = nnx.Param(
            softplus_inverse(jnp.full(lead + (input_dim if ard else 1,), lengthscale, dtype))
        )
        self.raw_variance = nnx.Param(softplus_inverse(jnp.full(lead, variance, dtype)))

    @property
    def lengthscales(self):
        """The lengthscales, softplus of their unconstrained parameters: (..., D) or (..., 1)."""
        return jax.nn.softplus(self.raw_lengthscales[...])

    @property
    def variance(self):
        """The kernel's variance, softplus of its unconstrained parameter."""
        return jax.nn.softplus(self.raw_variance[...])

    def _map(self, x1, x2, variance, lengthscales):
        if self.batch is None:
            return rbf(x1, x2, lengthscales, variance)
        in1 = 0 if x1.ndim == 3 else None
        in2 = 0 if x2.ndim == 3 else None
        return jax.vmap(rbf, (in1, in2, 0, 0))(
            x1, x2, lengthscales, jnp.broadcast_to(variance, (self.batch,))
        )

    def __call__(self, x1, x2):
        return self._map(x1, x2, self.variance, self.lengthscales)

    def correlation(self, x1, x2, lengthscales=None):
        """k(x1, x2) / variance. A layer multiplies the variance into a small matrix instead of an
        (M, N) one: the variance's gradient is then a sum over M^2 terms, not M N. lengthscales:
        the kernel's (None) or given values of the same shape (a layer passes them computed once
        per step to the function of its rows, which must not read the kernel's parameters)."""
        ls = self.lengthscales if lengthscales is None else lengthscales
        return self._map(x1, x2, jnp.ones((), x1.dtype), ls)

    def diag(self, x, variance=None):
        """k(x_i, x_i): (N,), or (N, P) for a batch of P kernels. variance: the kernel's (None) or
        given values of its shape (as `correlation`'s lengthscales)."""
        variance = self.variance if variance is None else variance
        return jnp.broadcast_to(
            variance, x.shape[:-1] + (() if self.batch is None else (self.batch,))
        ).astype(x.dtype)


# %% book/dgp.md
class Constant(nnx.Variable):
    """A fixed array of a module: not a parameter, never updated by the optimiser."""


class CholeskyError(FloatingPointError):
    """A kernel matrix was not numerically positive definite."""


@checks(K=Array(), jitter=Float(0), retries=Int(0))
def safe_cholesky(K, jitter: float, retries: int = 3):
    """Lower Cholesky factor of K + jitter I, retrying with 10x, 100x, ... the jitter if it fails.

    A failed factorisation shows as NaNs; each retry is a `lax.cond`, so the function stays
    differentiable and jittable. If every try fails the NaNs are returned, and the training loop
    stops with a message naming the step (Appendix B).
    """
    if K.ndim < 2 or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"K must be a square matrix (or a batch of them), got shape {K.shape}")
    eye = jnp.eye(K.shape[-1], dtype=K.dtype)
    L = jnp.linalg.cholesky(K + jitter * eye)
    for i in range(1, retries + 1):
        L = jax.lax.cond(
            jnp.any(jnp.isnan(L)),
            lambda j=jitter * 10.0**i: jnp.linalg.cholesky(K + j * eye),
            lambda: L,
        )
    return L


def _phi(X):
    """Lower triangle of X with the diagonal halved (batched over leading axes)."""
    M = X.shape[-1]
    return jnp.tril(X) * jnp.where(jnp.eye(M, dtype=bool), 0.5, 1.0).astype(X.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def cholesky_factors(K, jitter: float, retries: int = 3):
    """(L, L^{-1}) for K + jitter I (M, M) or a batch (P, M, M), with the retries of safe_cholesky.

    The backward pass is eq. dgp-chol-grad: products only, no triangular solve, and no retry in it
    (the jitter is a constant; the gradient is that of the factorised matrix).
    """
    L = safe_cholesky(K, jitter, retries)
    eye = jnp.broadcast_to(jnp.eye(K.shape[-1], dtype=K.dtype), K.shape)
    return L, solve_triangular(L, eye, lower=True)


def _cholesky_factors_fwd(K, jitter, retries):
    L, W = cholesky_factors(K.value, jitter, retries)
    return (L, W), (L, W)


def _cholesky_factors_bwd(jitter, retries, residuals, cotangents):
    L, W = residuals
    L_bar, W_bar = cotangents
    t = lambda X: jnp.swapaxes(X, -1, -2)
    inner = jnp.zeros_like(L)  # L^T L_bar - W_bar W^T, without products of zeros
    if not isinstance(L_bar, SymbolicZero):
        inner = inner + t(L) @ L_bar
    if not isinstance(W_bar, SymbolicZero):
        inner = inner - W_bar @ t(W)
    K_bar = t(W) @ _phi(inner) @ W
    return (0.5 * (K_bar + t(K_bar)),)


cholesky_factors.defvjp(_cholesky_factors_fwd, _cholesky_factors_bwd, symbolic_zeros=True)


# %% book/dgp.md
def _chunked(data, rows: int):
    """data's leaves (N, ...) padded with zero rows and cut into (chunks, rows', ...), rows' <= rows
    balanced (at most chunks - 1 rows of padding), and the mask (chunks, rows') of the real
    rows."""
    N = jax.tree.leaves(data)[0].shape[0]
    chunks = -(-N // rows)
    rows = -(-N // chunks)

    def cut(a):
        a = jnp.pad(a, [(0, chunks * rows - N)] + [(0, 0)] * (a.ndim - 1))
        return a.reshape((chunks, rows) + a.shape[1:])

    return jax.tree.map(cut, data), (jnp.arange(chunks * rows) < N).reshape(chunks, rows)


def _joined(chunked, N: int):
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:])[:N], chunked)


@checks(fn=Function(), rows=Int(1))
def map_rows(fn, x, rows: int):
    """fn applied to x (N, D) in chunks of at most `rows` rows, each under jax.checkpoint; outputs
    joined.

    fn maps (n, D) to a pytree of arrays with n leading rows. The chunks are of equal size, the last
    padded with zero rows whose outputs are dropped, so fn must treat rows independently.
    """
    N = x.shape[0]
    if N <= rows:
        return fn(x)
    xs, _ = _chunked(x, rows)
    return _joined(jax.lax.map(jax.checkpoint(fn), xs), N)


def _inexact(a) -> bool:
    return jnp.issubdtype(jnp.result_type(a), jnp.inexact)


@checks(fn=Function(), rows=Int(1))
def sum_rows(fn, params, data, rows: int):
    """The sum over the N rows of data of fn(params, rows of data), in chunks of at most `rows`
    rows, differentiated chunk by chunk (Section 10).

    fn maps params and a chunk of data (data's pytree, leaves (n, ...)) to (n,) values, one per
    row, and must treat rows independently; it must read nothing traced but its arguments. Under
    differentiation each chunk's backward pass runs right after its forward pass, while the
    chunk's intermediates are still in cache: nothing is recomputed and nothing of the chunk is
    kept, but params' gradient (summed) and data's (N rows; zero for integer leaves). Chunks are
    of equal size, the last padded with zero rows that count for nothing. Data of at most `rows`
    rows is one chunk, differentiated as any function.
    """
    N = jax.tree.leaves(data)[0].shape[0]
    if N <= rows:
        return jnp.sum(fn(params, data))
    return _sum_chunks(fn, params, data, rows)


@partial(jax.custom_vjp, nondiff_argnums=(0, 3))
def _sum_chunks(fn, params, data, rows: int):
    chunks, mask = _chunked(data, rows)
    values = jax.lax.map(lambda c: fn(params, c), chunks)
    return jnp.sum(jnp.where(mask, values, 0))


# %% book/dgp.md
def _sum_rows_fwd(fn, params, data, rows):
    N = jax.tree.leaves(data)[0].shape[0]
    leaves, tree = jax.tree.flatten(data)

    def value_and_grads(chunk, mask):
        def of(p, f):  # fn as a function of params and data's inexact leaves
            f = iter(f)
            return fn(p, jax.tree.unflatten(tree, [next(f) if _inexact(a) else a for a in chunk]))

        values, pull = jax.vjp(of, params, [a for a in chunk if _inexact(a)])
        return jnp.sum(jnp.where(mask, values, 0)), *pull(mask.astype(values.dtype))

    chunks, mask = _chunked(leaves, rows)
    first = jax.tree.unflatten(tree, [a[0] for a in chunks])
    dtype = jax.eval_shape(fn, params, first).dtype

    def body(carry, chunk):
        value, g_p, g_f = value_and_grads(*chunk)
        return (carry[0] + value, jax.tree.map(jnp.add, carry[1], g_p)), g_f

    start = (jnp.zeros((), dtype), jax.tree.map(jnp.zeros_like, params))
    (total, g_params), g_floats = jax.lax.scan(body, start, (chunks, mask))
    g_floats = iter(_joined(g_floats, N))  # data's cotangent: inexact leaves' gradient, rest kept
    g_data = jax.tree.unflatten(tree, [next(g_floats) if _inexact(a) else a for a in leaves])
    return total, (g_params, g_data)


def _sum_rows_bwd(fn, rows, residuals, g):
    g_params, g_data = residuals
    return (
        jax.tree.map(lambda a: g * a, g_params),
        jax.tree.map(
            lambda a: g * a if _inexact(a) else np.zeros(a.shape, jax.dtypes.float0), g_data
        ),
    )


_sum_chunks.defvjp(_sum_rows_fwd, _sum_rows_bwd)


@checks(num_outputs=Int(1), num_inducing=Int(1))
def default_chunk_rows(num_outputs: int, num_inducing: int, dtype=jnp.float64) -> int:
    """Rows per chunk: on the CPU, at most 4 MB of a layer's (rows, P M) product and 2^18 elements
    per (rows, M) array (chosen by timing the configurations of Appendix C, Section 1, with other
    chunk sizes); 2^27 elements on an accelerator."""
    if jax.default_backend() != "cpu":
        return max(128, 2**27 // (num_outputs * num_inducing))
    by_bytes = 2**22 // (num_outputs * num_inducing * jnp.dtype(dtype).itemsize)
    return max(128, min(by_bytes, 2**18 // num_inducing))


# %% book/dgp.md
def _layer_inputs(kernel: RBF, Z, num_outputs: int, mean_W) -> tuple:
    """(Z, mean_W) of an SVGPLayer as arrays: Z (M, D_in), or (P, M, D_in) for a per-output
    kernel; mean_W (D_in, P) or None. A ValueError names the argument whose shape is wrong."""
    Z = jnp.asarray(Z)
    check_array(Z, "Z", dtype="floating")
    if kernel.batch is not None and kernel.batch != num_outputs:
        raise ValueError(
            f"a per-output layer needs one kernel per output: kernel.batch is {kernel.batch}, "
            f"num_outputs is {num_outputs}"
        )
    if Z.ndim == 3 and (kernel.batch is None or Z.shape[0] != num_outputs):
        raise ValueError(
            f"Z of shape {Z.shape} needs a kernel with batch={Z.shape[0]} = num_outputs"
        )
    if Z.ndim not in (2, 3) or Z.shape[-1] != kernel.input_dim:
        raise ValueError(
            f"Z must have shape (M, {kernel.input_dim}) or (P, M, {kernel.input_dim}), got "
            f"{Z.shape}"
        )
    if kernel.batch is not None and Z.ndim == 2:
        Z = jnp.tile(Z[None], (num_outputs, 1, 1))
    if mean_W is not None:
        mean_W = jnp.asarray(mean_W, Z.dtype)
        if mean_W.shape != (Z.shape[-1], num_outputs):
            raise ValueError(
                f"mean_W must have shape {(Z.shape[-1], num_outputs)}, got {mean_W.shape}"
            )
    return Z, mean_W


# %% book/dgp.md
class SVGPLayer(nnx.Module):
    """One sparse variational GP layer with P outputs (Section 3).

    kernel: an RBF shared by the outputs with one set of inducing inputs (the authors' code and
    GPflux), or an RBF with batch=P: one kernel and one set of inducing inputs per output
    (GPyTorch). Z: initial inducing inputs (M, D_in), copied to every output of a per-output
    layer, or (P, M, D_in). num_outputs: P. mean_W (D_in, P) or None:
    the fixed linear mean function m(x) = x W (None: zero). whiten: parameterise q(v) with
    u = m(Z) + L v. q_sqrt_scale: initial q(u) covariance is q_sqrt_scale^2 times I (whitened) or
    K_ZZ (not whitened). noise_variance: sigma_l^2 added to the kernel's diagonal. jitter: added to
    K_ZZ before factorising. chunk_size: rows of x per chunk (None: default_chunk_rows).
    """

    @checks(
        kernel=Instance(RBF),
        Z=Array(dtype="floating"),
        num_outputs=Int(1),
        whiten=Bool(),
        q_sqrt_scale=Float(0, low_open=True),
        noise_variance=Float(0),
        jitter=Float(0),
        chunk_size=Maybe(Int(1)),
    )
    def __init__(
        self,
        kernel: RBF,
        Z,
        num_outputs: int,
        mean_W=None,
        *,
        whiten: bool = False,
        q_sqrt_scale: float = 1.0,
        noise_variance: float = 0.0,
        jitter: float = 1e-6,
        chunk_size: int | None = None,
    ):
        Z, mean_W = _layer_inputs(kernel, Z, num_outputs, mean_W)
        M = Z.shape[-2]
        self.kernel = kernel
        self.Z = nnx.Param(Z)
        self.num_outputs = num_outputs
        self.whiten = whiten
        self.jitter = jitter
        self.noise_variance = noise_variance
        self.chunk_size = chunk_size
        self.mean_W = Constant(mean_W) if mean_W is not None else None
        self.q_mu = nnx.Param(jnp.zeros((M, num_outputs), Z.dtype))
        if whiten:
            R = q_sqrt_scale * jnp.eye(M, dtype=Z.dtype)
        else:  # start from the prior covariance K_ZZ, scaled
            R = q_sqrt_scale * self._chol()
        self.q_sqrt = nnx.Param(jnp.tile(R, (num_outputs, 1, 1)) if R.ndim == 2 else R)

    def _kzz(self):
        Z = self.Z[...]
        return self.kernel(Z, Z) + self.noise_variance * jnp.eye(Z.shape[-2], dtype=Z.dtype)

    def _chol(self):
        """Lower Cholesky factor of K_ZZ (+ noise and jitter)."""
        return safe_cholesky(self._kzz(), self.jitter)

    def _factors(self):
        """L and L^{-1} of K_ZZ, differentiated by eq. dgp-chol-grad."""
        return cholesky_factors(self._kzz(), self.jitter)

    def mean_function(self, x):
        """The layer's mean function at x (..., D_in): zero, or x W (inner layers); (..., P)."""
        return (
            jnp.zeros(x.shape[:-1] + (self.num_outputs,), x.dtype)
            if self.mean_W is None
            else x @ self.mean_W[...]
        )

    def kl(self):
        """KL[q(u) || p(u)] summed over the layer's outputs (eq. dgp-kl)."""
        if self.whiten:
            return gauss_kl(self.q_mu[...], self.q_sqrt[...])
        return gauss_kl(self.q_mu[...], self.q_sqrt[...], *self._factors())


# %% book/dgp.md
@add_to_class(SVGPLayer)
class _SVGPMarginals:
    def operators(self) -> dict:
        """What the marginals of any rows need, computed once: T and B of eq. dgp-quadform (the
        O(M^3) part: the Cholesky factor, its inverse) and the parameters read per row, as a dict
        of arrays for `marginals`."""
        L, Linv = self._factors()
        T, B = marginal_operators(L, self.q_sqrt[...], self.whiten, Linv)
        variance = self.kernel.variance
        # so that alpha = T k(Z, x) with the kernel's correlation
        T = variance * T if T.ndim == 2 else variance[:, None, None] * T
        return {
            "T": T,
            "B": B,
            "Z": self.Z[...],
            "q_mu": self.q_mu[...],
            "lengthscales": self.kernel.lengthscales,
            "variance": variance,
            "mean_W": None if self.mean_W is None else self.mean_W[...],
        }

    def marginals(self, ops: dict, x):
        """Means and variances (n, P) of q(f(x)) at rows x (n, D_in) from `operators()` (eq.
        dgp-marginals). It reads no parameter of the layer, only `ops`: a function of rows can
        run it under a transformation of its own (`sum_rows`)."""
        kdiag = self.kernel.diag(x, ops["variance"]) + self.noise_variance
        kxz = self.kernel.correlation(x, ops["Z"], ops["lengthscales"])
        mean, var = marginals_from_operators(ops["T"], ops["B"], kxz, kdiag, ops["q_mu"])
        if ops["mean_W"] is not None:
            mean = mean + x @ ops["mean_W"]
        return mean, jnp.maximum(var, 1e-12)

    def rows_per_chunk(self, dtype) -> int:
        """Rows of x per chunk of the marginals: chunk_size, else default_chunk_rows."""
        M, P = self.q_mu.shape
        return self.chunk_size or default_chunk_rows(P, M, dtype)

    def __call__(self, x):
        """Marginals of q(f(x)): mean (N, P) and variance (N, P) for inputs x (N, D_in) (eq.
        dgp-marginals)."""
        ops = self.operators()
        return map_rows(lambda xc: self.marginals(ops, xc), x, self.rows_per_chunk(x.dtype))


# %% book/dgp.md
class Gaussian(nnx.Module):
    """Gaussian likelihood p(y | f) = N(y | f, variance), variance learned (Section 4)."""

    @checks(variance=Float(0, low_open=True))
    def __init__(self, variance: float = 0.05, dtype=jnp.float64):
        if variance <= 0:
            raise ValueError(f"variance must be positive, got {variance}")
        self.raw_variance = nnx.Param(softplus_inverse(jnp.asarray(variance, dtype)))

    @property
    def variance(self):
        """The noise variance, softplus of its unconstrained parameter plus 1e-6."""
        return jax.nn.softplus(self.raw_variance[...]) + 1e-6

    def variational_expectations(self, mean, var, y):
        """E_{N(f | mean, var)}[log N(y | f, variance)], elementwise (eq. dgp-var-exp)."""
        s2 = self.variance
        return -0.5 * jnp.log(2 * jnp.pi * s2) - 0.5 * ((y - mean) ** 2 + var) / s2

    def predict_mean_and_var(self, mean, var):
        """The mean and variance of y given the marginals of f: (mean, var + noise variance)."""
        return mean, var + self.variance

    def predict_log_density(self, mean, var, y):
        """log N(y | mean, var + variance), elementwise."""
        v = var + self.variance
        return -0.5 * jnp.log(2 * jnp.pi * v) - 0.5 * (y - mean) ** 2 / v

    def check_y(self, y, num_points: int, num_outputs: int):
        """y as a float (num_points, num_outputs) array, or ValueError naming what is wrong."""
        # a 1-D y would broadcast against (S, N, P) into a silently wrong (S, N, N) array
        return check_array(y, "y", ndim=2, shape=(num_points, num_outputs), dtype="floating")


# %% book/dgp.md
@checks(num_points=Int(1))
def gauss_hermite(num_points: int = 20, dtype=np.float64):
    """Nodes and weights for E_{N(0,1)}[g(z)] ~= sum_j w_j g(z_j) (probabilists' normalisation).

    dtype: that of the computation (NumPy float64 constants would promote float32 to float64).
    """
    t, w = np.polynomial.hermite.hermgauss(num_points)
    return (np.sqrt(2.0) * t).astype(dtype), (w / np.sqrt(np.pi)).astype(dtype)


def normal_cdf(z):
    """Phi(z) = erfc(-z / sqrt 2) / 2: full relative precision in the lower tail, and several times
    cheaper under XLA than jax.scipy.special.ndtr, which evaluates both of its branches."""
    return 0.5 * jax.lax.erfc(-z * (1.0 / math.sqrt(2.0)))


def _check_labels(y, name, num_points, allowed):
    y = check_array(y, name, ndim=2, shape=(num_points, None))
    if not isinstance(y, jax.core.Tracer):  # values are checked outside jit only
        values = np.asarray(y)
        if values.size and not np.isin(values, allowed).all():
            bad = values[~np.isin(values, allowed)][0]
            raise ValueError(
                f"{name} must hold labels in {{{allowed[0]}, ..., {allowed[-1]}}}, got {bad}"
            )
    return y


class Bernoulli(nnx.Module):
    """p(y = 1 | f) = Phi(f), the probit link, for labels y in {0, 1} (Section 4)."""

    @checks(quadrature_points=Int(1))
    def __init__(self, quadrature_points: int = 20):
        self.quadrature_points = quadrature_points

    def variational_expectations(self, mean, var, y):
        """E_{N(f | mean, var)}[log Phi((2y - 1) f)], elementwise, by Gauss-Hermite quadrature."""
        z, w = gauss_hermite(self.quadrature_points, mean.dtype)
        f = mean[..., None] + jnp.sqrt(var)[..., None] * z  # (..., Q)
        sign = (2.0 * y - 1.0).astype(mean.dtype)[..., None]
        return jnp.sum(w * jax.scipy.special.log_ndtr(sign * f), -1)

    def predict_mean_and_var(self, mean, var):
        """P(y = 1) = Phi(mean / sqrt(1 + var)) and its Bernoulli variance, elementwise."""
        p = jax.scipy.special.ndtr(mean / jnp.sqrt(1.0 + var))
        return p, p * (1.0 - p)

    def predict_log_density(self, mean, var, y):
        """log P(y | marginals of f), elementwise."""
        return jax.scipy.special.log_ndtr(
            (2.0 * y - 1.0).astype(mean.dtype) * mean / jnp.sqrt(1.0 + var)
        )

    def check_y(self, y, num_points: int, num_outputs: int):
        """y as a 0/1 (num_points, num_outputs) array, or ValueError naming what is wrong."""
        return check_array(y, "y", ndim=2, shape=(num_points, num_outputs), binary=True)


# %% book/dgp.md
def _win_probability(mean, var, y, nodes: int):
    """P_y for the labelled class only: (...,) from marginals (..., K) and labels (..., 1)."""
    z, w = gauss_hermite(nodes, mean.dtype)
    label = jnp.broadcast_to(jnp.asarray(y)[..., 0], mean.shape[:-1]).astype(jnp.int32)
    mu_y = jnp.take_along_axis(mean, label[..., None], -1)
    sd_y = jnp.sqrt(jnp.take_along_axis(var, label[..., None], -1))
    x = mu_y + sd_y * z  # (..., Q)
    cdf = normal_cdf(
        (x[..., None, :] - mean[..., :, None]) / jnp.sqrt(var)[..., :, None]
    )  # (..., K, Q)
    others = jnp.arange(mean.shape[-1]) != label[..., None]  # (..., K)
    cdf = jnp.where(others[..., None], cdf, 1.0)
    return jnp.sum(w * jnp.prod(cdf, -2), -1)


# %% book/dgp.md
class RobustMax(nnx.Module):
    """Robust-max likelihood for K classes (eq. dgp-robustmax); y holds class indices, shape (N, 1).

    quadrature_points: Gauss-Hermite nodes in the bound (20, as GPflow: this integral is most of
    the cost of a training step); predict_quadrature_points: in predictions (100, see the text).
    """

    @checks(
        num_classes=Int(2),
        epsilon=Float(0, 1, low_open=True, high_open=True),
        quadrature_points=Int(1),
        predict_quadrature_points=Int(1),
    )
    def __init__(
        self,
        num_classes: int,
        epsilon: float = 1e-3,
        quadrature_points: int = 20,
        predict_quadrature_points: int = 100,
    ):  # the contracts above refuse fewer than 2 classes and an epsilon outside (0, 1)
        self.num_classes = num_classes
        self.epsilon = epsilon
        self.quadrature_points = quadrature_points
        self.predict_quadrature_points = predict_quadrature_points

    def win_probabilities(self, mean, var):
        """P_k of eq. dgp-robustmax for every class k: (..., K) from marginals (..., K)."""

        def wins(k):
            return _win_probability(
                mean, var, jnp.full(mean.shape[:-1] + (1,), k), self.predict_quadrature_points
            )

        return jnp.moveaxis(jax.lax.map(wins, jnp.arange(self.num_classes)), 0, -1)

    def _mix(self, P):
        """p(y | f) averaged over the event that y wins (probability P) or does not."""
        return P * (1.0 - self.epsilon) + (1.0 - P) * self.epsilon / (self.num_classes - 1)

    def variational_expectations(self, mean, var, y):
        """E_q[log p(y | f)] for labels y (..., 1), marginals (..., K) (eq. dgp-robustmax)."""
        P = _win_probability(mean, var, y, self.quadrature_points)
        eps, K = self.epsilon, self.num_classes
        return P * math.log(1.0 - eps) + (1.0 - P) * math.log(eps / (K - 1))

    def predict_mean_and_var(self, mean, var):
        """The class probabilities (..., K) and their Bernoulli variances."""
        p = self._mix(self.win_probabilities(mean, var))
        return p, p * (1.0 - p)

    def predict_log_density(self, mean, var, y):
        """log p(y | marginals of f) of the labelled class, (...,)."""
        return jnp.log(self._mix(_win_probability(mean, var, y, self.predict_quadrature_points)))

    def check_y(self, y, num_points: int, num_outputs: int):
        """y as (num_points, 1) class indices in 0..K-1, or ValueError naming what is wrong."""
        if num_outputs != self.num_classes:
            raise ValueError(
                f"the last layer has {num_outputs} outputs but the likelihood has "
                f"{self.num_classes} classes"
            )
        y = _check_labels(y, "y", num_points, tuple(range(self.num_classes)))
        if y.shape[1] != 1:
            raise ValueError(
                f"y must have shape ({num_points}, 1) (class indices), got {tuple(y.shape)}"
            )
        return y


# %% book/dgp.md
def _check_layers(layers) -> None:
    """A ValueError unless there is a layer and each layer's outputs are the next one's inputs."""
    if not layers:
        raise ValueError("a DeepGP needs at least one layer")
    for l, (a, b) in enumerate(zip(layers[:-1], layers[1:])):
        if a.num_outputs != b.kernel.input_dim:
            raise ValueError(
                f"layer {l} has {a.num_outputs} outputs but layer {l + 1} takes "
                f"{b.kernel.input_dim} inputs"
            )


def _expected_log_likelihood_rows(layers: tuple, likelihood):
    """rows(params, chunk) for `sum_rows`: E[log p(y_i | f_i^L)] for a chunk of rows, summed per
    row, the rows sampled through the layers. params: (the layers' `operators()`, the likelihood's
    state); chunk: (x, y, the noise of eq. dgp-sample for layers 1..L-1); likelihood: its graphdef.
    It reads no parameter of a layer, only `params` (see SVGPLayer.marginals)."""

    def rows(params, chunk):
        ops, state = params
        f, yc, eps = chunk
        for layer, o, e in zip(layers[:-1], ops[:-1], eps):
            mean, var = layer.marginals(o, f)
            f = mean + jnp.sqrt(var) * e
        mean, var = layers[-1].marginals(ops[-1], f)
        expected = nnx.merge(likelihood, state).variational_expectations(mean, var, yc)
        return jnp.sum(expected.reshape(len(f), -1), 1)  # (n, P), or (n,) for robust-max

    return rows


# %% book/dgp.md
class DeepGP(nnx.Module):
    """A deep GP of SVGPLayers with the doubly stochastic bound (Section 5). One layer: the SGP."""

    @checks(num_data=Int(1))
    def __init__(
        self,
        layers: Sequence[SVGPLayer],
        likelihood: Gaussian | Bernoulli | RobustMax,
        num_data: int,
    ):
        _check_layers(layers)
        # nnx.List (flax >= 0.12) makes the layers a pytree child; older flax takes a plain list
        self.layers = nnx.List(layers) if hasattr(nnx, "List") else list(layers)
        self.likelihood = likelihood
        self.num_data = int(num_data)
        self.input_dim = layers[0].kernel.input_dim

    def _check_x(self, x):
        return check_array(x, "x", ndim=2, shape=(None, self.input_dim), dtype="floating")

    def _check_y(self, y, x):
        return self.likelihood.check_y(y, x.shape[0], self.layers[-1].num_outputs)

    @full_precision
    def propagate(self, x, key, num_samples: int = 1):
        """Sample through layers 1..L-1 (eq. dgp-sample); return the last layer's marginals: x (N,
        D) -> (mean, var), each (num_samples, N, P)."""
        x = self._check_x(x)
        S, N = num_samples, x.shape[0]
        f = jnp.broadcast_to(x, (S,) + x.shape).reshape(S * N, -1)
        keys = jax.random.split(key, len(self.layers))
        for layer, k in zip(self.layers[:-1], keys):
            mean, var = layer(f)
            f = mean + jnp.sqrt(var) * jax.random.normal(k, mean.shape, mean.dtype)
        mean, var = self.layers[-1](f)
        return mean.reshape(S, N, -1), var.reshape(S, N, -1)

    def kl(self):
        """KL[q(U) || p(U)] summed over the layers (eq. dgp-elbo)."""
        return sum(layer.kl() for layer in self.layers)

    @full_precision
    def elbo(self, x, y, key, num_samples: int = 1):
        """Unbiased estimate of the bound (eq. dgp-elbo) from a minibatch x (B, D), y (B, P). The
        rows go through all the layers in chunks (`sum_rows`), each chunk's gradient taken as it
        is computed; the samples are those of `propagate` with the same key."""
        y = self._check_y(y, x)
        x = self._check_x(x)
        S, N = num_samples, x.shape[0]

        def rep(a):  # the batch repeated S times, as propagate repeats it
            return jnp.broadcast_to(a, (S,) + a.shape).reshape((S * N,) + a.shape[1:])

        keys = jax.random.split(key, len(self.layers))
        noise = [  # eq. dgp-sample's epsilon for layers 1..L-1, drawn as propagate draws them
            jax.random.normal(k, (S * N, layer.num_outputs), x.dtype)
            for layer, k in zip(self.layers[:-1], keys)
        ]
        layers = tuple(self.layers)
        likelihood, likelihood_state = nnx.split(self.likelihood)
        rows = _expected_log_likelihood_rows(layers, likelihood)
        params = ([layer.operators() for layer in layers], likelihood_state)
        chunk = min(layer.rows_per_chunk(x.dtype) for layer in layers)
        data_term = sum_rows(rows, params, (rep(x), rep(y), noise), chunk) / S
        return self.num_data / N * data_term - self.kl()

    @full_precision
    def predict_y(self, x, key, num_samples: int = 100):
        """Mean and variance of the predictive mixture of y (eq. 18), each (N, P)."""
        mean, var = self.propagate(x, key, num_samples)
        m, v = self.likelihood.predict_mean_and_var(mean, var)
        mix_mean = jnp.mean(m, 0)
        return mix_mean, jnp.mean(v + m**2, 0) - mix_mean**2


# %% book/dgp.md
@add_to_class(DeepGP)
class _DeepGPDensity:
    @full_precision
    def log_density(self, x, y, key, num_samples: int = 100):
        """log (1/S) sum_s p(y | mu_s, var_s) for each test point: the mixture's log density, (N,
        P)."""
        y = self._check_y(y, x)
        mean, var = self.propagate(x, key, num_samples)
        lp = self.likelihood.predict_log_density(mean, var, y[None])
        return jax.scipy.special.logsumexp(lp, axis=0) - math.log(num_samples)


# %% book/dgp.md
@checks(x=Array(ndim=2), num_inducing=Int(1), seed=Int(0))
def kmeans_inducing(x, num_inducing: int, seed: int = 0):
    """Initial inducing inputs: k-means centres of x (N, D) (Section 6); all of x if N <= M."""
    x = np.asarray(x)
    if len(x) <= num_inducing:
        return x.copy()
    centres, _ = kmeans2(x, num_inducing, minit="points", seed=np.random.default_rng(seed))
    return centres


@checks(x=Array(ndim=2), width=Int(1))
def linear_mean_matrix(x, width: int):
    """The fixed mean function W (D, width) of an inner layer (Section 6).

    Identity if width == D; the top `width` principal directions of x if narrower; identity padded
    with zero columns if wider.
    """
    x = np.asarray(x)
    D = x.shape[1]
    if width == D:
        return np.eye(D)
    if width < D:
        _, _, Vt = np.linalg.svd(x, full_matrices=False)
        return Vt[:width].T
    return np.concatenate([np.eye(D), np.zeros((D, width - D))], 1)


# %% book/dgp.md
@checks(
    x=Array(ndim=2),
    y=Array(),
    num_layers=Int(1),
    num_inducing=Int(1),
    inner_width=Maybe(Int(1)),
    whiten=Bool(),
    likelihood_variance=Float(0, low_open=True),
    inner_q_sqrt_scale=Float(0, low_open=True),
    inner_noise=Float(0),
    lengthscale=Float(0, low_open=True),
    kernel_variance=Float(0, low_open=True),
    per_output_kernels=Bool(),
    ard=Bool(),
    seed=Int(0),
)
def build_dgp(
    x,
    y,
    num_layers: int,
    *,
    num_inducing: int = 100,
    inner_width: int | None = None,
    whiten: bool = True,
    likelihood=None,
    likelihood_variance: float = 0.05,
    inner_q_sqrt_scale: float = 1e-5,
    inner_noise: float = 2e-6,
    lengthscale: float = 1.0,
    kernel_variance: float = 1.0,
    per_output_kernels: bool = False,
    ard: bool = True,
    seed: int = 0,
    dtype=None,
) -> DeepGP:
    """A DeepGP of `num_layers` layers for data x (N, D), y (N,) or (N, P), initialised as the
    paper does, except that its layers are whitened by default (see below).

    num_layers = 1 gives the sparse GP baseline (SGP). inner_width: default min(30, D).
    likelihood: default Gaussian(likelihood_variance) (regression: standardise x and y first);
    with RobustMax(K) the last layer has K outputs and y holds class indices 0..K-1.
    whiten: q(v) over whitened inducing values (eq. dgp-whitened), the default, as GPflux's; the
    paper's layers are not whitened (whiten=False, as the paper presets): with the same Adam steps
    the whitened DGPs train faster and end better (Section 9 of the chapter, and its report).
    per_output_kernels: one kernel and one set of inducing inputs per output (GPyTorch's layers)
    instead of one per layer. ard=False: one lengthscale per kernel instead of one per input
    dimension. dtype: the model's, float32 or float64; default x's dtype, or float32 when JAX is
    in 32-bit mode (the default; float64 needs jax.config.update("jax_enable_x64", True)).
    """
    x = check_array(np.asarray(x), "x", ndim=2, dtype="floating")
    y = np.asarray(y)
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same number of rows, got {len(x)} and {len(y)}")
    y = y.reshape(len(y), 1) if y.ndim == 1 else y
    dtype = _model_dtype(x.dtype, dtype)  # (the contract above refuses num_layers < 1)
    N, D = x.shape
    likelihood = Gaussian(likelihood_variance, dtype) if likelihood is None else likelihood
    num_outputs = getattr(likelihood, "num_classes", None) or (y.shape[1] if y.ndim == 2 else 1)
    likelihood.check_y(y, N, num_outputs)
    width = inner_width or min(30, D)
    Z = kmeans_inducing(x, num_inducing, seed).astype(dtype)
    layers, x_run, z_run, d_in = [], x, Z, D
    for _ in range(num_layers - 1):
        W = linear_mean_matrix(x_run, width).astype(dtype)
        batch = width if per_output_kernels else None
        kern = RBF(d_in, lengthscale, kernel_variance, dtype, batch=batch, ard=ard)
        inner = dict(q_sqrt_scale=inner_q_sqrt_scale, noise_variance=inner_noise)
        layers.append(SVGPLayer(kern, z_run, width, W, whiten=whiten, **inner))
        x_run, z_run, d_in = x_run @ W, z_run @ W, width
    batch = num_outputs if per_output_kernels else None
    kern = RBF(d_in, lengthscale, kernel_variance, dtype, batch=batch, ard=ard)
    layers.append(SVGPLayer(kern, z_run, num_outputs, None, whiten=whiten))
    return DeepGP(layers, likelihood, num_data=N)


# %% book/dgp.md
def _model_dtype(data_dtype, dtype):
    """The dtype of a model built for data of `data_dtype`, asked for as `dtype` (None: the
    data's, float32 in JAX's 32-bit mode)."""
    x64 = jax.config.jax_enable_x64
    if dtype is None:
        return np.dtype(data_dtype if x64 else np.float32)
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    if np.dtype(dtype) == np.float64 and not x64:
        raise ValueError(
            "dtype is float64 but JAX is in 32-bit mode: call "
            "jax.config.update('jax_enable_x64', True) first, or build a float32 model"
        )
    return np.dtype(dtype)


# %% book/dgp.md
class Standardizer(NamedTuple):
    """Per-column mean and standard deviation of the training inputs and outputs (Section 7)."""

    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray

    @classmethod
    def fit(cls, x, y):
        """The columns' means and standard deviations of x (N, D) and y (N,) or (N, P)."""
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64).reshape(len(y), -1)
        x_std = x.std(0)
        return cls(x.mean(0), np.where(x_std > 0, x_std, 1.0), y.mean(0), y.std(0))

    def x(self, x):
        """x standardised with the training inputs' statistics (float64)."""
        return (np.asarray(x, np.float64) - self.x_mean) / self.x_std

    def y(self, y):
        """y standardised with the training outputs' statistics, as (N, P) (float64)."""
        return (np.asarray(y, np.float64).reshape(len(y), -1) - self.y_mean) / self.y_std


@functools.cache
def _compiles_with(options: tuple) -> bool:
    try:
        jax.block_until_ready(
            jax.jit(lambda a: a + 1, compiler_options=dict(options))(jnp.zeros(2))
        )
        return True
    except Exception:  # an option this jax does not know
        return False


def step_compiler_options(dtype) -> dict | None:
    """XLA options for compiling a deep-GP step in `dtype` (Section 10, Appendix C).

    On the CPU: XLA's YNNPACK fusions off (`xla_cpu_experimental_ynn_fusion_type=""`), chosen
    for float32 when they were slower there, and for float64 since the bound sums its rows chunk
    by chunk (`sum_rows`): the chunked steps at batch 10,000 are faster without them. Appendix
    C, Section 7 times the steps both ways. None elsewhere, or where this jax does not know the
    option. dtype is kept for a choice per precision.
    """
    if jax.default_backend() != "cpu":
        return None
    options = (("xla_cpu_experimental_ynn_fusion_type", ""),)
    return dict(options) if _compiles_with(options) else None


# %% book/dgp.md
@full_precision
@checks(
    model=Instance(DeepGP),
    x=Array(ndim=2),
    y=Array(),
    steps=Int(1),
    batch_size=Maybe(Int(1)),
    learning_rate=Float(0, low_open=True),
    num_samples=Int(1),
    seed=Seed(),
    log_every=Int(1),
    progress=Bool(),
    checkpoint_every=Int(1),
    stream=Bool(),
)
def train_dgp(
    model: DeepGP,
    x,
    y,
    *,
    steps: int,
    batch_size: int | None = 10_000,
    learning_rate: float = 0.01,
    num_samples: int = 1,
    seed=0,
    log_every: int = 100,
    progress: bool = True,
    checkpoint_dir=None,
    checkpoint_every: int = 1000,
    stream: bool = False,
    mesh="auto",
) -> Trained:
    """Maximise the bound with Adam (Section 7); returns Trained(model, history): the trained model
    (a new one; `model` is left as it was) and the loss of every step (history["loss"]).
    x (N, D), y (N,) or (N, P): standardised training data, cast to the model's dtype. batch_size:
    minibatch size, None or >= N for full batch. The loss is -ELBO / N. seed: an integer or a JAX
    key (Appendix B). checkpoint_dir: checkpoint every `checkpoint_every` steps
    there, and resume from the latest checkpoint found there. stream: x and y stay in host memory
    (or on disk as np.memmap, for data larger than memory) and each minibatch is read from them.
    mesh: the devices to train on (see lib.toolkit.fit; "auto": all of them).
    """
    dtype = model.layers[0].Z[...].dtype
    x, y = (a if hasattr(a, "shape") else np.asarray(a) for a in (x, y))
    y = y.reshape(len(y), 1) if y.ndim == 1 else y
    if not stream:  # (streamed data are checked batch by batch, inside the step)
        model._check_y(np.asarray(y), x)  # (x's rows only: it stays where it is)
        x, y = jnp.asarray(x, dtype), jnp.asarray(y, dtype if y.dtype.kind == "f" else None)
    N, key, tx = x.shape[0], seed_key(seed), optax.adam(learning_rate)
    graphdef, state = nnx_train_state(model, tx)

    def loss_fn(m, batch, k):
        xb, yb = batch
        xb, yb = xb.astype(dtype), yb.astype(dtype) if yb.dtype.kind == "f" else yb
        return -m.elbo(xb, yb, k, num_samples) / N, {}

    if batch_size is None or batch_size >= N:
        data = lambda t: (x, y)  # noqa: E731
    else:
        data = minibatches((x, y), batch_size, key=jax.random.fold_in(key, 1), stream=stream)
    hint = (
        "a Cholesky factorisation probably failed: standardise the data, or raise the layer's "
        "jitter or lower the learning rate"
    )
    result = fit(
        nnx_step(graphdef, tx, loss_fn),
        state,
        data,
        steps,
        key=key,
        log_every=log_every,
        progress=progress,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        desc=f"DGP {len(model.layers)}",
        hint=hint,
        mesh=mesh,
        compiler_options=step_compiler_options(dtype),
    )
    return Trained(nnx_model(graphdef, result.state), History(result.history))


# %% book/dgp.md
@full_precision
@checks(
    model=Instance(DeepGP),
    std=Instance(Standardizer),
    x_test=Array(ndim=2),
    y_test=Array(),
    num_samples=Int(1),
    seed=Int(0),
    batch_size=Int(1),
)
def evaluate_dgp(
    model: DeepGP,
    std: Standardizer,
    x_test,
    y_test,
    *,
    num_samples: int = 100,
    seed: int = 1,
    batch_size: int = 1000,
) -> dict:
    """Test log-likelihood (mean per point) and RMSE in the original units of y (Section 7).

    x_test (N, D), y_test (N,) or (N, P), raw (not standardised).
    """
    D = np.shape(std.x_mean)[-1] if np.ndim(std.x_mean) else None
    if D is not None and np.shape(x_test)[1] != D:
        raise ValueError(
            f"x_test must have {D} columns (the training inputs'), got shape {np.shape(x_test)}"
        )
    if np.shape(y_test)[0] != np.shape(x_test)[0]:
        raise ValueError(
            f"y_test must have a row per row of x_test ({np.shape(x_test)[0]}), got shape "
            f"{np.shape(y_test)}"
        )
    xs, ys = std.x(x_test), std.y(y_test)
    key = jax.random.key(seed)
    log_dens, means = [], []
    for start in range(0, len(xs), batch_size):
        xb = jnp.asarray(xs[start : start + batch_size])
        yb = jnp.asarray(ys[start : start + batch_size])
        k = jax.random.fold_in(key, start)
        log_dens.append(np.asarray(model.log_density(xb, yb, k, num_samples)))
        means.append(np.asarray(model.predict_y(xb, k, num_samples)[0]))
    log_dens = np.concatenate(log_dens) - np.log(std.y_std)
    means = np.concatenate(means)
    rmse = np.sqrt(np.mean(((means - ys) * std.y_std) ** 2))
    return {"test_log_likelihood": float(np.mean(log_dens)), "rmse": float(rmse)}


# %% book/dgp.md
from lib.data import UCI_DATASETS

UCI_MODELS = {
    "SGP": (1, 100),
    "SGP 500": (1, 500),
    "DGP 2": (2, 100),
    "DGP 3": (3, 100),
    "DGP 4": (4, 100),
    "DGP 5": (5, 100),
}


# %% book/dgp.md
@checks(
    name=OneOf(*UCI_DATASETS),
    model=OneOf(*UCI_MODELS),
    split=Int(0),
    steps=Int(1),
    batch_size=Int(1),
    learning_rate=Float(0, low_open=True),
    test_samples=Int(1),
    whiten=Bool(),
    ard=Bool(),
    seed=Int(0),
    progress=Bool(),
)
def run_uci_model(
    name: str,
    model: str,
    split: int,
    *,
    steps: int,
    batch_size: int = 10_000,
    learning_rate: float = 0.01,
    test_samples: int = 100,
    whiten: bool = False,
    ard: bool = True,
    seed: int = 0,
    progress: bool = True,
    data_dir=None,
    checkpoint_dir=None,
) -> dict:
    """Train and evaluate one model of UCI_MODELS on one split of a UCI set (Section 9); return a
    row.

    checkpoint_dir: where training checkpoints and resumes (see train_dgp); the row's train_seconds
    is then the time of this call's part of the training."""
    if model not in UCI_MODELS:
        raise ValueError(f"model must be one of {list(UCI_MODELS)}, got {model!r}")
    jax.config.update("jax_enable_x64", True)  # the experiments run in float64, as the paper's
    layers, inducing = UCI_MODELS[model]
    s = load_uci(name, split, data_dir)
    std = Standardizer.fit(s.x_train, s.y_train)
    x, y = std.x(s.x_train), std.y(s.y_train)
    dgp = build_dgp(x, y, layers, num_inducing=inducing, whiten=whiten, ard=ard, seed=seed + split)
    began = time.perf_counter()
    dgp, hist = train_dgp(
        dgp,
        x,
        y,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed + split,
        progress=progress,
        checkpoint_dir=checkpoint_dir,
    )
    seconds = time.perf_counter() - began
    row = {
        "dataset": name,
        "split": split,
        "model": model,
        "steps": steps,
        "whiten": whiten,
        "ard": ard,
        "train_seconds": round(seconds, 2),
        "final_loss": float(np.mean(hist["loss"][-100:])),
    }
    row.update(
        evaluate_dgp(dgp, std, s.x_test, s.y_test, num_samples=test_samples, seed=seed + split)
    )
    return row


# %% book/dgp.md
@checks(model=Instance(DeepGP), x=Array(ndim=2), y=Array(), num_samples=Int(1))
def gradient_step(
    model: DeepGP, x, y, *, num_samples: int = 1, compiler_options: dict | None | str = "default"
):
    """One Adam step on the bound of the batch x, y, compiled as `train_dgp` compiles it (a
    `FlatStep`; compiler_options "default": `step_compiler_options` of x's dtype, else the XLA
    options given, None for none): (step, leaves, batch, key) with
    step(leaves, batch, key) -> (leaves, metrics) (Section 10)."""
    tx = optax.adam(0.01)
    graphdef, state = nnx_train_state(model, tx)
    step = FlatStep(
        nnx_step(graphdef, tx, lambda m, b, k: (-m.elbo(b[0], b[1], k, num_samples), {})),
        state,
        compiler_options=step_compiler_options(jnp.asarray(x).dtype)
        if compiler_options == "default"
        else compiler_options,
    )
    return step, step.flatten(state), (jnp.asarray(x), jnp.asarray(y)), jax.random.key(0)


@checks(model=Instance(DeepGP), x=Array(ndim=2), y=Array(), repeats=Int(1), num_samples=Int(1))
def time_gradient_step(model: DeepGP, x, y, *, repeats: int = 20, num_samples: int = 1) -> float:
    """Median seconds of one jitted gradient step of the bound on the batch x, y (Section 10),
    called as `fit` calls it in `train_dgp` (`FlatStep.at`: the key derived inside the step)."""
    step, state, batch, key = gradient_step(model, x, y, num_samples=num_samples)
    state, _ = step.at(state, batch, key, 0)
    jax.block_until_ready(state)
    times = []
    for i in range(1, repeats + 1):
        began = time.perf_counter()
        state, metrics = step.at(state, batch, key, i)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - began)
    return float(np.median(times))


@checks(model=Instance(DeepGP), x=Array(ndim=2), y=Array(), num_samples=Int(1))
def gradient_step_flops(model: DeepGP, x, y, *, num_samples: int = 1) -> float:
    """Floating-point operations of that step, as XLA's cost analysis of the compiled step counts
    them.

    Counted on the step with the whole batch in one chunk (XLA counts the body of a loop over
    chunks once): the work of the algorithm, not of our memory-saving schedule. Library calls
    such as the M x M Cholesky factorisations are not counted: O(M^3), against the O(|B| M^2) of
    the products.
    """
    chunks = [layer.chunk_size for layer in model.layers]
    try:
        for layer in model.layers:
            layer.chunk_size = x.shape[0]
        step, state, batch, key = gradient_step(model, x, y, num_samples=num_samples)
        cost = step.jitted.lower(state, batch, key).compile().cost_analysis()
    finally:
        for layer, rows in zip(model.layers, chunks):
            layer.chunk_size = rows
    return float((cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"])


# %% book/dgp.md
@checks(
    model=Instance(DeepGP), x_test=Array(ndim=2), num_samples=Int(1), seed=Int(0), batch_size=Int(1)
)
def evaluate_classifier(
    model: DeepGP, x_test, y_test, *, num_samples: int = 100, seed: int = 1, batch_size: int = 100
) -> dict:
    """Test accuracy and mean test log-likelihood of a classifier DeepGP (RobustMax or Bernoulli).

    x_test (N, D); y_test (N, 1) class indices (RobustMax) or (N, P) 0/1 labels (Bernoulli).
    """
    key = jax.random.key(seed)
    correct, logp = [], []
    predict = jax.jit(lambda xb, k: model.predict_y(xb, k, num_samples)[0])
    for start in range(0, len(x_test), batch_size):
        xb = jnp.asarray(x_test[start : start + batch_size])
        yb = np.asarray(y_test[start : start + batch_size])
        probs = np.asarray(predict(xb, jax.random.fold_in(key, start)))
        if isinstance(model.likelihood, RobustMax):
            label = yb[:, 0].astype(int)
            correct.append(np.argmax(probs, 1) == label)
            logp.append(np.log(probs[np.arange(len(label)), label]))
        else:
            correct.append(((probs > 0.5) == (yb > 0.5)).ravel())
            logp.append(np.log(np.where(yb > 0.5, probs, 1.0 - probs)).ravel())
    return {
        "test_accuracy": float(np.mean(np.concatenate(correct))),
        "test_log_likelihood": float(np.mean(np.concatenate(logp))),
    }


@checks(split=OneOf("train", "test"))
def mnist_flat(split: str, data_dir=None):
    """MNIST as (N, 784) pixels in [0, 1] (float64) and (N, 1) labels."""
    images, labels = load_mnist(split, data_dir)
    return images.reshape(len(images), -1) / 255.0, labels.reshape(-1, 1).astype(np.int32)


# %% book/dgp.md
__all__ = [
    "DeepGP",
    "SVGPLayer",
    "RBF",
    "rbf",
    "Gaussian",
    "Bernoulli",
    "RobustMax",
    "build_dgp",
    "train_dgp",
    "gradient_step",
    "evaluate_dgp",
    "evaluate_classifier",
    "Standardizer",
    "kmeans_inducing",
    "conditional_marginals",
    "gauss_kl",
    "CholeskyError",
    "UCI_MODELS",
    "run_uci_model",
    "mnist_flat",
    "time_gradient_step",
    "gradient_step_flops",
    "safe_cholesky",
    "cholesky_factors",
    "Constant",
    "default_chunk_rows",
    "gauss_hermite",
    "linear_mean_matrix",
    "map_rows",
    "sum_rows",
    "marginal_operators",
    "marginals_from_operators",
    "normal_cdf",
    "quadratic_forms",
    "softplus_inverse",
    "step_compiler_options",
]
constructor_signatures(globals())  # help() and inspect.signature show __init__'s parameters
