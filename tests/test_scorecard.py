"""The reproduction record: claims, their statuses from results/, the scorecard CLI, the README's
counts, and the provenance every results file carries."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lib.record as R
import lib.toolkit as T

ROOT = Path(__file__).resolve().parents[1]


def _write(root: Path, rel: str, record: dict) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


# ---------------------------------------------------------------- the mechanism, on files made here


def test_read_key_path_indexes_keys_positions_and_rows():
    record = {
        "rows": [
            {"model": "SGP", "acc": 0.9},
            {"model": "DGP 2", "acc": 0.95, "deep": {"x": [1, 2]}},
        ]
    }
    assert R.read_key_path(record, "rows/1/acc") == 0.95
    assert R.read_key_path(record, "rows/model=SGP/acc") == 0.9
    assert R.read_key_path(record, "rows/model=DGP 2/deep/x/1") == 2
    with pytest.raises(KeyError, match="0 rows with model = 'DGP 3'"):
        R.read_key_path(record, "rows/model=DGP 3/acc")
    with pytest.raises(KeyError, match="no key 'nope'"):
        R.read_key_path(record, "rows/0/nope")


@pytest.mark.parametrize(
    "direction, ours, status",
    [
        ("two-sided", 10.4, "reproduced"),
        ("two-sided", 9.4, "not reproduced"),
        ("two-sided", 10.6, "not reproduced"),
        ("at least", 9.6, "reproduced"),
        ("at least", 9.4, "not reproduced"),
        ("at least", 99.0, "reproduced"),
        ("at most", 10.5, "reproduced"),
        ("at most", 10.6, "not reproduced"),
        ("at most", -99.0, "reproduced"),
        ("two-sided", float("nan"), "not reproduced"),
    ],
)
def test_evaluate_compares_in_the_claims_direction(tmp_path, direction, ours, status):
    _write(tmp_path, "results/x/a.json", {"rows": [{"v": ours}]})
    claim = R.Claim(
        "dgp",
        "Table 9",
        "row",
        "v",
        10.0,
        ours="results/x/a.json:rows/0/v",
        tolerance=0.5,
        direction=direction,
        expect=status,
        note="" if status == "reproduced" else "why",
        tolerance_basis="set for the test",
    )
    record = R.evaluate(claim, tmp_path)
    assert record["status"] == status and record["source"] == ["results/x/a.json"]
    assert R.check_claims([claim], tmp_path)[0]["status"] == status


def test_paired_difference_is_the_paired_t_statistics_mean_and_standard_error():
    """Oracle: scipy's paired t test; its statistic is mean / se of the differences."""
    from scipy import stats

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12) + 0.3
    p = R.paired_difference(a, b)
    assert p.n == 12 and np.isclose(p.mean, np.mean(a - b))
    assert np.isclose(p.mean / p.se, stats.ttest_rel(a, b).statistic)
    assert R.Paired(-0.3, 0.1, 5).reading == "worse" and R.Paired(0.3, 0.1, 5).reading == "better"
    assert R.Paired(-0.19, 0.1, 5).reading == "tie"
    assert np.isclose(R.Paired(0.3, 0.1, 5).margin, 0.3 - R.PAIRED_Z * 0.1)
    with pytest.raises(ValueError, match="one length >= 2"):
        R.paired_difference([1.0], [2.0])


@pytest.mark.parametrize(
    "ours, extra, status, finding",
    [
        (10.4, {}, "reproduced", None),
        (10.4, {"changes": "trained on from another run"}, "reproduced with changes", None),
        (10.4, {"unreliable": "the tracker drifted"}, "not reproduced", None),
        (11.0, {"better": "higher"}, "not reproduced", "better than the paper"),
        (9.0, {"better": "higher"}, "not reproduced", None),
        (9.0, {"better": "lower"}, "not reproduced", "better than the paper"),
    ],
)
def test_the_four_statuses_and_the_finding(tmp_path, ours, extra, status, finding):
    """A tolerance from the files (two standard errors of ours), changes, distrust, the better
    side."""
    _write(tmp_path, "results/x/a.json", {"rows": [{"v": ours, "se": 0.25}]})
    claim = R.Claim(
        "dgp",
        "Table 9",
        "row",
        "v",
        10.0,
        ours="results/x/a.json:rows/0/v",
        tolerance=lambda r: R.TOLERANCE_Z * r["results/x/a.json"]["rows"][0]["se"],
        tolerance_basis="two standard errors of ours over the splits; the paper gives none",
        expect=status,
        note="" if status == "reproduced" else "why",
        **extra,
    )
    record = R.check_claims([claim], tmp_path)[0]
    assert (record["status"], record["finding"]) == (status, finding)
    assert record["tolerance"] == "10.00 ± 0.5" and record["tolerance_value"] == 0.5
    assert np.isclose(record["gap"], (ours - 10.0) / 0.5)
    assert record["tolerance_basis"].startswith("two standard errors")


def test_a_function_of_several_files_a_reduced_source_and_not_run(tmp_path):
    _write(tmp_path, "results/x/a.json", {"rows": [{"v": 1.0}]})
    _write(tmp_path, "results/x/b.json", {"reduced": True, "rows": [{"v": 3.0}]})
    both = R.Claim(
        "ebp",
        "Sec. 5",
        "b - a",
        "gain",
        "b beats a",
        target=0.0,
        direction="at least",
        sources=("results/x/a.json", "results/x/b.json"),
        ours=lambda r: (
            r["results/x/b.json"]["rows"][0]["v"] - r["results/x/a.json"]["rows"][0]["v"]
        ),
        tolerance_basis="set for the test",
    )
    skipped = R.Claim(
        "ebp", "Table 1", "AROW", "error %", 13.3, expect="not run", note="not implemented"
    )
    got = R.check_claims([both, skipped], tmp_path)
    assert (
        got[0]["ours"] == 2.0
        and got[0]["reduced"] == ["results/x/b.json"]
        and got[0]["tolerance"] == "≥ 0"
    )
    assert got[1]["status"] == "not run" and got[1]["ours"] is None and got[1]["source"] == []


def test_a_missing_results_file_is_an_error_not_a_not_run(tmp_path):
    claim = R.Claim(
        "darn",
        "Table 2",
        "nh = 9",
        "log p",
        -138.84,
        ours="results/darn/gone.json:rows/0/x",
        tolerance_basis="set for the test",
    )
    with pytest.raises(FileNotFoundError, match="results/darn/gone.json is missing"):
        R.check_claims([claim], tmp_path)


def test_check_claims_fails_when_a_status_changes(tmp_path):
    _write(tmp_path, "results/x/a.json", {"rows": [{"v": 5.0}]})
    claim = R.Claim(
        "nram",
        "Table 1",
        "Copy",
        "error",
        0.0,
        ours="results/x/a.json:rows/0/v",
        direction="at most",
        tolerance_basis="set for the test",
    )
    with pytest.raises(
        AssertionError, match="nram / Table 1 / Copy: not reproduced .* the book states reproduced"
    ):
        R.check_claims([claim], tmp_path)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"paper": "gpt"}, "Claim.paper must be one of"),
        ({"direction": "sideways"}, "Claim.direction must be one of"),
        ({"expect": "maybe"}, "Claim.expect must be one of"),
        ({"tolerance": -1.0}, "Claim.tolerance must be a finite number >= 0"),
        ({"tolerance": float("nan")}, "Claim.tolerance must be a finite number >= 0"),
        ({"ours": None}, "must expect 'not run' and say why"),
        ({"ours": "rows/0/v"}, "Claim.ours must be 'results/...json:key/path'"),
        ({"ours": lambda r: 0.0}, "needs the files it reads in `sources`"),
        ({"expect": "not reproduced"}, "say why in `note`"),
        ({"better": "up"}, "Claim.better must be one of"),
        ({"tolerance_basis": " "}, "say where its tolerance comes from in `tolerance_basis`"),
        ({"expect": "reproduced with changes", "note": "n"}, "'reproduced with changes' and"),
        ({"changes": "a smaller learning rate"}, "'reproduced with changes' and"),
        (
            {"paper_value": "better", "target": None},
            "paper_value is not a number, so give `target`",
        ),
    ],
)
def test_a_malformed_claim_is_refused_with_the_field_named(kwargs, message):
    fields = dict(
        paper="dgp",
        where="Table 1",
        item="x",
        quantity="q",
        paper_value=1.0,
        ours="results/x/a.json:rows/0/v",
        tolerance_basis="set for the test",
    )
    fields.update(kwargs)
    with pytest.raises(ValueError, match=re.escape(message)):
        R.Claim(**fields)


def test_the_table_renders_as_html_and_text(tmp_path):
    _write(tmp_path, "results/x/a.json", {"reduced": True, "rows": [{"v": 0.9716}]})
    records = R.check_claims(
        [
            R.Claim(
                "dgp",
                "Sec. 4",
                "MNIST SGP",
                "accuracy",
                0.9748,
                ours="results/x/a.json:rows/0/v",
                tolerance=0.001,
                direction="at least",
                expect="not reproduced",
                note="short",
                section="dgp#dgp-mnist",
                tolerance_basis="set for the test",
            )
        ],
        tmp_path,
    )
    table = R.ScorecardTable(records, page="dgp")
    html = table._repr_html_()
    assert (
        '<a href="#dgp-mnist">dgp §</a> short' in html
        and "not reproduced" in html
        and "<sup" in html
    )
    summary = "dgp: 0 reproduced, 0 reproduced with changes, 1 not reproduced, 0 not run"
    assert "0.9716*" in repr(table) and summary in repr(table)
    assert "Tolerance:</em> set for the test" in html
    assert 'href="dgp.html#dgp-mnist"' in R.ScorecardTable(records)._repr_html_()


def test_a_run_of_unknown_code_is_marked(tmp_path):
    _write(tmp_path, "results/x/a.json", {"git_diff_note": "unknown", "rows": [{"v": 1.0}]})
    claim = R.Claim(
        "nram",
        "Table 1",
        "Copy",
        "error",
        1.0,
        ours="results/x/a.json:rows/0/v",
        tolerance_basis="b",
    )
    (record,) = R.check_claims([claim], tmp_path)
    assert record["unknown_code"] == ["results/x/a.json"] and not record["reduced"]
    table = R.ScorecardTable([record])
    assert "1.00†" in repr(table) and ">†</sup>" in table._repr_html_()


# ---------------------------------------------------------------- the book's own registries


@pytest.fixture(scope="module")
def book_records():
    return R.check_claims(R.all_claims(), ROOT)  # every status is the one its chapter states


def test_the_scorecard_covers_all_five_papers_with_valid_records(book_records):
    assert len(book_records) >= 60
    assert {r["paper"] for r in book_records} == set(R.PAPERS)
    for r in book_records:
        assert r["status"] in R.STATUSES and r["where"] and r["item"] and r["quantity"], r
        if r["ours"] is not None:  # every number has a tolerance and says where it comes from
            assert r["tolerance_basis"].strip() and r["tolerance_value"] is not None, r
        if r["status"] != "reproduced":
            assert r["note"].strip(), r
        for rel in r["source"]:
            assert (ROOT / rel).is_file(), rel
        if r["status"] == "not run":
            assert r["note"] and not r["source"], r
        else:
            assert r["source"] and r["ours"] is not None, r
        if r["status"] == "not reproduced":
            assert r["note"] and r["section"], r
    keys = [(r["paper"], r["where"], r["item"], r["quantity"]) for r in book_records]
    assert len(keys) == len(set(keys)), "two records of the same cell"


def test_every_section_a_record_links_to_exists(book_records):
    for r in book_records:
        if r["section"]:
            chapter, _, label = r["section"].partition("#")
            text = (ROOT / "book" / f"{chapter}.md").read_text()
            assert f"({label})=" in text, r["section"]


def test_the_readme_gives_the_scorecards_counts(book_records):
    readme = (ROOT / "README.md").read_text()
    counts = R.scorecard_counts(book_records)
    total = {s: sum(c[s] for c in counts.values()) for s in R.STATUSES}
    said = re.search(
        r"scorecard holds (\d+) records: (\d+) reproduced, (\d+) reproduced with changes, "
        r"(\d+) not\s+reproduced, (\d+) not run; (\d+) of the records not reproduced are better",
        readme,
    )
    assert said, "README: the sentence 'the scorecard holds N records: ...' is missing"
    better = sum(1 for r in book_records if r["finding"] == "better than the paper")
    expected = [len(book_records), *(total[s] for s in R.STATUSES), better]
    assert [int(x) for x in said.groups()] == expected
    for paper, c in counts.items():
        row = "| " + " | ".join([paper, *(str(c[s]) for s in R.STATUSES)]) + " |"
        assert row in readme, f"README's row for {paper} should read {row}"


def test_python_m_lib_scorecard_json():
    out = subprocess.run(
        [sys.executable, "-m", "lib", "scorecard", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    records = json.loads(out)
    assert len(records) >= 60
    for r in records:
        assert {
            "paper",
            "where",
            "item",
            "quantity",
            "paper_value",
            "ours",
            "tolerance",
            "status",
            "source",
        } <= set(r)
    text = subprocess.run(
        [sys.executable, "-m", "lib", "scorecard", "--paper", "nram"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    assert "Table 1" in text and "dgp " not in text


# ------------------------------------------------------------ provenance of the committed results


def test_every_results_file_says_how_it_relates_to_its_preset():
    for path in sorted((ROOT / "results").glob("*/*.json")):
        record = json.loads(path.read_text())
        rel = path.relative_to(ROOT)
        assert "deviations" in record and "git_diff_sha256" in record, (
            f"{rel}: run tools/migrate_results.py"
        )
        if record.get("preset") is not None:
            assert record["reduced"] == bool(record["deviations"]), rel
        # a run of uncommitted code names that code: the diff's hash and the diff beside it (the
        # legacy records that could not, "git_diff_note", were all run again at clean commits)
        assert not record.get("git_diff_note"), f"{rel}: rerun it (tools/run_queue.py --legacy)"
        if str(record["git_commit"]).endswith("-dirty"):
            diff = path.with_suffix(".diff")
            assert record["git_diff_sha256"] and diff.is_file(), rel


def test_the_readme_and_introduction_state_the_step_benchmark_as_it_stands():
    """README and the introduction say in words how many of the benchmark's configurations lib.dgp
    wins like for like: the words follow results/benchmarks/dgp-step.json."""
    summary = json.loads((ROOT / "results" / "benchmarks" / "dgp-step.json").read_text())["summary"]
    behind = sum(not e["ours_over_best_peer"] < 1 for e in summary)
    words = {0: f"all {len(summary)}", 1: "all configurations but one"}
    numbers = {12: "twelve"}
    said = words.get(behind, "").replace(str(len(summary)), numbers.get(len(summary), "?"))
    assert said, f"lib.dgp behind a peer in {behind} configurations: say it in README and intro"
    for page in (ROOT / "README.md", ROOT / "book" / "intro.md"):
        text = " ".join(page.read_text().split())
        assert f"faster in {said}" in text, f"{page.name} should say 'faster in {said}'"


def test_the_reports_paired_tests_and_the_records_agree(book_records):
    """One reading of worse and better (lib.record.PAIRED_Z): the reports' cells compute it with
    the functions the records use, and each record's status is what that reading says."""
    import lib.dgp_report as G
    import lib.ebp_report as E

    assert "uci_paired(" in (ROOT / "book" / "dgp_report.md").read_text()
    assert "compare_columns(" in (ROOT / "book" / "ebp_report.md").read_text()
    by_item = {(r["paper"], r["item"]): r for r in book_records}
    never_worse = [c for c in G.CLAIMS if c.paper_value == "DGP never worse than SGP"]
    assert len(never_worse) >= 10
    for claim in never_worse:
        label, model = claim.item.rsplit(" − ", 1)[0].rsplit(" DGP ", 1)
        files = {f: json.loads((ROOT / f).read_text()) for f in claim.sources}
        dataset = next(row["dataset"] for rec in files.values() for row in rec["rows"])
        reading = G.uci_paired(files, dataset, f"DGP {model}").reading
        record = by_item["dgp", claim.item]
        if claim.unreliable:
            assert record["status"] == "not reproduced", record
        else:
            assert (record["status"] == "reproduced") == (reading != "worse"), (reading, record)
    rows = [
        row
        for f in E._TEXT_FILES + (E._AROW_FILE,)
        for row in json.loads((ROOT / f).read_text())["rows"]
    ]
    for kind in ("Real", "Binary"):
        for other, item in (
            ("BP", f"{kind} EBP-P ≤ BP, all tasks"),
            ("AROW", f"{kind} EBP-P ≤ AROW, all tasks"),
        ):
            readings = {
                E.compare_columns(rows, task, f"{kind} EBP-P", other).reading
                for task in E.PAPER_TABLE1
            }
            record = by_item["ebp", item]
            assert (record["status"] == "reproduced") == (readings == {"better"}), (
                readings,
                record,
            )
