"""Packaging: pyproject.toml and environment.yml list the same requirements; Python and lib
layout."""

import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import export  # noqa: E402


def normalise(req: str) -> str:
    name, spec = re.match(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*(.*)$", req).groups()
    return re.sub(r"[-_.]+", "-", name).lower() + spec.replace(" ", "")


def test_environment_yml_and_pyproject_list_the_same_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"])
    for extra in ("book", "test", "dev"):
        wanted |= set(project["optional-dependencies"][extra])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {r for r in pip if not r.startswith("-e")}
    assert {normalise(r) for r in listed} == {normalise(r) for r in wanted}
    assert "-e ." in pip
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == ["python=3.12"]


def test_python_version_and_jax_floor():
    assert (ROOT / ".python-version").read_text().strip() == "3.12"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "jax>=0.11" in project["optional-dependencies"]["dev"]
    # the library itself keeps a looser floor, so that Colab's GPU build of jax is kept
    assert any(r.startswith("jax>=") and r != "jax>=0.11" for r in project["dependencies"])
    # the floor of flax (0.11.0) needs Python 3.11: a looser requires-python fails at install
    assert "flax>=0.11.0" in project["dependencies"]
    assert project["requires-python"] == ">=3.11"


def test_jupyter_book_is_pinned_below_2():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "jupyter-book>=1.0.4,<2" in project["optional-dependencies"]["book"]


def test_lib_init_lists_every_generated_module():
    import lib

    generated = {p.stem for p in export.generate(ROOT)}
    assert set(lib.MODULES) == generated
    for name in lib.MODULES:
        assert getattr(lib, name).__name__ == f"lib.{name}"


def test_generated_modules_export_their_public_names_and_keep_their_helpers():
    import lib.data

    import lib.toolkit

    assert "load_mnist" in lib.data.__all__ and "_is_int" not in lib.toolkit.__all__
    assert callable(lib.toolkit._is_int)  # a helper: importable, not in the public API
    for name in lib.MODULES:
        module = getattr(lib, name)
        assert module.__all__ and all(not n.startswith("_") for n in module.__all__)
        assert all(hasattr(module, n) for n in module.__all__)


def test_floor_constraints_are_the_declared_lower_bounds():
    """`make test-floor` tests exactly the oldest releases that pyproject.toml admits."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {}
    for req in project["dependencies"]:
        m = re.match(r"^([A-Za-z0-9_.\-]+)>=([0-9.]+)$", req)
        if m:
            declared[m.group(1)] = m.group(2)
    pins = dict(
        line.split("==")
        for line in (ROOT / "tests" / "floor-constraints.txt").read_text().split("\n")
        if line and not line.startswith("#")
    )
    for name in ("jax", "flax", "orbax-checkpoint", "threadpoolctl"):
        assert pins[name] == declared[name], name
    assert pins["jaxlib"] == pins["jax"]


def test_the_versions_known_to_deadlock_are_named_at_import():
    from lib.toolkit import known_deadlock

    message = known_deadlock("0.10.2", 2)
    assert "jax 0.10.2" in message and "jax >= 0.11" in message
    assert known_deadlock("0.6.2", 1) is not None
    assert known_deadlock("0.11.0", 2) is None and known_deadlock("0.10.2", 16) is None


def test_the_wheel_carries_every_committed_results_file(tmp_path):
    """Outside a checkout (Colab) the chapters read results/ from the installed package."""
    import zipfile

    from outside import build_wheel

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    folders = {
        p.name for p in (ROOT / "results").iterdir() if p.is_dir() and not p.name.startswith(".")
    }
    assert {f"lib._results.{f}" for f in folders} <= listed, "a results/ folder is not packaged"
    names = set(zipfile.ZipFile(build_wheel(tmp_path)).namelist())
    committed = {
        p.relative_to(ROOT / "results").as_posix() for p in (ROOT / "results").glob("*/*.json")
    }
    assert committed and {f"lib/_results/{c}" for c in committed} <= names
    assert not any(".checkpoints" in n for n in names)


def test_the_colab_cell_installs_the_release_of_this_library():
    import lib
    from chapters import colab_cell_source

    cell = colab_cell_source()
    assert f'@v{lib.__version__}"' in cell and "@main" not in cell
    assert "pip could not install" in cell  # says why in plain words when pip fails


def test_nbval_runs_the_chapters_in_nbval_order():
    """tools/outside.py orders the notebooks by NBVAL_ORDER, which names only real chapters;
    a chapter it does not name runs after them."""
    from chapters import chapter_sources
    from outside import NBVAL_ORDER, nbval_order

    stems = {p.stem for p in chapter_sources()}
    assert set(NBVAL_ORDER) <= stems, set(NBVAL_ORDER) - stems
    books = [Path(f"/x/{s}.ipynb") for s in sorted(stems | {"new"})]
    order = [p.stem for p in nbval_order(books)]
    assert order[: len(NBVAL_ORDER)] == list(NBVAL_ORDER) and order[-1] == "new"
    assert sorted(order) == sorted(stems | {"new"})


def test_the_floor_leaves_out_only_modules_that_do_not_import_the_pinned_releases():
    """`make test-floor` runs the tests of every module of lib that imports jax, flax, orbax or
    threadpoolctl (at any depth of its code); a module whose tests it leaves out imports none. A
    report's record module (lib.<paper>_report, lib.<paper>_<part>_report) is tested in its paper's
    tests/test_<paper>.py."""
    import ast

    import lib

    pinned = {"jax", "jaxlib", "flax", "orbax", "threadpoolctl"}
    recipe = (ROOT / "Makefile").read_text().split("\ntest-floor:")[1].split("\n\n")[0]
    floor = set(re.findall(r"tests/test_(\w+)\.py", recipe))
    for module in lib.MODULES:
        tree = ast.parse((ROOT / "lib" / f"{module}.py").read_text())
        imported = {
            name.split(".")[0]
            for node in ast.walk(tree)
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        # a report's record (each of its parts) is tested with its method, lib.record with toolkit
        tests = module.split("_")[0]
        tests = {"record": "toolkit"}.get(tests, tests)
        if imported & pinned or "lib" in imported:
            assert tests in floor, f"make test-floor does not run tests/test_{tests}.py"
