"""The headroom benchmark (benchmarks/headroom.py): its set of static configs is derived from the
config space alone and in bounds for every family, its paired arithmetic subtracts per seed,
and the best config is chosen on validation, never on the held-out split."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
sys.path.insert(0, str(ROOT / "benchmarks"))

import headroom  # noqa: E402

from designer.tasks import make_task  # noqa: E402
from jaxenv.control.registry import NAMES, make  # noqa: E402


def mapf_space(preset: str):
    return make_task(headroom.settings("mapf", preset, "fixed", 0, quick=True)).space


def check_set(space, names_wanted: set[str]) -> list:
    default = space.default()
    arms = headroom.arms(space, [0, 1])
    names = [a.name for a in arms]
    assert len(names) == len(set(names))
    assert names[0] == "fixed" and arms[0].values == default
    assert names_wanted <= set(names)
    for arm in arms:
        if arm.values is None:
            assert arm.engineer == "dr"
            continue
        assert space.validate(arm.values) == arm.values  # in bounds, pins held
        if arm.kind == "extreme":
            assert arm.values != default
            changed = {k for k in default if arm.values[k] != default[k]}
            assert changed <= set(space.editable_names())
    return arms


def test_mapf_paper_set_spans_sizes_holes_and_waits():
    space = mapf_space("paper")
    arms = check_set(space, {"dr", "round0_s0", "round0_s1", "size_weights_first_half",
                             "size_weights_last_half", "hole_ratio_low", "hole_ratio_high",
                             "wait_ratio_low", "wait_ratio_high"})
    by = {a.name: a.values for a in arms}
    assert by["size_weights_last_half"]["size_weights"] == [0, 0, 0, 0, .25, .25, .25, .25]
    assert by["hole_ratio_high"]["hole_ratio"] == [space["hole_ratio"].high] * 8
    assert not any(n.startswith("agent_weights") for n in by)  # pinned at 2 agents
    # the high ends run before dr, the low ends after it, round 0's configs last
    names = list(by)
    assert names.index("wait_ratio_high") < names.index("dr") < names.index("hole_ratio_low")
    assert names[-2:] == ["round0_s0", "round0_s1"]


def test_mapf_open_set_adds_agent_counts_at_capacity_five():
    space = mapf_space("open")
    assert len(space["agent_weights"].keys) == 5
    by = {a.name: a.values for a in check_set(space, {"agent_weights_first_half",
                                                      "agent_weights_last_half"})}
    assert by["agent_weights_last_half"]["agent_weights"] == pytest.approx([0, 0, 1 / 3] * 1
                                                                           + [1 / 3, 1 / 3])
    assert by["agent_weights_first_half"]["agent_weights"] == pytest.approx([1 / 3] * 3 + [0, 0])


@pytest.mark.parametrize("name", NAMES)
def test_control_set_narrows_widens_and_shifts_every_range(name):
    space = make(name).config_space
    arms = check_set(space, {"ranges_narrow", "ranges_wide", "ranges_low", "ranges_high"})
    by = {a.name: a.values for a in arms}
    pairs = headroom.range_pairs(space)
    assert pairs
    for lo, hi in pairs:
        k = space[lo]
        nominal = 0.5 * (k.default + space[hi].default)
        assert (by["ranges_wide"][lo], by["ranges_wide"][hi]) == (k.low, k.high)
        assert by["ranges_low"][hi] == pytest.approx(nominal, abs=k.step)
        assert by["ranges_high"][lo] == pytest.approx(nominal, abs=k.step)
        n_lo, n_hi = by["ranges_narrow"][lo], by["ranges_narrow"][hi]
        assert k.low <= n_lo <= nominal <= n_hi <= k.high
        assert n_hi - n_lo <= 2 * headroom.NARROW * (k.high - k.low) + k.step


def record(config: str, seed: int, val: float, valid: float) -> dict:
    return {"config": config, "seed": seed, "validation_score": val, "stage": 1,
            "heldout": {"valid": valid, "optimal": valid / 2}, "wall_s": 1.0}


def test_paired_headroom_subtracts_per_seed():
    best = {0: {"valid": 60.0}, 1: {"valid": 50.0}, 2: {"valid": 70.0}}
    fixed = {0: {"valid": 55.0}, 1: {"valid": 52.0}}
    out = headroom.paired_headroom(best, fixed)["valid"]
    assert out["per_seed"] == {"0": 5.0, "1": -2.0}  # seed 2 has no pair
    assert out["mean"] == pytest.approx(1.5)
    assert out["std"] == pytest.approx(4.949747, rel=1e-5)
    with pytest.raises(ValueError, match="no seed"):
        headroom.paired_headroom({3: {"valid": 1.0}}, fixed)


def test_best_static_is_chosen_on_validation_not_heldout():
    arms = [headroom.Arm("fixed", "default", values={"x": 0}),
            headroom.Arm("a", "extreme", values={"x": 1}),
            headroom.Arm("b", "extreme", values={"x": 2}),
            headroom.Arm("dr", "run", engineer="dr")]
    records = [record("fixed", 0, 10, 50), record("fixed", 1, 10, 40),
               record("a", 0, 12, 45), record("a", 1, 12, 41),  # best on validation
               record("b", 0, 11, 90), record("b", 1, 11, 90),  # best on held-out
               record("dr", 0, 99, 60), record("dr", 1, 99, 60)]  # a run, not a config
    out = headroom.summarise("cartpole-like", arms, records, [0, 1])
    assert out["best_static"]["name"] == "a"
    assert out["headroom"]["valid"]["per_seed"] == {"0": -5.0, "1": 1.0}
    assert out["dr_vs_fixed"]["valid"]["mean"] == pytest.approx(15.0)
    # a config that has not run every seed does not compete
    out = headroom.summarise("x", arms, records + [record("c", 0, 50, 0)], [0, 1])
    assert out["best_static"]["name"] == "a"


def test_numbers_read_mapf_per_agent_counts():
    cell = lambda v, o: {"n": 1, "valid": v, "optimal": o}  # noqa: E731
    table = {"overall": cell(40.0, 30.0),
             "mean_over_sizes": {"3": cell(60.0, 50.0), "5": cell(20.0, 10.0)}}
    assert headroom.numbers("mapf", table) == {
        "valid": 40.0, "optimal": 30.0, "valid_3": 60.0, "optimal_3": 50.0,
        "valid_5": 20.0, "optimal_5": 10.0}


@pytest.mark.parametrize("argv, said", [
    (["--task", "nosuch"], "--task/--preset: .*unknown environment 'nosuch'"),
    (["--task", "cartpole", "--preset", "paper"], "--task/--preset: --preset paper applies"),
    (["--seeds", "0,x"], "--seeds: comma-separated integers, got '0,x'"),
    (["--random", "y"], "--random: comma-separated integers"),
    (["--knobs", "hole_ratio,zzz"], r"--knobs: \['zzz'\] name no editable knob of mapf "
                                    r"\(hole_ratio, size_weights, wait_ratio\)"),
    (["--stop-at", "99:99"], "2"),  # argparse's own one-line usage error, exit status 2
])
def test_a_bad_flag_is_one_line_before_any_run(argv, said, tmp_path, capsys):
    """A study never starts on a flag it would misread: an unknown task, seeds that are not
    integers, knob prefixes that match nothing (which used to run the other configs) or a
    time that is none."""
    with pytest.raises(SystemExit, match=f"^{said}"):
        headroom.main([*argv, "--quick", "--runs", str(tmp_path), "--json",
                       str(tmp_path / "h.json")])
    assert not (tmp_path / "h.json").exists() and not (tmp_path / "h.jsonl").exists()
