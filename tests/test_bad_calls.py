"""An independent set of bad calls across the library: the mistakes a user makes, written by hand
(not generated from the argument contracts, and none of the examples of the hardening issue).

Each call must raise a ValueError or TypeError (FileNotFoundError for a missing file) whose message
names the argument at fault, within
a timeout; a call that returns is counted as accepted silently (and as a silent NaN if what it
returns holds a NaN or an Inf). The suite passes when at least 95% of the calls get a clear error,
none returns NaN and none hangs; `python tests/test_bad_calls.py` prints the counts and every call
that falls short.
"""

from __future__ import annotations

import functools
import signal
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

TIMEOUT = 60  # seconds per call


class Hang(Exception):
    pass


@functools.cache
def objects() -> dict:
    """Valid objects to put beside the bad argument (built once)."""
    import lib.darn as D
    import lib.dgp as G
    import lib.ebp as E
    import lib.nram as N
    import lib.partition as P

    rng = np.random.default_rng(0)
    bits = (rng.random((40, 10)) < 0.3).astype(np.float32)
    xr = rng.normal(size=(60, 3)).astype(np.float32)
    yr = np.sin(xr.sum(1, keepdims=True)).astype(np.float32)
    labels = np.where(rng.random(30) < 0.5, 1.0, -1.0).astype(np.float32)
    config = N.TrainConfig(task="copy", steps=10, max_difficulty=3, memory_size=8, chunk=5)
    dgp = G.build_dgp(xr, yr, 2, num_inducing=5)
    return {
        "bits": bits,
        "xr": xr,
        "yr": yr,
        "darn": D.DARN(10, 4, 6, rngs=nnx.Rngs(0)),
        "rbm": P.RBM(10, 4, rngs=nnx.Rngs(0)),
        "net": E.init_ebp(jax.random.key(0), [8, 5, 1], kind="binary"),
        "x8": rng.normal(size=(30, 8)).astype(np.float32),
        "labels": labels,
        "config": config,
        "spec": config.spec(),
        "controller": N.make_controller(config, nnx.Rngs(0)),
        "dgp": dgp,
        "std": G.Standardizer(np.zeros(3), np.ones(3), np.zeros(1), np.ones(1)),
        "key": jax.random.key(0),
        "np_rng": np.random.default_rng(0),
    }


def _calls():
    """(id, thunk, the argument its error must name)."""
    import lib.darn as D
    import lib.data as DATA
    import lib.dgp as G
    import lib.ebp as E
    import lib.nram as N
    import lib.nram_report as R
    import lib.partition as P
    import lib.toolkit as T

    o = objects()
    key, bits, xr, yr = o["key"], o["bits"], o["xr"], o["yr"]
    half = np.full((5, 10), 0.5, np.float32)
    wide = np.zeros((5, 12), np.float32)
    nan_bits = bits.copy()
    nan_bits[0, 0] = np.nan
    nan_xr = xr.copy()
    nan_xr[3, 1] = np.nan
    x8, labels, net = o["x8"], o["labels"], o["net"]
    mem = jnp.full((4, 4), 0.25)
    nan_x8 = x8.copy()
    nan_x8[2, 5] = np.nan
    return [
        # ---- DARN
        ("DARN n_visible=0", lambda: D.DARN(0, 4, rngs=nnx.Rngs(0)), "n_visible"),
        ("DARN a zero-width layer", lambda: D.DARN(10, [4, 0], rngs=nnx.Rngs(0)), "n_hidden"),
        (
            "DARN negative tanh units",
            lambda: D.DARN(10, 4, -1, rngs=nnx.Rngs(0)),
            "n_deterministic",
        ),
        ("darn_loss x of the wrong width", lambda: D.darn_loss(o["darn"], wide, key), "x"),
        ("darn_loss x not binary", lambda: D.darn_loss(o["darn"], half, key), "x"),
        (
            "darn_loss sparsity_target above 1",
            lambda: D.darn_loss(o["darn"], bits, key, sparsity_target=1.5, sparsity_weight=1.0),
            "sparsity_target",
        ),
        ("train_darn x_train too wide", lambda: D.train_darn(o["darn"], wide, steps=2), "x_train"),
        (
            "train_darn learning_rate 0",
            lambda: D.train_darn(o["darn"], bits, steps=2, learning_rate=0.0),
            "learning_rate",
        ),
        (
            "train_darn optimiser misspelt",
            lambda: D.train_darn(o["darn"], bits, steps=2, optimizer="adamw"),
            "optimizer",
        ),
        (
            "train_darn unknown estimator",
            lambda: D.train_darn(o["darn"], bits, steps=2, estimator="vae"),
            "estimator",
        ),
        (
            "train_darn batch_size 0",
            lambda: D.train_darn(o["darn"], bits, steps=2, batch_size=0),
            "batch_size",
        ),
        ("exact_log_prob x too wide", lambda: D.exact_log_prob(o["darn"], wide), "x"),
        (
            "importance_log_prob no samples",
            lambda: D.importance_log_prob(o["darn"], bits, key, num_samples=0),
            "num_samples",
        ),
        (
            "mean_description_length negative samples",
            lambda: D.mean_description_length(o["darn"], bits, key, num_samples=-2),
            "num_samples",
        ),
        (
            "mixture with no components",
            lambda: D.fit_mixture_of_bernoullis(bits, 0),
            "num_components",
        ),
        ("mixture on data with a NaN", lambda: D.fit_mixture_of_bernoullis(nan_bits, 4), "x_train"),
        (
            "mixture negative tolerance",
            lambda: D.fit_mixture_of_bernoullis(bits, 4, tol=-1.0),
            "tol",
        ),
        ("all_binary n=-1", lambda: D.all_binary(-1), "n"),
        ("strictly_lower n=-3", lambda: D.strictly_lower(-3), "n"),
        (
            "bernoulli_log_prob shapes disagree",
            lambda: D.bernoulli_log_prob(jnp.zeros((3, 4)), jnp.zeros((3, 5))),
            "logits",
        ),
        (
            "split_layers sizes do not add up",
            lambda: D.split_layers(jnp.zeros((2, 10)), [4, 4]),
            "sizes",
        ),
        ("NADE no hidden units", lambda: D.NADE(5, 0, rngs=nnx.Rngs(0)), "n_hidden"),
        ("sampling_cost num=0", lambda: D.sampling_cost(o["darn"], key, num=0), "num"),
        ("init_visible_bias x too wide", lambda: D.init_visible_bias(o["darn"], wide), "x_train"),
        # ---- partition
        ("RBM n_visible=0", lambda: P.RBM(0, 4, rngs=nnx.Rngs(0)), "n_visible"),
        (
            "RBM negative init_scale",
            lambda: P.RBM(10, 4, rngs=nnx.Rngs(0), init_scale=-1.0),
            "init_scale",
        ),
        (
            "train_sml_pt x_train too wide",
            lambda: P.train_sml_pt(o["rbm"], wide, seed=key, steps=2),
            "x_train",
        ),
        (
            "train_sml_pt no chains",
            lambda: P.train_sml_pt(o["rbm"], bits, seed=key, steps=2, n_chains=0),
            "n_chains",
        ),
        (
            "train_sml_pt betas not decreasing",
            lambda: P.train_sml_pt(o["rbm"], bits, seed=key, steps=2, betas=[1.0, 0.5, 0.7]),
            "betas",
        ),
        (
            "train_sml_pt gibbs_steps 0",
            lambda: P.train_sml_pt(o["rbm"], bits, seed=key, steps=2, gibbs_steps=0),
            "gibbs_steps",
        ),
        (
            "train_sml_pt x not binary",
            lambda: P.train_sml_pt(o["rbm"], half, seed=key, steps=2),
            "x_train",
        ),
        ("exact_log_z negative beta", lambda: P.exact_log_z(o["rbm"], beta=-0.5), "beta"),
        ("exact_log_z NaN beta", lambda: P.exact_log_z(o["rbm"], beta=float("nan")), "beta"),
        ("ais_log_z no runs", lambda: P.ais_log_z(o["rbm"], key, n_runs=0), "n_runs"),
        (
            "ais_log_z base_bias of the wrong length",
            lambda: P.ais_log_z(o["rbm"], key, base_bias=jnp.zeros(7), n_runs=2),
            "base_bias",
        ),
        ("linear_betas one temperature", lambda: P.linear_betas(1), "n_temps"),
        ("tracker_init no temperatures", lambda: P.tracker_init(0, 0.0), "n_temps"),
        ("log_odds_of_mean eps=0", lambda: P.log_odds_of_mean(bits, eps=0.0), "eps"),
        ("learning_rate negative lr0", lambda: P.learning_rate(10, -1.0, None), "lr0"),
        (
            "adapt_betas swap rates of the wrong length",
            lambda: P.adapt_betas(P.linear_betas(5), jnp.full(2, 0.5)),
            "swap_rate",
        ),
        (
            "init_sml_state no chains",
            lambda: P.init_sml_state(o["rbm"], P.linear_betas(3), 0, key),
            "n_chains",
        ),
        ("check_binary a 2 in the data", lambda: P.check_binary(bits + 1.0, "x"), "x"),
        ("ais_betas a negative count", lambda: P.ais_betas(counts=(10, -5, 10)), "counts"),
        ("binary_codes n_bits=-2", lambda: P.binary_codes(-2), "n_bits"),
        # ---- EBP
        ("init_ebp one layer", lambda: E.init_ebp(key, [784]), "sizes"),
        ("init_ebp sigma_w=0", lambda: E.init_ebp(key, [10, 5, 1], sigma_w=0.0), "sigma_w"),
        (
            "train_ebp x of the wrong width",
            lambda: E.train_ebp(
                net, np.zeros((30, 9), np.float32), labels, seed=key, kind="binary"
            ),
            "x",
        ),
        (
            "train_ebp y of the wrong length",
            lambda: E.train_ebp(net, x8, labels[:20], seed=key),
            "y",
        ),
        (
            "train_ebp 0/1 labels",
            lambda: E.train_ebp(net, x8, (labels > 0).astype(np.float32), seed=key),
            "y",
        ),
        (
            "train_ebp NaN in x",
            lambda: E.train_ebp(net, nan_x8, labels, seed=key),
            "x",
        ),
        (
            "train_ebp no epochs",
            lambda: E.train_ebp(net, x8, labels, seed=key, epochs=0),
            "epochs",
        ),
        (
            "train_bp negative lr",
            lambda: E.train_bp(net, x8, labels, seed=key, learning_rate=-0.1),
            "learning_rate",
        ),
        (
            "train_bp unknown loss",
            lambda: E.train_bp(net, x8, labels, seed=key, learning_rate=0.1, loss="hinge"),
            "loss",
        ),
        (
            "ebp_p x of the wrong width",
            lambda: E.ebp_p(net, np.zeros((4, 9), np.float32), "binary"),
            "x",
        ),
        (
            "ebp_forward negative extra_var",
            lambda: E.ebp_forward(net, x8, "binary", extra_var=-1.0),
            "extra_var",
        ),
        (
            "error_rate fewer labels than outputs",
            lambda: E.error_rate(jnp.ones((10, 1)), labels[:12]),
            "y",
        ),
        (
            "one_vs_rest a label out of range",
            lambda: E.one_vs_rest(np.array([0, 3, 10]), 10),
            "labels",
        ),
        ("fold_indices fold out of range", lambda: E.fold_indices(100, 8, 8), "fold"),
        ("fold_indices no folds", lambda: E.fold_indices(100, 0, 0), "n_folds"),
        ("sparse_rows a dense array", lambda: E.sparse_rows(x8), "x"),
        ("weight_mean capitalised kind", lambda: E.weight_mean(net.fields[0], "Binary"), "kind"),
        (
            "ebp_ensemble no networks",
            lambda: E.ebp_ensemble(net, x8, "binary", key, n_networks=0),
            "n_networks",
        ),
        # ---- NRAM
        ("TrainConfig unknown task", lambda: N.TrainConfig(task="sort"), "task"),
        ("TrainConfig no registers", lambda: N.TrainConfig(registers=0), "registers"),
        ("TrainConfig no timesteps", lambda: N.TrainConfig(timesteps=0), "timesteps"),
        (
            "TrainConfig negative learning rate",
            lambda: N.TrainConfig(learning_rate=-1.0),
            "learning_rate",
        ),
        ("TrainConfig unknown controller", lambda: N.TrainConfig(controller="gru"), "controller"),
        ("TrainConfig batch_size 0", lambda: N.TrainConfig(batch_size=0), "batch_size"),
        (
            "NRAMSpec unknown module",
            lambda: N.NRAMSpec(modules=("READ", "FOO", "WRITE")),
            "modules",
        ),
        ("NRAMSpec no registers", lambda: N.NRAMSpec(registers=0), "registers"),
        (
            "make_batch memory too small",
            lambda: N.make_batch("copy", [3], 2, o["np_rng"]),
            "memory_size",
        ),
        (
            "make_batch difficulty 0",
            lambda: N.make_batch("copy", [0], 16, o["np_rng"]),
            "difficulties",
        ),
        ("make_batch unknown task", lambda: N.make_batch("nope", [3], 16, o["np_rng"]), "task"),
        ("evaluate at length 0", lambda: N.evaluate(o["controller"], o["config"], 0), "n"),
        ("read p of the wrong size", lambda: N.read(mem, jnp.full(5, 0.2)), "p"),
        (
            "write a of the wrong size",
            lambda: N.write(mem, jnp.full(4, 0.25), jnp.full(5, 0.2)),
            "a",
        ),
        ("module_int unknown module", lambda: N.module_int("FOO", 1, 2, 8), "name"),
        ("safe_log negative eps", lambda: N.safe_log(jnp.ones(3), -1.0), "eps"),
        (
            "cell_errors target of another shape",
            lambda: N.cell_errors(np.zeros((2, 8)), np.zeros((2, 6)), np.ones((2, 8))),
            "target",
        ),
        (
            "draw_settings an empty choice",
            lambda: R.draw_settings({"learning_rate": []}, 3, 0),
            "space",
        ),
        ("draw_settings count 0", lambda: R.draw_settings({"hidden": [8]}, 0, 0), "count"),
        ("Curriculum top 0", lambda: N.Curriculum(0), "top"),
        ("Curriculum threshold 2", lambda: N.Curriculum(5, threshold=2.0), "threshold"),
        (
            "run_discrete no timesteps",
            lambda: N.run_discrete(
                o["spec"], N.copy_program(o["spec"]), jnp.zeros(8, jnp.int32), 0
            ),
            "timesteps",
        ),
        (
            "load_controller text not a controller",
            lambda: N.load_controller(o["config"], "hello"),
            "text",
        ),
        # ---- DGP
        ("build_dgp y shorter than x", lambda: G.build_dgp(xr, yr[:50], 2), "y"),
        ("build_dgp no layers", lambda: G.build_dgp(xr, yr, 0), "num_layers"),
        (
            "build_dgp no inducing points",
            lambda: G.build_dgp(xr, yr, 2, num_inducing=0),
            "num_inducing",
        ),
        ("build_dgp NaN in x", lambda: G.build_dgp(nan_xr, yr, 2), "x"),
        (
            "build_dgp zero likelihood variance",
            lambda: G.build_dgp(xr, yr, 2, likelihood_variance=0.0),
            "likelihood_variance",
        ),
        ("RBF input_dim 0", lambda: G.RBF(0), "input_dim"),
        ("RBF negative lengthscale", lambda: G.RBF(3, lengthscale=-1.0), "lengthscale"),
        ("Gaussian negative variance", lambda: G.Gaussian(variance=-0.1), "variance"),
        (
            "train_dgp x of the wrong width",
            lambda: G.train_dgp(o["dgp"], xr[:, :2], yr, steps=2),
            "x",
        ),
        (
            "train_dgp learning_rate 0",
            lambda: G.train_dgp(o["dgp"], xr, yr, steps=2, learning_rate=0.0),
            "learning_rate",
        ),
        (
            "train_dgp batch_size 0",
            lambda: G.train_dgp(o["dgp"], xr, yr, steps=2, batch_size=0),
            "batch_size",
        ),
        (
            "evaluate_dgp x_test of the wrong width",
            lambda: G.evaluate_dgp(o["dgp"], o["std"], xr[:, :2], yr, num_samples=2),
            "x_test",
        ),
        ("kmeans_inducing none", lambda: G.kmeans_inducing(xr, 0), "num_inducing"),
        ("kmeans_inducing NaN in x", lambda: G.kmeans_inducing(nan_xr, 5), "x"),
        (
            "rbf inputs of different widths",
            lambda: G.rbf(jnp.zeros((5, 3)), jnp.zeros((5, 4)), jnp.ones(3), 1.0),
            "x2",
        ),
        ("gauss_hermite no points", lambda: G.gauss_hermite(0), "num_points"),
        ("safe_cholesky a non-square K", lambda: G.safe_cholesky(jnp.zeros((3, 4)), 1e-6), "K"),
        ("linear_mean_matrix width 0", lambda: G.linear_mean_matrix(xr, 0), "width"),
        # ---- toolkit and data
        (
            "minibatches arrays of different lengths",
            lambda: T.minibatches((xr, yr[:50]), 10, key=key),
            "arrays",
        ),
        ("make_rngs negative seed", lambda: T.make_rngs(-1), "seed"),
        (
            "fit no steps",
            lambda: T.fit(lambda s, b, k: (s, {}), jnp.zeros(()), lambda t: None, 0, key=key),
            "num_steps",
        ),
        (
            "fit log_every 0",
            lambda: T.fit(
                lambda s, b, k: (s, {}), jnp.zeros(()), lambda t: None, 5, key=key, log_every=0
            ),
            "log_every",
        ),
        ("load_uci split 25 of kin8nm", lambda: DATA.load_uci("kin8nm", split=25), "split"),
        ("load_uci misspelt name", lambda: DATA.load_uci("kin9nm"), "name"),
        ("load_mnist split 'validation'", lambda: DATA.load_mnist("validation"), "split"),
        ("load_ebp unknown task", lambda: DATA.load_ebp("reuters"), "name"),
        ("load_nade unknown set", lambda: DATA.load_nade("dnaa"), "name"),
        ("preset keys differ", lambda: T.preset(book={"a": 1}, paper={"b": 2}), "paper"),
        (
            "read_idx a missing file",
            lambda: DATA.read_idx(tempfile.gettempdir() + "/no-such.idx"),
            "path",
        ),
        ("set_lapack_threads 0", lambda: T.set_lapack_threads(0), "threads"),
    ]


def _nonfinite(value) -> bool:
    try:
        leaves = jax.tree.leaves(value)
    except Exception:
        return False
    for leaf in leaves:
        try:
            a = np.asarray(leaf)
        except Exception:
            continue
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            return True
    return False


def outcome(thunk, name: str) -> tuple[str, str]:
    """("clear" | "unclear" | "silent" | "silent NaN" | "hang", detail)."""

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIMEOUT)
    try:
        value = thunk()
    except Hang:
        return "hang", f"no answer in {TIMEOUT} s"
    except (ValueError, TypeError, FileNotFoundError) as err:
        text = str(err)
        if name in text:
            return "clear", f"{type(err).__name__}: {text[:160]}"
        return "unclear", f"{type(err).__name__} without {name!r}: {text[:160]}"
    except Exception as err:  # noqa: BLE001 - every other failure is an unclear one
        return "unclear", f"{type(err).__name__}: {str(err)[:160]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return ("silent NaN" if _nonfinite(value) else "silent"), f"returned {type(value).__name__}"


@functools.cache
def results() -> list[tuple[str, str, str, str]]:
    return [(cid, name, *outcome(thunk, name)) for cid, thunk, name in _calls()]


def counts() -> dict:
    rows = results()
    out = {
        k: sum(r[2] == k for r in rows)
        for k in ("clear", "unclear", "silent", "silent NaN", "hang")
    }
    out["calls"] = len(rows)
    return out


def test_the_calls_are_distinct_and_cover_every_module():
    ids = [c[0] for c in _calls()]
    assert len(ids) == len(set(ids)) and len(ids) >= 100


def test_bad_calls_get_a_clear_error_naming_the_argument():
    c = counts()
    short = [
        f"{cid} ({name}): {kind}: {detail}"
        for cid, name, kind, detail in results()
        if kind != "clear"
    ]
    assert c["hang"] == 0 and c["silent NaN"] == 0, short
    assert c["clear"] >= 0.95 * c["calls"], f"{c}\n" + "\n".join(short)


if __name__ == "__main__":
    for cid, name, kind, detail in results():
        if kind != "clear":
            print(f"{kind:10s} {cid} ({name}): {detail}")
    print(counts(), file=sys.stderr)
