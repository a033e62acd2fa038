"""Shared fixtures: the repository root and the data directory of the real datasets."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The unit tests' problems are small: their time is mostly XLA compiling, not running, so they
# compile with LLVM's optimisations off (about 30% off tests/test_dgp.py on two cores). Set before
# any test module imports jax; an XLA_FLAGS of the caller's own is kept, and wins.
_FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")
os.environ["XLA_FLAGS"] = " ".join(
    [
        *(f for f in _FAST_COMPILE if f.split("=")[0] not in os.environ.get("XLA_FLAGS", "")),
        os.environ.get("XLA_FLAGS", ""),
    ]
).strip()


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real datasets: LIB_DATA_DIR (set by the Makefile and .ci/run to ../shared/data)."""
    value = os.environ.get("LIB_DATA_DIR")
    if not value:
        pytest.skip("LIB_DATA_DIR is not set: the real-data tests need the datasets (see README)")
    path = Path(value).resolve()
    if not (path / "mnist").is_dir():
        pytest.fail(f"LIB_DATA_DIR={value} does not hold the datasets (no mnist/ folder)")
    return path
