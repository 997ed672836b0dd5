"""The closed loop end to end: the run folder, kill -9 and resume, a failing LLM backend, CLI
errors. Runs go through the real `envengineer` command in subprocesses with a tiny budget;
a persistent compilation cache keeps the later processes' compiles short."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.xla_flags import xla_flags

TINY = ["--stages", "3", "--stage-steps", "2048", "--envs", "64", "--hidden", "16",
        "--verify-k", "2", "--verify-episodes", "16", "--candidates", "2", "--seed", "3"]
SETTINGS = {"trainee": {"num_steps": 16, "num_minibatches": 2, "pool_size": 64}}


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or tmp_path_factory.mktemp("jax_cache")
    return dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                XLA_FLAGS=xla_flags(optimized=True))  # whole runs: XLA's default level


@pytest.fixture(scope="module")
def settings_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("settings") / "tiny.json"
    p.write_text(json.dumps(SETTINGS))
    return p


def cli(args: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "designer.cli", *args], env=env,
                          capture_output=True, text=True, timeout=900, **kw)


def metrics(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("times")
    return rows


@pytest.fixture(scope="module")
def straight(tmp_path_factory, env, settings_file) -> Path:
    out = tmp_path_factory.mktemp("runs") / "straight"
    res = cli(["run", "--engineer", "rules", *TINY, "--settings", str(settings_file),
               "--out", str(out)], env)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@pytest.mark.slow
def test_run_folder_holds_everything(straight):
    run = json.loads((straight / "run.json").read_text())
    assert run["settings"]["engineer"] == "rules" and run["seed"] == 3
    assert "jax" in run["versions"]
    for k in range(3):
        d = straight / "stages" / f"{k:03d}"
        for name in ("config.json", "train.json", "validation.json", "heldout.json",
                     "context.json", "candidates.json", "choice.json", "done.json"):
            assert (d / name).is_file(), (k, name)
        assert (d / "ckpt").is_dir()
        assert json.loads((d / "validation.json").read_text())["split"] == "validation"
        assert json.loads((d / "heldout.json").read_text())["split"] == "heldout"
    cands = json.loads((straight / "stages" / "000" / "candidates.json").read_text())
    assert cands and all(0 <= c["score"]["success"] <= 1 for c in cands)
    assert len(metrics(straight)) == 3
    assert list((straight / "tb").glob("events.out.tfevents.*"))  # TensorBoard is installed
    report = (straight / "report.md").read_text()
    assert "Held-out split" in report and "paper: Qwen3-4B + GRPO + engineer" in report
    for png in ("heldout_curve.png", "configs.png", "failures.png", "stage_time.png",
                "selection.png"):
        assert (straight / png).stat().st_size > 5000


@pytest.mark.slow
def test_the_run_hands_back_the_stage_chosen_on_validation(straight, env):
    from designer.run.selection import select_stage
    from designer.tasks.mapf.task import score

    sel = json.loads((straight / "selected.json").read_text())
    tables = [json.loads((straight / "stages" / f"{k:03d}" / "validation.json").read_text())
              ["table"] for k in range(3)]
    assert sel["rule"] == "validation" and sel["scores"] == [score(t) for t in tables]
    k = select_stage(sel["scores"], "validation")
    assert sel["stage"] == k and sel["last_stage"] == 2
    own = json.loads((straight / "stages" / f"{k:03d}" / "heldout.json").read_text())["table"]
    assert sel["heldout"] == own and not sel["heldout_evaluated_after_run"]
    assert f"rules seed 3: stage {k}" in (straight / "report.md").read_text()


@pytest.mark.slow
def test_a_chosen_stage_without_heldout_is_evaluated_from_its_checkpoint(
        tmp_path, env, straight, settings_file, monkeypatch):
    """Held-out skipped at stage 0 (`--heldout-every 5`); when stage 0 is chosen, its
    checkpoint is evaluated after the run and gives the table stage 0 wrote in a run that
    did evaluate it. The report then shows the final stage beside the result, and `eval`
    defaults to the chosen stage."""
    out = tmp_path / "sparse"
    res = cli(["run", "--engineer", "rules", *TINY, "--settings", str(settings_file),
               "--heldout-every", "5", "--out", str(out)], env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((out / "stages" / "000" / "heldout.json").read_text())["table"] is None
    (out / "selected.json").unlink()
    import designer.run.loop
    from designer.cli import saved_settings
    from designer.report import write_report

    monkeypatch.setattr(designer.run.loop, "select_stage", lambda scores, rule: 0)
    loop = designer.run.loop.ClosedLoop(saved_settings(out / "run.json"), out)
    loop.run()
    sel = json.loads((out / "selected.json").read_text())
    assert sel["stage"] == 0 and sel["heldout_evaluated_after_run"]
    assert sel["heldout"] == json.loads((straight / "stages" / "000" / "heldout.json")
                                        .read_text())["table"]
    report = write_report([out], tmp_path / "report").read_text()
    assert "stage 0" in report and "The same runs at their final stage" in report
    res = cli(["eval", str(out)], env)
    assert res.returncode == 0 and "stage 0: held-out split" in res.stdout, res.stderr[-3000:]


# The real command, killed with SIGKILL by itself as stage 1's verification starts (after its
# training and validation, before anything of stage 1 is written): a point in the run that
# does not depend on how fast the machine is, where a kill timed from outside did.
DIE_IN_STAGE_1 = """
import os, signal, sys
from designer.run.loop import ClosedLoop
phase = ClosedLoop.phase
def dying(self, stage, name, times):
    if (stage, name) == (1, "verify"):
        os.kill(os.getpid(), signal.SIGKILL)
    return phase(self, stage, name, times)
ClosedLoop.phase = dying
from designer.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_kill_minus_nine_then_resume_equals_the_uninterrupted_run(tmp_path, env, straight,
                                                                 settings_file):
    out = tmp_path / "killed"
    proc = subprocess.run([sys.executable, "-c", DIE_IN_STAGE_1, "run", "--engineer", "rules",
                           *TINY, "--settings", str(settings_file), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    first = out / "stages" / "000" / "done.json"
    assert first.exists() and not (out / "stages" / "001" / "done.json").exists()
    stamp = first.stat().st_mtime_ns
    res = cli(["run", "--resume", str(out)], env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert first.stat().st_mtime_ns == stamp  # the finished stage was not redone
    assert metrics(out) == metrics(straight)


@pytest.mark.slow
def test_a_run_saved_before_the_cost_to_go_option_resumes_and_evaluates(tmp_path, env,
                                                                      settings_file):
    """A run.json without `capacity.cost_to_go` (saved before the option; its trainee saw no
    cost-to-go) resumes and re-evaluates with the option off, not with today's default."""
    out = tmp_path / "old"
    args = ["--engineer", "rules", *TINY, "--stages", "1", "--settings", str(settings_file)]
    res = cli(["run", *args, "--cost-to-go", "off", "--out", str(out)], env)
    assert res.returncode == 0, res.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    for key in ("cost_to_go", "priority", "intent"):  # all three came later
        del run["settings"]["capacity"][key]
    (out / "run.json").write_text(json.dumps(run))
    res = cli(["run", "--resume", str(out)], env)
    assert res.returncode == 0, res.stderr[-3000:]
    res = cli(["eval", str(out)], env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "held-out split" in res.stdout


@pytest.mark.slow
def test_a_second_process_on_the_same_folder_is_refused(tmp_path, env, settings_file):
    from designer.run.folder import RunFolder

    out = tmp_path / "locked"
    with RunFolder(out):
        res = cli(["run", "--engineer", "fixed", *TINY, "--settings", str(settings_file),
                   "--out", str(out)], env)
    assert res.returncode == 2
    assert "in use by another process" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "--settings", "/nonexistent/settings.json"], "not found"),
    (["run", "--stages", "0"], "bad value for stages"),
    (["run", "--engineer", "oracle"], "bad value for engineer"),
    (["run", "--backend", "gpt-9"], "bad value for backend"),
    (["run", "--verify-signal", "reward"], "bad value for verify.signal"),
    (["run", "--stages", "many"], "invalid int value"),
    (["run", "--resume", "/nonexistent/run"], "not a run folder"),
    (["run", "--guidelines", "/nonexistent/g.md"], "no such guidelines file"),
    (["compare", "--engineers", "fixed,oracle"], "unknown engineer"),
    (["compare", "--seeds", "0,x"], "--seeds must be integers"),
    (["report", "/nonexistent/run"], "not a run folder"),
    (["eval", "/nonexistent/run"], "not a run folder"),
    (["bench", "--which", "nothing"], "unknown benchmark"),
    ([], "choose a command"),
])
def test_cli_errors_are_one_clear_line(args, message, capsys):
    from designer.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.slow
def test_malformed_settings_file_is_one_clear_line_and_no_traceback(tmp_path, env):
    """In a subprocess: exit status 2, one line on stderr, nothing else."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = cli(["run", "--settings", str(bad)], env)
    assert res.returncode == 2 and "malformed" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


@pytest.mark.slow
def test_a_dead_llm_server_falls_back_to_the_rules_engineer(tmp_path, env, settings_file):
    """The LLM backend fails at every call: the run completes on the fallback engineer, and
    the candidates, the context record and the call log say so."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "dead"
    res = cli(["run", "--engineer", "llm", "--backend", "openai", "--base-url",
               f"http://127.0.0.1:{port}/v1", *TINY, "--stages", "2", "--settings",
               str(settings_file), "--out", str(out)], dict(env, OPENAI_API_KEY="sk-secret-42"))
    assert res.returncode == 0, res.stderr[-3000:]
    cands = json.loads((out / "stages" / "000" / "candidates.json").read_text())
    assert cands and all(c["source"] == "rules (fallback)" for c in cands)
    assert "backend error" in cands[0]["rationale"]
    record = json.loads((out / "stages" / "000" / "context.json").read_text())
    assert record["fallback"] == "rules" and "Connection" in record["error"]
    calls = (out / "calls.jsonl").read_text()
    assert '"ok": false' in calls and "sk-secret-42" not in calls
    assert (out / "stages" / "001" / "done.json").exists()


class DiesAfterFirstCall:
    """An LLM backend that answers its first call with a real edit, then fails every call."""

    name, model, constrained = "scripted", "dies-after-one", True

    def __init__(self):
        self.calls = 0

    def count_tokens(self, messages) -> int:
        return sum(len(m["content"]) // 4 for m in messages)

    def generate(self, messages, schema, n=1, max_tokens=256, seed=0):
        from designer.llm.base import BackendError, Reply, parse_reply

        self.calls += 1
        if self.calls > 1:
            raise BackendError("connection reset by the server (scripted failure)")
        text = '{"hole_ratio": {"3": 0.1, "4": 0.1}, "rationale": "fewer holes on small maps"}'
        edit, error = parse_reply(text, schema)
        return [Reply(text, edit, error, 10, 20, 0.01, self.name, self.model)] * n


@pytest.mark.slow
def test_a_backend_that_fails_mid_run_ends_on_the_fallback(tmp_path, monkeypatch):
    """Stage 0's proposals come from the LLM; from stage 1 on the backend fails: the run
    completes on the rules engineer, and the candidates and the context record say why."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    from designer.run.loop import ClosedLoop
    from designer.settings import RunSettings

    s = RunSettings.model_validate({
        "engineer": "llm", "edits": "values", "stages": 3, "stage_steps": 2048,
        "candidates": 2, "seed": 3, "trainee": {**SETTINGS["trainee"], "num_envs": 64,
                                                "hidden": 16},
        "verify": {"k": 2, "episodes": 16}})
    backend = DiesAfterFirstCall()
    ClosedLoop(s, tmp_path / "run", backend=backend).run()
    stages = tmp_path / "run" / "stages"
    first = json.loads((stages / "000" / "candidates.json").read_text())
    assert [c["source"] for c in first] == ["llm:scripted/dies-after-one"] * 2
    assert first[0]["values"]["hole_ratio"][:2] == [0.1, 0.1]
    second = json.loads((stages / "001" / "candidates.json").read_text())
    assert second and all(c["source"] == "rules (fallback)" for c in second)
    assert "scripted failure" in second[0]["rationale"]
    record = json.loads((stages / "001" / "context.json").read_text())
    assert record["fallback"] == "rules" and "scripted failure" in record["error"]
    assert (stages / "002" / "done.json").exists() and backend.calls >= 2
