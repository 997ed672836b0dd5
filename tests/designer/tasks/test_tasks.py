"""designer.tasks: the family seam, and the rules engineer driven by a Curriculum (data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import ValidationError

from designer.engineer.edits import preset_space
from designer.engineer.engineers import RulesEngineer
from designer.settings import RunSettings
from designer.tasks import CauseRule, Curriculum, make_task
from designer.tasks.mapf.task import CURRICULUM
from jaxenv.config_space import ConfigSpace, Knob
from jaxenv.mapf import make_config_space

SPACE = preset_space(make_config_space(max_size=10, max_agents=2), "paper")


@dataclass
class FakeFailures:
    """What the rules engineer reads of F: cause totals and failures per simplex key."""

    causes: dict[str, int] = field(default_factory=dict)
    by_key: dict[str, float] | None = None
    split: str = "validation"
    train: dict = field(default_factory=dict)
    trajectories: list = field(default_factory=list)

    def cause_totals(self) -> dict[str, int]:
        return dict(self.causes)

    def failures_by_key(self, knob: str) -> dict[str, float] | None:
        return self.by_key


def _ctx(space, current, success, failures=None):
    return SimpleNamespace(space=space, current=current, failures=failures,
                           train={"success_rate": success})


def _mean_size(space, values):
    keys = np.asarray([int(k) for k in space["size_weights"].keys], float)
    return float(np.dot(keys, values["size_weights"]))


def test_mapf_rules_harder_when_training_is_easy_and_easier_when_hard():
    cur = SPACE.default()
    eng = RulesEngineer(CURRICULUM)
    up = eng.propose(_ctx(SPACE, cur, 0.95))[0].values
    down = eng.propose(_ctx(SPACE, cur, 0.05))[0].values
    assert _mean_size(SPACE, up) > _mean_size(SPACE, cur) > _mean_size(SPACE, down)
    h = np.asarray(cur["hole_ratio"])
    np.testing.assert_allclose(np.asarray(up["hole_ratio"]),
                               np.clip(h + 0.05, SPACE["hole_ratio"].low,
                                       SPACE["hole_ratio"].high), atol=1e-6)
    assert np.all(np.asarray(down["hole_ratio"]) <= h)


def test_mapf_rules_follow_failures_and_raise_waits_on_conflicts():
    cur = SPACE.default()
    keys = SPACE["size_weights"].keys
    fails = FakeFailures(causes={"vertex": 40, "hole": 60}, by_key={keys[-1]: 10.0})
    got = RulesEngineer(CURRICULUM).propose(_ctx(SPACE, cur, 0.5, fails))[0]
    w0, w1 = np.asarray(cur["size_weights"]), np.asarray(got.values["size_weights"])
    assert w1[-1] > w0[-1] and abs(w1.sum() - 1) < 1e-6   # weight moves to the failing size
    assert np.all(np.asarray(got.values["wait_ratio"]) > np.asarray(cur["wait_ratio"]) - 1e-9)
    assert "conflicts" in got.rationale
    calm = FakeFailures(causes={"vertex": 10, "hole": 90})
    kept = RulesEngineer(CURRICULUM).propose(_ctx(SPACE, cur, 0.5, calm))[0].values
    np.testing.assert_allclose(kept["wait_ratio"], cur["wait_ratio"])


def test_the_rules_engineer_knows_no_family():
    """A made-up family: its own knobs move by the curriculum's data alone."""
    space = ConfigSpace([
        Knob(name="length", kind="float", low=0.1, high=2.0, default=0.5, description="m"),
        Knob(name="gain", kind="float", low=0.0, high=1.0, default=0.5, description="-"),
        Knob(name="frozen", kind="float", low=0.0, high=1.0, default=0.5, editable=False,
             description="not editable"),
    ], lambda v: v)
    cu = Curriculum(harder={"length": +0.25, "frozen": +0.1},
                    rules=(CauseRule(("angle",), 0.5, "gain", -0.2, "angle failures"),),
                    what="longer poles")
    eng = RulesEngineer(cu)
    cur = space.default()
    hard = eng.propose(_ctx(space, cur, 0.99, FakeFailures(causes={"angle": 9, "time": 1})))[0]
    assert hard.values["length"] == pytest.approx(0.75)
    assert hard.values["gain"] == pytest.approx(0.3)
    assert hard.values["frozen"] == 0.5                  # not editable: never moved
    assert "longer poles" in hard.rationale and "angle failures" in hard.rationale
    easy = eng.propose(_ctx(space, cur, 0.0, FakeFailures()))[0]
    assert easy.values["length"] == pytest.approx(0.25) and easy.values["gain"] == 0.5


def test_unknown_environment_is_a_clear_error():
    with pytest.raises(ValidationError, match="unknown environment 'nope'"):
        RunSettings(env="nope")
    with pytest.raises(ValueError, match="unknown environment"):
        make_task(SimpleNamespace(env="nope"))


def test_mapf_task_pins_the_runs_rules():
    task = make_task(RunSettings(engineer="fixed"))
    assert task.name == "mapf" and not task.space["goal_rule"].editable
    assert task.validator.split == "validation" and task.heldout.split == "heldout"
    assert set(task.targets) == {"size_weights", "agent_weights"}
    assert task.headline({"overall": {"valid": 50.0, "optimal": 20.0, "n": 3}}) == {
        "valid": 50.0, "optimal": 20.0}


def test_the_runs_reward_reaches_training_and_evaluation():
    """A pinned reward setting (here the conflict penalty) is the value every stage trains
    under and the value validation and held-out play under; the engineer cannot edit it."""
    task = make_task(RunSettings(engineer="fixed", task={"conflict_penalty": 0.5,
                                                         "soc_cost": 0.05}))
    assert not task.space["conflict_penalty"].editable
    cfg = task.space.to_config(task.space.default())
    assert float(cfg.conflict_penalty) == float(task.eval_cfg.conflict_penalty) == 0.5
    assert float(cfg.soc_cost) == float(task.eval_cfg.soc_cost) == np.float32(0.05)
    with pytest.raises(ValidationError):
        RunSettings(task={"conflict_penalty": -1.0})


def test_every_control_family_has_its_own_guidelines():
    """G is written per family (issue 14 §4): each registered family, Brax's included, has its
    own guideline file beside the shared control one, and it names its task."""
    from designer.tasks.control.task import guideline_files
    from jaxenv.control.registry import ALL_NAMES

    for name in ALL_NAMES:
        files = [p.name for p in guideline_files(name)]
        assert files == [f"{name.replace(':', '_')}.md", "control.md"], name
        own = guideline_files(name)[0].read_text()
        assert "The task (" in own and len(own) > 200, name


def _run(engineer: str, seed: int, valid: float, soc: float, noop: int):
    """A finished run as the report reads it: one held-out result, two stages, four
    candidates of which `noop` equal the config they edit."""
    from designer.tasks.report import Run

    cell = {"n": 10, "valid": valid, "optimal": valid / 2, "optimal_soc": soc}
    table = {"mean_over_sizes": {k: dict(cell) for k in ("3", "4", "5")}}
    stages = [{"values": {"x": 0}}, {"values": {"x": seed + 1}}]
    cands = [[{"score": {"distance": 0.0 if i < noop else 0.3}} for i in range(4)]]
    return Run(path=None, settings={"engineer": engineer, "seed": seed}, stages=stages,
               heldout=[table], validation=[], selected={"heldout": table, "stage": 0,
                                                         "rule": "validation"},
               candidates=cands)


def test_the_report_pairs_engineers_with_fixed_by_seed_and_counts_no_ops():
    from designer.tasks.mapf.report import cost_table, paired_table
    from designer.tasks.report import engineering_table

    runs = [_run("fixed", 0, 40.0, 10.0, 0), _run("fixed", 1, 50.0, 20.0, 0),
            _run("rules", 0, 45.0, 12.0, 2), _run("rules", 1, 53.0, 20.0, 2),
            _run("rules", 7, 99.0, 99.0, 2)]  # seed 7 has no fixed run: not paired
    rows = paired_table(runs)
    rules = next(r for r in rows if r.startswith("| rules"))
    assert "| 2 |" in rules and "4.00 ± 1.41 / 2.00 ± 0.71 / 1.00 ± 1.41" in rules
    fixed = next(r for r in cost_table(runs) if r.startswith("| fixed"))
    assert fixed.count("22.50 ± 3.54 / 15.00 ± 7.07") == 3  # makespan / sum of costs
    eng = next(r for r in engineering_table(runs) if r.startswith("| rules"))
    assert eng == "| rules | 3 | 4.0 | 50.0 | 2.00 ± 0.00 |"
    assert paired_table([r for r in runs if r.settings["engineer"] == "rules"]) == []


def test_a_trained_engineer_is_labelled_apart_from_its_base_model():
    from designer.tasks.report import Run

    base = {"engineer": "llm", "roles": "single", "context": "F,G,H,T", "edits": "auto",
            "backend": "transformers"}
    label = lambda s: Run(Path("r"), s, [], [], []).label  # noqa: E731
    assert label(base) == label(dict(base, adapter="none")) == "llm (single, F,G,H,T, moves)"
    assert label(dict(base, adapter="/x/seed0.safetensors")) == \
        "llm (single, F,G,H,T, moves, adapter seed0)"
