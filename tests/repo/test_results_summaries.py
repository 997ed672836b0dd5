"""Results stay summaries: every experiment under benchmarks/results keeps one summary.json
that says how its figures were made, and every results path the README and docs quote exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
REQUIRED = ("command", "commit", "seeds", "machine")
QUOTED = re.compile(r"benchmarks/results/(?:[A-Za-z0-9_./*-]|\{[^}\s]*\})*[A-Za-z0-9_/*}-]")
SUMMARIES = sorted(RESULTS.glob("*/summary.json"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def quoted_paths(text: str) -> list[str]:
    """The `benchmarks/results/...` paths a page names; a name cut at `_` (a family of
    files, as in `trainee_ablation_*.json`) or with a glob is kept as a pattern."""
    return [m.group(0).rstrip("/.") for m in QUOTED.finditer(text)]


def exists(path: str) -> bool:
    if any(c in path for c in "*{"):
        alternatives = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", path)
        if alternatives:
            head, options, tail = alternatives.groups()
            return all(exists(head + o + tail) for o in options.split(","))
        return any(ROOT.glob(path))
    return (ROOT / path).exists() or (path.endswith("_") and any(ROOT.glob(path + "*")))


def test_every_experiment_folder_has_a_summary() -> None:
    folders = sorted(p for p in RESULTS.iterdir() if p.is_dir())
    assert folders, "benchmarks/results holds no experiment folder"
    assert [p for p in folders if not (p / "summary.json").is_file()] == []


def test_experiment_folders_hold_only_summary_report_and_plots() -> None:
    allowed = {"summary.json", "report.md"}
    extra = [p.relative_to(RESULTS).as_posix() for p in RESULTS.glob("*/*")
             if p.name not in allowed and p.suffix != ".png"]
    assert extra == []


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.parent.name)
def test_summary_names_command_commit_seeds_machine(path: Path) -> None:
    summary = json.loads(path.read_text())
    missing = [k for k in REQUIRED if k not in summary or summary[k] in ("", None, "unknown")]
    assert missing == [], f"{path.relative_to(ROOT)}: missing {missing}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_quoted_results_paths_exist(page: Path) -> None:
    missing = [p for p in quoted_paths(page.read_text()) if not exists(p)]
    assert missing == [], f"{page.relative_to(ROOT)} names missing results: {missing}"


@pytest.mark.parametrize("page", ["README.md", "docs/results.md"])
def test_headline_figures_resolve_to_a_summary(page: str) -> None:
    """Every mean ± std the headline tables quote is in some experiment's summary.json."""
    stored = "".join(p.read_text() for p in SUMMARIES)
    figures = set(re.findall(r"\d+\.\d+ ± \d+\.\d+", (ROOT / page).read_text()))
    assert figures, f"{page} quotes no headline figure"
    assert sorted(f for f in figures if f not in stored) == []


def test_quoted_path_pattern() -> None:
    text = ("see `benchmarks/results/compare_v8/summary.json`, "
            "benchmarks/results/gpu_h200/ and benchmarks/results/trainee_ablation_*.json, "
            "benchmarks/results/learned_vs_frozen_{cartpole,mapf}.json.")
    assert quoted_paths(text) == ["benchmarks/results/compare_v8/summary.json",
                                  "benchmarks/results/gpu_h200",
                                  "benchmarks/results/trainee_ablation_*.json",
                                  "benchmarks/results/learned_vs_frozen_{cartpole,mapf}.json"]
    assert exists("benchmarks/results/learned_vs_frozen_{cartpole,mapf}.json")
    assert not exists("benchmarks/results/learned_vs_frozen_{cartpole,nothing}.json")
    assert exists("benchmarks/results/compare_v8/summary.json")
    assert not exists("benchmarks/results/compare_v8/run_folders")
