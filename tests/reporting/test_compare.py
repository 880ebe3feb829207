"""Tests for subaudit.reporting.compare (``subaudit compare``): equal, rounded and changed
inputs, verdicts, structure, a git revision's reference, and the reference kept in git in step
with ``dvc.lock``.  The DVC path (a revision without ``reference/``): tests/workflow/test_dvc.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import run_cli
from subaudit.reporting import compare as cmp


def results(folder: Path, fig: pd.DataFrame, report: dict) -> Path:
    (folder / "figures").mkdir(parents=True, exist_ok=True)
    fig.to_csv(folder / "figures" / "fig3.csv", index=False, float_format="%.10g")
    (folder / "report.json").write_text(json.dumps(report, indent=2))
    return folder


FIG = pd.DataFrame({"scenario": ["S2", "S3"], "q": [1.0, 0.25], "epsilon": [3.784593047, 1.25]})
REPORT = {"claims": {"5": {"verdict": "supported", "q_verdict": 1, "drop": 0.0677686013333334}}, "cannot_tell": 0}


def changed(fig=None, **claim) -> tuple[pd.DataFrame, dict]:
    report = json.loads(json.dumps(REPORT))
    report["claims"]["5"].update(claim)
    return (FIG if fig is None else fig), report


def test_equal_runs_agree_and_every_value_is_identical(tmp_path):
    a, b = results(tmp_path / "a", FIG, REPORT), results(tmp_path / "b", FIG, REPORT)
    c = cmp.compare_folders(a, b)
    assert c.agrees and not c.verdicts
    assert [f.name for f in c.files] == ["figures/fig3.csv", "report.json"]
    assert all(f.same_bytes and f.counts == {"identical": f.counts["identical"], "printed": 0, "different": 0}
               for f in c.files)
    assert c.files[0].counts["identical"] == 6 and c.files[1].counts["identical"] == 4
    proc = run_cli("compare", str(a), str(b))
    assert proc.returncode == 0 and "agrees" in proc.stdout


def test_values_equal_at_the_printed_precision_agree_but_are_counted():
    fig = FIG.assign(epsilon=[3.784593047 + 2e-7, 1.25])        # 3.78 either way
    c = cmp.compare_tables("fig3.csv", fig.astype(str), FIG.astype(str))
    assert c.agrees and c.counts["printed"] == 1 and c.counts["different"] == 0
    (cell,) = c.cells
    assert cell.column == "epsilon" and cell.row == "row 1 (scenario=S2)"
    assert cell.abs_diff == pytest.approx(2e-7) and cell.rel_diff == pytest.approx(2e-7 / 3.784593047)


def test_a_list_of_numbers_is_as_its_worst_element():
    assert cmp._classify("1.0;2.0000001", "1.0;2.0")[0] == "printed"
    status, diff, _ = cmp._classify("1.0;2.01;3.0000001", "1.0;2.0;3.0")
    assert status == "different" and diff == pytest.approx(0.01)
    assert cmp._classify("1;2", "1;2;3")[0] == "different"


def test_a_value_that_moved_beyond_the_printed_precision_fails(tmp_path):
    a = results(tmp_path / "a", FIG.assign(epsilon=[3.79, 1.25]), REPORT)   # 3.79 against 3.78
    b = results(tmp_path / "b", FIG, REPORT)
    c = cmp.compare_folders(a, b)
    assert not c.agrees and c.files[0].counts["different"] == 1 and c.files[1].agrees
    assert c.files[0].largest.abs_diff == pytest.approx(3.79 - 3.784593047)
    proc = run_cli("compare", str(a), str(b), check=False)
    assert proc.returncode == 1
    assert "figures/fig3.csv: 1 values differ beyond the printed precision" in proc.stdout
    assert "epsilon in row 1 (scenario=S2): 3.79 vs 3.784593047" in proc.stdout
    listed = json.loads(run_cli("compare", str(a), str(b), "--json", check=False).stdout)
    assert listed["agrees"] is False and listed["files"][0]["cells"][0]["status"] == "different"


def test_a_changed_verdict_is_named_even_with_every_number_printed_equal(tmp_path):
    a = results(tmp_path / "a", *changed(verdict="cannot tell"))
    b = results(tmp_path / "b", FIG, REPORT)
    c = cmp.compare_folders(a, b)
    assert not c.agrees
    assert [(v.column, v.run, v.reference) for v in c.verdicts] == [("claims.5.verdict", '"cannot tell"',
                                                                      '"supported"')]
    out = cmp.format_comparison(c)
    assert 'verdicts that changed:\n  claims.5.verdict: "cannot tell" (reference "supported")' in out
    c = cmp.compare_folders(results(tmp_path / "c", *changed(q_verdict=0)), b)   # a coded verdict
    assert [v.column for v in c.verdicts] == ["claims.5.q_verdict"]


def test_structure_differences_fail(tmp_path):
    b = results(tmp_path / "b", FIG, REPORT)
    extra = results(tmp_path / "rows", FIG.iloc[:1], REPORT)
    assert cmp.compare_folders(extra, b).files[0].structure == ["1 rows in the run, 2 in the reference"]
    cols = results(tmp_path / "cols", FIG.assign(se=0.1), {**REPORT, "new": 1})
    c = cmp.compare_folders(cols, b)
    assert not c.agrees and c.files[0].structure == ["columns only in the run: se"]
    assert c.files[1].structure == ["keys only in the run: new"]
    shutil.copy(b / "figures" / "fig3.csv", b / "figures" / "fig4.csv")
    c = cmp.compare_folders(results(tmp_path / "a", FIG, REPORT), b)
    assert not c.agrees and c.files[1].name == "figures/fig4.csv" and c.files[1].structure == [
        "only in the reference"]


def test_a_git_revision_is_compared_through_its_reference(tmp_path):
    repo = tmp_path / "repo"
    results(repo / cmp.REFERENCE, FIG, REPORT)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "reference"], check=True)
    run = results(tmp_path / "run" / "results", FIG.assign(epsilon=[3.9, 1.25]), REPORT)
    c = cmp.compare(run.parent, "HEAD", repo=repo)                  # a run's folder: its results/
    assert not c.agrees and c.files[0].counts["different"] == 1
    assert cmp.compare(repo / cmp.REFERENCE, "HEAD", repo=repo).agrees
    proc = run_cli("compare", str(run.parent), "no-such-rev", "--repo", str(repo), check=False)
    assert proc.returncode == 2 and "REFERENCE = 'no-such-rev' is invalid" in proc.stderr
    proc = run_cli("compare", str(tmp_path / "empty"), str(repo / cmp.REFERENCE), check=False)
    assert proc.returncode == 2 and "no results here" in proc.stderr


def _lock_md5(repo_root: Path, path: str) -> str:
    lock = yaml.safe_load((repo_root / "dvc.lock").read_text())
    (md5,) = [o["md5"] for stage in lock["stages"].values() for o in stage["outs"] if o["path"] == path]
    return md5


def test_the_reference_in_git_is_the_run_dvc_lock_records(repo_root):
    """reference/report.json is the report dvc.lock records (its md5), and it pins every figure
    CSV of reference/ by sha256 (figure_csvs): regenerating dvc.lock without copying the new
    results into reference/ fails here."""
    ref = repo_root / cmp.REFERENCE
    report = (ref / "report.json").read_bytes()
    assert hashlib.md5(report).hexdigest() == _lock_md5(repo_root, "results/report.json")
    pinned = json.loads(report)["figure_csvs"]
    assert pinned == {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in sorted((ref / "figures").glob("*.csv"))}
    assert sorted(p.name for p in ref.iterdir()) == ["README.md", "figures", "report.json"]
