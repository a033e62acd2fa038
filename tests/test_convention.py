"""One convention for the trainers of the five modules (Appendix B, "One convention for every
trainer"): every public trainer is called here through one shared keyword set and returns
Trained(model, History) with a dict of numpy arrays; no trainer spells a shared concept another way.
"""

import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import lib.darn as D
import lib.dgp as G
import lib.ebp as E
import lib.nram as N
import lib.partition as P
from lib.toolkit import History, Trained

MODULES = (D, G, E, N, P)
# the keyword names of the concepts that trainers share, and spellings of them that must not appear
SHARED = {"seed": 0, "progress": False}
SOMETIMES = ("batch_size", "learning_rate", "x_valid", "y_valid", "checkpoint_dir")
FORBIDDEN = (
    "lr",
    "key",
    "rng",
    "num_steps",
    "n_steps",
    "max_iterations",
    "iterations",
    "n_epochs",
    "x_test",
    "y_test",
    "valid_x",
    "verbose",
)


def _data():
    rng = np.random.default_rng(0)
    bits = (rng.random((24, 6)) < 0.5).astype(np.float32)
    x = rng.normal(size=(24, 3)).astype(np.float32)
    y = np.sin(x[:, 0]).astype(np.float32)
    signs = np.where(x[:, 0] > 0, 1.0, -1.0)
    return bits, x, y, signs


def _calls():
    """{name: (trainer, positional arguments, the length keyword, the optional shared keywords it
    takes, the class of model it must return)}."""
    bits, x, y, signs = _data()
    ebp_net = E.init_ebp(jax.random.key(0), [3, 4, 1], kind="binary")
    nram = N.TrainConfig(task="copy", steps=4, chunk=2)
    valid = {"x_valid": x, "y_valid": signs}

    def likelihood_loss(model, batch, key):
        return -jnp.mean(model.log_prob(batch)), {}

    return {
        "train_dgp": (
            G.train_dgp,
            (G.build_dgp(x, y, 2, num_inducing=4), x, y),
            {"steps": 2},
            {"batch_size": 8, "learning_rate": 0.01},
            G.DeepGP,
        ),
        "train_darn": (
            D.train_darn,
            (D.DARN(6, 3, 4, rngs=nnx.Rngs(0)), bits),
            {"steps": 4},
            {"batch_size": 8, "learning_rate": 1e-3, "x_valid": bits, "eval_every": 2},
            D.DARN,
        ),
        "train_likelihood": (
            D.train_likelihood,
            (D.NADE(6, 3, rngs=nnx.Rngs(0)), bits),
            {"steps": 4},
            {"batch_size": 8, "learning_rate": 1e-3, "x_valid": bits, "eval_every": 2},
            D.NADE,
        ),
        "fit_with_validation": (
            D.fit_with_validation,
            (D.NADE(6, 3, rngs=nnx.Rngs(0)), likelihood_loss, bits),
            {"steps": 4},
            {"batch_size": 8, "learning_rate": 1e-3},
            D.NADE,
        ),
        "fit_mixture_of_bernoullis": (
            D.fit_mixture_of_bernoullis,
            (bits, 2),
            {"steps": 3},
            {"x_valid": bits},
            D.MixtureOfBernoullis,
        ),
        "train_sml_pt": (
            P.train_sml_pt,
            (P.RBM(6, 3, rngs=nnx.Rngs(0)), bits),
            {"steps": 4},
            {"batch_size": 4, "learning_rate": 1e-3, "x_valid": bits, "eval_every": 2},
            P.RBM,
        ),
        "train_ebp": (
            E.train_ebp,
            (ebp_net, x, signs),
            {"epochs": 2},
            {"batch_size": 4, **valid},
            E.EBPNet,
        ),
        "train_bp": (
            E.train_bp,
            (ebp_net, x, signs),
            {"epochs": 2},
            {"batch_size": 4, "learning_rate": 0.1, **valid},
            E.EBPNet,
        ),
        "train_arow": (E.train_arow, (x, signs), {"epochs": 2}, {"r": 1.0, **valid}, E.AROW),
        "train_nram": (
            N.train_nram,
            (nram,),
            {"steps": 4},
            {"batch_size": 4, "learning_rate": 0.01},
            nnx.Module,
        ),
    }


def public_trainers() -> dict:
    """Every public function of the five modules whose name says it trains: train_*, fit_*."""
    found = {}
    for module in MODULES:
        for name in module.__all__:
            fn = getattr(module, name)
            own = getattr(inspect.unwrap(fn), "__module__", None) == module.__name__
            if own and callable(fn) and name.startswith(("train_", "fit_")):
                found[name] = fn
    return found


def test_every_public_trainer_is_called_here():
    assert set(public_trainers()) == set(_calls()) | {"train_nram_seeds"}


@pytest.mark.parametrize("name", sorted(public_trainers()))
def test_trainers_spell_the_shared_keywords_alike(name):
    params = inspect.signature(public_trainers()[name]).parameters
    assert not set(params) & set(FORBIDDEN), f"{name} spells a shared keyword its own way"
    assert "progress" in params
    assert ("seed" in params) != (name == "train_nram_seeds"), name  # that one takes `seeds`
    assert ("steps" in params) != ("epochs" in params), f"{name} needs one length keyword"
    for keyword in SOMETIMES:
        if keyword in params:  # keyword-only, as every shared keyword
            assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY, (name, keyword)


@pytest.mark.parametrize("name", sorted(_calls()))
def test_every_trainer_takes_the_shared_keywords_and_returns_model_and_history(name):
    trainer, args, length, optional, model_type = _calls()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the convention's own names only
        result = trainer(*args, **length, **optional, **SHARED)
    assert isinstance(result, Trained)
    model, history = result
    assert isinstance(model, model_type), type(model)
    assert isinstance(history, History) and len(history) > 0
    for series, values in history.items():
        assert isinstance(values, np.ndarray), (name, series, type(values))
    if isinstance(args[0], nnx.Module):
        assert model is not args[0]  # a new object: the model passed in is left as it was


def test_the_seed_may_be_a_key_and_means_the_same_as_its_integer():
    _, x, y, _ = _data()
    runs = [
        G.train_dgp(G.build_dgp(x, y, 1, num_inducing=4), x, y, steps=3, seed=s, progress=False)
        for s in (3, jax.random.key(3))
    ]
    np.testing.assert_array_equal(runs[0].history["loss"], runs[1].history["loss"])


def test_train_nram_seeds_returns_one_trained_pair_per_seed():
    config = N.TrainConfig(task="copy", steps=4, chunk=2)
    results = N.train_nram_seeds(config, [0, 1], steps=2, batch_size=4, progress=False)
    assert len(results) == 2
    for model, history in results:
        assert isinstance(model, nnx.Module) and isinstance(history, History)
        assert list(history["step"]) == [2]


def test_old_keywords_still_work_with_a_warning_that_names_the_new_one():
    bits = _data()[0]
    rbm = P.RBM(6, 3, rngs=nnx.Rngs(0))
    new = P.train_sml_pt(rbm, bits, steps=2, learning_rate=0.01, seed=1, progress=False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        old = P.train_sml_pt(rbm, bits, jax.random.key(1), steps=2, lr=0.01, progress=False)
        assert old.evals == old.history.evals  # the old result's field
    np.testing.assert_array_equal(new.history["log_z"], old.history["log_z"])
    messages = sorted(str(w.message) for w in said if w.category is DeprecationWarning)
    assert messages == [
        "result.evals is deprecated: use history.evals",
        "train_sml_pt(key=...) is deprecated: use seed=",
        "train_sml_pt(lr=...) is deprecated: use learning_rate=",
    ]
    with pytest.raises(TypeError, match="both lr= .deprecated. and learning_rate="):
        P.train_sml_pt(rbm, bits, steps=2, lr=0.1, learning_rate=0.1)


def test_a_dgp_trains_in_float32_without_x64_on_standardized_float64_data():
    """The user's case: JAX in its default 32-bit mode, data standardised to float64 and a 1-D y.
    A fresh process, as the other tests switch x64 on."""
    import subprocess
    import sys

    code = """
import jax, numpy as np
from lib.dgp import Standardizer, build_dgp, train_dgp, evaluate_dgp
assert not jax.config.jax_enable_x64
rng = np.random.default_rng(0)
x = rng.normal(size=(80, 2)); y = np.sin(x[:, 0])
std = Standardizer.fit(x, y)
model = build_dgp(std.x(x), std.y(y), 2, num_inducing=8)
assert model.layers[0].Z[...].dtype == np.float32 and model.layers[0].whiten
model, history = train_dgp(model, std.x(x), std.y(y), steps=5, progress=False)
assert np.isfinite(history["loss"]).all()
print(evaluate_dgp(model, std, x, y, num_samples=5))
try:
    build_dgp(std.x(x), std.y(y), 2, dtype=np.float64)
except ValueError as err:
    assert "32-bit" in str(err)
else:
    raise AssertionError("float64 without x64 was not refused")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_build_dgp_whitens_by_default_and_the_paper_preset_does_not():
    import lib.dgp_report as GR

    assert inspect.signature(G.build_dgp).parameters["whiten"].default is True
    from lib.record import EXPERIMENTS

    assert GR.run_dgp_uci and EXPERIMENTS["dgp-uci"].presets["paper"]["whiten"] is False


def _dot_precisions(fn, *args) -> set:
    jaxpr = jax.make_jaxpr(fn)(*args)
    found = set()

    def walk(jaxpr):
        for e in jaxpr.eqns:
            if e.primitive.name == "dot_general":
                found.add(str(e.params["precision"]))
            for value in e.params.values():  # the programs inside (jit, scan, cond, ...)
                for sub in value if isinstance(value, (list, tuple)) else [value]:
                    sub = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's Jaxpr
                    if hasattr(sub, "eqns"):
                        walk(sub)

    walk(jaxpr.jaxpr)
    return found


def test_the_products_that_need_full_float32_ask_for_it_whatever_the_global_setting():
    """Under a GPU's default (TF32, set globally), the partition function's and the deep GP's
    products are still full float32 (Precision.HIGHEST in their programs), and the entry points
    of their runs say so (the toolkit's full_precision)."""
    rbm = P.RBM(6, 3, rngs=nnx.Rngs(0))
    _, x, y, _ = _data()
    dgp = G.build_dgp(x, y, 2, num_inducing=4)
    tracker = P.tracker_init(3, 0.0)
    highest = {"(Precision.HIGHEST, Precision.HIGHEST)"}
    with jax.default_matmul_precision("tensorfloat32"):
        assert _dot_precisions(lambda v: rbm.free_energy(v).sum(), jnp.ones((2, 6))) == highest
        assert (
            _dot_precisions(
                lambda x, y: dgp.elbo(x, y, jax.random.key(0)),
                jnp.asarray(x),
                jnp.asarray(y)[:, None],
            )
            == highest
        )
        o, q = jnp.zeros(2), jnp.full(3, 1e-3)  # three temperatures
        assert (
            _dot_precisions(lambda t: P.kalman_update(t, o, o + 1, o, o + 1, 0.0, q).mean, tracker)
            == highest
        )
        assert _dot_precisions(lambda v: (v @ v.T).sum(), jnp.ones((2, 6))) != highest  # plain
    for fn in (P.train_sml_pt, P.ais_log_z, P.exact_log_z, P.sml_pt_step, G.train_dgp):
        assert getattr(fn, "__full_precision__", False), fn.__name__
    assert getattr(G.evaluate_dgp, "__full_precision__", False)
