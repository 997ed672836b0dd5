"""A finished run folder corrupted file by file: every damage is a clean error naming the file,
or a recovery the user is told about; never a traceback, never a silently different result.

One tiny run is built once for the module (an LLM engineer whose backend is dead, so the run
also holds a call log and a fallback). Each case copies it, damages one file (truncated,
garbage, the wrong JSON type, one flipped bit, zeroed) and reads it the way `resume`, `eval`
and `report` do (`RunFolder.verify`, `designer.report.load_run`), or runs the command.
The run's training, held-out and verification compiles make the module `slow`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from designer.run.folder import RunCorrupt, RunFolder

pytestmark = pytest.mark.slow

DERIVED = ("metrics.jsonl", "report.md", ".lock")  # rewritten from the stages, never read
DAMAGES = ("truncate", "garbage", "wrong-type", "flip-first", "flip-middle", "flip-last", "zero")


class DeadBackend:
    """An LLM server that never answers: the engineer falls back to `rules`."""

    name, model, constrained = "dead", "nobody", False

    def count_tokens(self, messages) -> int:
        return sum(len(m["content"]) // 4 for m in messages)

    def generate(self, messages, schema, n=1, max_tokens=256, seed=0):
        from designer.llm import BackendError

        raise BackendError("POST http://127.0.0.1:9/v1/chat/completions failed: "
                           "ConnectionRefusedError (scripted)")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, list[str]]:
    """The finished tiny run (2 stages, 2,000 env steps asked, 2,048 trained) and the notes
    the loop showed on the console. Two updates a stage with the trainee and verification
    settings of tests/e2e/test_loop.py and test_sweep.py: the session's compilation cache
    then holds one set of programs for all three files' runs."""
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from designer.llm import LoggedBackend
    from designer.llm.calllog import CallLog
    from designer.report import write_report
    from designer.run.loop import ClosedLoop
    from designer.settings import RunSettings

    out = tmp_path_factory.mktemp("runs") / "tiny"
    s = RunSettings.model_validate({
        "engineer": "llm", "stages": 2, "stage_steps": 2000, "candidates": 2, "seed": 5,
        "trainee": {"num_envs": 64, "num_steps": 16, "num_minibatches": 2, "pool_size": 64,
                    "hidden": 16},
        "verify": {"k": 2, "episodes": 16}})
    notes: list[str] = []
    backend = LoggedBackend(DeadBackend(), CallLog(out / "calls.jsonl"))
    ClosedLoop(s, out, backend=backend, on_note=notes.append).run()
    write_report([out], out, title="tiny")
    return out, notes


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    if how == "truncate":
        path.write_bytes(raw[:len(raw) // 2])
    elif how == "garbage":
        path.write_bytes(b"\x00\xff{garbage" * max(1, len(raw) // 10))
    elif how == "wrong-type":
        path.write_text("[]" if raw.lstrip()[:1] == b"{" else "{}")
    elif how == "zero":
        path.write_bytes(bytes(len(raw)))
    else:
        i = {"flip-first": 0, "flip-middle": len(raw) // 2, "flip-last": len(raw) - 1}[how]
        b = bytearray(raw)
        b[i] ^= 1 << (i % 8)
        path.write_bytes(bytes(b))


def _snapshot(d: Path):
    from designer.report import load_run

    r = load_run(d)
    stages = [{k: v for k, v in s.items() if k != "digests"} for s in r.stages]
    return stages, r.heldout, r.validation, r.selected


def _one_line_naming(err: BaseException, rel: str) -> None:
    text = str(err)
    assert "\n" not in text and len(text) < 500, text
    assert rel.split("/")[0] in text or rel in text, (rel, text)


@pytest.mark.parametrize("how", DAMAGES)
def test_every_damaged_file_is_refused_by_name_or_ignored(run, tmp_path, how):
    from designer.report import load_run

    root, _ = run
    want = _snapshot(root)
    silent, wrong = [], []
    d = tmp_path / "copy"
    for rel in _files(root):
        if rel.endswith(".png") or rel.startswith("tb/") or (root / rel).stat().st_size == 0:
            continue  # plots and events are outputs; an empty file has nothing to damage
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(root, d)
        _damage(d / rel, how)
        if (d / rel).read_bytes() == (root / rel).read_bytes():
            continue  # this damage leaves the file as it was
        for read in (lambda: RunFolder(d).verify(), lambda: load_run(d)):
            try:
                read()
            except RunCorrupt as e:
                if rel in DERIVED:
                    wrong.append(f"{rel}: refused a derived file: {e}")
                    continue
                _one_line_naming(e, rel)
            except Exception as e:  # noqa: BLE001 -- any other exception is the failure
                wrong.append(f"{rel}: {type(e).__name__}: {e}")
            else:
                if rel not in DERIVED:
                    silent.append(rel)
        if rel in DERIVED:
            assert _snapshot(d) == want, rel
    assert not wrong, wrong
    assert not silent, f"read without complaint after {how}: {silent}"


def _unseal(d: Path) -> None:
    """`d` as a run saved before digests existed: no seals, no digests."""
    for p in [d / "run.json", d / "selected.json", *d.glob("stages/*/done.json")]:
        obj = json.loads(p.read_text())
        obj.pop("sha256", None)
        obj.pop("digests", None)
        p.write_text(json.dumps(obj, indent=1))


@pytest.mark.parametrize("rel, how, needle", [
    ("stages/001/validation.json", "truncate", "not valid JSON"),
    ("stages/000/heldout.json", "garbage", "not valid JSON"),
    ("stages/000/train.json", "wrong-type", "train.json"),
    ("stages/000/done.json", "wrong-type", "done.json"),
    ("selected.json", "truncate", "selected.json"),
    ("run.json", "wrong-type", "run.json"),
])
def test_an_older_run_without_digests_is_read_on_its_schemas(run, tmp_path, rel, how, needle):
    from designer.report import load_run

    d = tmp_path / "old"
    shutil.copytree(run[0], d)
    _unseal(d)
    assert _snapshot(d) == _snapshot(run[0])  # unsealed and intact: read as before
    _damage(d / rel, how)
    with pytest.raises(RunCorrupt, match=needle) as err:
        load_run(d)
    _one_line_naming(err.value, rel)


def _edit(path: Path, change) -> None:
    obj = json.loads(path.read_text())
    obj.pop("sha256", None)
    path.write_text(json.dumps(change(obj), indent=1))


@pytest.mark.parametrize("case, needle", [
    ("done.json is a list", "done.json: the top level"),
    ("selected.json names stage 7", "selected.json: names stage 7"),
    ("run.json without settings", "run.json: settings: Field required"),
    ("stage folder replaced by a file", "is not a folder"),
    ("middle stage folder removed", "stages/000 is missing or unfinished"),
    ("last stage folder removed", "selected.json: names stage"),
    ("validation table without its cells", "validation.json: table"),
])
def test_the_issue_cases_are_one_line_naming_file_and_field(run, tmp_path, case, needle):
    from designer.report import load_run

    d = tmp_path / "case"
    shutil.copytree(run[0], d)
    _unseal(d)
    s0, s1 = d / "stages" / "000", d / "stages" / "001"
    if case == "done.json is a list":
        (s0 / "done.json").write_text("[1, 2]")
    elif case == "selected.json names stage 7":
        _edit(d / "selected.json", lambda o: {**o, "stage": 7, "last_stage": 7})
    elif case == "run.json without settings":
        _edit(d / "run.json", lambda o: {k: v for k, v in o.items() if k != "settings"})
    elif case == "stage folder replaced by a file":
        shutil.rmtree(s1)
        s1.write_text("not a stage")
    elif case == "middle stage folder removed":
        shutil.rmtree(s0)
    elif case == "last stage folder removed":
        shutil.rmtree(s1)
    else:
        _edit(s1 / "validation.json", lambda o: {**o, "table": {"overall": {}}})
    for read in (lambda: RunFolder(d).verify(), lambda: load_run(d)):
        with pytest.raises(RunCorrupt, match=needle) as err:
            read()
        assert "\n" not in str(err.value)


def test_the_fallback_and_the_rounded_budget_are_shown_everywhere(run):
    root, notes = run
    assert any("fell back to the rules engineer" in n and "scripted" in n for n in notes)
    assert any("2,048 env steps, not the 2,000 asked for" in n for n in notes), notes
    rows = [json.loads(x) for x in (root / "metrics.jsonl").read_text().splitlines()]
    assert "ConnectionRefusedError" in rows[0]["fallback"] and rows[1]["fallback"] is None
    assert all(r["stage_steps"] == 2048 and "digests" not in r for r in rows)
    report = (root / "report.md").read_text()
    assert "## Engineer fallbacks" in report and "seed 5, stage 0: backend error" in report
    assert "2 stages x 2,048 env steps" in report
    assert "Each stage trained 2,048 env steps where `--stage-steps` asked for 2,000" in report


def test_cli_refuses_a_flipped_checkpoint_bit_in_one_line(run, tmp_path, capsys):
    from designer.cli import main

    d = tmp_path / "flipped"
    shutil.copytree(run[0], d)
    ckpt = sorted(p for p in (d / "stages" / "000" / "ckpt").rglob("*") if p.is_file()
                  and p.stat().st_size > 64)[0]
    _damage(ckpt, "flip-middle")
    for args in (["eval", str(d)], ["run", "--resume", str(d)],
                 ["report", str(d), "--out", str(tmp_path / "r")]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ckpt.name in err[0] and "changed after stage 0" in err[0]


def test_report_of_one_run_given_twice_counts_it_once(run, tmp_path, capsys):
    """The command refuses a folder named twice; the library reports it once, with a note;
    two copies of one run are refused by both."""
    from designer.cli import main
    from designer.report import write_report

    root = run[0]
    assert main(["report", str(root), str(root) + "/", "--out", str(tmp_path / "r0")]) == 2
    assert "named twice" in capsys.readouterr().err
    write_report([root, str(root) + "/"], tmp_path / "r")
    assert "same run folder" in capsys.readouterr().err
    assert "1 run(s)" in (tmp_path / "r" / "report.md").read_text()
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    assert main(["report", str(root), str(twin), "--out", str(tmp_path / "r2")]) == 2
    assert "hold the same run" in capsys.readouterr().err


def test_resume_recomputes_what_it_can_and_refuses_what_it_cannot(run, tmp_path, capfd):
    """A damaged selected.json and metrics.jsonl are recomputed from the stages (and the user
    is told); an out-of-bounds config in an older, unsealed run is refused by name; a zeroed
    checkpoint there is one line, not orbax's traceback."""
    from designer.cli import main, saved_settings
    from designer.run.loop import ClosedLoop

    root = run[0]
    d = tmp_path / "repair"
    shutil.copytree(root, d)
    _damage(d / "selected.json", "flip-middle")
    _damage(d / "metrics.jsonl", "truncate")
    notes: list[str] = []
    ClosedLoop(saved_settings(d / "run.json"), d, on_note=notes.append).run()
    assert any("metrics.jsonl did not match" in n for n in notes), notes
    assert any("selected.json" in n and "recomputing" in n for n in notes), notes
    assert RunFolder(d).selection() == RunFolder(root).selection()
    assert (d / "metrics.jsonl").read_text() == (root / "metrics.jsonl").read_text()

    old = tmp_path / "old"
    shutil.copytree(root, old)
    _unseal(old)
    _edit(old / "stages" / "000" / "config.json",
          lambda o: {**o, "values": {**o["values"], "slip_prob": 7.0}})
    with pytest.raises(RunCorrupt, match=r"000/config.json: values.slip_prob"):
        ClosedLoop(saved_settings(old / "run.json"), old).run()
    shutil.copytree(root, old, dirs_exist_ok=True)
    _unseal(old)
    for p in (old / "stages" / "001" / "ckpt").rglob("*"):
        if p.is_file():
            _damage(p, "zero")
    capfd.readouterr()
    assert main(["eval", str(old)]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "001/ckpt: the checkpoint cannot be read" in err[0], err
