"""Shared fixtures: the repository root and the data directory of the real datasets."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
