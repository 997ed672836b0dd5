"""`envengineer sweep`: a 4-trial sweep on Ray's local cluster (one trial killed once, retried,
resumed), a rerun that skips finished trials, an extended grid with a trial that always fails,
malformed specs, and the spec and scheduling logic on their own. Sweeps run through the real
command in subprocesses with the `rules` engineer and a tiny budget; a shared compilation cache
keeps the later processes' compiles short."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from designer.cli import main
from designer.settings import RunSettings
from designer.sweep.launch import FAULT_ENV, Queue
from designer.sweep.spec import SweepSpec, load_spec
from designer.sweep.trials import ROUND0_FIELD, Trial, expand, variant_of
from tests.helpers.xla_flags import xla_flags

ROOT = Path(__file__).resolve().parents[2]
TINY = {"engineer": "rules", "stages": 2, "stage_steps": 2048, "candidates": 2, "heldout_every": 2,
        "trainee": {"num_envs": 64, "hidden": 16, "num_steps": 16, "num_minibatches": 2,
                    "pool_size": 64},
        "verify": {"k": 2, "episodes": 16}}
SPEC = {"name": "tiny", "base": TINY, "grid": {"ablation": ["V1", "V2"], "seed": [0, 1]}}
NAMES = ["V1_seed-0", "V1_seed-1", "V2_seed-0", "V2_seed-1"]
CRASH = "V2_seed-0"  # killed (SIGKILL) right after its stage 0, on its first attempt


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or tmp_path_factory.mktemp("jax_cache")
    return dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                XLA_FLAGS=xla_flags(optimized=True))  # whole runs: XLA's default level


def write_spec(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# Two CPUs a trial: on a two-core machine the trials run one after another, so the first
# compiles the run's programs into the shared cache and the others load them, where two trials
# at once would both compile them on cores the other pytest worker also needs.
CPUS_PER_TRIAL = str(min(2, os.cpu_count() or 1))


def sweep(spec: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "designer.cli", "sweep", str(spec), "--out",
                           str(out), "--cpus-per-trial", CPUS_PER_TRIAL, *extra], env=env,
                          capture_output=True, text=True, timeout=900)


def results(out: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {r["trial"]: r for r in rows}


def attempts(out: Path, name: str) -> list[dict]:
    p = out / name / "sweep" / "attempts.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()]


def stage_files(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns
            for p in sorted(out.glob("*/stages/*/done.json"))}


@pytest.fixture(scope="module")
def first(tmp_path_factory, env) -> tuple[Path, subprocess.CompletedProcess, float]:
    tmp = tmp_path_factory.mktemp("sweep")
    spec = write_spec(tmp / "tiny.yaml", SPEC)
    t0 = time.perf_counter()
    res = sweep(spec, tmp / "out", dict(env, **{FAULT_ENV: f"{CRASH}:0"}))
    wall = time.perf_counter() - t0
    print(f"4-trial sweep: {wall:.0f}s wall")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return tmp / "out", res, wall


@pytest.mark.slow
def test_four_trial_sweep_writes_runs_report_and_results(first):
    out, res, _ = first
    rows = results(out)
    assert sorted(rows) == NAMES
    for name, r in rows.items():
        assert r["status"] == "finished" and r["stages_done"] == 2 and r["error"] is None, r
        assert set(r["heldout_by_agents"]) == {"3", "4", "5"}
        sel = json.loads((out / name / "selected.json").read_text())  # the run's result
        assert r["result_stage"] == sel["stage"]
        assert r["heldout_by_agents"] == sel["heldout"]["mean_over_sizes"]
        assert r["overrides"]["seed"] == int(name[-1]) and r["wall_s"] > 0
        run = json.loads((out / name / "run.json").read_text())["settings"]
        assert run["context"] == {"V1": "F", "V2": "F,G"}[name[:2]]
        assert run["seed"] == int(name[-1]) and run["trainee"]["hidden"] == 16
    report = (out / "report.md").read_text()
    assert "## Sweep" in report and "Held-out split" in report  # ours, then designer.report's
    assert report.index("## Sweep") < report.index("## Held-out split")
    assert "| V3 | F+G+H with round 0 | 0/0 | not in this sweep |" in report
    v1 = [rows[n]["heldout_by_agents"]["4"]["valid"] for n in NAMES[:2]]
    line = next(x for x in report.splitlines() if x.startswith("| V1 | F |"))
    cells = [c.strip() for c in line.strip("|").split("|")]  # variant, context, n, 3, 4, 5
    assert cells[2] == "2/2" and cells[4] == f"{np.mean(v1):.2f} ± {np.std(v1, ddof=1):.2f}"
    assert "| ablation=V2 | 2/2 |" in report
    assert (out / "heldout_curve.png").stat().st_size > 5000
    assert any((out / "ray_logs").glob("session_*/raylet.out"))
    assert "4/4 trials finished" in res.stdout


@pytest.mark.slow
def test_a_killed_trial_is_retried_and_resumes_from_its_run_folder(first):
    out, res, _ = first
    a = attempts(out, CRASH)
    assert [x["attempt"] for x in a] == [1, 2]
    assert a[0]["returncode"] == -9 and a[0]["error"] == "killed by SIGKILL"
    assert a[1]["returncode"] == 0 and a[1]["stages_before"] == 1  # resumed after stage 0
    stage0 = out / CRASH / "stages" / "000" / "done.json"
    assert stage0.stat().st_mtime < a[1]["started"]  # stage 0 was not redone
    assert results(out)[CRASH]["retries"] == 1
    assert all(len(attempts(out, n)) == 1 for n in NAMES if n != CRASH)
    assert f"{CRASH}: attempt 1 failed" in res.stdout and "retry 1 of 2" in res.stdout


@pytest.mark.slow
def test_a_rerun_skips_finished_trials(first, env):
    out, _, _ = first
    before = stage_files(out)
    assert len(before) == 8
    logs = {n: len(attempts(out, n)) for n in NAMES}
    res = sweep(out.parent / "tiny.yaml", out, env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "4 finished before (skipped), 0 to resume, 0 new" in res.stdout
    assert stage_files(out) == before  # no stage written or rewritten
    assert {n: len(attempts(out, n)) for n in NAMES} == logs
    assert all(r["skipped"] and r["status"] == "finished" for r in results(out).values())


@pytest.mark.slow
def test_a_bad_trial_never_stops_the_others(first, env, tmp_path):
    out = tmp_path / "extended"
    shutil.copytree(first[0], out)
    spec = write_spec(tmp_path / "tiny.yaml", {**SPEC, "grid": {"ablation": ["V1", "V2"],
                                                                "seed": [0, 1, 2]}})
    res = sweep(spec, out, dict(env, **{FAULT_ENV: "V1_seed-2:-1:9"}), "--retries", "1")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    rows = results(out)
    bad = rows["V1_seed-2"]
    assert bad["status"] == "failed" and bad["attempts"] == 2 and bad["stages_done"] == 0
    assert bad["error"] == "exit status 3: error: injected fault before the first stage"
    assert rows["V2_seed-2"]["status"] == "finished" and not rows["V2_seed-2"]["skipped"]
    assert all(rows[n]["skipped"] for n in NAMES)
    report = (out / "report.md").read_text()
    assert "### Failed trials" in report and "| V1_seed-2 | 0/2 | 2 |" in report
    assert "failed: V1_seed-2: exit status 3" in res.stderr


# --------------------------------------------------------------- malformed specs: no Ray
@pytest.mark.parametrize("text, suffix, message", [
    ("grdi:\n  seed: [0]\n", ".yaml", "unknown key grdi"),
    ("grid:\n  trainee.lrr: [0.1]\n", ".yaml", "unknown run setting grid.trainee.lrr"),
    ("base:\n  trainee: {lr: 0.1, foo: 1}\n", ".yaml", "unknown run setting base.trainee.foo"),
    ("grid:\n  trainee.lr: [1.0e-3, 2.0]\n", ".yaml", "bad value for grid.trainee.lr = 2.0"),
    ("grid:\n  engineer: [rules, oracle]\n", ".yaml", "bad value for grid.engineer = 'oracle'"),
    ("grid:\n  seed: 0\n", ".yaml", "grid.seed: Input should be a valid list"),
    ("grid:\n  ablation: [V9]\n", ".yaml", "unknown ablation variant 'V9'"),
    ("random:\n  samples: 2\n  params:\n    trainee.lr: {normal: [0, 1]}\n", ".yaml",
     "unknown key random.params.trainee.lr.normal"),
    ("grid: [seed: [0\n", ".yaml", "is not valid YAML"),
    ("just words\n", ".yaml", "must be a mapping"),
    ("[grid]\nseed = [0, 1\n", ".toml", "is not valid TOML"),
    ("grid = 1\n", ".json", "use a .yaml, .yml or .toml file"),
])
def test_a_malformed_spec_is_one_clear_line(text, suffix, message, tmp_path, capsys):
    spec = tmp_path / f"spec{suffix}"
    spec.write_text(text)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()  # every trial is validated before anything is launched


def test_flags_that_clash_with_the_grid_or_hold_bad_values(tmp_path, capsys):
    spec = write_spec(tmp_path / "s.yaml", {"grid": {"backend": ["openai", "replay"]}})
    assert main(["sweep", str(spec), "--backend", "openai", "--dry-run"]) == 2
    assert "--backend conflicts with grid.backend" in capsys.readouterr().err
    spec = write_spec(tmp_path / "t.yaml", {"grid": {"seed": [0]}})
    assert main(["sweep", str(spec), "--backend", "gpt-9", "--dry-run"]) == 2
    assert "bad value for --backend" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--retries", "-1"]) == 2
    assert "--retries must be at least 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_folder_holding_other_settings_is_refused(first, tmp_path, capsys):
    spec = write_spec(tmp_path / "s.yaml", {**SPEC, "base": {**TINY, "stage_steps": 4096}})
    assert main(["sweep", str(spec), "--out", str(first[0]), "--dry-run"]) == 2
    assert "holds a run with other settings" in capsys.readouterr().err


def test_the_example_spec_is_valid(capsys):
    assert main(["sweep", str(ROOT / "examples" / "sweep_ablation.yaml"), "--dry-run",
                 "--out", "/nonexistent/sweep"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "18 trials in /nonexistent/sweep"
    assert lines[0].startswith("V1_seed-0\tnew\t")


# ------------------------------------------------------------------ spec and scheduling
def test_grid_random_draws_and_toml_nesting(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[base]\nengineer = "rules"\n[grid]\nseed = [0, 1]\n[grid.trainee]\n'
                    'hidden = [16, 32]\n[random]\nsamples = 3\nseed = 7\n'
                    '[random.params.trainee]\nlr = {loguniform = [1e-4, 1e-2]}\n'
                    'ent_coef = {uniform = [0.0, 0.05]}\n')
    trials = expand(load_spec(spec))
    assert len(trials) == 2 * 2 * 3
    assert trials[0].name == "seed-0_trainee.hidden-16_r0"
    draws = {}
    for t in trials:
        assert 1e-4 <= t.settings.trainee.lr <= 1e-2 and t.settings.engineer == "rules"
        assert t.settings.trainee.hidden == t.overrides["trainee.hidden"]
        draws.setdefault(t.name[-2:], set()).add(t.settings.trainee.lr)
    assert all(len(v) == 1 for v in draws.values())  # draw k is shared by every grid cell
    assert len({next(iter(v)) for v in draws.values()}) == 3
    assert [t.settings for t in expand(load_spec(spec))] == [t.settings for t in trials]
    o = trials[0].overrides
    assert trials[0].cell == (f"trainee.hidden=16, trainee.lr={o['trainee.lr']}, "
                              f"trainee.ent_coef={o['trainee.ent_coef']}")


def test_v3_needs_round0_in_the_history():
    [t] = expand(SweepSpec(grid={"ablation": ["V3"]}))
    assert getattr(t.settings, ROUND0_FIELD) is True and t.settings.context == "F,G,H"
    [t4] = expand(SweepSpec(grid={"ablation": ["V4"]}))
    assert getattr(t4.settings, ROUND0_FIELD) is False and t4.settings.context == "F,G,H"
    assert variant_of(t.settings) == "V3" and variant_of(t4.settings) == "V4"


def trial(name: str, **kw) -> Trial:
    return Trial(name, {}, RunSettings(**kw))


def test_queue_caps_trials_sharing_the_llm_server_and_retries():
    llm = [trial(f"llm{i}", engineer="llm", backend="openai") for i in range(3)]
    local = trial("local", engineer="llm", backend="transformers")
    q = Queue([*llm, local], retries=1, llm_concurrency=2)
    assert [t.name for t, _ in q.ready()] == ["llm0", "llm1", "local"]
    assert q.ready() == []  # llm2 waits for a slot
    assert q.done(llm[0], 1, ok=False) == "retry"
    assert [(t.name, n) for t, n in q.ready()] == [("llm2", 1)]
    assert q.done(llm[1], 1, ok=True) == "finished"
    assert [(t.name, n) for t, n in q.ready()] == [("llm0", 2)]  # the retry gets the slot
    assert q.done(llm[0], 2, ok=False) == "failed"
    for t in (llm[2], local):
        assert q.done(t, 1, ok=True) == "finished"
    assert not q
