"""Train the engineer on scored move tables: SFT, then GRPO, on a LoRA in JAX (tunix).

Usage:
    python scripts/train_engineer.py --data DATA.jsonl [--data MORE.jsonl] --out DIR
        [--train-seeds 10-49] [--heldout-seeds 50-54] [--seeds 0,1,2]
        [--sft-steps 20] [--grpo-steps 20] [--contexts 4] [--group 8] [--eval-every 5]
        [--model PATH] [--rank 16] [--alpha 32] [--init NAME|FILE] [--ship NAME]

Data: the JSONL rows of ``scripts/engineer_data.py``, one per context (task, seed, proposer,
stage): the exact prompt messages the moves-language engineer is sent, the target diagnosis
and the table of every admitted single move with its verification score (the choice rule's)
(``choice_score``: the number the choice rule ranks by, none outside its band) and, for
some moves, the realized gain (`read_rows` names the keys it reads). Contexts are
split by seed: held-out seeds are never trained on.

The model's choice among a context's admitted moves is read exactly, not sampled through a
decoder: every admitted move is scored by teacher forcing, log pi(move | prompt, diagnosis)
(the reply's own prefix ``{"training":..,"weakest":..,"moves":["`` appended to the prompt,
which runs once per context, the move and its closing ``"]`` as the completion). Under the
one-move grammar (`moves.moves_schema(..., max_moves=1)`) a reply's move is one of these
strings, so the softmax over their log-probabilities is the model's move distribution given
the diagnosis, with no torch round trip and no decoder in the loop.

1. SFT: per context the best move (realized gain where measured, else the verification
   score); the target is the full reply ``moves.reply_text(diagnosis, [best], rationale)``
   (the rationale made of the diagnosis words) closed by the end-of-reply token; the loss is
   on the reply tokens only (the learner's weighted log-likelihood with weights of one).
2. GRPO: each step takes ``--contexts`` training contexts, samples ``--group`` moves from
   the model's move distribution of each, rewards each with its verification score in the
   table, normalises advantages within each context's group and takes one LoRA update over
   all groups (`EngineerLearner.step_groups`).
3. Measured on the held-out contexts before training and every ``--eval-every`` updates:
   top-1 agreement (the model's most probable move is the table's best) and the mean
   verification score of the model's move distribution (and of its top-1 move), against
   the table's best and the uniform choice. Learning is read on these, never on a reward.

Each training seed (``--seeds``) trains from the same initial LoRA (a fresh one, or with
``--init`` a saved adapter, e.g. a shipped one continued on another family's data; its card
is kept in the new one) with its own data order and samples; ``DIR`` gets ``summary.json``
(every curve), ``curves.png`` and one adapter per seed. ``--ship NAME`` copies the first
seed's adapter to ``designer/engineer/adapters/NAME/adapter.safetensors`` with its
``MODEL_CARD.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "scripts"):  # the packages; engineer_data, whose rows this reads
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# XLA:CPU's memory-minimising scheduler (`policy.llm.engineer_rl.MEMORY_FLAG`), set before any
# import: importing the packages starts JAX, and an update without it keeps every layer's
# activations (SmolLM2 on two prompts of a thousand tokens ran out of memory)
MEMORY_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
if "concurrency_optimized_scheduler" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {MEMORY_FLAG}".strip()

from engineer_data import seed_list  # noqa: E402

from designer.engineer.moves import RATIONALE_CHARS, reply_text  # noqa: E402

HOLE = "@MOVE@"  # a placeholder move: the reply text before it is the scoring prefix
MOVE_BUCKET = 8  # completions of one move are a few tokens: pad them to 8s, not 64s
SFT_BUCKET = 64


@dataclass(frozen=True)
class Example:
    """One context of the dataset: its prompt, target diagnosis and scored move table."""

    key: str
    seed: int
    messages: list[dict[str, str]]
    diagnosis: dict[str, str]
    moves: tuple[str, ...]
    scores: np.ndarray  # verification score of each move
    best: int  # index of the best move (realized gain where measured, else the score)
    realized: bool  # whether `best` came from realized gains


def _score(m: dict[str, Any]) -> float:
    """A move's verification score: the choice rule's (``choice_score``; none, outside the
    rule's band, is 0), else a plain ``score`` number."""
    if "choice_score" in m:
        return float(m["choice_score"] or 0.0)
    return float(m["score"])


def _gain(m: dict[str, Any]) -> float | None:
    r = m.get("realized")
    return None if r is None else float(r["gain"] if isinstance(r, dict) else r)


def _readable(m: Any) -> bool:
    """Whether a move entry has what `_score` and `_gain` read, as numbers."""
    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if not isinstance(m, dict) or "move" not in m:
        return False
    score = m["choice_score"] if "choice_score" in m else m.get("score")
    r = m.get("realized")
    gain = r.get("gain") if isinstance(r, dict) else r
    return (number(score) or ("choice_score" in m and score is None)) and (
        r is None or number(gain))


def read_rows(rows: Iterable[dict[str, Any]]) -> list[Example]:
    """Examples from dataset rows (`scripts/engineer_data.py`'s format). Keys read: ``seed``,
    ``messages``, ``diagnosis`` ({"training", "weakest"}), ``moves`` (a list of {"move",
    "choice_score" or a number "score", optional "realized" ({"gain"} or a number)}), an
    optional ``key``. A row whose moves all score alike teaches nothing and is skipped."""
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"row {i}: not a JSON object")
        table = row.get("moves")
        if row.get("seed") is None or not isinstance(table, list) or not table:
            raise ValueError(f"row {i}: needs a seed and a scored move table")
        missing = [k for k in ("messages", "diagnosis") if not row.get(k)]
        missing += [f"diagnosis.{k}" for k in ("training", "weakest")
                    if not isinstance(row.get("diagnosis"), dict) or k not in row["diagnosis"]]
        if not all(_readable(m) for m in table):
            missing.append("a move's 'move', number score or realized gain")
        if missing:
            raise ValueError(f"row {i}: missing {', '.join(missing)}")
        scores = np.asarray([_score(m) for m in table], np.float64)
        if np.ptp(scores) <= 0:
            continue
        gains = [(j, g) for j, m in enumerate(table) if (g := _gain(m)) is not None]
        best = max(gains, key=lambda g: g[1])[0] if gains else int(np.argmax(scores))
        key = row.get("key") or [row.get(k) for k in ("task", "seed", "proposer", "stage")]
        out.append(Example("/".join(map(str, key)) if isinstance(key, list) else str(key),
                           int(row["seed"]), list(row["messages"]),
                           {"training": row["diagnosis"]["training"],
                            "weakest": row["diagnosis"]["weakest"]},
                           tuple(str(m["move"]) for m in table), scores, best, bool(gains)))
    return out


def load(paths: Sequence[str | Path]) -> list[Example]:
    """Every file's rows as examples; a file that cannot be read, a line that is not JSON or
    a row without what `read_rows` reads is a ValueError naming where."""
    out = []
    for p in paths:
        try:
            lines = Path(p).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{p}: cannot be read ({e.__class__.__name__})") from None
        rows = []
        for n, line in enumerate(lines, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise ValueError(f"{p} line {n}: not JSON") from None
        try:
            out += read_rows(rows)
        except ValueError as e:
            raise ValueError(f"{p}: {e}") from None
    return out


def seed_set(spec: str, flag: str = "--train-seeds") -> set[int]:
    """'10-39,45' -> {10, ..., 39, 45} (the dataset script's reading of a seed list)."""
    return set(seed_list(spec, flag))


def split(examples: list[Example], train: set[int], heldout: set[int]
          ) -> tuple[list[Example], list[Example]]:
    """(training, held-out) contexts by seed; a seed in both sets is refused."""
    if train & heldout:
        raise ValueError(f"seeds {sorted(train & heldout)} are both training and held-out")
    return ([e for e in examples if e.seed in train], [e for e in examples if e.seed in heldout])


# ------------------------------------------------------------------------------ texts


def prefix(diagnosis: dict[str, str]) -> str:
    """The reply up to its move: ``{"training":..,"weakest":..,"moves":["``."""
    text = reply_text(diagnosis, [HOLE])
    return text[:text.index(HOLE)]


def rationale(diagnosis: dict[str, str]) -> str:
    """A short rationale made of the diagnosis words (the SFT target's)."""
    words = f"{diagnosis['training'].replace('_', ' ')}; weakest {diagnosis['weakest']}"
    return words[:RATIONALE_CHARS].strip()


def sft_target(e: Example) -> str:
    return reply_text(e.diagnosis, [e.moves[e.best]], rationale(e.diagnosis))


# ------------------------------------------------------------------------------ model


class MoveModel:
    """An `EngineerLearner` read as a distribution over each context's admitted moves."""

    def __init__(self, learner: Any, chunk: int = 64, prompt_len: int = 0):
        self.learner, self.chunk, self.prompt_len = learner, chunk, prompt_len
        self._ids: dict[str, tuple[list[int], list[list[int]]]] = {}

    def fit(self, examples: list[Example]) -> MoveModel:
        """One compiled shape for the whole dataset: every prompt padded to the longest,
        every move table to the largest (the CPU compiles each shape of a 30-layer model for
        tens of seconds)."""
        self.prompt_len = max(len(self.ids(e)[0]) for e in examples)
        self.chunk = -(-max(len(e.moves) for e in examples) // 8) * 8
        return self

    def ids(self, e: Example) -> tuple[list[int], list[list[int]]]:
        """(prompt + reply prefix ids, each move's completion ids), cached per context."""
        if e.key not in self._ids:
            lrn = self.learner
            self._ids[e.key] = (lrn.prompt_ids(e.messages, prefix(e.diagnosis)),
                                [lrn.completion_ids(m + '"]', ended=False) for m in e.moves])
        return self._ids[e.key]

    def logprobs(self, e: Example) -> np.ndarray:
        """log pi(move | prompt, diagnosis) of every admitted move (unnormalised)."""
        p, moves = self.ids(e)
        out = []
        for i in range(0, len(moves), self.chunk):
            part = moves[i:i + self.chunk]
            part = part + [part[-1]] * (self.chunk - len(part))  # one compiled shape
            out.append(self.learner.group_logprobs([(p, part)], bucket=MOVE_BUCKET,
                                                   prompt_len=self.prompt_len)[0])
        return np.concatenate(out)[:len(moves)]

    def distribution(self, e: Example, temperature: float = 1.0) -> np.ndarray:
        """The model's move distribution (softmax of the log-probabilities / temperature)."""
        lp = self.logprobs(e) / temperature
        q = np.exp(lp - lp.max())
        return q / q.sum()


def evaluate(model: MoveModel, examples: list[Example]) -> dict[str, float]:
    """Held-out measures (module docstring, 3), means over the contexts."""
    top1, expected, greedy, best, uniform = [], [], [], [], []
    for e in examples:
        q = model.distribution(e)
        pick = int(np.argmax(q))
        # a move tied with the best on the verification score agrees (the table cannot tell
        # them apart); a best chosen by realized gain agrees only with itself
        top1.append(float(pick == e.best or (not e.realized
                                             and e.scores[pick] >= e.scores[e.best])))
        expected.append(float(q @ e.scores))
        greedy.append(float(e.scores[pick]))
        best.append(float(e.scores[e.best]))
        uniform.append(float(e.scores.mean()))
    return {"top1": float(np.mean(top1)), "score_expected": float(np.mean(expected)),
            "score_top1": float(np.mean(greedy)), "score_best": float(np.mean(best)),
            "score_uniform": float(np.mean(uniform)), "contexts": len(examples)}


def sft_step(model: MoveModel, batch: list[Example]) -> float:
    """One supervised update on the batch's best-move replies (loss on reply tokens)."""
    lrn = model.learner
    groups = [(lrn.prompt_ids(e.messages), [lrn.completion_ids(sft_target(e))]) for e in batch]
    return float(np.mean(lrn.update(groups, np.ones((len(groups), 1)), bucket=SFT_BUCKET,
                                    prompt_len=model.prompt_len)["losses"]))


def grpo_step(model: MoveModel, batch: list[Example], group: int,
              rng: np.random.Generator, temperature: float = 1.0) -> dict[str, Any]:
    """One GRPO update: ``group`` moves sampled from each context's move distribution (at
    ``temperature``: above 1 it explores a peaked distribution, whose samples would all be
    one move and carry no advantage), rewarded by their verification scores."""
    groups, rewards = [], []
    for e in batch:
        q = model.distribution(e, temperature)
        picks = rng.choice(len(q), size=group, p=q)
        p, moves = model.ids(e)
        groups.append((p, [moves[j] for j in picks]))
        rewards.append(e.scores[picks])
    out = model.learner.step_groups(groups, rewards, bucket=MOVE_BUCKET,
                                    prompt_len=model.prompt_len)
    out["reward"] = float(np.mean(rewards))
    return out


def train(model: MoveModel, training: list[Example], heldout: list[Example], *, seed: int,
          sft_steps: int, grpo_steps: int, batch: int, contexts: int, group: int,
          eval_every: int, minutes: float = 0.0, start: dict[str, Any] | None = None,
          temperature: float = 1.0, log: Any = print) -> list[dict[str, Any]]:
    """SFT then GRPO from the learner's initial LoRA; the curve of held-out measures.
    ``minutes`` (0: none): past it, the run stops after a last held-out measure (the curve
    says where). ``start``: the initial LoRA's measures, when already taken."""
    rng = np.random.default_rng(seed)
    model.learner.reset()
    t_start = time.perf_counter()
    curve = [{"update": 0, "phase": "start", **(start or evaluate(model, heldout))}]
    log(json.dumps(curve[-1]))
    last = sft_steps + grpo_steps
    for u in range(1, last + 1):
        t0 = time.perf_counter()
        if u <= sft_steps:
            idx = rng.choice(len(training), min(batch, len(training)), replace=False)
            rec: dict[str, Any] = {"phase": "sft",
                                   "loss": sft_step(model, [training[i] for i in idx])}
        else:
            idx = rng.choice(len(training), min(contexts, len(training)), replace=False)
            rec = {"phase": "grpo", **grpo_step(model, [training[i] for i in idx], group, rng,
                                                temperature)}
        rec["step_s"] = round(time.perf_counter() - t0, 2)
        over = minutes > 0 and time.perf_counter() - t_start > 60 * minutes
        if over:
            rec["stopped"] = f"the {minutes:g} min budget ran out"
        if u % eval_every == 0 or u in (sft_steps, last) or over:
            rec.update(evaluate(model, heldout))
        curve.append({"update": u, **rec})
        log(json.dumps({k: v for k, v in curve[-1].items() if k not in ("losses", "kl")}))
        if over:
            break
    return curve


# ------------------------------------------------------------------------------ output


def plot(curves: dict[int, list[dict[str, Any]]], sft_steps: int, path: Path) -> None:
    """Top-1 agreement and mean verification score on the held-out contexts, per update."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for seed, curve in curves.items():
        pts = [c for c in curve if "top1" in c]
        x = [c["update"] for c in pts]
        axes[0].plot(x, [c["top1"] for c in pts], marker="o", label=f"seed {seed}")
        axes[1].plot(x, [c["score_expected"] for c in pts], marker="o", label=f"seed {seed}")
    first = next(iter(curves.values()))[0]
    axes[1].axhline(first["score_best"], color="green", ls="--", label="table's best")
    axes[1].axhline(first["score_uniform"], color="gray", ls=":", label="uniform choice")
    for ax, title in zip(axes, ("top-1 agreement with the best move",
                                "mean verification score of the model's move")):
        ax.axvline(sft_steps + 0.5, color="k", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel(f"update (SFT 1-{sft_steps}, then GRPO)")
        ax.legend(fontsize=8)
    fig.suptitle(f"held-out contexts ({first['contexts']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


CARD = """# Engineer adapter `{name}`

A LoRA of the engineer's model for the moves language (one move per reply), trained by
`scripts/train_engineer.py`: SFT on each context's best move, then (as many updates as
listed below) GRPO with the move's verification score as the reward. Loaded by
`envengineer run --adapter {name}` (transformers backend; merged once into a cached model
folder keyed by this file's hash).

- base model: {base}
- LoRA: rank {rank}, alpha {alpha} (every attention and MLP projection)
- data: {data} ({n_train} training contexts from seeds {train_seeds}; {n_heldout} held-out
  contexts from seeds {heldout_seeds}, never trained on)
- updates: {sft} SFT (batch {batch}), then {grpo} GRPO ({contexts} contexts x {group}
  sampled moves per update); training seed {seed}; {minutes:.1f} min on the machine it ran on
- stored as {dtype} (the LoRA's factors; merged into the base in float32)
- started from: {init}

The datasets, made by `scripts/engineer_data.py`:

{datasets}

Held-out measures (before -> after training, this seed; the held-out contexts also chose the
learning rate and the number of updates, so the engineer's test is a compare on seeds 0-4):

| measure | before | after |
|---|---|---|
{table}

Rebuild (the datasets first, with the commands above):

    {command}
"""


SHIP_DTYPE = "float16"  # half the bytes of float32; LoRA factors lose nothing that matters


def dataset_commands(paths: Sequence[str | Path]) -> str:
    """Each dataset's making: the commands its ``.meta.json`` recorded, with their commits."""
    out = []
    for p in paths:
        meta = Path(f"{p}.meta.json")
        runs = json.loads(meta.read_text()).get("invocations", []) if meta.is_file() else []
        out.append(f"- `{Path(p).name}`: " + ("; ".join(
            f"`python {shlex.join(r['command'][1:])}` (commit {str(r.get('commit'))[:7]})"
            for r in runs) or "no record of its making"))
    return "\n".join(out)


def ship(src: Path, dest: Path, base: str) -> Path:
    """The adapter ``src`` written to ``dest`` as `SHIP_DTYPE`, its metadata kept but the base
    model named rather than pathed (the training machine's folder means nothing elsewhere)."""
    from safetensors.numpy import load_file

    from policy.llm.engineer_rl import adapter_meta, write_adapter

    return write_adapter({k: v.astype(SHIP_DTYPE) for k, v in load_file(str(src)).items()},
                         dest, {**adapter_meta(src), "base": base, "dtype": SHIP_DTYPE})


def model_card(name: str, args: argparse.Namespace, meta: dict[str, Any],
               curve: list[dict[str, Any]], seed: int) -> str:
    start, end = curve[0], [c for c in curve if "top1" in c][-1]
    rows = "\n".join(f"| {k} | {start[k]:.3f} | {end[k]:.3f} |"
                     for k in ("top1", "score_expected", "score_top1", "score_best",
                               "score_uniform"))
    return CARD.format(name=name, base=meta["base"], rank=args.rank, alpha=args.alpha,
                       dtype=SHIP_DTYPE, datasets=dataset_commands(args.data),
                       data=", ".join(Path(d).name for d in args.data),
                       n_train=meta["train_contexts"], n_heldout=meta["heldout_contexts"],
                       train_seeds=args.train_seeds, heldout_seeds=args.heldout_seeds,
                       sft=sum(c["phase"] == "sft" for c in curve),
                       grpo=sum(c["phase"] == "grpo" for c in curve), batch=args.batch,
                       contexts=args.contexts, group=args.group, seed=seed,
                       minutes=meta["minutes"][str(seed)], table=rows,
                       command=meta["command"], init=meta.get("init") or "a fresh LoRA"
                       ) + parent_card(getattr(args, "init", None))


def parent_card(init: str | None) -> str:
    """The card of the adapter training started from (its data and making), one heading
    level down, so a card continued from another keeps the whole provenance."""
    from designer.engineer.adapters import resolve

    path = resolve(init) if init else None
    card = path.parent / "MODEL_CARD.md" if path is not None else None
    if card is None or not card.is_file():
        return ""
    body = card.read_text().replace("\n#", "\n##")
    return "\n## The adapter it started from\n\n#" + body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", action="append", required=True, help="dataset JSONL (repeat)")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--train-seeds", default="10-49", help="seeds trained on, e.g. 10-49")
    ap.add_argument("--heldout-seeds", default="50-54", help="seeds measured on, e.g. 50-54")
    ap.add_argument("--heldout-max", type=int, default=0, help="at most this many held-out "
                    "contexts (evenly spaced; 0: all)")
    ap.add_argument("--seeds", default="0,1,2", help="training seeds (one run each)")
    ap.add_argument("--model", default=None, help="base model (default: SmolLM2-135M)")
    ap.add_argument("--init", default=None, help="start from this adapter (a shipped name "
                    "or a file; its rank and alpha) instead of a fresh LoRA")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--sft-steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=2, help="SFT contexts per update")
    ap.add_argument("--grpo-steps", type=int, default=20)
    ap.add_argument("--contexts", type=int, default=4, help="GRPO contexts per update")
    ap.add_argument("--group", type=int, default=8, help="sampled moves per context")
    ap.add_argument("--temperature", type=float, default=1.0, help="GRPO's sampling "
                    "temperature over the move distribution")
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--minutes", type=float, default=0.0, help="time budget per training "
                    "seed (0: none); past it the seed stops after a last measure")
    ap.add_argument("--ship", default=None, help="copy the first seed's adapter into "
                    "designer/engineer/adapters/NAME with its model card")
    args = ap.parse_args(argv)

    train_seeds, heldout_seeds = (seed_set(args.train_seeds, "--train-seeds"),
                                  seed_set(args.heldout_seeds, "--heldout-seeds"))
    seeds = seed_list(args.seeds, "--seeds")
    try:
        examples = load(args.data)
    except ValueError as e:
        raise SystemExit(f"--data: {e}") from None
    training, heldout = split(examples, train_seeds, heldout_seeds)
    if args.heldout_max and len(heldout) > args.heldout_max:
        pick = np.linspace(0, len(heldout) - 1, args.heldout_max).round().astype(int)
        heldout = [heldout[i] for i in sorted(set(pick))]
    if not training or not heldout:
        raise SystemExit(f"{len(training)} training and {len(heldout)} held-out contexts: "
                         "both must be non-empty (check --train-seeds / --heldout-seeds)")
    print(f"{len(training)} training contexts, {len(heldout)} held-out", flush=True)

    from designer.engineer.adapters import describe, resolve
    from policy.llm.engineer_rl import EngineerLearner, adapter_meta

    try:
        init = resolve(args.init) if args.init else None  # `none`: a fresh LoRA
    except ValueError as e:
        raise SystemExit(f"--init: {e}") from None
    if init is not None:
        meta_init = adapter_meta(init)
        args.rank, args.alpha = int(meta_init["rank"]), float(meta_init["alpha"])
        print(f"starting from {init} (rank {args.rank}, alpha {args.alpha:g})", flush=True)
    learner = EngineerLearner(args.model, rank=args.rank, alpha=args.alpha, lr=args.lr)
    if init is not None:
        learner.load_adapter(init, start=True)
    model = MoveModel(learner).fit(training + heldout)
    args.out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "command": "python scripts/train_engineer.py " + shlex.join(argv or sys.argv[1:]),
        "base": str(args.model or "SmolLM2-135M-Instruct (the embedded GGUF)"),
        "init": None if init is None else describe(args.init),
        "train_contexts": len(training), "heldout_contexts": len(heldout),
        "realized_best": sum(e.realized for e in training), "minutes": {}, "curves": {}}
    curves: dict[int, list[dict[str, Any]]] = {}
    learner.reset()
    t0 = time.perf_counter()
    start = evaluate(model, heldout)  # every seed starts from the same LoRA: measured once
    meta["start_minutes"] = round((time.perf_counter() - t0) / 60, 2)
    print(f"start: {json.dumps(start)}", flush=True)
    for seed in seeds:
        t0 = time.perf_counter()
        curves[seed] = train(model, training, heldout, seed=seed, sft_steps=args.sft_steps,
                             grpo_steps=args.grpo_steps, batch=args.batch,
                             contexts=args.contexts, group=args.group,
                             eval_every=args.eval_every, minutes=args.minutes, start=start,
                             temperature=args.temperature,
                             log=lambda s, seed=seed: print(f"[seed {seed}] {s}", flush=True))
        meta["minutes"][str(seed)] = round((time.perf_counter() - t0) / 60, 2)
        meta["curves"][str(seed)] = curves[seed]
        learner.save_adapter(args.out / f"adapter-seed{seed}.safetensors")
        (args.out / "summary.json").write_text(json.dumps({**vars(args), "out": str(args.out),
                                                           **meta}, indent=1, default=str))
        plot(curves, args.sft_steps, args.out / "curves.png")
    if args.ship:
        dest = ROOT / "designer" / "engineer" / "adapters" / args.ship
        dest.mkdir(parents=True, exist_ok=True)
        ship(args.out / f"adapter-seed{seeds[0]}.safetensors", dest / "adapter.safetensors",
             Path(args.model).name if args.model else "SmolLM2-135M-Instruct")
        (dest / "MODEL_CARD.md").write_text(model_card(args.ship, args, meta,
                                                       curves[seeds[0]], seeds[0]))
        print(f"shipped: {dest}")
    print(f"summary: {args.out / 'summary.json'}; curves: {args.out / 'curves.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
