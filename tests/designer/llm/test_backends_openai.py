"""The OpenAI-compatible client against a loopback server that speaks the protocol.

The server (`openai_stub.py`) plays vLLM (takes `json_schema` and `structured_outputs`),
llama.cpp's server (HTTP 500 on `json_schema`, takes `json_object`), a hosted API (refuses
unknown fields), a dead server, a slow one, a flaky one and one that answers garbage. The API
key is set in the environment and must appear in no error, repr or log line.
"""

from __future__ import annotations

import json
import secrets
import time

import pytest

from designer.engineer.edits import edit_schema
from designer.llm import BackendError, LoggedBackend, make_backend
from designer.llm.calllog import CallLog
from designer.llm.openai import OpenAIBackend
from jaxenv.mapf import make_config_space
from tests.designer.llm.openai_stub import Raw, StubServer, completion, dead_url, raw_answer

SCHEMA = edit_schema(make_config_space())
MESSAGES = [{"role": "system", "content": "You design training environments."},
            {"role": "user", "content": "Agents collide on 8x8 maps. Propose the next config."}]
EDIT = {"rationale": "more waits", "wait_ratio": {"8": 0.5}, "slip_prob": 7}  # 7: out of bounds


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


def backend(url: str, **kw) -> OpenAIBackend:
    kw = {"timeout_s": 5.0, "attempts": 3, "backoff_s": 0.01, **kw}
    return make_backend("openai", base_url=url, **kw)


def test_vllm_like_server_gets_the_schema_both_ways_and_the_key(api_key: str) -> None:
    with StubServer(lambda body, h: (200, completion([json.dumps(EDIT)] * body["n"]))) as srv:
        b = backend(srv.url, model="m1")
        replies = b.generate(MESSAGES, SCHEMA, n=2, max_tokens=64, seed=7)
    (req,) = srv.requests
    body = req["body"]
    assert body["messages"] == MESSAGES and body["model"] == "m1"
    assert (body["n"], body["max_tokens"], body["seed"]) == (2, 64, 7)
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA
    assert fmt["json_schema"]["name"].startswith("schema-")
    assert body["structured_outputs"] == {"json": SCHEMA}
    assert req["headers"]["authorization"] == f"Bearer {api_key}"
    assert len(replies) == 2
    for r in replies:  # numeric bounds are the caller's job: the reply is parsed as it came
        assert r.edit == EDIT and r.error is None
        assert (r.backend, r.model, r.prompt_tokens) == ("openai", "m1", 17)


def test_llamacpp_like_server_falls_back_to_json_object_and_keeps_it(api_key: str) -> None:
    def respond(body, headers):
        if body.get("response_format", {}).get("type") == "json_schema":
            return 500, {"error": {"message": "json_schema is not supported"}}
        return 200, completion([json.dumps(EDIT)])  # one choice, whatever n asks

    with StubServer(respond) as srv:
        b = backend(srv.url)
        first = b.generate(MESSAGES, SCHEMA, n=3, max_tokens=64, seed=10)
        second = b.generate(MESSAGES, SCHEMA, n=1, max_tokens=64, seed=20)
    kinds = [r["body"]["response_format"]["type"] for r in srv.requests]
    # discovery: json_schema (+structured_outputs), json_schema, then json_object, kept after
    assert kinds[:3] == ["json_schema", "json_schema", "json_object"]
    assert set(kinds[3:]) == {"json_object"}
    obj = srv.requests[2]["body"]
    assert obj["response_format"]["schema"] == SCHEMA and "structured_outputs" not in obj
    seeds = [r["body"]["seed"] for r in srv.requests[2:]]
    assert seeds == [10, 11, 12, 20]  # topped up one request at a time, seed + i
    assert b.model == "stub-model"  # no model named: the server's first (GET /models)
    assert [r.edit for r in first + second] == [EDIT] * 4


def test_hosted_like_server_refusing_unknown_fields(api_key: str) -> None:
    def respond(body, headers):
        if "structured_outputs" in body:
            return 400, {"error": {"message": "Unrecognized request argument: "
                                              "structured_outputs"}}
        return 200, completion([json.dumps(EDIT)])

    with StubServer(respond) as srv:
        (r,) = backend(srv.url, model="gpt").generate(MESSAGES, SCHEMA)
    assert r.edit == EDIT
    assert [("structured_outputs" in q["body"]) for q in srv.requests] == [True, False]
    assert srv.requests[1]["body"]["response_format"]["type"] == "json_schema"


def test_pinned_format_and_free_text() -> None:
    with StubServer(lambda body, h: (200, completion(["Agents collide: add waits."]))) as srv:
        b = backend(srv.url, model="m", response_format="json_object")
        (text,) = b.generate(MESSAGES, None)
        (obj,) = b.generate(MESSAGES, SCHEMA)
    assert "response_format" not in srv.requests[0]["body"]  # free text: no format at all
    assert srv.requests[1]["body"]["response_format"]["type"] == "json_object"
    assert text.text == "Agents collide: add waits." and text.error is None
    assert obj.edit is None and obj.error.startswith("not JSON")
    with pytest.raises(ValueError, match="response_format"):
        backend(srv.url, response_format="grammar")


def test_dead_server_is_a_backend_error_naming_the_refusal(api_key: str) -> None:
    b = backend(dead_url(), model="m")
    t = time.perf_counter()
    with pytest.raises(BackendError) as err:
        b.generate(MESSAGES, SCHEMA)
    assert time.perf_counter() - t < 5
    assert "ConnectionRefusedError" in str(err.value) and "after 3 tries" in str(err.value)
    assert api_key not in str(err.value)


def test_timeout_is_retried_then_a_backend_error() -> None:
    def slow(body, headers):
        time.sleep(1.0)
        return 200, completion([json.dumps(EDIT)])

    with StubServer(slow) as srv:
        b = backend(srv.url, model="m", timeout_s=0.2, attempts=2)
        t = time.perf_counter()
        with pytest.raises(BackendError, match=r"after 2 tries: TimeoutError"):
            b.generate(MESSAGES, SCHEMA)
        assert time.perf_counter() - t < 3
    assert len(srv.requests) == 2


def test_server_errors_are_retried_with_backoff() -> None:
    calls = []

    def flaky(body, headers):
        calls.append(body)
        if len(calls) <= 2:
            return 503, {"error": "overloaded"}
        return 200, completion([json.dumps(EDIT)])

    with StubServer(flaky) as srv:
        b = backend(srv.url, model="m", response_format="json_schema")
        (r,) = b.generate(MESSAGES, SCHEMA)
    assert r.edit == EDIT and len(srv.requests) == 3


@pytest.mark.parametrize("payload, cause", [
    (b"<html>502 Bad Gateway</html>", "not JSON"),
    ({"object": "error"}, "no choices"),
    ({"choices": []}, "no choices"),
])
def test_garbage_answers_are_backend_errors(payload, cause) -> None:
    with StubServer(lambda body, h: (200, payload)) as srv:
        b = backend(srv.url, model="m", response_format="json_schema")
        with pytest.raises(BackendError, match=cause):
            b.generate(MESSAGES, SCHEMA)
    assert len(srv.requests) == 1  # a garbage answer is not retried


@pytest.mark.parametrize("content, cause", [
    ("I think you should add more holes.", "not JSON"),
    ('{"slip_prob": NaN}', "non-finite"),
    ('{"slip_prob": ' + "9" * 5000 + "}", "non-finite"),
    ('{"slip_prob": 123456789012345678901234}', "integer out of range"),
    ("[" * 100 + "]" * 100, "nested deeper"),
    ('"just a string"', "expected a JSON object"),
    ('{"slip_prob": 99, "slip_prob": 0.1, "rationale": "x"}', "duplicate key 'slip_prob'"),
])
def test_garbage_content_is_a_reply_error(content, cause) -> None:
    with StubServer(lambda body, h: (200, completion([content], finish="stop"))) as srv:
        (r,) = backend(srv.url, model="m").generate(MESSAGES, SCHEMA)
    assert r.edit is None and cause in r.error


def test_truncated_reply_says_so() -> None:
    with StubServer(lambda body, h: (200, completion(['{"rationale": "mo'],
                                                     finish="length"))) as srv:
        (r,) = backend(srv.url, model="m").generate(MESSAGES, SCHEMA, max_tokens=5)
    assert r.edit is None and r.error.startswith("cut at max_tokens=5: not JSON")


def test_api_key_never_in_errors_reprs_or_the_log(api_key: str, tmp_path) -> None:
    def echo(body, headers):  # a server that quotes the credentials it got, as some do
        if body["seed"] == 0:
            return 401, {"error": f"invalid key: {headers['authorization']}"}
        return 200, completion([json.dumps({"rationale": headers["authorization"]})])

    log = CallLog(tmp_path / "calls.jsonl")
    with StubServer(echo) as srv:
        b = LoggedBackend(backend(srv.url, model="m"), log)
        with pytest.raises(BackendError) as err:
            b.generate(MESSAGES, SCHEMA, seed=0)
        (r,) = b.generate(MESSAGES, SCHEMA, seed=1)
    assert "HTTP 401" in str(err.value) and "***" in str(err.value)
    assert api_key not in str(err.value)
    assert api_key not in r.text and r.edit == {"rationale": "Bearer ***"}
    assert api_key not in repr(b) and api_key not in repr(b.inner)
    assert api_key not in str(vars(b.inner))
    text = (tmp_path / "calls.jsonl").read_text()
    assert api_key not in text
    failed, ok = CallLog(tmp_path / "calls.jsonl").calls()
    assert not failed["ok"] and "HTTP 401" in failed["error"] and ok["ok"]


def test_failures_are_logged_with_their_cause(tmp_path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    b = LoggedBackend(backend(dead_url(), model="m", attempts=1), log)
    with pytest.raises(BackendError):
        b.generate(MESSAGES, SCHEMA)
    (rec,) = CallLog(tmp_path / "calls.jsonl").calls()
    assert rec["ok"] is False and "ConnectionRefusedError" in rec["error"]
    assert rec["backend"] == "openai" and rec["messages"] == MESSAGES


def test_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BackendError, match="base-url"):
        make_backend("openai")
    with pytest.raises(BackendError, match="http"):
        make_backend("openai", base_url="ftp://example/v1")
    b = make_backend("openai", base_url="http://user:pw-secret@127.0.0.1:1/v1", model="m")
    assert "pw-secret" not in repr(b)


def _fragments(key: str, width: int = 8) -> set[str]:
    return {key[i:i + width] for i in range(len(key) - width + 1)}


def test_a_dripping_server_is_bounded_by_the_call_deadline() -> None:
    answer = raw_answer(json.dumps(completion([json.dumps(EDIT)])).encode())
    drip = Raw(answer, every_s=0.05, chunk=1)  # headers too; each byte well within timeout_s
    with StubServer(lambda body, h: (200, drip)) as srv:
        b = backend(srv.url, model="m", timeout_s=5.0, deadline_s=1.0)
        t = time.perf_counter()
        with pytest.raises(BackendError, match="deadline of 1s"):
            b.generate(MESSAGES, SCHEMA)
        assert time.perf_counter() - t < 2.5
    assert len(srv.requests) == 1  # a missed deadline is not retried


def test_backoff_never_outlasts_the_deadline() -> None:
    with StubServer(lambda body, h: (503, {"error": "overloaded"})) as srv:
        b = backend(srv.url, model="m", backoff_s=5.0, attempts=5, deadline_s=0.5)
        t = time.perf_counter()
        with pytest.raises(BackendError, match="deadline"):
            b.generate(MESSAGES, SCHEMA)
        assert time.perf_counter() - t < 2.0


@pytest.mark.parametrize("where", ["error-cut", "message-cut", "garbage-cut", "content"])
def test_no_fragment_of_the_key_escapes(api_key: str, where: str, tmp_path) -> None:
    def echo(body, headers):
        if where == "error-cut":  # the key straddles the 2,000 bytes read from an error body
            return 401, Raw(raw_answer(("x" * 1990 + api_key).encode(),
                                       status="401 Unauthorized"))
        if where == "message-cut":  # ... or the 300 characters kept in the message
            return 401, {"error": "y" * 260 + api_key}
        if where == "garbage-cut":  # ... or the 120 bytes quoted from a garbage answer
            return 200, ("<" * 110 + api_key).encode()
        return 200, completion([json.dumps({"rationale": api_key[:12] + " and " +
                                            api_key[-9:]})])

    log = CallLog(tmp_path / "calls.jsonl")
    with StubServer(echo) as srv:
        b = LoggedBackend(backend(srv.url, model="m", attempts=1,
                                  response_format="json_schema"), log)
        try:
            texts = [r.text for r in b.generate(MESSAGES, SCHEMA)]
        except BackendError as e:
            texts = [str(e)]
    assert where not in ("message-cut", "garbage-cut") or "***" in texts[0]
    for text in (*texts, (tmp_path / "calls.jsonl").read_text()):
        assert not any(f in text for f in _fragments(api_key)), text[-200:]


@pytest.mark.parametrize("answer, cause", [
    (raw_answer(b'{"choices": [', length=400), "not JSON"),  # cut short
    (raw_answer(b"\xff\xfe\x00garbage"), "not JSON"),
    (b"SPEAK FRIEND\r\n\r\n", "BadStatusLine"),
])
def test_garbage_bodies_are_one_line_backend_errors(answer: bytes, cause: str) -> None:
    with StubServer(lambda body, h: (200, Raw(answer))) as srv:
        b = backend(srv.url, model="m", attempts=2, response_format="json_schema")
        with pytest.raises(BackendError, match=cause) as err:
            b.generate(MESSAGES, SCHEMA)
    assert "\n" not in str(err.value)
