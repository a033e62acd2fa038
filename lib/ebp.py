# GENERATED FILE: do not edit. Source: book/ebp.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""Expectation Backpropagation (Soudry et al. 2014), derived in book/ebp.md.

Mean-field networks of binary or real weights with sign units: the forward pass of means and
variances, the EBP update, the EBP-P and EBP-D predictors, sparse inputs, the backpropagation
baselines (backpropagation and AROW) and the folds of the text benchmark. The paper-scale
experiments and the claims are lib.ebp_report.
"""

# %% book/ebp.md
from __future__ import annotations

import dataclasses
import math
import warnings
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from lib.toolkit import Array, Float, Function, Instance, Int, Key, Maybe, NonFiniteError, OneOf
from lib.toolkit import constructor_signatures
from lib.toolkit import Bool, Progress, checks
from lib.toolkit import check_array, restore_checkpoint, save_checkpoint
from lib.toolkit import History, Seed, Trained, renamed, seed_key


# %% book/ebp.md
@jax.tree_util.register_pytree_node_class
class SparseRows:
    """n rows of a sparse matrix, flattened: row `row[k]` has value `val[k]` in column `idx[k]`
    (padding: val 0).

    Layer-one products gather the rows of W (in, out) that occur and sum them per row of the batch,
    so a 230,000-feature input is never densified. `n` (the number of rows) is static; stacked
    batches scan like arrays."""

    def __init__(self, idx, val, row, n: int):
        self.idx, self.val, self.row, self.n = idx, val, row, n

    def tree_flatten(self):
        """The pytree's leaves (idx, val, row) and its static part (n)."""
        return (self.idx, self.val, self.row), self.n

    @classmethod
    def tree_unflatten(cls, n, leaves):
        """The inverse of tree_flatten."""
        return cls(*leaves, n)


def _padded_rows(x, batches: np.ndarray, width: int) -> dict:
    """idx, val, row (numpy, (len(batches), width)) of the CSR matrix x's rows batches[k] for each
    k: the rows one after the other, each row's nonzeros in their stored order, gathered with one
    index array (no per-row or per-batch loop); zeros pad each batch to `width`."""
    lengths = np.diff(x.indptr)[batches]  # (batches, batch_size) nonzeros of each row
    per_batch = lengths.sum(1)
    lengths, starts = lengths.reshape(-1), x.indptr[batches.reshape(-1)]
    entry = np.arange(int(lengths.sum()))
    first = np.cumsum(lengths) - lengths  # where each row's nonzeros start in `entry`
    source = entry + np.repeat(starts - first, lengths)  # their positions in x.indices, x.data
    slot = entry - np.repeat(np.cumsum(per_batch) - per_batch, per_batch)
    which = np.repeat(np.arange(len(batches)), per_batch)
    row_in_batch = np.repeat(np.tile(np.arange(batches.shape[1]), len(batches)), lengths)
    out = {
        name: np.zeros((len(batches), width), dtype)
        for name, dtype in (("idx", np.int32), ("val", np.float32), ("row", np.int32))
    }
    out["idx"][which, slot] = x.indices[source]
    out["val"][which, slot] = x.data[source]
    out["row"][which, slot] = row_in_batch
    return out


def sparse_rows(x, rows=None, width: int | None = None) -> SparseRows:
    """The rows `rows` (default all) of a scipy.sparse matrix as SparseRows, padded to `width`
    nonzeros."""
    import scipy.sparse as sp

    if not sp.issparse(x):
        raise TypeError(
            f"x must be a scipy.sparse matrix (dense inputs need no SparseRows), got "
            f"{type(x).__name__}"
        )
    x = sp.csr_array(x)
    rows = np.arange(x.shape[0]) if rows is None else np.asarray(rows)
    nnz = int(np.diff(x.indptr)[rows].sum())
    width = nnz if width is None else width
    if nnz > width:
        raise ValueError(f"{nnz} nonzeros do not fit in width {width}")
    out = _padded_rows(x, rows[None], width)
    return SparseRows(*(jnp.asarray(out[name][0]) for name in ("idx", "val", "row")), len(rows))


@checks(order=Array(ndim=1, dtype="integer"), batch_size=Int(1))
def sparse_batches(x, order, batch_size: int) -> SparseRows:
    """Consecutive batches of `order`'s rows, stacked (leading axis: batch), padded to the largest
    batch."""
    batches = np.asarray(order)[: (len(order) // batch_size) * batch_size].reshape(-1, batch_size)
    width = int(np.diff(x.indptr)[batches].sum(1).max())
    out = _padded_rows(x, batches, width)
    return SparseRows(*(jnp.asarray(out[name]) for name in ("idx", "val", "row")), batch_size)


# %% book/ebp.md
def check_inputs(x, name: str = "x"):
    """Dense inputs -> a float32 jax array; scipy.sparse -> CSR (float64 values kept on the
    host)."""
    import scipy.sparse as sp

    if sp.issparse(x):
        x = sp.csr_array(x)
        if not np.isfinite(x.data).all():
            raise ValueError(f"{name} must be finite")
        return x
    return jnp.asarray(check_array(x, name, ndim=2), jnp.float32)


def _matvec(w, x, power: int = 1, f=None):
    """(B, out) = sum_j x_j^power f(w)[j, :] for each row x of the batch (dense, or SparseRows);
    w is (in, out).

    f: an elementwise function of the weights (default: none), applied, for SparseRows, to the
    rows that occur only: f of all 230,000 rows at every minibatch would cost more than the rest
    of the update."""
    if isinstance(x, SparseRows):
        w = w[x.idx]
        w = w if f is None else f(w)
        return jax.ops.segment_sum(w * (x.val**power)[:, None], x.row, num_segments=x.n)
    return (x**power) @ (w if f is None else f(w))


def _sum_sq(x):
    """(B, 1): sum_j x_j^2 for each row x of the batch (dense, or SparseRows)."""
    if isinstance(x, SparseRows):
        return jax.ops.segment_sum(x.val**2, x.row, num_segments=x.n)[:, None]
    return jnp.sum(x**2, 1, keepdims=True)


def _outer_add(w, g, x):
    """w + sum_b x[b] g[b]^T, w (in, out): a rank-B update of contiguous rows."""
    if isinstance(x, SparseRows):
        return w.at[x.idx].add(x.val[:, None] * g[x.row])
    return w + x.T @ g


# %% book/ebp.md
KINDS = ("binary", "real")


@partial(jax.tree_util.register_dataclass, data_fields=["fields", "biases"], meta_fields=["kind"])
@dataclasses.dataclass(frozen=True)
class EBPNet:
    """Mean-field posterior of a sign network. fields[l] (in, out), a Flax Dense kernel's layout
    (layer l's pre-activation is v @ W + b): for binary weights the field h
    with P(W = +1) = sigmoid(2h), mean tanh(h); for real weights the posterior mean (variance fixed
    at 1). biases[l] (out,): real biases, point estimates updated like weights with input 1.
    kind: "binary" or "real", the weights' kind, which every function of the network reads from
    here (None: a network built without it, whose kind each call must give)."""

    fields: tuple
    biases: tuple
    kind: str | None = None


@checks(key=Key(), kind=Maybe(OneOf(*KINDS)), sigma_w=Float(0, low_open=True))
def init_ebp(key, sizes: Sequence[int], *, kind: str | None = None, sigma_w: float = 1.0) -> EBPNet:
    """A network of layer widths `sizes` (inputs first) with `kind` weights, "binary" or "real":
    fields ~ U(-1/2, 1/2) sqrt(12 sigma_w / K), variance sigma_w / K (the authors' code); biases 0.
    Without `kind` (deprecated) the network does not know its kind and each call must name it."""
    if kind is None:
        warnings.warn(
            "init_ebp without kind= is deprecated: build the network with kind='binary' or "
            "kind='real', and its functions read the kind from it",
            DeprecationWarning,
            stacklevel=2,
        )
    for n in sizes:
        Int(1).check(n, "sizes")
    if len(sizes) < 2:
        raise ValueError(
            f"sizes must list at least an input and an output width, all >= 1, got {sizes}"
        )
    keys = jax.random.split(key, len(sizes) - 1)
    fields = tuple(  # drawn (out, in) as always, so the same key gives the same network
        ((jax.random.uniform(k, (o, i)) - 0.5) * math.sqrt(12 * sigma_w / i)).T
        for k, i, o in zip(keys, sizes[:-1], sizes[1:])
    )
    return EBPNet(fields, tuple(jnp.zeros(o) for o in sizes[1:]), kind)


# %% book/ebp.md
def net_kind(net: EBPNet, kind: str | None = None) -> str:
    """The kind of `net`'s weights: the one it was built with; `kind`, if given, must agree (a
    network built without a kind takes it from the call)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if net.kind is None:
        if kind is None:
            raise ValueError(
                "the network was built without a kind: build it with init_ebp(..., kind='binary' "
                "or 'real'), or pass kind="
            )
        return kind
    if kind is not None and kind != net.kind:
        raise ValueError(
            f"kind={kind!r} contradicts the network, whose weights are {net.kind} "
            f"(init_ebp(..., kind={net.kind!r})); leave kind out"
        )
    return net.kind


# %% book/ebp.md
@checks(kind=OneOf(*KINDS))
def weight_mean(h, kind: str):
    """<W>, the mean of a weight under its factor with parameter h: tanh h (binary), h (real)."""
    return jnp.tanh(h) if kind == "binary" else h


@checks(net=Instance(EBPNet), kind=Maybe(OneOf(*KINDS)), extra_var=Float(0))
def ebp_forward(net: EBPNet, x, kind: str | None = None, *, extra_var: float = 1.0):
    """Eq. 4.1-4.2: mean and variance of every layer's normalised input u = (W v + b) / sqrt(K + 1),
    and the mean <v> of its sign, under the factorised posterior and the large fan-in Gaussian
    approximation.

    Returns (inputs, mus, variances, <v_L>): inputs[l] is <v_{l-1}> (x for l = 0), each (B, width).
    extra_var: a constant added to every layer's summed variance (1 in the authors' code).
    """
    kind = net_kind(net, kind)
    width = net.fields[0].shape[0]
    if not isinstance(x, SparseRows) and (jnp.ndim(x) != 2 or jnp.shape(x)[1] != width):
        raise ValueError(
            f"x must have shape (batch, {width}) (the network's input width), got "
            f"{tuple(jnp.shape(x))}"
        )

    def mean(h):
        return weight_mean(h, kind)

    def second(h):  # E[W^2]
        return 1.0 if kind == "binary" else h**2 + 1.0

    inputs, mus, variances = [], [], []
    m = x
    for l, (h, b) in enumerate(zip(net.fields, net.biases)):
        k1 = h.shape[0] + 1.0
        if l == 0:  # deterministic real input x (of a sparse x, the weights of its nonzeros only)
            mu = (_matvec(h, m, f=mean) + b) / math.sqrt(k1)
            # sum_r Var(W) x_r^2, Var(W) = E[W^2] - <W>^2: 1 for every real weight (no product
            # needed), 1 - tanh(h)^2 for a binary one
            spread = _sum_sq(m)
            if kind == "binary":
                spread = spread - _matvec(h, m, 2, lambda h: mean(h) ** 2)
            var = jnp.broadcast_to((spread + extra_var) / k1, mu.shape)
        else:  # v in {-1, 1}: E[v^2] = 1
            wm = mean(h)
            mu = (m @ wm + b) / math.sqrt(k1)
            total = jnp.sum(second(h) * jnp.ones_like(h), 0)  # sum_r E[W^2] E[v^2]
            var = (total - (m**2) @ (wm**2) + extra_var) / k1
        inputs.append(m)
        mus.append(mu)
        variances.append(var)
        m = jax.scipy.special.erf(mu / jnp.sqrt(2 * var))  # <v> = 2 Phi(mu / sigma) - 1
    return inputs, mus, variances, m


# %% book/ebp.md
@checks(z=Array())
def mills_ratio(z):
    """phi(z) / Phi(z), finite for every float32 z (through log_ndtr); ~ -z as z -> -inf, -> 0 as z
    -> inf."""
    return jnp.exp(-0.5 * z**2 - 0.5 * math.log(2 * math.pi) - log_ndtr(z))


@checks(mu=Array(), var=Array(), y=Array())
def output_delta(mu, var, y):
    """Eq. 4.3: Delta_L = d ln P(v_L = y) / d mu_L = y phi(z) / (sigma Phi(z)), z = y mu / sigma."""
    sigma = jnp.sqrt(var)
    return y * mills_ratio(y * mu / sigma) / sigma


@checks(mu=Array(), var=Array(), y=Array())
def asymptotic_output_delta(mu, var, y):
    """Footnote 4's limit of output_delta for |mu / sigma| -> inf: -mu / sigma^2 when y mu < 0, else
    0."""
    return jnp.where(y * mu < 0, -mu / var, 0.0)


@checks(net=Instance(EBPNet), kind=Maybe(OneOf(*KINDS)), extra_var=Float(0))
def ebp_update(net: EBPNet, x, y, kind: str | None = None, *, extra_var: float = 1.0) -> EBPNet:
    """One Bayes-like update (eqs. 4.3-4.5) from a minibatch: x (B, M) or SparseRows, y (B, n_out)
    in {-1, 1}."""
    kind = net_kind(net, kind)
    inputs, mus, variances, _ = ebp_forward(net, x, kind, extra_var=extra_var)
    deltas = [output_delta(mus[-1], variances[-1], y)]
    for l in range(len(net.fields) - 1, 0, -1):  # eq. 4.4
        k1 = net.fields[l].shape[0] + 1.0
        sigma = jnp.sqrt(variances[l - 1])
        density = jnp.exp(-0.5 * (mus[l - 1] / sigma) ** 2) / (
            math.sqrt(2 * math.pi) * sigma
        )  # N(0 | mu, s^2)
        deltas.insert(
            0, 2 / math.sqrt(k1) * density * (deltas[0] @ weight_mean(net.fields[l], kind).T)
        )
    fields, biases = [], []
    for l, (h, b) in enumerate(zip(net.fields, net.biases)):  # eq. 4.5
        step = deltas[l] / math.sqrt(h.shape[0] + 1.0)
        fields.append(_outer_add(h, step, inputs[l]) if l == 0 else h + inputs[l].T @ step)
        biases.append(b + jnp.sum(step, 0))
    return EBPNet(tuple(fields), tuple(biases), net.kind)


# %% book/ebp.md
@checks(net=Instance(EBPNet), kind=Maybe(OneOf(*KINDS)), extra_var=Float(0))
def ebp_p(net: EBPNet, x, kind: str | None = None, *, extra_var: float = 1.0):
    """EBP-P (eq. 4.7): the Bayes output; for one output unit, sign(<v_L>). Returns <v_L>."""
    return ebp_forward(net, x, kind, extra_var=extra_var)[3]


def sign_network(weights, biases, x):
    """A deterministic sign network: hidden v = sign(W v + b); returns the output layer's W v +
    b."""
    v = x
    for l, (w, b) in enumerate(zip(weights, biases)):
        a = (_matvec(w, v) if l == 0 else v @ w) + b
        v = jnp.sign(a) if l < len(weights) - 1 else a
    return v


@checks(net=Instance(EBPNet), kind=Maybe(OneOf(*KINDS)))
def ebp_d(net: EBPNet, x, kind: str | None = None):
    """EBP-D (eq. 4.6): the network of the most probable weights, sign(h) (binary) or the mean
    (real)."""
    kind = net_kind(net, kind)
    return sign_network([jnp.sign(h) if kind == "binary" else h for h in net.fields], net.biases, x)


@checks(net=Instance(EBPNet), kind=Maybe(OneOf(*KINDS)), key=Maybe(Key()), n_networks=Int(1))
def ebp_ensemble(net: EBPNet, x, kind: str | None = None, key=None, n_networks: int = 16):
    """Mean output sign of n_networks sign networks with weights drawn from the factorised
    posterior."""
    kind = net_kind(net, kind)
    if key is None:
        raise TypeError("ebp_ensemble() needs key=, a JAX key")

    def one(k):
        ks = jax.random.split(k, len(net.fields))
        if kind == "binary":
            ws = [
                jnp.where(jax.random.uniform(kk, h.shape) < jax.nn.sigmoid(2 * h), 1.0, -1.0)
                for kk, h in zip(ks, net.fields)
            ]
        else:
            ws = [h + jax.random.normal(kk, h.shape) for kk, h in zip(ks, net.fields)]
        return jnp.sign(sign_network(ws, net.biases, x))

    return jnp.mean(jax.lax.map(one, jax.random.split(key, n_networks)), 0)


# %% book/ebp.md
@checks(output=Array(), y=Array())
def error_rate(output, y) -> float:
    """Share of rows classified wrongly. Labels with one +1 per row over several outputs (classes
    coded one against the rest, `one_vs_rest`): the largest output is not that class. Otherwise:
    some output's sign differs from y (a zero output counts as an error).

    output (n,) or (n, n_out); y the same shape, or (n,) with one output (as `load_ebp` gives
    labels).
    """
    output, y = jnp.asarray(output), jnp.asarray(y)
    if output.ndim == 1:
        output = output[:, None]
    if y.ndim == 1 and output.shape[-1] == 1:
        y = y[:, None]
    if y.shape != output.shape:
        raise ValueError(
            f"y must have the shape of the outputs {tuple(output.shape)} (or "
            f"({output.shape[0]},) with one output), got {tuple(y.shape)}"
        )
    if not bool(jnp.all((y == 1) | (y == -1))):
        raise ValueError("y must hold labels -1 and +1 (one_vs_rest codes class labels)")
    if y.shape[-1] > 1 and bool(jnp.all(jnp.sum(y > 0, -1) == 1)):
        return float(jnp.mean(jnp.argmax(output, -1) != jnp.argmax(y, -1)))
    return float(jnp.mean(jnp.any(jnp.sign(output) != y, -1)))


@checks(labels=Array(ndim=1, dtype="integer"), n_classes=Int(2))
def one_vs_rest(labels, n_classes: int) -> np.ndarray:
    """Class labels 0..n_classes-1 as (n, n_classes) targets: +1 for the class, -1 for the
    others."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"labels must be a vector of integers in 0..{n_classes - 1}")
    return np.where(labels[:, None] == np.arange(n_classes), 1.0, -1.0).astype(np.float32)


@checks(net=Instance(EBPNet), method=OneOf("EBP-P", "EBP-D"), extra_var=Float(0))
def predict_labels(net: EBPNet, x, *, method: str = "EBP-P", extra_var: float = 1.0) -> np.ndarray:
    """The labels `net` gives the rows of x, by EBP-P (the Bayes output, eq. 4.7) or EBP-D (the most
    probable weights, eq. 4.6): with one output, -1 or +1 (n,) (a zero output reads as +1); with
    several, the class 0..n_out-1 of the largest output (classes coded by `one_vs_rest`)."""
    x = _as_device(check_inputs(x))
    out = ebp_p(net, x, extra_var=extra_var) if method == "EBP-P" else ebp_d(net, x)
    out = np.asarray(out)
    if out.shape[-1] == 1:
        return np.where(out[:, 0] >= 0, 1, -1)
    return np.argmax(out, -1)


# %% book/ebp.md
def check_labels(y, n: int | None = None, name: str = "y"):
    """Labels of +-1, shape (n,) or (n, n_out), as a float32 (n, n_out) array; `n`: the number of
    input rows they must match."""
    y = np.asarray(y)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise ValueError(f"{name} (the labels) must have shape (n,) or (n, n_out), got {y.shape}")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"{name} (the labels) has {y.shape[0]} rows but the inputs have {n}")
    if not np.isin(y, (-1, 1)).all():
        raise ValueError(f"{name} (the labels) must be -1 or +1, got values {np.unique(y)[:5]}")
    return jnp.asarray(y, jnp.float32)


def _apply_update(spec: tuple, net: EBPNet, x, y) -> EBPNet:
    """spec = ("ebp", kind, extra_var) or ("bp", learning rate, loss): one minibatch update."""
    if spec[0] == "ebp":
        return ebp_update(net, x, y, spec[1], extra_var=spec[2])
    return bp_update(net, x, y, spec[1], spec[2])


@partial(jax.jit, static_argnames=("spec",))
def _scan_batches(net, batches_x, batches_y, spec):
    return jax.lax.scan(
        lambda n, b: (_apply_update(spec, n, b[0], b[1]), None), net, (batches_x, batches_y)
    )[0]


@partial(jax.jit, static_argnames=("spec", "batch_size"))
def _scan_dense(net, x, y, order, spec, batch_size):
    batches = order[: (order.shape[0] // batch_size) * batch_size].reshape(-1, batch_size)
    return jax.lax.scan(lambda n, i: (_apply_update(spec, n, x[i], y[i]), None), net, batches)[0]


def _as_device(x):
    """Dense stays; a scipy.sparse matrix becomes one SparseRows batch of all its rows."""
    return x if isinstance(x, jax.Array) else sparse_rows(x)


def _held_out(x_valid, y_valid) -> tuple:
    """The held-out inputs and labels, checked, on the device (or None, None)."""
    if (x_valid is None) != (y_valid is None):
        raise ValueError("x_valid and y_valid must be given together")
    if x_valid is None:
        return None, None
    x_valid = _as_device(check_inputs(x_valid, "x_valid"))
    n = x_valid.n if isinstance(x_valid, SparseRows) else len(x_valid)
    return x_valid, check_labels(y_valid, n, "y_valid")


# %% book/ebp.md
@checks(
    net=Instance(EBPNet),
    seed=Seed(),
    epochs=Int(1),
    batch_size=Int(1),
    evaluate=Maybe(Function()),
    progress=Bool(),
)
def online_passes(
    net: EBPNet,
    x,
    y,
    spec: tuple,
    *,
    epochs: int,
    batch_size: int,
    evaluate=None,
    x_valid=None,
    y_valid=None,
    seed=0,
    checkpoint_dir=None,
    progress: bool = True,
) -> Trained:
    """`epochs` shuffled passes of minibatch updates `spec` (the last partial minibatch of a pass is
    left out); after each, evaluate(net, x_valid, y_valid) -> dict of errors. x: dense (n, M) or
    scipy.sparse. Returns Trained(net, history): history["epoch"] and each error per pass.
    checkpoint_dir: save the network and the history there after every pass, and resume from the
    latest. progress: report the passes done and the latest errors (toolkit `Progress`)."""
    key = seed_key(seed)
    x = check_inputs(x)
    y = check_labels(y, x.shape[0])
    if x.shape[1] != net.fields[0].shape[0]:
        raise ValueError(
            f"x has {x.shape[1]} features but the network's first layer takes "
            f"{net.fields[0].shape[0]}"
        )
    if y.shape[1] != net.fields[-1].shape[1]:
        raise ValueError(
            f"y (the labels) has {y.shape[1]} columns but the network has "
            f"{net.fields[-1].shape[1]} outputs"
        )
    if batch_size > x.shape[0]:
        raise ValueError(f"batch_size ({batch_size}) must not exceed the {x.shape[0]} rows of x")
    x_valid, y_valid = _held_out(x_valid, y_valid)
    history, done = [], 0
    restored = restore_checkpoint(checkpoint_dir, net) if checkpoint_dir is not None else None
    if restored is not None:
        done, net, extra = restored
        history = extra["history"]
    report = Progress(epochs, f"{spec[0].upper()} passes", initial=done, enabled=progress)
    for epoch in range(done, epochs):
        order = np.asarray(jax.random.permutation(jax.random.fold_in(key, epoch), x.shape[0]))
        if isinstance(x, jax.Array):
            net = _scan_dense(net, x, y, jnp.asarray(order), spec, batch_size)
        else:
            used = order[: (len(order) // batch_size) * batch_size].reshape(-1, batch_size)
            net = _scan_batches(net, sparse_batches(x, order, batch_size), y[used], spec)
        for name, arrays in (("fields", net.fields), ("biases", net.biases)):
            for l, a in enumerate(arrays):
                if not bool(jnp.isfinite(a).all()):
                    bad = np.asarray(a)[~np.isfinite(np.asarray(a))][0]
                    raise NonFiniteError(
                        epoch + 1,
                        f"{name}[{l}]",
                        float(bad),
                        f"training {spec[0]} diverged in pass {epoch + 1}",
                    )
        if x_valid is not None and evaluate is not None:
            history.append({"epoch": epoch + 1, **evaluate(net, x_valid, y_valid)})
        if checkpoint_dir is not None:
            save_checkpoint(checkpoint_dir, epoch + 1, net, {"history": history})
        latest = history[-1] if history else {}
        report.update(epoch + 1, {k: v for k, v in latest.items() if k != "epoch"})
    report.close()
    return Trained(
        net, History({k: [row[k] for row in history] for k in history[0]} if history else {})
    )


# %% book/ebp.md
@renamed(positional=("key",), key="seed", x_test="x_valid", y_test="y_valid")
@checks(
    net=Instance(EBPNet),
    seed=Seed(),
    kind=Maybe(OneOf(*KINDS)),
    epochs=Int(1),
    batch_size=Int(1),
    extra_var=Float(0),
    progress=Bool(),
)
def train_ebp(
    net: EBPNet,
    x,
    y,
    *,
    epochs: int = 3,
    batch_size: int = 10,
    extra_var: float = 1.0,
    x_valid=None,
    y_valid=None,
    seed=0,
    checkpoint_dir=None,
    progress: bool = True,
    kind: str | None = None,
) -> Trained:
    """Online EBP of `net`, whose weights are of its kind (binary or real, see init_ebp); returns
    Trained(net, history): a new network, and per pass over x its errors on (x_valid, y_valid) as
    EBP-P and as EBP-D (history["epoch"], history["EBP-P"], history["EBP-D"]). y: labels +-1, one
    column per output. seed: an integer or a JAX key (the order of the examples). checkpoint_dir,
    progress: see online_passes. kind: only for a network built without one (deprecated)."""
    kind = net_kind(net, kind)

    def evaluate(net, xt, yt):
        return {
            "EBP-P": error_rate(ebp_p(net, xt, kind, extra_var=extra_var), yt),
            "EBP-D": error_rate(ebp_d(net, xt, kind), yt),
        }

    return online_passes(
        net,
        x,
        y,
        ("ebp", kind, float(extra_var)),
        epochs=epochs,
        batch_size=batch_size,
        evaluate=evaluate,
        x_valid=x_valid,
        y_valid=y_valid,
        seed=seed,
        checkpoint_dir=checkpoint_dir,
        progress=progress,
    )


# %% book/ebp.md
def _first_layer(rows, x):
    """x W from W's rows: all of W for dense x, the gathered rows W[x.idx] for SparseRows."""
    if isinstance(x, SparseRows):
        return jax.ops.segment_sum(rows * x.val[:, None], x.row, num_segments=x.n)
    return x @ rows


@checks(net=Instance(EBPNet))
def mlp_output(net: EBPNet, x, rows=None):
    """The real-weight network of the same architecture: tanh hidden layers, a linear output.
    rows: the first layer's weights as _first_layer takes them (default: read from net)."""
    h = x
    for l, (w, b) in enumerate(zip(net.fields, net.biases)):
        if l == 0:
            if rows is None:
                rows = w[h.idx] if isinstance(h, SparseRows) else w
            a = _first_layer(rows, h) + b
        else:
            a = h @ w + b
        h = jnp.tanh(a) if l < len(net.fields) - 1 else a
    return h


@checks(net=Instance(EBPNet), loss=OneOf("ce", "mse"))
def bp_loss(rows, net: EBPNet, x, y, loss: str):
    """Cross-entropy (logistic, softplus(-y f)) or squared error ((tanh f - y)^2), averaged over the
    batch."""
    out = mlp_output(net, x, rows)
    if loss == "ce":
        return jnp.mean(jax.nn.softplus(-y * out))
    return jnp.mean((jnp.tanh(out) - y) ** 2)


@checks(net=Instance(EBPNet), lr=Float(0, low_open=True), loss=OneOf("ce", "mse"))
def bp_update(net: EBPNet, x, y, lr: float, loss: str) -> EBPNet:
    """One SGD step; for sparse x only the rows of W_1 that occur are read and written."""
    rows = net.fields[0][x.idx] if isinstance(x, SparseRows) else net.fields[0]
    g_rows, g_net = jax.grad(bp_loss, argnums=(0, 1))(rows, net, x, y, loss)
    fields = [
        net.fields[0].at[x.idx].add(-lr * g_rows)
        if isinstance(x, SparseRows)
        else net.fields[0] - lr * g_rows
    ]
    fields += [w - lr * g for w, g in zip(net.fields[1:], g_net.fields[1:])]
    biases = tuple(b - lr * g for b, g in zip(net.biases, g_net.biases))
    return EBPNet(tuple(fields), biases, net.kind)


# %% book/ebp.md
@renamed(positional=("key",), key="seed", lr="learning_rate", x_test="x_valid", y_test="y_valid")
@checks(
    net=Instance(EBPNet),
    seed=Seed(),
    learning_rate=Float(0, low_open=True),
    loss=OneOf("ce", "mse"),
    epochs=Int(1),
    batch_size=Int(1),
    progress=Bool(),
)
def train_bp(
    net: EBPNet,
    x,
    y,
    *,
    learning_rate: float,
    loss: str = "ce",
    epochs: int = 3,
    batch_size: int = 10,
    x_valid=None,
    y_valid=None,
    seed=0,
    checkpoint_dir=None,
    progress: bool = True,
) -> Trained:
    """Backpropagation baseline (SGD, constant learning rate) with the passes and minibatches of
    train_ebp, the weights of `net` trained as real numbers whatever its kind; returns
    Trained(net, history): per pass, the errors on (x_valid, y_valid) of the network ("BP") and of
    its sign-clipped copy ("clipped BP": weights sign(W), real biases, sign units).
    checkpoint_dir, progress: see online_passes."""
    if loss not in ("ce", "mse"):
        raise ValueError(f"loss must be 'ce' or 'mse', got {loss!r}")

    def evaluate(net, xt, yt):
        clipped = sign_network([jnp.sign(w) for w in net.fields], net.biases, xt)
        return {"BP": error_rate(mlp_output(net, xt), yt), "clipped BP": error_rate(clipped, yt)}

    return online_passes(
        net,
        x,
        y,
        ("bp", float(learning_rate), loss),
        epochs=epochs,
        batch_size=batch_size,
        evaluate=evaluate,
        x_valid=x_valid,
        y_valid=y_valid,
        seed=seed,
        checkpoint_dir=checkpoint_dir,
        progress=progress,
    )


# %% book/ebp.md
@checks(n=Int(1), fold=Int(0), n_folds=Int(2))
def fold_indices(n: int, fold: int, n_folds: int = 8):
    """The authors' contiguous folds: test rows round(fold n / K) .. round((fold + 1) n / K) - 1
    (0-based)."""
    if not 0 <= fold < n_folds:
        raise ValueError(f"fold must be in 0..{n_folds - 1}, got {fold}")
    test = np.arange(round(fold * n / n_folds), round((fold + 1) * n / n_folds))
    return np.setdiff1d(np.arange(n), test), test


# %% book/ebp.md
def _host_rows(x, name: str):
    """x (n, M) on the host in float64: a CSR array if sparse, else a dense ndarray (AROW)."""
    import scipy.sparse as sp

    if sp.issparse(x):
        x = check_inputs(x, name)
        return sp.csr_array((x.data.astype(np.float64), x.indices, x.indptr), shape=x.shape)
    check_array(x, name, ndim=2)
    return np.asarray(x, np.float64)


# %% book/ebp.md
class AROW(NamedTuple):
    """A linear classifier trained by AROW: the weights' mean and the diagonal of their covariance,
    the bias's last when it has one."""

    mean: np.ndarray
    var: np.ndarray


@renamed(x_test="x_valid", y_test="y_valid")
@checks(r=Float(0, low_open=True), epochs=Int(1), bias=Bool(), seed=Maybe(Seed()), progress=Bool())
def train_arow(
    x,
    y,
    *,
    r: float,
    epochs: int = 3,
    x_valid=None,
    y_valid=None,
    bias: bool = True,
    seed=None,
    progress: bool = False,
) -> Trained:
    """AROW with a diagonal covariance (eq. ebp-arow), Sigma = I and mu = 0 at the start; x (n, M)
    dense or scipy.sparse (float64 on the host), y in {-1, +1} (n,). The examples are visited
    `epochs` times, in their order (seed None, as the authors' code) or in a new random order each
    pass (seed an integer or a JAX key). Returns Trained(AROW(mean, var), history): history["epoch"]
    and history["AROW"], the error on (x_valid, y_valid) after each pass, when they are given."""
    import scipy.sparse as sp

    x = _host_rows(x, "x")
    labels = np.asarray(check_labels(y, x.shape[0]))
    if labels.shape[1] != 1:
        raise ValueError(f"y must hold one label per row for AROW, got shape {labels.shape}")
    labels = labels[:, 0].astype(np.float64)
    if (x_valid is None) != (y_valid is None):
        raise ValueError("x_valid and y_valid must be given together")
    n, width = x.shape
    mu, sigma = np.zeros(width), np.ones(width)
    mu_b, sigma_b = 0.0, float(bias)  # the bias's weight (feature 1); variance 0: no bias
    sparse, history = sp.issparse(x), {"epoch": [], "AROW": []}
    report = Progress(epochs, "AROW passes", enabled=progress)
    for epoch in range(1, epochs + 1):
        order = range(n)
        if seed is not None:
            order = np.asarray(jax.random.permutation(jax.random.fold_in(seed_key(seed), epoch), n))
        for i in order:
            if sparse:  # the example's nonzero features
                idx = x.indices[x.indptr[i] : x.indptr[i + 1]]
                val = x.data[x.indptr[i] : x.indptr[i + 1]]
            else:
                idx, val = slice(None), x[i]
            margin = labels[i] * (mu[idx] @ val + mu_b)
            if margin < 1:
                s = sigma[idx] * val  # Sigma x on those features; sigma_b on the bias
                beta = 1.0 / (s @ val + sigma_b + r)
                step = (1.0 - margin) * beta * labels[i]
                mu[idx] += step * s
                sigma[idx] -= beta * s * s
                mu_b, sigma_b = mu_b + step * sigma_b, sigma_b - beta * sigma_b**2
        if x_valid is not None:
            weights = np.append(mu, mu_b) if bias else mu
            history["epoch"].append(epoch)
            history["AROW"].append(arow_error(weights, x_valid, y_valid))
        report.update(epoch, {"AROW": history["AROW"][-1]} if history["AROW"] else {})
    report.close()
    model = AROW(np.append(mu, mu_b), np.append(sigma, sigma_b)) if bias else AROW(mu, sigma)
    return Trained(model, History(history))


def arow_error(mu, x, y) -> float:
    """Share of rows of x whose sign(mu . [x, 1]) differs from y (a score of 0 counts as +1);
    mu without the bias entry when its length is x's width."""
    x = _host_rows(x, "x")
    labels = np.asarray(check_labels(y, x.shape[0]))[:, 0]
    w = np.asarray(mu, np.float64)
    if w.ndim != 1 or len(w) not in (x.shape[1], x.shape[1] + 1):
        raise ValueError(f"mu has shape {w.shape} for {x.shape[1]} features")
    score = x @ w[: x.shape[1]] + (w[-1] if len(w) > x.shape[1] else 0.0)
    return float(np.mean(np.where(score >= 0, 1.0, -1.0) != labels))


# %% book/ebp.md
__all__ = [
    "EBPNet",
    "init_ebp",
    "ebp_update",
    "ebp_forward",
    "ebp_p",
    "ebp_d",
    "ebp_ensemble",
    "train_ebp",
    "online_passes",
    "train_bp",
    "bp_loss",
    "bp_update",
    "train_arow",
    "arow_error",
    "mlp_output",
    "sign_network",
    "error_rate",
    "predict_labels",
    "net_kind",
    "AROW",
    "SparseRows",
    "sparse_rows",
    "one_vs_rest",
    "fold_indices",
    "KINDS",
    "weight_mean",
    "mills_ratio",
    "output_delta",
    "asymptotic_output_delta",
    "check_inputs",
    "check_labels",
    "sparse_batches",
]
constructor_signatures(globals())  # help() and inspect.signature show __init__'s parameters
