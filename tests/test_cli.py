"""End to end: the `envengineer` command runs on its embedded default."""

from __future__ import annotations

from designer.cli import main
from designer.demo import demo


def test_demo_runs_and_reports(capsys):
    summary = demo(levels=16, envs=8, steps=16, seed=0)
    out = capsys.readouterr().out
    assert "A sample level" in out and "G0" in out
    assert summary["env_steps_per_s"] > 0
    assert summary["episodes"] > 0
    # Random joint actions almost always fail; the causes must account for every episode.
    assert sum(summary["failure_causes"].values()) + round(
        summary["random_policy_success"] * summary["episodes"]) == summary["episodes"]


def test_main_parses_arguments():
    assert main(["demo", "--levels", "8", "--envs", "4", "--steps", "4"]) == 0
