"""The engineer's dataset (scripts/engineer_data.py): a kill -9 mid-run resumes without
duplicate rows and to the rows an uninterrupted run writes; a context's move table holds every
admitted move, each changing the config; the baseline's realized gain is 0; the target
diagnosis and the proxy-vs-realized report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
sys.path.insert(0, str(ROOT / "scripts"))

import engineer_data as ed  # noqa: E402

TINY = ["--task", "cartpole", "--seeds", "10", "--stages", "3", "--stage-steps", "2048",
        "--num-envs", "16", "--num-steps", "16", "--verify-episodes", "8",
        "--table-episodes", "8", "--tokens", "approx", "--realized-every", "2",
        "--realized-moves", "3", "--noise"]


def run_script(out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen([sys.executable, str(ROOT / "scripts" / "engineer_data.py"), *TINY,
                             "--out", str(out)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen) -> None:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-2000:]


def without_times(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_diagnosis_by_the_rules_thresholds_and_weakest_cell() -> None:
    assert ed.diagnose(0.9, ["b", "a"], 0.3, 0.8) == {"training": "too_easy", "weakest": "b"}
    assert ed.diagnose(0.5, ["b"], 0.3, 0.8)["training"] == "about_right"
    assert ed.diagnose(0.1, [], 0.3, 0.8) == {"training": "too_hard", "weakest": "none"}


def test_seeds_reserved_for_evaluation_are_refused() -> None:
    assert ed.parse_seeds("10-12,50") == [10, 11, 12, 50]
    with pytest.raises(SystemExit, match="reserved for evaluating"):
        ed.parse_seeds("3-12")
    assert [ed.proposer_of(s, ed.MIX) for s in (9, 10, 11)] == ["dr", "mutate", "rules"]


def test_a_torn_last_line_is_dropped_and_keys_are_written_once(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    row = {"key": ["cartpole", 10, "dr", 0], "x": 1}
    path.write_text(json.dumps(row) + "\n" + '{"key": ["cartpole", 10, "dr", 1], "x"')
    rows = ed.Rows(path)
    assert path.read_text() == json.dumps(row) + "\n"
    rows.append(row)  # already there: not written again
    rows.append({**row, "key": ["cartpole", 10, "dr", 1]})
    assert [r["key"][-1] for r in ed.read_rows(path)] == [0, 1]


def test_report_ranks_proxy_against_realized_gain(tmp_path: Path) -> None:
    def move(lrn: float, inside: bool, gain: float | None) -> dict:
        return {"score": {"learnability": lrn}, "inside": inside,
                "realized": None if gain is None else {"gain": gain}}

    rows = [{"key": ["mapf", s, "dr", 0], "task": "mapf", "split": "train",
             "baseline": {"gain": 0.0},
             "moves": [move(0.2, True, 0.3), move(0.1, True, 0.2), move(0.2, False, -0.1),
                       move(0.25, True, None)]} for s in (10, 11)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rep = ed.report([path])
    assert rep["rows"] == 2 and rep["realized_contexts"] == 2
    assert rep["proxy_vs_realized"]["mapf"]["n"] == 6
    assert rep["proxy_vs_realized"]["overall"]["spearman"] == pytest.approx(1.0)
    assert rep["within_context_pair_agreement"]["share"] == 1.0


def test_a_file_that_is_not_a_dataset_is_one_line(tmp_path: Path) -> None:
    """`--report` and `--out` on a file that is not a dataset end in one line naming the file
    and line (or row), and never append to it; a torn last line alone is still skipped."""
    good = {"key": ["mapf", 10, "dr", 0], "task": "mapf", "split": "train", "baseline": None,
            "moves": [{"score": {"learnability": 0.2}, "inside": True, "realized": None}]}
    files = {"list.jsonl": "[1, 2]\n", "middle.jsonl": "{\"key\n" + json.dumps(good) + "\n",
             "unscored.jsonl": json.dumps(dict(good, moves=[{"realized": {"gain": 1}}])) +
             "\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    said = {}
    for name in [*files, "absent.jsonl"]:
        with pytest.raises(SystemExit) as e:
            ed.main(["--report", str(tmp_path / name)])
        said[name] = str(e.value)
    assert said["list.jsonl"].endswith("list.jsonl line 1: not a row of a dataset (a JSON "
                                       "object with a key list)")
    assert "middle.jsonl line 1: not JSON" in said["middle.jsonl"]
    assert "row ['mapf', 10, 'dr', 0]: a move is not scored (KeyError" in said["unscored.jsonl"]
    (tmp_path / "bare.jsonl").write_text(json.dumps({"key": [1]}) + "\n")
    with pytest.raises(SystemExit, match=r"row \[1\]: not a scored row \(no baseline, moves, "):
        ed.main(["--report", str(tmp_path / "bare.jsonl")])
    assert "absent.jsonl: cannot be read (FileNotFoundError)" in said["absent.jsonl"]
    torn = tmp_path / "torn.jsonl"  # a torn last line alone: the report still runs
    torn.write_text(json.dumps(good) + '\n{"key": ["ma')
    assert ed.main(["--report", str(torn)]) == 0
    with pytest.raises(SystemExit, match="^--out: .*list.jsonl line 1"):
        ed.main(["--out", str(tmp_path / "list.jsonl"), "--seeds", "10"])
    assert (tmp_path / "list.jsonl").read_text() == files["list.jsonl"]


@pytest.mark.slow
def test_kill_9_resumes_to_the_uninterrupted_rows(tmp_path: Path) -> None:
    from designer.engineer import moves as mv
    from designer.tasks import make_task

    whole = tmp_path / "whole.jsonl"
    finish(run_script(whole))
    rows = ed.read_rows(whole)
    assert [r["stage"] for r in rows] == [0, 1]  # the last stage proposes nothing

    space = make_task(ed.settings_for("cartpole", None, "mutate", 10,
                                      ed.BUDGETS["cartpole"])).space
    for r in rows:
        current = space.parse(r["current"], space.default())
        assert [m["move"] for m in r["moves"]] == mv.admitted(space, current)
        assert all(m["values"] != r["current"] for m in r["moves"])
        assert all(json.loads(m["reply"])["moves"] == [m["move"]] for m in r["moves"])
        assert r["messages"][0]["role"] == "system" and "## Your answer" in \
            r["messages"][1]["content"]
    assert rows[0]["baseline"]["gain"] == 0.0 and rows[1]["baseline"] is None
    assert 0.0 <= rows[0]["baseline"]["repeat_score"] <= 1.0
    assert ed.report([whole])["noise"]["contexts"] == 1
    assert sum(m["realized"] is not None for m in rows[0]["moves"]) == 3

    cut = tmp_path / "cut.jsonl"
    proc = run_script(cut)
    t0 = time.monotonic()
    while not (cut.exists() and b"\n" in cut.read_bytes()):
        assert proc.poll() is None and time.monotonic() - t0 < 600
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    with cut.open("a") as f:  # the torn line a kill in the middle of a write leaves
        f.write('{"key": ["cartpole", 10, "mutate", 1], "task": "cartp')
    finish(run_script(cut))
    lines = cut.read_text().splitlines()
    keys = [tuple(json.loads(line)["key"]) for line in lines]
    assert len(keys) == len(set(keys)) == 2
    assert without_times(ed.read_rows(cut)) == without_times(rows)
