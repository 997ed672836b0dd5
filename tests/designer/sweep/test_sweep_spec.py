"""Sweep specs and options a user or a hostile file can write: each refused with one line (exit 2)
before anything is created, in bounded time; and a property test over random small specs
(either a clean error or exactly the trials the count promised). No Ray: nothing is launched."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from designer.cli import main
from designer.settings import RunSettings
from designer.sweep.spec import MAX_NODES, SweepError, load_spec, trial_count
from designer.sweep.trials import expand

TINY = {"engineer": "rules", "stages": 1}


def refused(tmp_path: Path, capsys, text: str, *flags: str, name: str = "spec.yaml") -> str:
    """`envengineer sweep` on a spec holding `text`: exit 2, one line, nothing created."""
    spec = tmp_path / name
    spec.write_text(text)
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert main(["sweep", str(spec), "--out", str(out), *flags]) == 2
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert not out.exists()
    return err[0]


def draws(dist: str) -> str:
    return f"base: {{engineer: rules}}\nrandom:\n  samples: 2\n  params:\n    trainee.lr: {dist}\n"


@pytest.mark.parametrize("dist, message", [
    ("{uniform: [0.0, .inf]}", "random.params.trainee.lr.uniform.1: Input should be a finite"),
    ("{uniform: [.nan, 0.1]}", "random.params.trainee.lr.uniform.0: Input should be a finite"),
    ("{uniform: [-1.0e+308, 1.0e+308]}", "uniform.0: Input should be greater than or equal to"),
    ("{loguniform: [1.0e-300, 1.7e+308]}", "loguniform.1: Input should be less than or equal"),
    ("{loguniform: [-.inf, 1.0]}", "loguniform.0: Input should be a finite number"),
    ("{randint: [0, 18446744073709551616]}", "randint.1: Input should be less than or equal"),
    ("{uniform: [0.5, 0.1]}", "uniform needs [low, high] with low <= high"),
])
def test_random_ranges_that_cannot_be_drawn(dist, message, tmp_path, capsys):
    assert message in refused(tmp_path, capsys, draws(dist))


def test_a_grid_of_a_million_trials_is_refused_before_expansion(tmp_path, capsys):
    values = list(range(1000))
    text = yaml.safe_dump({"base": TINY, "grid": {"seed": values, "stage_steps":
                                                  [v + 1 for v in values]}})
    err = refused(tmp_path, capsys, text, "--dry-run")
    assert "the spec makes 1,000,000 trials, over max_trials = 1,000" in err


def test_a_2_to_the_64_trial_grid_is_refused(tmp_path, capsys):
    text = yaml.safe_dump({"grid": {f"k{i}": [0, 1] for i in range(64)}})
    assert f"the spec makes {2**64:,} trials" in refused(tmp_path, capsys, text)


def test_random_samples_count_against_the_cap(tmp_path, capsys):
    text = yaml.safe_dump({"base": TINY, "grid": {"seed": [0, 1, 2]}, "max_trials": 5,
                           "random": {"samples": 2, "params": {"trainee.lr": {
                               "choice": [0.001, 0.002]}}}})
    assert "makes 6 trials, over max_trials = 5" in refused(tmp_path, capsys, text)


def test_max_trials_raises_the_cap_within_its_limit(tmp_path, capsys):
    spec = {"base": TINY, "grid": {"seed": list(range(1500))}}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({**spec, "max_trials": 1500}))
    assert len(expand(load_spec(path))) == 1500
    err = refused(tmp_path, capsys, yaml.safe_dump({**spec, "max_trials": 10**9}))
    assert "max_trials: Input should be less than or equal to 100000" in err


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path, capsys):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    text = "\n".join(lines) + "\ngrid: {seed: *a9}\n"
    assert len(text) < 800
    err = refused(tmp_path, capsys, text)
    assert f"its aliases expand to over {MAX_NODES:,} values" in err


def test_a_recursive_alias_is_refused(tmp_path, capsys):
    assert "an alias refers to the value that holds it" in refused(
        tmp_path, capsys, "grid:\n  seed: &s [0, *s]\n")


def test_modest_aliases_still_work(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("base: {engineer: rules, stages: &one 1}\ngrid:\n  seed: &s [0, *one]\n")
    assert [t.name for t in expand(load_spec(path))] == ["seed-0", "seed-1"]


@pytest.mark.parametrize("name", ["/proc/self", "../escape", "..", "a/b", ".hidden", "a b"])
def test_a_name_that_leaves_the_sweep_root_is_refused(name, tmp_path, capsys):
    text = yaml.safe_dump({"name": name, "base": TINY, "grid": {"seed": [0]}})
    assert f"name {name!r} must be one folder name" in refused(tmp_path, capsys, text)


def test_a_spec_file_named_dot_dot_is_no_folder_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default folder is runs/sweeps/<stem> under here
    spec = tmp_path / "...yaml"
    spec.write_text(yaml.safe_dump({"base": TINY, "grid": {"seed": [0]}}))
    assert main(["sweep", str(spec), "--dry-run"]) == 2
    assert "the spec's file name '..' must be one folder name" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["...yaml"]


@pytest.mark.parametrize("flag, value, message", [
    ("--cpus-per-trial", "nan", "--cpus-per-trial must be a finite number, got nan"),
    ("--gpus-per-trial", "inf", "--gpus-per-trial must be a finite number, got inf"),
    ("--cpus-per-trial", "0", "--cpus-per-trial must be at least 0.001"),
    ("--llm-concurrency", "0", "--llm-concurrency must be at least 1"),
    ("--retries", str(10**30), "--retries must be at least 0 and at most 1000"),
])
def test_sweep_options_out_of_bounds(flag, value, message, tmp_path, capsys):
    text = yaml.safe_dump({"base": TINY, "grid": {"seed": [0]}})
    assert message in refused(tmp_path, capsys, text, flag, value)


def test_a_huge_seed_in_a_spec_is_refused_where_a_run_refuses_it(tmp_path, capsys):
    """The spec's values pass `RunSettings`' own validation: its bound on the seed, not one
    restated here."""
    highs = [m.le for m in RunSettings.model_fields["seed"].metadata
             if getattr(m, "le", None) is not None]
    highs += [m.lt - 1 for m in RunSettings.model_fields["seed"].metadata
              if getattr(m, "lt", None) is not None]
    high = min(highs) if highs else None
    if high is None:
        pytest.skip("RunSettings sets no upper bound on the seed")
    text = yaml.safe_dump({"base": TINY, "grid": {"seed": [0, high + 1]}})
    assert f"bad value for grid.seed = {high + 1}" in refused(tmp_path, capsys, text)


def test_an_unreadable_sweep_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"base": TINY, "grid": {"seed": [0]}}))
    from designer.sweep import Options, run_sweep

    with pytest.raises(SweepError, match="cannot create the sweep folder"):
        run_sweep(load_spec(spec), expand(load_spec(spec)),
                  Options(out=tmp_path / "file" / "sweep"))


# ------------------------------------------------------------------------- property test
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, 1e-4, 0.01, 0.5, 1.0, 2.0, 1e300]))
INTS = st.one_of(st.integers(-3, 5), st.sampled_from([2**63, 2**64, -(2**64), 10**40]))
HOSTILE = st.one_of(FLOATS, INTS, st.text(max_size=5))
VALID = {"seed": st.integers(0, 5), "stages": st.integers(1, 3),
         "trainee.lr": st.sampled_from([1e-4, 0.01, 0.5]),
         "ablation": st.sampled_from(["V1", "V3", "V6"]),
         "engineer": st.sampled_from(["rules", "fixed"]),
         "capacity.max_agents": st.integers(1, 4), "trainee.hidden": st.integers(4, 64),
         "verify.k": st.integers(1, 8)}
DISTS = {"trainee.lr": st.sampled_from([{"uniform": [1e-4, 1e-2]}, {"loguniform": [1e-4, 1e-2]},
                                        {"choice": [0.001, 0.002]}]),
         "trainee.ent_coef": st.just({"uniform": [0.0, 0.05]}),
         "seed": st.just({"randint": [0, 100]})}
HOSTILE_DIST = st.one_of(
    st.builds(lambda a, b: {"uniform": [a, b]}, st.one_of(FLOATS, INTS), st.one_of(FLOATS, INTS)),
    st.builds(lambda a, b: {"loguniform": [a, b]}, FLOATS, FLOATS),
    st.builds(lambda a, b: {"randint": [a, b]}, INTS, INTS),
    st.builds(lambda xs: {"choice": xs}, st.lists(HOSTILE, min_size=1, max_size=3)))


@st.composite
def specs(draw) -> dict:
    """A small spec; in one of two, some of its parts are hostile (three in four stay valid)."""
    hostile = draw(st.booleans())

    def pick(valid: st.SearchStrategy, bad: st.SearchStrategy) -> object:
        return draw(st.one_of(valid, valid, valid, bad) if hostile else valid)

    keys = draw(st.lists(st.sampled_from(sorted(VALID)), max_size=3, unique=True))
    spec: dict = {"base": dict(TINY)}
    spec["grid"] = {k: pick(st.lists(VALID[k], min_size=1, max_size=3, unique_by=repr),
                            st.lists(st.one_of(VALID[k], HOSTILE), max_size=3))
                    for k in keys}
    rest = [k for k in sorted(DISTS) if k not in keys]
    if rest and draw(st.booleans()):
        params = {k: pick(DISTS[k], HOSTILE_DIST)
                  for k in draw(st.lists(st.sampled_from(rest), min_size=1, unique=True))}
        spec["random"] = {"samples": pick(st.integers(1, 3), st.integers(-1, 0)),
                          "seed": pick(st.integers(0, 9), INTS), "params": params}
    if draw(st.booleans()):
        spec["max_trials"] = pick(st.integers(1, 100), st.integers(-1, 0))
    if draw(st.booleans()):
        spec["name"] = pick(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True),
                            st.text(max_size=12))
    return spec


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs())
def test_any_small_spec_is_a_clean_error_or_the_counted_trials(spec):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text(yaml.safe_dump(spec, allow_unicode=True))
        try:
            loaded = load_spec(path)
            trials = expand(loaded)
        except SweepError as e:
            assert str(e) and "\n" not in str(e)
            event("refused")
            return
        event("expanded")
        assert len(trials) == trial_count(loaded) <= loaded.max_trials
        assert len({t.name for t in trials}) == len(trials)
        for t in trials:
            assert "/" not in t.name and t.name not in (".", "..")
            assert all(not isinstance(v, float) or math.isfinite(v)
                       for v in t.overrides.values())
