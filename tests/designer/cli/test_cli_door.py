"""The command line's door: every input checked before anything is created.

A property test drives the argument and settings parsers in-process with random and hostile
values: each command line is either refused with one line (`CliError`, exit status 2 from
`main`) or gives valid settings, and nothing is created on disk either way. Example tests cover
each refusal the door owes (huge seeds and budgets, batches past int32, unwritable folders,
empty or repeated lists, a missing model, an empty context, --learn without the llm engineer,
a base URL that is not one).
"""

from __future__ import annotations

import os
import string
import tempfile
import typing
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from designer.cli import CliError, check, main
from designer.cli.flags import run_flags
from designer.settings import SEED_LIMIT, RunSettings

FLAGS = [(flag, info) for flag, _, info in run_flags()]


@contextmanager
def empty_cwd():
    """A fresh empty working folder (the default run folders land under it)."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            yield Path(d)
        finally:
            os.chdir(old)


def created(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def refused_in_one_line(argv: list[str]) -> str:
    with pytest.raises(CliError) as e:
        check(argv)
    message = str(e.value)
    assert message and "\n" not in message, message
    return message


numbers = st.one_of(st.integers(-2**70, 2**70), st.sampled_from(
    ["0", "-1", "1e9", "nan", "inf", "-inf", "1e999", "9" * 30, "0x10", "", " ", "1.5", "2**31"]),
    st.floats(allow_nan=True, allow_infinity=True))
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=40)
paths = st.sampled_from(["/dev/null", "/dev/null/x", "/sys/envengineer", "/proc/envengineer",
                         "x" * 300, "a/" * 5 + "b" * 256, "", ".", "runs/a", "~nobody/x"])
values = st.one_of(numbers.map(str), texts, paths,
                   st.sampled_from(["on", "off", "yes", "maybe", "llm", "ppo", "rules",
                                    "transformers", "openai", "F,G,H,T", ",", "S"]))


def typed(info) -> st.SearchStrategy[str]:
    """Values of the flag's own type (near and past its bounds), else anything."""
    kind = info.annotation
    if kind is int:
        return st.one_of(st.integers(-2, 70).map(lambda e: 2**e), st.integers(-5, 5000),
                         st.integers(-2**70, 2**70)).map(str)
    if kind is float or kind == float | None:
        return st.floats(allow_nan=True, allow_infinity=True).map(str)
    if kind is bool:
        return st.sampled_from(["on", "off"])
    args = typing.get_args(kind)
    if args and all(isinstance(a, str) for a in args):
        return st.sampled_from(args)
    return values


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    cmd = draw(st.sampled_from(["run", "compare"]))
    argv = [cmd]
    for flag, info in draw(st.lists(st.sampled_from(FLAGS), max_size=6, unique_by=lambda f: f[0])):
        if flag == "learn":
            argv.append("--learn")
        else:
            argv.append(f"--{flag}={draw(typed(info) if draw(st.booleans()) else values)}")
    if draw(st.booleans()):
        argv.append(f"--out={draw(paths | texts)}")
    if cmd == "compare" and draw(st.booleans()):
        argv.append(f"--seeds={draw(st.sampled_from(['0,0', '', ',', '1,2', '-1', '9' * 30]))}")
    if cmd == "compare" and draw(st.booleans()):
        argv.append(f"--engineers={draw(st.sampled_from(['', ',', 'fixed,fixed', 'dr']))}")
    return argv


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command_lines())
def test_hostile_command_lines_are_refused_in_one_line_or_give_valid_settings(argv):
    with empty_cwd() as root:
        try:
            work = check(argv)
        except CliError as e:
            assert str(e) and "\n" not in str(e), str(e)
        else:
            assert callable(work)  # accepted: the settings below validated
        assert created(root) == [], argv


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([f for f, info in FLAGS if info.annotation in (int, "int")]),
       numbers.map(str))
def test_every_integer_setting_is_bounded_at_the_door(flag, value):
    with empty_cwd():
        try:
            check(["run", f"--{flag}={value}"])
        except CliError:
            return
    bound = int(value)
    assert -2**31 < bound < 2**40, (flag, value)  # whatever passes fits the jitted counts


@pytest.mark.parametrize("argv, message", [
    (["run", "--seed", "9" * 30], "bad value for seed"),
    (["run", "--seed", str(2**63)], "bad value for seed"),
    (["run", "--seed", str(SEED_LIMIT)], "bad value for seed"),
    (["run", "--seed", "-1"], "bad value for seed"),
    (["run", "--stage-steps", "9" * 30], "bad value for stage_steps"),
    (["run", "--envs", "1e9"], "invalid int value"),
    (["run", "--envs", str(10**9)], "bad value for trainee.num_envs"),
    (["run", "--envs", str(2**20), "--max-agents", "64"], "exceeds 2^31 - 1"),
    (["run", "--stage-steps", str(10**12), "--envs", "1", "--stages", "1000"],
     "exceeds 2^31 - 1"),
    (["run", "--lr", "nan"], "finite number"),
    (["run", "--gamma", "inf"], "finite number"),
    (["run", "--context", ""], "at least one context module"),
    (["run", "--learn", "--engineer", "rules"], "--learn needs --engineer llm"),
    (["run", "--backend", "openai", "--base-url", "localhost:8000"], "not an http(s) URL"),
    (["run", "--base-url", "ftp://x/v1"], "not an http(s) URL"),
    (["run", "--trainee", "llm", "--llm-model", "/nonexistent/model"],
     "no such LLM trainee model"),
    (["run", "--out", "/dev/null"], "is not a folder"),
    (["run", "--out", "/dev/null/run"], "is not a folder"),
    (["run", "--out", "/sys/envengineer-run"], "cannot write in /sys"),
    (["run", "--out", "x" * 300], "name too long"),
    (["run", "--out", "a/" + "b" * 5000], "name too long"),
    (["run", "--num-processes", "2", "--process-id", "2"], "must be below --num-processes"),
    (["compare", "--engineers", ""], "--engineers names none"),
    (["compare", "--engineers", ",,"], "--engineers names none"),
    (["compare", "--engineers", "fixed,fixed"], "names fixed twice"),
    (["compare", "--seeds", ""], "--seeds names none"),
    (["compare", "--seeds", "0,0"], "names 0 twice"),
    (["compare", "--seeds", "0," + "9" * 30], "bad value for seed"),
    (["compare", "--out", "/dev/null"], "is not a folder"),
    (["eval", "--llm", "--backend", "openai", "--base-url", "not a url"], "not an http(s) URL"),
    (["eval", "--llm", "--seed", "9" * 30], "expected 0 to"),
    (["eval", "--llm", "--answers", "/dev/null/a.jsonl"], "is not a folder"),
    (["eval", "--llm", "--from", "/nonexistent.jsonl", "--table", "/sys/t.md"],
     "cannot write in /sys"),
    (["demo", "--envs", str(10**9)], "expected 1 to"),
    (["sweep", "spec.yaml", "--cpus-per-trial", "nan"], "--cpus-per-trial must be a finite number"),
    (["sweep", "spec.yaml", "--gpus-per-trial", "inf"], "--gpus-per-trial must be a finite number"),
])
def test_each_refusal_is_one_line_exit_2_and_creates_nothing(argv, message, capsys):
    with empty_cwd() as root:
        assert message in refused_in_one_line(argv)
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
        assert created(root) == []


def test_report_refuses_an_unwritable_out_and_a_run_named_twice(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    before = created(tmp_path)
    assert "is not a folder" in refused_in_one_line(["report", str(run), "--out", "/dev/null"])
    assert "named twice" in refused_in_one_line(["report", str(run), str(tmp_path / "." / "run")])
    assert created(tmp_path) == before


def test_a_rejected_run_leaves_no_folder_behind(tmp_path):
    out = tmp_path / "a" / "b"
    refused_in_one_line(["run", "--out", str(out), "--stages", "0"])
    refused_in_one_line(["run", "--out", str(out), "--intent", "on", "--cost-to-go", "off"])
    assert not (tmp_path / "a").exists()
    with empty_cwd() as root:  # the default folder, runs/<time>-<engineer>, neither
        refused_in_one_line(["run", "--candidates", "0"])
        assert created(root) == []


def test_accepted_command_lines_give_the_settings_they_name(tmp_path):
    with empty_cwd() as root:
        check(["run", "--seed", str(SEED_LIMIT - 1), "--envs", "64", "--out", "r"])
        check(["compare", "--seeds", "0,1", "--engineers", "fixed,dr", "--out", "c"])
        assert created(root) == []
    assert RunSettings(seed=SEED_LIMIT - 1).seed == SEED_LIMIT - 1


def test_every_flag_is_generated_from_a_described_setting():
    names = [flag for flag, _ in FLAGS]
    assert len(names) == len(set(names))
    assert all(info.description for _, info in FLAGS)
    assert all(c in string.ascii_lowercase + "-" for n in names for c in n)


def test_a_control_run_carries_no_mapf_blocks_and_a_ppo_run_no_llm_stage():
    from designer.settings import upgrade_saved

    control = RunSettings(env="cartpole", engineer="rules")
    assert control.capacity is None and control.task is None and control.llm is None
    assert RunSettings().capacity is not None and RunSettings(trainee_kind="llm").llm is not None
    assert "capacity settings apply to env mapf only" in refused_in_one_line(
        ["run", "--env", "cartpole", "--max-agents", "3"])
    assert "llm settings apply to trainee_kind llm only" in refused_in_one_line(
        ["run", "--llm-steps", "5"])
    assert "writes MAPF plans" in refused_in_one_line(["run", "--env", "cartpole",
                                                       "--trainee", "llm"])
    # a control run saved with every block reads as one saved today
    old = {**control.model_dump(), "capacity": RunSettings().capacity.model_dump(),
           "task": RunSettings().task.model_dump(), "llm": RunSettings(
               trainee_kind="llm").llm.model_dump()}
    assert RunSettings.model_validate(upgrade_saved(old)) == control


def test_a_new_setting_reaches_the_flag_and_the_trainer_from_its_field():
    from designer.trainees import build_trainee
    from jaxenv.mapf import Capacity, MAPFFrozenLake

    env = MAPFFrozenLake(Capacity(max_size=4, max_agents=2))
    with empty_cwd():
        s = RunSettings.model_validate({"trainee": {"clip_eps": 0.1}})
    hp, _ = build_trainee(s, env)
    assert hp.clip_eps == 0.1
    assert build_trainee(RunSettings(), env)[0].clip_eps == 0.2
    assert "bad value for trainee.clip_eps" in refused_in_one_line(["run", "--clip-eps", "0"])


def test_a_setting_is_its_field_flag_trainer_and_migration_from_one_declaration():
    """`trainee.vf_coef` is declared once (a `TraineeSettings` field with `flag("vf-coef",
    legacy=0.5)`): its flag sets `Hparams.vf_coef` by name, its bounds refuse at the door, and a
    run saved before it existed reads back with the value it ran with."""
    from designer.cli import Parser, add_run_flags, build_settings
    from designer.settings import ADDED_SINCE, upgrade_saved
    from designer.trainees import build_trainee
    from jaxenv.mapf import Capacity, MAPFFrozenLake

    p = Parser()
    add_run_flags(p)
    env = MAPFFrozenLake(Capacity(max_size=4, max_agents=2))
    with empty_cwd():
        assert build_trainee(build_settings(p.parse_args(["--vf-coef", "0.25"])), env)[0] \
            .vf_coef == 0.25
    assert "bad value for trainee.vf_coef" in refused_in_one_line(["run", "--vf-coef", "-1"])
    assert ADDED_SINCE[("trainee", "vf_coef")] == 0.5
    old = RunSettings().model_dump()
    del old["trainee"]["vf_coef"]
    assert RunSettings.model_validate(upgrade_saved(old)) == RunSettings()
