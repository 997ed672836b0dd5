"""End to end: the `envengineer` command runs on its embedded default."""

from __future__ import annotations

import pytest

from designer.cli import main
from designer.tasks.mapf.demo import demo


@pytest.mark.slow
def test_demo_runs_and_reports(capsys):
    summary = demo(levels=16, envs=8, steps=16, seed=0)
    out = capsys.readouterr().out
    assert "A sample level" in out and "G0" in out
    assert summary["env_steps_per_s"] > 0
    assert summary["episodes"] > 0
    # Random joint actions almost always fail; the causes must account for every episode.
    assert sum(summary["failure_causes"].values()) + round(
        summary["random_policy_success"] * summary["episodes"]) == summary["episodes"]


@pytest.mark.slow
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


def test_verify_signal_flag_and_family_defaults():
    """`--verify-signal` lands in `VerifySettings.signal`; unset, the family decides (return
    for the control families, success for MAPF); a bad value is one clear error."""
    import pytest

    from designer.cli import CliError, Parser, add_run_flags, build_settings, settings_from
    from designer.settings import RunSettings

    p = Parser()
    add_run_flags(p)
    assert build_settings(p.parse_args([])).verify.signal == "success"  # mapf
    assert build_settings(p.parse_args(["--env", "cartpole"])).verify.signal == "return"
    s = build_settings(p.parse_args(["--env", "cartpole", "--verify-signal", "success"]))
    assert s.verify.signal == "success"
    assert build_settings(p.parse_args(["--verify-signal", "return"])).verify.signal == "return"
    with pytest.raises(CliError, match="bad value for verify.signal"):
        build_settings(p.parse_args(["--verify-signal", "reward"]))
    with pytest.raises(CliError, match="bad value for verify.signal"):
        settings_from({"env": "cartpole", "verify": {"signal": "share"}})
    # a settings file or a saved run.json that sets the signal keeps it; other verify fields
    # set alone still get the family's signal
    s = RunSettings.model_validate({"env": "cartpole", "verify": {"k": 2}})
    assert (s.verify.k, s.verify.signal) == (2, "return")
    assert RunSettings.model_validate(s.model_dump()) == s
    mapf = RunSettings.model_validate({"verify": {"k": 2}})
    assert mapf.verify.signal == "success"


def test_pool_every_flag_reaches_the_trainer_and_is_bounded():
    """`--pool-every` lands in the PPO hyperparameters; a negative value is one clear error."""
    import pytest

    from designer.cli import CliError, Parser, add_run_flags, build_settings
    from designer.trainees import build_trainee
    from jaxenv.mapf import Capacity, MAPFFrozenLake

    p = Parser()
    add_run_flags(p)
    s = build_settings(p.parse_args(["--pool-every", "25"]))
    assert s.trainee.pool_every == 25
    hp, _ = build_trainee(s, MAPFFrozenLake(Capacity(max_size=4, max_agents=2)))
    assert hp.pool_every == 25
    assert build_settings(p.parse_args([])).trainee.pool_every == 0
    with pytest.raises(CliError, match="bad value for trainee.pool_every"):
        build_settings(p.parse_args(["--pool-every", "-1"]))


def test_lr_flags_reach_the_trainer():
    """`--lr` and `--lr-schedule linear` land in the PPO hyperparameters: the schedule spans
    the run's planned stages; a bad schedule name is one clear error."""
    import pytest

    from designer.cli import CliError, Parser, add_run_flags, build_settings
    from designer.trainees import build_trainee
    from jaxenv.mapf import Capacity, MAPFFrozenLake

    p = Parser()
    add_run_flags(p)
    env = MAPFFrozenLake(Capacity(max_size=4, max_agents=2))
    s = build_settings(p.parse_args(["--lr", "2.5e-4", "--lr-schedule", "linear",
                                     "--stages", "3"]))
    hp, _ = build_trainee(s, env)
    assert (hp.lr, hp.anneal_updates) == (2.5e-4, 3 * s.num_updates)
    hp, _ = build_trainee(build_settings(p.parse_args(["--lr-schedule", "constant"])), env)
    assert hp.anneal_updates == 0
    with pytest.raises(CliError, match="bad value for trainee.lr_schedule"):
        build_settings(p.parse_args(["--lr-schedule", "cosine"]))


def test_gae_lambda_flag_reaches_the_trainer_and_is_bounded():
    """`--gae-lambda` lands in the PPO hyperparameters (MAPF's default 0.99, a control
    family's PPO's usual 0.95); a value above 1 is one clear error."""
    import pytest

    from designer.cli import CliError, Parser, add_run_flags, build_settings
    from designer.trainees import build_trainee
    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from policy.ppo import Hparams

    p = Parser()
    add_run_flags(p)
    env = MAPFFrozenLake(Capacity(max_size=4, max_agents=2))
    hp, _ = build_trainee(build_settings(p.parse_args(["--gae-lambda", "0.8"])), env)
    assert hp.gae_lambda == 0.8
    hp, _ = build_trainee(build_settings(p.parse_args([])), env)
    assert hp.gae_lambda == 0.99
    assert build_settings(p.parse_args(["--env", "cartpole"])).trainee.gae_lambda == 0.95
    assert Hparams().gae_lambda == 0.95
    with pytest.raises(CliError, match="bad value for trainee.gae_lambda"):
        build_settings(p.parse_args(["--gae-lambda", "1.5"]))


def test_cost_to_go_flag_and_runs_saved_before_it(tmp_path):
    """`--cost-to-go on|off` sets the capacity (default on); a run.json saved before the
    option existed resumes with it off, as that run was trained (and one saved before
    `lr_schedule` with a constant rate, and one saved before `gae_lambda` with 0.95)."""
    import json

    from designer.cli import Parser, add_run_flags, build_settings, saved_settings

    p = Parser()
    add_run_flags(p)
    assert build_settings(p.parse_args([])).capacity.cost_to_go
    s = build_settings(p.parse_args(["--cost-to-go", "off"]))
    assert not s.capacity.cost_to_go
    old = build_settings(p.parse_args([])).model_dump()
    del old["capacity"]["cost_to_go"], old["capacity"]["intent"], old["capacity"]["priority"]
    del old["trainee"]["lr_schedule"]
    del old["trainee"]["gae_lambda"]
    (tmp_path / "run.json").write_text(json.dumps({"settings": old}))
    assert saved_settings(tmp_path / "run.json").capacity.cost_to_go is False
    assert saved_settings(tmp_path / "run.json").trainee.lr_schedule == "constant"
    assert saved_settings(tmp_path / "run.json").trainee.gae_lambda == 0.95
    new = build_settings(p.parse_args([])).model_dump()
    (tmp_path / "run.json").write_text(json.dumps({"settings": new}))
    assert saved_settings(tmp_path / "run.json").capacity.cost_to_go is True
    assert saved_settings(tmp_path / "run.json").trainee.gae_lambda == 0.99
