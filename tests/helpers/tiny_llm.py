"""A tiny random-weight chat model built in-process (no download), behind the real
transformers + outlines backend: a 2-layer Llama over a 300-token BPE trained here on a few
lines of edit-like text. Its replies are random, so everything a test sees of them comes from
the grammar."""

from __future__ import annotations

import json

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CORPUS = ["Most failures are holes on 9x9 and 10x10 maps.",
          "Agents swap places on 4x4 maps (edge conflicts).",
          "Episodes time out on 7x7 maps with a wait needed.",
          "Valid 92% on 3x3, 11% on 10x10; vertex conflicts dominate."]


def tiny_backend(seed: int = 0):
    """The tiny model as a `TransformersBackend` (needs the llm extra)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from designer.llm.hf import TransformersBackend

    bpe = Tokenizer(models.BPE())
    bpe.decoder = decoders.Fuse()
    alphabet = [chr(c) for c in range(32, 127)] + ["\n"]
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=alphabet, show_progress=False)
    corpus = [json.dumps({"rationale": "fewer holes on large maps", "size_weights": {"3": 0.1},
                          "hole_ratio": {"9": 0.25}, "slip_prob": 0.05}), *CORPUS]
    bpe.train_from_iterator(corpus * 10, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                  pad_token="<|im_end|>")
    tok.chat_template = CHATML
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=4096, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.eos_token_id, bos_token_id=None)
    lm = LlamaForCausalLM(config).eval()
    return TransformersBackend(lm=lm, tokenizer=tok, model_name="tiny-llama", temperature=1.0,
                               top_p=1.0, threads=1)
