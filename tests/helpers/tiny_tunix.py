"""A tiny random-weight Llama (or Qwen3) for the tunix tests, built here (no download): a
transformers ``LlamaForCausalLM`` (``Qwen3ForCausalLM`` with ``family="qwen3"``) over a small
BPE trained on plan-like text, saved as a safetensors folder and loaded into tunix through
``policy.llm.tunix_adapter`` (the real loader path).

The vocabulary is small and the output layer scaled down, so sampling is near uniform and a
reply hits ``<|im_end|>`` at a random length: the paper's length term then gives a group
rewards that differ, and GRPO has a gradient."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_llm import CHATML

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = ["A0: (0,0) -> (0,1) -> (1,1)", "A1: (2,2) -> (2,2) -> (2,1)",
          "Grid 3x3, 2 agents. Write the plan.", "system user assistant"]


def tiny_folder(path: Path, rope_theta: float = 10_000.0, seed: int = 0,
                vocab: int = 64, layers: int = 2, head_scale: float = 0.05,
                tied: bool = False, json_text: bool = False, corpus: tuple[str, ...] = (),
                family: str = "llama", qk_scale: float = 1.0) -> Path:
    """Write the tiny model (config, safetensors, tokenizer) into ``path``.

    ``json_text``: every byte in the vocabulary (at least 300 tokens), so a grammar can make
    the model write any JSON (the ``self`` engineer's tests); ``corpus``: more BPE training
    text (shorter prompts in tokens); ``family``: "llama" or "qwen3" (whose RMSNorm weights,
    the q/k norms included, are drawn around 1 rather than left at 1: their mapping shows);
    ``qk_scale``: queries and keys scaled up (their projections; Qwen3's q/k norms), so
    attention depends sharply on the positions (a wrong RoPE theta moves the logits far)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = (pre_tokenizers.ByteLevel.alphabet() if json_text
                else sorted(set("".join(CORPUS) + "\n")))
    vocab = max(vocab, 300) if json_text else vocab
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=alphabet)
    bpe.train_from_iterator(CORPUS * 10 + list(corpus), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>")
    tok.chat_template = CHATML
    torch.manual_seed(seed)
    config_cls, lm_cls = {"llama": (LlamaConfig, LlamaForCausalLM),
                          "qwen3": (Qwen3Config, Qwen3ForCausalLM)}[family]
    config = config_cls(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=8, max_position_embeddings=2048, rope_theta=rope_theta,
                        rms_norm_eps=1e-5, tie_word_embeddings=tied,
                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                        bos_token_id=None)
    lm = lm_cls(config).eval()
    with torch.no_grad():
        lm.lm_head.weight.mul_(head_scale)  # small: near-uniform sampling, random lengths
        for name, w in lm.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                w.mul_(qk_scale)
        if family != "llama":
            for name, w in lm.named_parameters():
                if name.endswith("norm.weight"):
                    w.copy_(1 + 0.2 * torch.randn_like(w))
                if name.endswith(("q_norm.weight", "k_norm.weight")):
                    w.mul_(qk_scale)  # the q/k norms set the attention's scale here
    path.mkdir(parents=True, exist_ok=True)
    if tied:  # as designer.llm.hf caches a GGUF: safetensors keeps only lm_head.weight
        from safetensors.torch import save_model

        save_model(lm, str(path / "model.safetensors"), metadata={"format": "pt"})
        lm.config.save_pretrained(path)
    else:
        lm.save_pretrained(path)
    tok.save_pretrained(path)
    return path
