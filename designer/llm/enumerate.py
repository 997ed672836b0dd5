"""Exact sampling of an enum grammar by enumeration: one model pass per decision, not per token.

A reply grammar made of enum fields (a string enum, or an array of exactly one enum item) and
at most one short free-text field at its end (the moves language of a local model) admits few
replies per field. Decoding it token by token costs a model step per token, JSON punctuation
included, and the longest of a call's replies sets the call's time. Here each enum field is
decided by one forward pass that scores every option at once: the options' tokens are laid side
by side after the shared prefix, each attending to the prefix and to itself (a 4-D attention
mask), so each option's log-probability is exact under the model (its canonical tokens). Only
the trie's inner nodes are fed (a last token is scored by its parent's logits), and the chosen
option's keys and values are gathered from that pass rather than computed again. An
option is drawn from those probabilities at the temperature, within top-p. The replies of a
call that share their prefix draw an array item (a move) **without replacement** (Gumbel
top-k), so a call's candidates differ while options remain; plain enums are drawn
independently. The free-text field is sampled token by token under the pattern's character
class and length, all replies in one batch that a finished reply leaves. `enum_plan(schema)`
says whether a schema has this shape; the backend decodes any other schema with outlines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_TEXT = re.compile(r"^\^\[(?P<cls>[^\]]*(?:\\\][^\]]*)*)\]\{0,(?P<n>\d+)\}\$$")


@dataclass(frozen=True)
class Field:
    """One reply field: an enum (`options`), an array of one enum item, or free text."""

    name: str
    options: tuple[str, ...] = ()
    array: bool = False
    chars: re.Pattern | None = None  # free text: one allowed character
    max_chars: int = 0

    @property
    def free(self) -> bool:
        return self.chars is not None

    def opening(self, first: bool) -> str:
        return ("{" if first else ",") + json.dumps(self.name) + ":" + ('["' if self.array
                                                                         else '"')

    def closing(self) -> str:
        return '"]' if self.array else '"'


def enum_plan(schema: dict | None) -> list[Field] | None:
    """The fields of a schema this sampler can decode exactly, in order; None otherwise.

    Accepted: an object with every property required (in the schema's order) and no others;
    each property a string enum, an array of exactly one string-enum item, or (the last only)
    a string whose pattern is one character class repeated 0 to N times. Enum strings must
    need no JSON escaping."""
    if not isinstance(schema, dict) or schema.get("type") != "object" \
            or schema.get("additionalProperties", True) is not False:
        return None
    props = schema.get("properties") or {}
    if not props or list(schema.get("required", [])) != list(props):
        return None
    out: list[Field] = []
    for i, (name, p) in enumerate(props.items()):
        items = p.get("items", {}) if p.get("type") == "array" else None
        enum = (items or p).get("enum")
        if items is not None and (p.get("minItems"), p.get("maxItems")) != (1, 1):
            return None
        if enum is not None:
            if not enum or not all(isinstance(v, str) and json.dumps(v)[1:-1] == v
                                   for v in enum):
                return None
            out.append(Field(name, tuple(enum), array=items is not None))
            continue
        m = _TEXT.match(p.get("pattern", "")) if p.get("type") == "string" else None
        if m is None or i != len(props) - 1:
            return None
        out.append(Field(name, chars=re.compile(f"[{m['cls']}]"), max_chars=int(m["n"])))
    return out


@dataclass
class _Group:
    """Replies that share their text so far, and the model's cache of it."""

    text: str
    members: list[int]
    cache: Any  # holds the prompt and reply tokens but the last (`full[:-1]`)
    full: list[int] = field(default_factory=list)


def draw(scores: Any, n: int, *, temperature: float, top_p: float, distinct: bool,
         gen: Any) -> list[int]:
    """`n` option indices drawn from log-probabilities `scores` at the temperature.

    Plain draws are independent, within the top-p nucleus. ``distinct`` draws (a call's moves)
    are without replacement (Gumbel top-k): the nucleus first, then, where the replies outnumber
    it, the options outside it in the model's order of likelihood (a peaked model, a trained
    engineer's, has a nucleus of one or two moves, and a repeated candidate wastes a
    verification slot); only when every option is drawn do they repeat."""
    import torch

    scores = scores / max(temperature, 1e-6)
    order = torch.argsort(scores, descending=True)
    probs = torch.softmax(scores[order], 0)
    inside = max(int((torch.cumsum(probs, 0) - probs < top_p).sum()), 1)
    allowed = order[:inside]
    if not distinct:
        p = torch.softmax(scores[allowed], 0)
        return allowed[torch.multinomial(p, n, replacement=True, generator=gen)].tolist()
    picks: list[int] = []

    def gumbel_top(pool: Any) -> None:
        u = torch.rand(len(pool), generator=gen).clamp(1e-12, 1 - 1e-12)
        keys = scores[pool] - torch.log(-torch.log(u))
        picks.extend(pool[torch.argsort(keys, descending=True)][:n - len(picks)].tolist())

    gumbel_top(allowed)
    if len(picks) < n and len(order) > inside:
        gumbel_top(order[inside:])
    while len(picks) < n:  # every option drawn: again, from the nucleus
        gumbel_top(allowed)
    return picks


class EnumSampler:
    """Samples replies of an `enum_plan` grammar from a transformers causal LM (docstring)."""

    def __init__(self, lm: Any, tokenizer: Any):
        self.lm, self.tokenizer = lm, tokenizer
        self._pieces: list[str] | None = None  # each vocabulary id's text (specials: "")
        self._masks: dict[str, tuple[Any, Any, Any]] = {}  # per character class

    # ---------------------------------------------------------------- model passes
    def _ids(self, prompt: list[int], text: str) -> list[int]:
        return prompt + self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _feed(self, cache: Any, ids: list[int], start: int) -> None:
        """Run `ids` (positions `start`...) through the model into `cache` (the vocabulary
        projection only for the last position: for a long prompt it is not free)."""
        import torch

        x = torch.tensor([ids], dtype=torch.long)
        pos = torch.arange(start, start + len(ids)).unsqueeze(0)
        self.lm(input_ids=x, position_ids=pos, past_key_values=cache, use_cache=True,
                logits_to_keep=1)

    def _option_logprobs(self, g: _Group, seqs: list[list[int]]
                         ) -> tuple[Any, int, Any]:
        """Log-probability of each token sequence continuing `g` (one pass, options side by
        side); the cache is left at the longest prefix `keep` all of them share with
        `g.full`. Also `own(o)`: option `o`'s keys and values after `keep` but its last token
        (per layer, its path through the trie): a chosen option's cache is gathered, not
        recomputed."""
        import torch

        shared = len(g.full)  # tokens every option shares with the text so far
        for s in seqs:
            shared = min(shared, next((j for j, (a, b) in enumerate(zip(s, g.full)) if a != b),
                                      min(len(s), len(g.full))))
        keep = shared - 1  # the last shared token is fed again: its logits score the options
        g.cache.crop(keep)
        # The options' tails as a token trie: a prefix two options share is one node, so a
        # pass costs the distinct prefixes, not the options times their length.
        tokens: list[int] = []
        parent: list[int] = []
        depth: list[int] = []
        node: dict[tuple[int, int], int] = {}
        paths = []
        for s in seqs:
            at, path = -1, []
            for d, t in enumerate(s[keep:]):
                if (at, t) not in node:
                    node[(at, t)] = len(tokens)
                    tokens.append(t), parent.append(at), depth.append(d)
                at = node[(at, t)]
                path.append(at)
            paths.append(path)
        # Only nodes with a child are fed: a leaf's score comes from its parent's logits, and a
        # chosen option's cache holds its tokens but the last.
        inner = sorted({p for p in parent if p >= 0})
        at = {n: r for r, n in enumerate(inner)}
        q = len(inner)
        mask = torch.zeros((1, 1, q, keep + q), dtype=torch.bool)
        mask[..., :keep] = True
        for r, i in enumerate(inner):  # each node sees the prefix, its ancestors and itself
            j = i
            while j >= 0:
                mask[0, 0, r, keep + at[j]] = True
                j = parent[j]
        if getattr(self.lm.config, "_attn_implementation", "sdpa") == "eager":
            mask = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))  # additive form
        if q:
            logp = torch.log_softmax(self.lm(
                input_ids=torch.tensor([[tokens[i] for i in inner]]), attention_mask=mask,
                position_ids=torch.tensor([[keep + depth[i] for i in inner]]),
                past_key_values=g.cache, use_cache=True).logits[0].float(), -1)
        trie = [(layer.keys[..., keep:, :], layer.values[..., keep:, :])
                for layer in g.cache.layers]
        g.cache.crop(keep)

        def own(o: int) -> list[tuple[Any, Any]]:
            fed = torch.tensor([at[n] for n in paths[o][:-1]], dtype=torch.long)
            return [(k[..., fed, :], v[..., fed, :]) for k, v in trie]

        out = [sum((logp[at[path[d - 1]], tokens[path[d]]] for d in range(1, len(path))),
                   torch.tensor(0.0)) for path in paths]
        return torch.stack(out), keep, own

    # ---------------------------------------------------------------- sampling
    def sample(self, prompt: list[int], plan: list[Field], n: int, *, temperature: float,
               top_p: float, seed: int) -> list[str]:
        """`n` reply texts of the grammar `plan` after the prompt's token ids."""
        import torch
        from transformers import DynamicCache

        gen = torch.Generator().manual_seed(seed)
        cache = DynamicCache()
        with torch.inference_mode():
            if len(prompt) > 1:
                self._feed(cache, prompt[:-1], 0)
            groups = [_Group("", list(range(n)), cache, list(prompt))]
            for i, f in enumerate(plan):
                if f.free:
                    return self._free_text(groups, f, i == 0, n, temperature, gen)
                groups = [h for g in groups for h in self._decide(g, prompt, f, i == 0,
                                                                   temperature, top_p, gen)]
        texts = [""] * n
        for g in groups:
            for m in g.members:
                texts[m] = g.text + "}"
        return texts

    def _decide(self, g: _Group, prompt: list[int], f: Field, first: bool,
                temperature: float, top_p: float, gen: Any) -> list[_Group]:
        """Draw `f`'s option for each member of `g`; the members split by their option."""
        import torch
        from transformers import DynamicCache

        texts = [g.text + f.opening(first) + o + f.closing() for o in f.options]
        seqs = [self._ids(prompt, t) for t in texts]
        scores, keep, own = self._option_logprobs(g, seqs)
        picks = draw(scores, len(g.members), temperature=temperature, top_p=top_p,
                     distinct=f.array, gen=gen)
        by_option: dict[int, list[int]] = {}
        for m, o in zip(g.members, picks):
            by_option.setdefault(o, []).append(m)
        out = []
        for o, members in by_option.items():  # the prefix and the option's path, but its last
            cache = DynamicCache()
            for i, (layer, (k, v)) in enumerate(zip(g.cache.layers, own(o))):
                cache.update(torch.cat([layer.keys, k], -2), torch.cat([layer.values, v], -2), i)
            out.append(_Group(texts[o], members, cache, seqs[o]))
        return out

    def _allowed(self, f: Field) -> tuple[Any, Any, Any]:
        """Per vocabulary id (cached per character class): whether its text is only `f`'s
        characters, its text length, and whether it ends the text (a closing quote, alone or
        with the final brace)."""
        import torch

        key = f.chars.pattern
        if key not in self._masks:
            if self._pieces is None:
                special = set(self.tokenizer.all_special_ids) | set(
                    getattr(self.tokenizer, "added_tokens_decoder", {}))
                pieces = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))])
                self._pieces = ["" if i in special else p for i, p in enumerate(pieces)]
            run = re.compile(f"(?:{f.chars.pattern})+")
            ok = torch.tensor([run.fullmatch(p) is not None for p in self._pieces])
            length = torch.tensor([len(p) for p in self._pieces])
            ends = torch.tensor([p in ('"', '"}') for p in self._pieces])
            self._masks[key] = (ok, length, ends)
        return self._masks[key]

    def _batch(self, groups: list[_Group], opening: list[int]
               ) -> tuple[list[tuple[int, _Group]], Any, Any, Any, Any]:
        """One row per member: the caches (each its text but the last token) left-padded to
        the longest, which of their positions are real, and the first step's tokens and
        positions: the text's last token and `opening`, every row at once."""
        import torch
        from transformers import DynamicCache

        rows = [(m, g) for g in groups for m in g.members]
        lens = [len(g.full) - 1 for _, g in rows]
        top = max(lens)
        batch = DynamicCache()
        for layer in range(len(groups[0].cache.layers)):
            ks, vs = [], []
            for (_, g), ln in zip(rows, lens):
                pad = (0, 0, top - ln, 0)
                ks.append(torch.nn.functional.pad(g.cache.layers[layer].keys, pad))
                vs.append(torch.nn.functional.pad(g.cache.layers[layer].values, pad))
            batch.update(torch.cat(ks), torch.cat(vs), layer)
        seen = torch.zeros((len(rows), top), dtype=torch.long)
        for r, ln in enumerate(lens):
            seen[r, top - ln:] = 1
        last = torch.tensor([g.full[-1:] + opening for _, g in rows])
        pos = torch.tensor([[ln + j for j in range(last.shape[1])] for ln in lens])
        return rows, batch, seen, last, pos

    def _free_text(self, groups: list[_Group], f: Field, first: bool, n: int,
                   temperature: float, gen: Any) -> list[str]:
        """The last field, free text, token by token for every reply in one batch."""
        import torch

        ok, length, ends = self._allowed(f)
        opening = self.tokenizer(f.opening(first), add_special_tokens=False)["input_ids"]
        rows, batch, seen, last, pos = self._batch(groups, opening)
        written = [""] * len(rows)
        live = list(range(len(rows)))  # rows still writing; a finished row leaves the batch
        fed = 0
        for _ in range(f.max_chars + 1):
            fed += last.shape[1]
            mask = torch.cat([seen, torch.ones((len(live), fed), dtype=torch.long)], 1)
            logits = self.lm(input_ids=last, attention_mask=mask, position_ids=pos,
                             past_key_values=batch, use_cache=True,
                             logits_to_keep=1).logits[:, -1].float()
            nxt, stay = [], []
            for i, r in enumerate(live):
                room = f.max_chars - len(written[r])
                allow = ends | (ok & (length <= room))
                z = (logits[i] / max(temperature, 1e-6)).masked_fill(~allow, float("-inf"))
                t = int(torch.multinomial(torch.softmax(z, 0), 1, generator=gen))
                if not bool(ends[t]):
                    written[r] += self._pieces[t]
                    nxt.append(t), stay.append(i)
            if not stay:
                break
            if len(stay) < len(live):
                keep = torch.tensor(stay)
                batch.batch_select_indices(keep)
                seen, pos = seen[keep], pos[keep]
                live = [live[i] for i in stay]
            last = torch.tensor([[t] for t in nxt])
            pos = pos[:, -1:] + 1
        texts = [""] * n
        for (m, g), w in zip(rows, written):
            texts[m] = g.text + f.opening(first) + w + '"}'
        return texts
