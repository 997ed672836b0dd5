"""The closed loop on control families: the same loop, engineers and report as MAPF, through
the `designer.tasks` seam (no family branch in the loop or the engineers)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from designer.cli import main
from designer.engineer.registry import make_engineer
from designer.settings import RunSettings
from designer.tasks import make_task
from designer.tasks.control.failures import control_failures
from designer.tasks.control.task import curriculum
from jaxenv.control.registry import family
from policy.network import ActorCritic, init_params
from policy.split_eval import evaluate_split

TINY = ["--stages", "2", "--stage-steps", "8192", "--envs", "32", "--hidden", "16",
        "--verify-k", "2", "--verify-episodes", "16", "--candidates", "2", "--seed", "1"]


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "cartpole"
    assert main(["run", "--env", "cartpole", "--engineer", "rules", *TINY, "--out",
                 str(out)]) == 0
    return out


@pytest.mark.slow
def test_cartpole_run_folder_report_and_robustness_table(cartpole_run):
    run = json.loads((cartpole_run / "run.json").read_text())["settings"]
    assert run["env"] == "cartpole" and run["trainee"]["num_steps"] == 128  # family default
    held = json.loads((cartpole_run / "stages/001/heldout.json").read_text())["table"]
    assert held["family"] == "cartpole" and held["n"] == 512
    assert len(held["per_variant"]["success"]) == 512
    assert held["success"] == pytest.approx(100 * np.mean(held["per_variant"]["success"]))
    assert set(held["by_param"]) == set(family("cartpole").param_names)
    val = json.loads((cartpole_run / "stages/000/validation.json").read_text())
    assert val["failures"]["n"] == 128 and "angle" in val["failures"]["endings"]
    report = (cartpole_run / "report.md").read_text()
    assert "CartPole-v1" in report and "success %" in report
    for png in ("heldout_curve.png", "heatmap.png", "ranges.png", "endings.png"):
        assert (cartpole_run / png).stat().st_size > 5_000, png
    ctx = json.loads((cartpole_run / "stages/000/context.json").read_text())
    text = ctx["rendered"][1]["content"]
    assert "length_min" in text and "## F: failures on the validation set" in text
    assert "hole" not in text  # nothing of MAPF leaks into a control prompt
    assert "$" not in text  # every template field is filled, the answer's included


@pytest.mark.slow
def test_rules_on_cartpole_leaves_round_0_under_the_graded_signal(tmp_path):
    """The family default verifies on the normalised return: after a short stage the policy
    balances nothing (success 0.0 on the candidate, which the success signal would reject:
    the config would stay round 0's forever), but its return is graded, inside the window, so
    the rules engineer's candidate is chosen and stage 1 trains on it."""
    from designer.run.scoring import CandidateScorer, Score

    out = tmp_path / "graded"
    args = [a if a != "8192" else "65536" for a in TINY]  # 16 updates: some return, no success
    assert main(["run", "--env", "cartpole", "--engineer", "rules", *args,
                 "--heldout-every", "99", "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["settings"]["verify"]["signal"] == "return"
    cands = json.loads((out / "stages/000/candidates.json").read_text())
    scores = [Score.from_dict(c["score"]) for c in cands]
    assert all(s.signal == "return" and s.success == 0.0 for s in scores)
    assert all(s.p == s.normalized_return for s in scores)
    assert any(0.08 <= s.p <= 0.95 for s in scores), [s.p for s in scores]
    choice = json.loads((out / "stages/000/choice.json").read_text())
    assert choice["index"] is not None and "normalised return" in choice["reason"]
    picked = cands[choice["index"]]["values"]
    assert json.loads((out / "stages/001/config.json").read_text())["values"] == picked
    assert picked != json.loads((out / "stages/000/config.json").read_text())["values"]
    # the same scores under the success signal: nothing inside the window, round 0 kept
    space = make_task(RunSettings(env="cartpole", engineer="rules")).space
    plain = [Score.from_dict({**c["score"], "p": None, "signal": "success"}) for c in cands]
    assert CandidateScorer(evaluator=object(), space=space).choose(plain).index is None


@pytest.mark.slow
def test_pendulum_runs_with_the_gaussian_trainee(tmp_path):
    out = tmp_path / "pendulum"
    assert main(["run", "--env", "pendulum", "--engineer", "mutate", *TINY, "--out",
                 str(out)]) == 0
    held = json.loads((out / "stages/001/heldout.json").read_text())["table"]
    assert held["family"] == "pendulum" and np.isfinite(held["normalized_return"])
    choice = json.loads((out / "stages/000/choice.json").read_text())
    assert choice["index"] is not None or "keeping" in choice["reason"]


def test_control_failures_name_the_worst_bins_and_failed_variants():
    task = make_task(RunSettings(env="cartpole", engineer="fixed"))
    net = ActorCritic(num_actions=2, hidden=8)
    # untrained: fails often (the init jitted: one compile, not one per orthogonal kernel)
    params = jax.jit(lambda k: init_params(net, task.env, k))(jax.random.PRNGKey(0))
    val = evaluate_split(params, net, jax.random.PRNGKey(1), task.validator, cfg=task.eval_cfg)
    f = control_failures(val, {"success_rate": 0.1, "cause_angle": 0.9}, seed=0)
    assert f.n == 128 and f.success < 50 and sum(f.failed_endings.values()) > 0
    full = f.render(n_traj=3, sizes=None)
    assert all(p in full for p in family("cartpole").param_names)
    assert "Failed variant 1:" in full and "ended by" in full
    assert f.render(n_traj=0, sizes=0).count("\n") < full.count("\n")
    assert "worst bins" in f.summary()


def _range(values, p):
    return sorted((values[f"{p}_min"], values[f"{p}_max"]))


def test_the_rules_engineer_widens_and_narrows_ranges_in_either_order():
    task = make_task(RunSettings(env="cartpole", engineer="rules"))
    eng = make_engineer(RunSettings(env="cartpole", engineer="rules"), task=task)
    space = task.space
    cur = dict(space.default(), length_min=1.0, length_max=0.5)  # an inverted range
    fails = SimpleNamespace(cause_totals=lambda: {}, failures_by_key=lambda k: None)
    ctx = lambda p: SimpleNamespace(space=space, current=cur, failures=fails,  # noqa: E731
                                    train={"success_rate": p})
    wide = eng.propose(ctx(0.99))[0].values
    narrow = eng.propose(ctx(0.01))[0].values
    step = 0.1 * (2.0 - 0.1)
    assert _range(wide, "length") == pytest.approx([0.5 - step, 1.0 + step], abs=0.03)
    assert _range(narrow, "length") == pytest.approx([0.5 + step, 1.0 - step], abs=0.03)
    g0 = _range(space.default(), "gravity")
    assert _range(narrow, "gravity") == pytest.approx(g0, abs=1e-6)  # a point stays a point
    assert curriculum("cartpole").ranges and not curriculum("cartpole").harder


@pytest.mark.parametrize("engineer", ["fixed", "dr", "learnability", "mutate", "rules"])
def test_every_engineer_proposes_valid_control_configs(engineer):
    s = RunSettings(env="acrobot", engineer=engineer, candidates=2)
    task = make_task(s)
    eng = make_engineer(s, task=task)
    cur = task.space.default()
    ctx = SimpleNamespace(space=task.space, current=cur, stage=1, train={"success_rate": 0.5},
                          failures=None,
                          verify=lambda cands: [SimpleNamespace(success=0.5, learnability=0.25)
                                                for _ in cands])
    props = eng.propose(ctx)
    assert props
    for p in props:
        assert task.space.validate(p.values) == p.values


@pytest.mark.slow
def test_constrained_edits_of_a_control_space_all_apply():
    pytest.importorskip("outlines")
    from designer.engineer.edits import RATIONALE, edit_schema
    from tests.helpers.tiny_llm import tiny_backend

    space = make_task(RunSettings(env="cartpole", engineer="fixed")).space
    schema = edit_schema(space)
    backend = tiny_backend()
    msgs = [{"role": "user", "content": "Widen the pole lengths."}]
    replies = backend.generate(msgs, schema, n=40, max_tokens=600, seed=0)
    for r in replies:
        assert r.error is None, (r.error, r.text)
        body = {k: v for k, v in r.edit.items() if k != RATIONALE}
        space.validate(space.parse(body, space.default()))


@pytest.mark.slow
def test_brax_inverted_pendulum_runs_in_the_loop(tmp_path):
    pytest.importorskip("brax")
    out = tmp_path / "brax"
    assert main(["run", "--env", "brax:inverted_pendulum", "--engineer", "rules", *TINY,
                 "--heldout-every", "99", "--out", str(out)]) == 0  # held-out once, at the end
    held = json.loads((out / "stages/001/heldout.json").read_text())["table"]
    assert held["family"] == "brax:inverted_pendulum" and held["n"] > 0
    trainee = json.loads((out / "run.json").read_text())["settings"]["trainee"]
    assert trainee["obs_norm"] and trainee["state_std"] and trainee["gamma"] == 0.97  # defaults
    meta = " ".join(p.read_text(errors="ignore") for p in (out / "stages/001/ckpt").rglob("*")
                    if p.is_file() and "METADATA" in p.name)
    assert "obs_norm" in meta  # the running statistics are part of the checkpoint
    assert np.isfinite(held["normalized_return"])
    assert (out / "heatmap.png").stat().st_size > 5_000
