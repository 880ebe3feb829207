"""The documentation site builds with ``mkdocs build --strict`` (no broken link or anchor,
every page in the nav), its generated sections render from what a run writes, and the README
stays short with links that resolve."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def _slug(heading: str) -> str:
    """The anchor MkDocs (toc) and GitHub give a heading: lower case, punctuation dropped."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_every_page_that_names_the_opacus_auditor_leads_to_the_tutorial(repo_root):
    """The tutorial is where an Opacus user starts: every page that names OneRunAudit, and the
    pages an Opacus user opens first, link it."""
    pages = {p for p in (repo_root / "docs").glob("*.md") if "OneRunAudit" in p.read_text()}
    pages |= {repo_root / "docs" / n for n in ("index.md", "opacus.md", "own-data.md", "one-run.md", "install.md")}
    pages |= {repo_root / "README.md"}
    missing = [p.name for p in sorted(pages) if p.name != "tutorial.md" and "tutorial.md" not in p.read_text()]
    assert not missing, missing


def test_site_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module)
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # generated from the parser: every subcommand has its section
    cli = (site / "cli" / "index.html").read_text()
    for command in ("account", "statement", "estimate", "calibrate", "verify"):
        assert f"usage: subaudit {command}" in cli
    # the API pages render each package
    for page in (DOCS / "api").glob("*.md"):
        package = re.search(r"^::: (\S+)", page.read_text(), re.M).group(1)
        assert f'id="{package}"' in (site / "api" / page.stem / "index.html").read_text(), package
    # every marker was expanded (one left over would pass through as an HTML comment)
    for html in site.rglob("*.html"):
        assert "<!-- subaudit:" not in html.read_text(), html


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 150
    # it opens with the two commands, which do their own set-up
    assert lines[2:6] == ["```bash", lines[3], lines[4], "```"]
    assert lines[3].startswith("make run") and lines[4].startswith("make test")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor and target.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, link


def test_markers_render_from_what_a_run_wrote(tmp_path):
    hooks = _hooks()
    # nothing written yet: each section says how to produce it
    assert "make run" in hooks.render_report(tmp_path / "report.json", claim_texts={})
    assert "subaudit bench" in hooks.render_bench(tmp_path / "bench.json")
    assert "make run" in hooks.render_job_seconds(tmp_path / "benchmarks")

    report = {"claims": {"2": {"verdict": "supported", "code": 1, "ratio": 1.3200001},
                         "1": {"verdict": "cannot tell", "code": 0, "audit": 3.95}},
              "supported": 1, "refuted": 0, "cannot_tell": 1, "estimator": "auc",
              "final_step": {"fig3": {"1_S2": 3.62, "1_S3": 3.12, "0.25_S2": 3.54}}}
    (tmp_path / "report.json").write_text(json.dumps(report))
    md = hooks.render_report(tmp_path / "report.json", claim_texts={"1": "S1 audits exceed eps_AR"})
    assert "| 1 | S1 audits exceed eps_AR | cannot tell | audit = 3.95 |" in md
    assert "| 2 |  | supported | ratio = 1.32 |" in md
    assert "| panel | S2 | S3 |" in md and "| 0.25 | 3.54 |  |" in md

    bench = {"quick": True, "matmul_gflops": 300.0, "machine": {"processor": "x86_64", "torch_threads": 2,
                                                                 "torch": "2.13.0", "device": "cpu"},
             "workloads": [{"name": "image head", "sizes": [768, 10], "n": 500, "q": 1.0, "runs": 256,
                            "threads": 2, "basis": "full",
                            "batching": "dense", "engine_model_steps_per_s": 12000.0,
                            "opacus_model_steps_per_s": 130.0, "speedup_vs_opacus": 92.3,
                            "fraction_of_matmul": 0.58, "randomness_share": 0.1},
                           {"name": "text head", "sizes": [384, 2], "n": 1000, "q": 0.25, "runs": 1000,
                            "threads": 1, "basis": "span", "batching": "dense",
                            "engine_model_steps_per_s": 12262.0, "opacus_model_steps_per_s": 650.5,
                            "speedup_vs_opacus": 18.8, "fraction_of_matmul": 0.09, "randomness_share": 0.2}],
             "goals": [{"goal": "image head q=1", "target": 0.5, "measured": 0.58, "met": True}]}
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    md = hooks.render_bench(tmp_path / "bench.json")
    assert "| image head | 768 -> 10 | 500 | 1 | 256 | 2 | full | dense | 12,000/s | 130.0/s | 92x | 58% | 10% |" in md
    assert ("| text head | 384 -> 2 | 1000 | 0.25 | 1000 | 1 | span | dense | 12,262/s | 650.5/s | 19x | 9% "
            "| 20% |") in md
    assert "| image head q=1 | 0.5 | 0.58 | yes |" in md

    (tmp_path / "benchmarks" / "natural" / "image").mkdir(parents=True)
    for name, seconds in (("train_S2_q1", 10.0), ("train_S3_q1", 5.0), ("craft_S3", 5.0)):
        (tmp_path / "benchmarks" / "natural" / "image" / f"{name}.tsv").write_text(
            f"s\th:m:s\tmax_rss\n{seconds}\t0:00:10\t300.5\n")
    md = hooks.render_job_seconds(tmp_path / "benchmarks")
    assert "20 job-seconds" in md and "| natural/image/train | 2 | 15 | 75% | 300 |" in md
    # a job the warm worker ran: its peak memory from its log (the benchmark measured the waiter)
    (tmp_path / "natural" / "image").mkdir(parents=True)
    (tmp_path / "natural" / "image" / "train_S3_q1.log").write_text(
        "INFO job\nwarm worker: ran in process 7, forked from the worker: cpu_s=4.00 max_rss_mb=812.3\n")
    md = hooks.render_job_seconds(tmp_path / "benchmarks")
    assert "| natural/image/train | 2 | 15 | 75% | 812 |" in md

    from subaudit.reporting.claims import CLAIMS

    from subaudit.reporting.figure_registry import FIGURES

    md = hooks.render_figures()
    assert "| `results/figures/fig2.*` | Figure 1 | Figure 2 |" in md
    assert md.count("\n| `results/figures/") == len(FIGURES)
    md = hooks.render_claims()
    paper = sum(not c.beyond for c in CLAIMS.values())
    assert f"The paper's {paper} claims:" in md and f"and {len(CLAIMS) - paper} beyond it:" in md
    assert all(f"{c.number}. {c.text} (" in md for c in CLAIMS.values())

    (tmp_path / "params.yaml").write_text("a: 1  # one\n\nb:\n  c: 2   # two\n  d: [3]\ne: 4\n")
    assert "b:\n  c: 2   # two\n  d: [3]\n```" in hooks.render_params(tmp_path / "params.yaml", "b")


def test_findings_are_computed_from_the_figure_csvs(tmp_path):
    """The findings pages show (docs marker ``finding``) say what the reference figures' CSVs say,
    checked against pandas; no page states a finding typed from an old run."""
    import pandas as pd

    hooks = _hooks()
    ref = ROOT / "reference" / "figures"
    assert hooks._figures_folder(tmp_path) == tmp_path / "reference" / "figures"
    assert "make run" in hooks.render_one_run_finding(tmp_path)

    md = hooks.render_scenario_finding(ref, "S6")
    frames = []
    for name in hooks.FINAL_STEP_FIGURES:
        d = pd.read_csv(ref / f"{name}.csv")
        d = d[d["step"] == d.groupby(["experiment", "q"])["step"].transform("max")]
        d = d.assign(column=d["scenario"].fillna(d["series"].str.split(" ").str[0]))
        frames.append(d.pivot_table(index=["experiment", "q"], columns="column", values="epsilon"))
    table = pd.concat(frames).dropna(subset=["S6"])   # the settings that audit S6
    for other in ("S2", "S4", "S7", "eps_AR"):
        below = int((table["S6"] < table[other]).sum())
        assert f"below {other} in {below} of {len(table)}" in md
    assert md.count("\n| image |") == 3

    one = pd.read_csv(ref / "one-run.csv")
    md = hooks.render_one_run_finding(ref)
    for kind, d in one.groupby("kind"):
        best = d[d.series.str.startswith("one-run")].groupby("q").epsilon.max()
        rrun = d[d.series.str.startswith("R-run")].set_index("q").epsilon
        share = best / rrun
        assert f"`{kind}` canaries reached {share.min():.0%} to {share.max():.0%} of the R-run bound" in md

    rec = pd.read_csv(ref / "reconstruction.csv")
    rec = rec[~rec.outcome.str.contains("recovered")].pivot(index="outcome", columns="source", values="units")
    md = hooks.render_reconstruction_finding(ref)
    for source in ("predicted (nominal fire rate)", "predicted (held-out rates)"):
        assert f"{source}: off by {(rec[source] - rec['observed']).abs().sum():.0f} units in all" in md

    typed = [p.name for p in DOCS.glob("*.md") if re.search(r"On the default run \(commit", p.read_text())]
    assert typed == []


def test_docstrings_render_as_markdown():
    hooks = _hooks()
    assert hooks.markdown_docstring(":func:`x` and :class:`~a.B`") == "`x` and `a.B`"
    # a[i][j] would be a reference link autorefs cannot resolve; code is left alone
    assert hooks.markdown_docstring("a[i][j] `b[i][j]`\n    c[i][j]") == "a[i]\\[j] `b[i][j]`\n    c[i][j]"


def test_the_workflow_page_names_every_section_rule_file_and_figure(repo_root):
    """docs/workflow.md names each section of params.yaml, each rule file and each figure the
    registry draws; the DVC stage versions every output folder the workflow page lists."""
    import yaml

    from subaudit.reporting.figure_registry import FIGURES

    page = (repo_root / "docs" / "workflow.md").read_text()
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    for key, value in params.items():
        if isinstance(value, dict):
            assert f"`{key}`" in page, f"params.yaml section {key} missing from docs/workflow.md"
    for rules in (repo_root / "workflow" / "rules").glob("*.smk"):
        if rules.stem != "common":
            assert f"`{rules.stem}`" in page, f"rule file {rules.name} missing from docs/workflow.md"
    for name in FIGURES:
        assert f"results/figures/{name}" in page or f"`{name}`" in page, f"figure {name} missing"
    outs = {next(iter(o)) for o in yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]["default"]["outs"]}
    for folder in ("results/deep", "results/reconstruction", "results/one_run", "results/natural"):
        assert folder in outs and f"`{folder}/" in page


_FENCE = re.compile(r"^(?:[ ]*<!--\s*not run:\s*(?P<why>[^\n]+?)\s*-->\n[ ]*\n)?"
                    r"(?P<indent>[ ]*)```(?P<lang>python|bash)[^\n]*\n(?P<body>.*?)\n(?P=indent)```", re.S | re.M)


def _code_blocks(repo_root: Path) -> list[tuple[str, str, str, str | None]]:
    """Every python and bash block of the docs and the README: (where, language, code, why it
    is not run or None)."""
    out = []
    for page in [repo_root / "README.md", *sorted((repo_root / "docs").glob("*.md"))]:
        text = page.read_text()
        for m in _FENCE.finditer(text):
            line = text[:m.start("lang")].count("\n") + 1
            out.append((f"{page.relative_to(repo_root)}:{line}", m.group("lang"), m.group("body"), m.group("why")))
    return out


def test_every_code_block_in_the_docs_runs_or_says_why_not(repo_root, tmp_path):
    """A python block runs as it is; a bash block of `subaudit` commands runs line by line (in
    an empty folder); the README's two `make` commands are the checks every change passes; any
    other block is marked `<!-- not run: why -->` above it."""
    blocks = _code_blocks(repo_root)
    assert len(blocks) > 30
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    failures = []
    for where, lang, code, why in blocks:
        if why is not None:
            continue
        if lang == "python":
            cmd = [sys.executable, "-c", code]
        else:
            lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
            if [ln.split()[:2] for ln in lines] == [["make", "run"], ["make", "test"]]:
                continue
            if not all(ln.startswith("subaudit ") for ln in lines):
                failures.append(f"{where}: not only subaudit commands: mark it <!-- not run: why -->")
                continue
            cmd = ["bash", "-euo", "pipefail", "-c", "\n".join(lines)]
        work = tmp_path / where.replace("/", "_").replace(":", "_")
        work.mkdir()
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            failures.append(f"{where}: exit {proc.returncode}\n{proc.stderr[-1500:]}")
    assert not failures, "\n\n".join(failures)
