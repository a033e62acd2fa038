"""lib.data: every loader on the real datasets, the format parsers, downloads, and the errors."""

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse

import lib.data as D
from loopback import serve_directory

# ---------------------------------------------------------------- the real datasets


def test_mnist(data_dir):
    for split, n in (("train", 60000), ("test", 10000)):
        images, labels = D.load_mnist(split, data_dir)
        assert images.shape == (n, 28, 28) and images.dtype == np.uint8
        assert labels.shape == (n,) and labels.dtype == np.uint8
        assert images.max() == 255 and images.min() == 0
        assert set(np.unique(labels)) == set(range(10))
    # the classes are roughly balanced (each between 8% and 12% of the training set)
    _, labels = D.load_mnist("train", data_dir)
    assert (np.bincount(labels) / len(labels)).min() > 0.08


def test_binarized_mnist(data_dir):
    s = D.load_binarized_mnist(data_dir)
    assert [x.shape for x in s] == [(50000, 784), (10000, 784), (10000, 784)]
    for x in s:
        assert x.dtype == np.uint8 and set(np.unique(x)) == {0, 1}
    assert abs(s.train.mean() - 0.1306) < 5e-4


def test_caltech101_silhouettes(data_dir):
    c = D.load_caltech101_silhouettes(data_dir)
    assert [x.shape for x in (c.train, c.valid, c.test)] == [(4100, 784), (2264, 784), (2307, 784)]
    for x, y in ((c.train, c.train_labels), (c.valid, c.valid_labels), (c.test, c.test_labels)):
        assert x.dtype == np.uint8 and set(np.unique(x)) <= {0, 1}
        assert y.shape == (len(x),) and y.min() >= 1 and y.max() <= 101
    assert len(c.classnames) == 101 and all(isinstance(n, str) and n for n in c.classnames)
    # upright: the border rows of most silhouettes are background (1) on every side
    img = np.stack([D.caltech_image(r) for r in c.train[:200]])
    assert img[:, 0, :].mean() > 0.9 and img[:, :, 0].mean() > 0.9


@pytest.mark.parametrize(
    "name, d, sizes",
    [
        ("dna", 180, (1400, 600, 1186)),
        ("mushrooms", 112, (2000, 500, 5624)),
        ("nips", 500, (400, 100, 1240)),
    ],
)
def test_nade(data_dir, name, d, sizes):
    s = D.load_nade(name, data_dir)
    assert tuple(len(x) for x in s) == sizes
    for x in s:
        assert x.shape[1] == d and x.dtype == np.uint8 and set(np.unique(x)) == {0, 1}


@pytest.mark.parametrize("name", sorted(D.UCI_DATASETS))
def test_uci_splits_partition_the_data(data_dir, name):
    n, d, k = D.UCI_DATASETS[name]
    folder = data_dir / "uci" / name / "data"
    table = np.loadtxt(folder / "data.txt")
    assert table.shape[0] == n
    columns = list(np.loadtxt(folder / "index_features.txt", dtype=int)) + [
        int(np.loadtxt(folder / "index_target.txt"))
    ]
    table = table[:, columns]  # naval-propulsion-plant has a second target, unused
    rows = lambda x, y: np.concatenate([x, y[:, None]], 1)  # noqa: E731
    ref = table[np.lexsort(table.T[::-1])]
    for split in range(k):
        s = D.load_uci(name, split, data_dir)
        assert s.x_train.shape[1] == d == s.x_test.shape[1] and s.x_train.dtype == np.float64
        assert len(s.y_test) == len(s.x_test) and 0.085 < len(s.y_test) / n < 0.115  # 90/10 splits
        assert np.isfinite(s.x_train).all() and np.isfinite(s.y_train).all()
        # train and test are disjoint and cover the table: as multisets of rows they equal it
        both = np.concatenate([rows(s.x_train, s.y_train), rows(s.x_test, s.y_test)])
        assert np.array_equal(both[np.lexsort(both.T[::-1])], ref)
    with pytest.raises(ValueError, match=f"split must be an integer in 0..{k - 1}"):
        D.load_uci(name, k, data_dir)


def test_uci_splits_differ(data_dir):
    a, b = D.load_uci("concrete", 0, data_dir), D.load_uci("concrete", 1, data_dir)
    assert not np.array_equal(a.y_test, b.y_test)


@pytest.mark.parametrize("name", sorted(D.EBP_TASKS))
def test_ebp(data_dir, name):
    n, d, sparse, _ = D.EBP_TASKS[name]
    t = D.load_ebp(name, data_dir)
    assert t.x.shape == (n, d) and scipy.sparse.issparse(t.x) == sparse and t.x.dtype == np.float64
    if sparse:
        assert isinstance(t.x, scipy.sparse.csr_array) and t.x.has_sorted_indices
        assert np.isfinite(t.x.data).all()
    else:
        assert np.isfinite(t.x).all()
    assert t.y.shape == (n,) and t.y.dtype == np.int8 and set(np.unique(t.y)) == {-1, 1}
    assert t.test_ratio == 0.5


def test_describe_covers_every_dataset(data_dir):
    rows = D.describe(data_dir)
    datasets = {r["dataset"].split(" ")[0] for r in rows}
    assert len(datasets) == 2 + 1 + 1 + len(D.NADE_DATASETS) + len(D.UCI_DATASETS) + len(
        D.EBP_TASKS
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        D.load_mnist("valid")
    with pytest.raises(ValueError, match="name must be one of"):
        D.load_nade("adult")
    with pytest.raises(ValueError, match="name must be one of"):
        D.load_uci("boston")
    with pytest.raises(ValueError, match="name must be one of"):
        D.load_ebp("spam")


def test_data_home_order(monkeypatch, tmp_path):
    monkeypatch.setenv("LIB_DATA_DIR", str(tmp_path / "env"))
    assert D.data_home(tmp_path / "arg")[0] == tmp_path / "arg"
    assert D.data_home()[0] == tmp_path / "env" and "LIB_DATA_DIR" in D.data_home()[1]
    monkeypatch.delenv("LIB_DATA_DIR")
    home, how = D.data_home()
    assert "rederived" in str(home) and "cache" in how


# ---------------------------------------------------------------- parsers on small files


def idx_bytes(a: np.ndarray) -> bytes:
    return b"\0\0\x08" + bytes([a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.tobytes()


def test_read_idx(tmp_path):
    a = np.random.default_rng(0).integers(0, 256, (3, 5, 4), dtype=np.uint8)
    (tmp_path / "a.gz").write_bytes(gzip.compress(idx_bytes(a)))
    (tmp_path / "a.idx").write_bytes(idx_bytes(a))
    assert np.array_equal(D.read_idx(tmp_path / "a.gz"), a)
    assert np.array_equal(D.read_idx(tmp_path / "a.idx"), a)
    (tmp_path / "short.idx").write_bytes(idx_bytes(a)[:-1])
    with pytest.raises(D.DatasetCorruptError, match="declares shape"):
        D.read_idx(tmp_path / "short.idx")
    (tmp_path / "bad.idx").write_bytes(b"\1\2" + idx_bytes(a)[2:])
    with pytest.raises(D.DatasetCorruptError, match="bad magic"):
        D.read_idx(tmp_path / "bad.idx")
    (tmp_path / "trunc.gz").write_bytes(gzip.compress(idx_bytes(a))[:-10])
    with pytest.raises(D.DatasetCorruptError, match="gzip"):
        D.read_idx(tmp_path / "trunc.gz")


def test_read_amat(tmp_path):
    (tmp_path / "a.amat").write_text("0 1 0 1 9\n1 1 0 0 9\n\n")
    assert D.read_amat(tmp_path / "a.amat", n_columns=4).tolist() == [[0, 1, 0, 1], [1, 1, 0, 0]]
    with pytest.raises(D.DatasetCorruptError, match="other than 0 and 1"):
        D.read_amat(tmp_path / "a.amat")  # the dummy column 9 is kept without n_columns
    (tmp_path / "ragged.amat").write_text("0 1\n1\n")
    with pytest.raises(D.DatasetCorruptError, match="one width"):
        D.read_amat(tmp_path / "ragged.amat")


def test_read_libsvm(tmp_path):
    (tmp_path / "a.libsvm").write_text("+1 1:1 3:1\n-1 2:1\n0\n")
    assert D.read_libsvm(tmp_path / "a.libsvm", 3).tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 0]]
    with pytest.raises(D.DatasetCorruptError, match="outside 1..2"):
        D.read_libsvm(tmp_path / "a.libsvm", 2)
    (tmp_path / "b.libsvm").write_text("1 1:0.5\n")
    with pytest.raises(D.DatasetCorruptError, match="not binary"):
        D.read_libsvm(tmp_path / "b.libsvm", 3)


def test_read_mat_dense_and_sparse(tmp_path):
    dense = np.arange(12.0).reshape(3, 4)
    sparse = scipy.sparse.random(6, 9, density=0.25, format="csc", random_state=1)
    scipy.io.savemat(
        tmp_path / "m.mat", {"dense": dense, "sparse": sparse, "labels": np.array([[1], [-1], [1]])}
    )
    m = D.read_mat(tmp_path / "m.mat")
    assert np.array_equal(m["dense"], dense) and m["labels"].shape == (3, 1)
    assert isinstance(m["sparse"], scipy.sparse.csr_array)
    assert np.array_equal(m["sparse"].toarray(), sparse.toarray())
    (tmp_path / "bad.mat").write_bytes((tmp_path / "m.mat").read_bytes()[:100])
    with pytest.raises(D.DatasetCorruptError, match="not a readable MATLAB file"):
        D.read_mat(tmp_path / "bad.mat")


def test_fingerprint_is_independent_of_storage_and_sensitive_to_content():
    a = np.arange(6, dtype=np.uint8).reshape(2, 3)
    assert D.fingerprint({"a": a}) == D.fingerprint({"a": np.asfortranarray(a)})
    assert D.fingerprint({"a": a}) != D.fingerprint({"a": a.reshape(3, 2)})
    assert D.fingerprint({"a": a}) != D.fingerprint({"a": a.astype(np.int16)})
    s = scipy.sparse.random(5, 5, density=0.4, format="csc", random_state=0)
    assert D.fingerprint({"s": s}) == D.fingerprint({"s": scipy.sparse.csr_array(s)})
    t = s.copy()
    t.data[0] += 1
    assert D.fingerprint({"s": s}) != D.fingerprint({"s": t})


# ---------------------------------------------------------------- offline and corrupt files


def test_offline_error_names_dataset_directory_and_url(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "MNIST_URL", "http://127.0.0.1:9/mnist/")  # nothing listens on port 9
    with pytest.raises(D.DatasetNotFoundError) as err:
        D.load_mnist("test", tmp_path)
    msg = str(err.value)
    assert (
        "dataset mnist" in msg
        and str(tmp_path) in msg
        and "http://127.0.0.1:9/mnist/t10k-images-idx3-ubyte.gz" in msg
    )
    assert "the argument data_dir" in msg
    assert not any(p.is_file() for p in tmp_path.rglob("*"))  # no partial file left behind


def test_truncated_file_raises(data_dir, tmp_path):
    (tmp_path / "mnist").mkdir()
    for f in (data_dir / "mnist").iterdir():
        shutil.copy(f, tmp_path / "mnist" / f.name)
    gz = tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz"
    gz.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])
    with pytest.raises(D.DatasetCorruptError, match="t10k-images"):
        D.load_mnist("test", tmp_path)


def test_altered_data_fails_the_fingerprint(data_dir, tmp_path):
    z = dict(np.load(data_dir / "nade" / "dna.npz"))
    z["test"][0, 0] ^= 1  # one flipped bit: still a valid file, but wrong data
    (tmp_path / "nade").mkdir()
    np.savez_compressed(tmp_path / "nade" / "dna.npz", **z)
    with pytest.raises(D.DatasetCorruptError, match="do not hold the expected data"):
        D.load_nade("dna", tmp_path)
    (tmp_path / "nade" / "dna.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(D.DatasetCorruptError, match="not a readable .npz"):
        D.load_nade("dna", tmp_path)


def test_altered_uci_table_fails_the_fingerprint(data_dir, tmp_path):
    shutil.copytree(data_dir / "uci" / "energy", tmp_path / "uci" / "energy")
    table = tmp_path / "uci" / "energy" / "data" / "data.txt"
    lines = table.read_text().splitlines()
    lines[5] = lines[5].replace("0", "1", 1)
    table.write_text("\n".join(lines) + "\n")
    with pytest.raises(D.DatasetCorruptError, match="uci/energy"):
        D.load_uci("energy", 0, tmp_path)


# ---------------------------------------------------------------- downloads, over loopback


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/'www'; yields (root folder, base URL)."""
    www = tmp_path / "www"
    www.mkdir()
    with serve_directory(www) as url:
        yield www, url


def write_libsvm(path: Path, x: np.ndarray):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join("1 " + " ".join(f"{j + 1}:1" for j in np.flatnonzero(r)) + "\n" for r in x)
    )


@pytest.mark.network
def test_download_convert_and_verify_libsvm_and_amat(data_dir, tmp_path, server, monkeypatch):
    www, url = server
    monkeypatch.setattr(D, "NADE_URL", url)
    dna = np.load(data_dir / "nade" / "dna.npz")
    nips = np.load(data_dir / "nade" / "nips.npz")
    for split in ("train", "valid", "test"):
        write_libsvm(www / "dna" / f"dna_scale_{split}.libsvm", dna[split])
        amat = www / "nips-0-12" / f"nips-0-12_all_shuffled_bidon_target_{split}.amat"
        amat.parent.mkdir(parents=True, exist_ok=True)
        # the originals carry a dummy target column after the 500 bits
        amat.write_text("".join(" ".join(map(str, r)) + " 0\n" for r in nips[split]))
    home = tmp_path / "cache"
    for name, ref in (("dna", dna), ("nips", nips)):
        s = D.load_nade(name, home)
        assert all(np.array_equal(getattr(s, k), ref[k]) for k in ("train", "valid", "test"))
        assert (home / "nade" / f"{name}.npz").is_file()
    assert sorted(p.name for p in (home / "nade").iterdir()) == [
        "dna.npz",
        "nips.npz",
    ]  # originals removed


@pytest.mark.network
def test_download_of_wrong_data_is_rejected_and_removed(data_dir, tmp_path, server, monkeypatch):
    www, url = server
    monkeypatch.setattr(D, "NADE_URL", url)
    dna = np.load(data_dir / "nade" / "dna.npz")
    for split in ("train", "valid", "test"):
        x = dna[split].copy()
        if split == "valid":
            x = x[:-1]  # one example missing
        write_libsvm(www / "dna" / f"dna_scale_{split}.libsvm", x)
    home = tmp_path / "cache"
    with pytest.raises(D.DatasetCorruptError, match="downloaded files were deleted"):
        D.load_nade("dna", home)
    assert not (home / "nade" / "dna.npz").exists()


@pytest.mark.network
def test_download_of_a_plain_file(data_dir, tmp_path, server, monkeypatch):
    www, url = server
    name = "caltech101_silhouettes_28_split1.mat"
    shutil.copy(data_dir / "caltech101_silhouettes" / name, www / name)
    monkeypatch.setattr(D, "CALTECH_URL", url + name)
    c = D.load_caltech101_silhouettes(tmp_path / "cache")
    assert c.train.shape == (4100, 784)
    assert (tmp_path / "cache" / "caltech101_silhouettes" / name).read_bytes() == (
        www / name
    ).read_bytes()
