"""Export of a tunix Llama or Qwen3 (LoRA merged) as a transformers folder
(policy.llm.export): the folder's logits under transformers equal tunix's of the LoRA model,
tied and untied, at a rope_theta that is not tunix's default; it loads in the transformers
backend; it is written atomically. Tiny random-weight models built here
(tests/helpers/tiny_tunix.py), no download."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

tunix = pytest.importorskip("tunix", reason="the tunix extra is not installed")

pytestmark = pytest.mark.slow

IDS = np.array([[5, 9, 17, 3, 30, 41, 7, 12, 22, 19, 8, 33]], np.int32)


def lora_model(folder, seed=0, rank=4, alpha=8.0):
    """The tiny model in tunix with LoRA whose B is random (a LoRA that changes logits)."""
    from flax import nnx

    from policy.llm import tunix_adapter as A

    lm, tok, _ = A.load_model(folder)
    lora = A.apply_lora(lm, A.make_mesh(), rank=rank, alpha=alpha)
    rng = np.random.default_rng(seed)
    for path, v in nnx.iter_graph(lora):
        if isinstance(v, nnx.LoRAParam) and str(path[-1]).endswith("_lora_b"):
            v.set_value(jnp.asarray(rng.normal(0, 0.3, v.shape), v.dtype))
    return lm, lora, tok


def tunix_logits(lm):
    n = IDS.shape[1]
    attn = jnp.tril(jnp.ones((n, n), bool))[None]
    return np.asarray(lm(jnp.asarray(IDS), jnp.arange(n)[None], None, attn)[0])


def hf_logits(folder):
    import torch
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True).eval()
    with torch.no_grad():
        return hf(torch.tensor(IDS, dtype=torch.long)).logits.numpy()


@pytest.mark.parametrize(("family", "tied"), [("llama", False), ("llama", True),
                                              ("qwen3", True)])
def test_export_matches_tunix_lora_logits(tmp_path, monkeypatch, family, tied):
    import json

    from policy.llm.export import export_hf, lora_scale_of
    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    src = tiny_folder(tmp_path / "src", rope_theta=50_000.0, head_scale=1.0, tied=tied,
                      family=family)
    base, lora, tok = lora_model(src)
    assert lora_scale_of(lora) == pytest.approx(2.0)
    want = tunix_logits(lora)
    assert np.abs(want - tunix_logits(base)).max() > 1e-2  # the LoRA matters
    out = export_hf(lora, tok, src, tmp_path / "out")
    assert json.loads((out / "config.json").read_text())["model_type"] == family
    np.testing.assert_allclose(hf_logits(out), want, atol=1e-4, rtol=1e-4)
    # ... and back into tunix (the route a later stage or run takes)
    from policy.llm import tunix_adapter as A

    again, _, _ = A.load_model(out)
    np.testing.assert_allclose(tunix_logits(again), want, atol=1e-4, rtol=1e-4)


def test_export_without_lora_and_atomic_overwrite(tmp_path, monkeypatch):
    from policy.llm import tunix_adapter as A
    from policy.llm.export import COMPLETE, export_hf
    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    src = tiny_folder(tmp_path / "src", rope_theta=50_000.0, head_scale=1.0)
    lm, tok, _ = A.load_model(src)
    out = export_hf(lm, tok, src, tmp_path / "out")
    np.testing.assert_allclose(hf_logits(out), hf_logits(src), atol=1e-5, rtol=1e-5)
    _, lora, _ = lora_model(src)
    export_hf(lora, tok, src, out)  # over the previous export
    np.testing.assert_allclose(hf_logits(out), tunix_logits(lora), atol=1e-4, rtol=1e-4)
    assert (out / COMPLETE).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


def test_exported_folder_loads_in_the_transformers_backend(tmp_path, monkeypatch):
    from designer.llm.hf import TransformersBackend
    from policy.llm.export import export_hf
    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    src = tiny_folder(tmp_path / "src", rope_theta=50_000.0, tied=True, json_text=True)
    _, lora, tok = lora_model(src)
    out = export_hf(lora, tok, src, tmp_path / "out")
    backend = TransformersBackend(out, threads=1)
    schema = {"type": "object", "properties": {"a": {"enum": ["left", "right"]}},
              "required": ["a"], "additionalProperties": False}
    replies = backend.generate([{"role": "user", "content": "Write the plan."}], schema, n=2,
                               max_tokens=40, seed=1)
    assert len(replies) == 2
    assert all(r.edit is not None and r.edit["a"] in ("left", "right") for r in replies), replies
