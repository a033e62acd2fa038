"""lib: the library of the book "Re-derived: five papers in JAX".

Each module is generated from the book chapter of the same name (book/<module>.md) and is
imported on first use, so `import lib` stays light:

    data       the papers' datasets: loaders, parsers, fingerprints             (Appendix A)
    toolkit    training loop, NaN/Inf stop, seeding, checkpoints, presets,
               argument contracts                                               (Appendix B)
    record     the experiment registry and `python -m lib`, results files,
               provenance, claims and the scorecard                     (Appendix B, part 2)
    darn       deep autoregressive networks: binary stochastic layers, Appendix A's gradient
    partition  RBMs trained by SML with parallel tempering; log Z tracked by IS, bridge
               sampling and a Kalman filter; exact log Z; AIS
    ebp        expectation backpropagation: binary / real weights, sparse inputs, BP baseline
    nram       neural random-access machines: gates on distributions, fuzzy and discretised
               machines, tasks
    dgp        deep Gaussian processes, doubly stochastic variational inference

The reproduction record of a paper (its experiments for `python -m lib`, the paper's tables, the
claims of the scorecard) is a module of its own, generated from the paper's reproduction report
(book/<paper>_report.md); no method module imports it:

    darn_report       Table 2 (binarised MNIST) and Table 1 (binary UCI sets) for DARN
    partition_report  Figure 3, Table 1 and the 500-hidden-unit RBMs for the tracked log Z
    ebp_report        Table 1, AROW, the deeper network and MNIST for expectation backpropagation
    nram_report       Table 1's easy tasks, the searches and the claims for the NRAM
    nram_hard_report  Table 1's hard tasks and Figure 3 for the NRAM (part 2 of its report)
    dgp_report        Figure 1's UCI grid, the authors' kin8nm notebook and MNIST for deep GPs
"""

import importlib

__version__ = "0.1.0"

# the record modules, generated from the reproduction reports
REPORTS = (
    *("darn_report", "partition_report", "ebp_report"),
    *("nram_report", "nram_hard_report", "dgp_report"),
)
MODULES = ("data", "toolkit", "record", "darn", "partition", "ebp", "nram", "dgp", *REPORTS)
__all__ = ["__version__", *MODULES]


def __getattr__(name):
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'lib' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(MODULES))
