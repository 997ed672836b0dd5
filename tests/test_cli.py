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


def test_run_trainee_llm_flags_build_the_llm_settings():
    """`run --trainee llm` and its knobs land in `RunSettings` (the CPU preset's 4x4 maps)."""
    from designer.cli import Parser, add_run_flags, build_settings

    p = Parser()
    add_run_flags(p)
    s = build_settings(p.parse_args(["--trainee", "llm", "--llm-steps", "5", "--llm-group", "8",
                                     "--llm-sft-steps", "10", "--llm-verify-levels", "6"]))
    assert s.trainee_kind == "llm" and (s.llm.steps, s.llm.group) == (5, 8)
    assert (s.llm.sft_steps, s.llm.verify_levels) == (10, 6)
    assert (s.capacity.max_size, s.capacity.max_agents) == (4, 2)
    assert build_settings(p.parse_args([])).trainee_kind == "ppo"
