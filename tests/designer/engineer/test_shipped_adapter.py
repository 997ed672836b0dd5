"""The engineer adapter shipped in the package: a few MB with its model card, the embedded
engineer's default, and, merged into the embedded SmolLM2 offline, a model whose replies to a
MAPF stage parse as admitted moves, distinct where they share their diagnosis."""

from __future__ import annotations

import pytest

from designer.engineer import adapters
from designer.engineer import moves as mv
from designer.engineer.edits import preset_space
from designer.settings import RunSettings
from jaxenv.mapf import make_config_space
from policy.llm.engineer_rl import adapter_meta

CELLS = ["3 agents 5x5", "4 agents 8x8", "5 agents 10x10"]


def test_the_shipped_adapter_is_a_few_megabytes_with_its_model_card() -> None:
    path = adapters.resolve("shipped")
    assert path is not None and path.parent.name == adapters.SHIPPED
    assert path.stat().st_size < 8_000_000
    meta = adapter_meta(path)
    assert meta["dtype"] == "float16" and meta["base"].startswith("SmolLM2-135M")
    card = (path.parent / "MODEL_CARD.md").read_text()
    assert f"rank {meta['rank']}, alpha {float(meta['alpha'])}" in card
    assert "scripts/train_engineer.py" in card and "scripts/engineer_data.py" in card
    assert RunSettings().adapter == adapters.SHIPPED  # the embedded engineer's default


@pytest.mark.slow
def test_the_shipped_adapter_merged_into_smollm2_writes_admitted_distinct_moves(
        tmp_path, monkeypatch) -> None:
    pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")
    pytest.importorskip("tunix", reason="the adapter is merged with tunix")
    from designer.llm.open import open_backend
    from policy.llm.models import cache_dir, model_folder

    base = model_folder(None)  # the embedded SmolLM2, converted once into the user's cache
    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path))  # a fresh merge, not a cached one
    assert cache_dir() == tmp_path
    settings = RunSettings(model=str(base), adapter="shipped")
    space = preset_space(make_config_space(), "paper")
    cur = space.default()
    schema = mv.moves_schema(space, cur, CELLS, max_moves=1)
    messages = [{"role": "system", "content": "You are the environment engineer. Reply with "
                 "JSON."},
                {"role": "user", "content": "Stage 2. Training success 0.31, validation 0.22; "
                 "most failures are collisions at 5 agents on 10x10 maps."}]
    replies = open_backend(settings, None).generate(messages, schema, n=4, max_tokens=288,
                                                   seed=0)
    assert any((tmp_path / "adapters").glob(f"{adapters.SHIPPED}-*"))  # merged here
    for r in replies:
        assert r.error is None, (r.error, r.text)
        out = mv.apply_moves(space, r.edit, cur, CELLS, constrained=True)
        assert out.ok and out.changed, (out.rejection, r.text)
        space.validate(out.values)
    by_diagnosis: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for r in replies:  # replies that share their diagnosis draw their moves without replacement
        by_diagnosis.setdefault((r.edit["training"], r.edit["weakest"]), []).append(
            tuple(r.edit["moves"]))
    assert all(len(set(m)) == len(m) for m in by_diagnosis.values()), by_diagnosis
