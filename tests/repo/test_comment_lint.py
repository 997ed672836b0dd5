"""Product comments and docstrings say what and why: never a benchmark figure, a results path
or an issue number, which go stale at the next run (they belong in docs/experiments/)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jaxenv", "policy", "designer")

# A measured figure: a speed-up ("3.5x", "1.34x faster", "2×"), a decimal percentage
# ("87.5 %"), a before/after pair ("from 67.7 to 87.5"), or a rate ("4.1e6 steps/s").
# Shapes ("10x10", "11 x 11", "3×3"), formulas ("cos(3 x)"), a definition's multiple
# ("0.3 at 3x the optimum"), integer percentages and defaults ("0.95") pass.
FIGURE = re.compile(
    r"(?<![\w.])\d+\.\d+[x×](?![\w×])"
    r"|(?<![\w.])\d+[x×]\s+(?:faster|slower|quicker|more|less|fewer|as fast)\b"
    r"|\b\d+\.\d+\s?%"
    r"|\bfrom\s+\d+(?:\.\d+)?\s*%?\s+to\s+\d+(?:\.\d+)?\b"
    r"|\b\d[\d,.]*(?:e[+-]?\d+)?\s?[kMG]?\s?(?:env-|agent-)?steps?/s\b",
    re.IGNORECASE)
# A results path, or the name of a stored experiment (`compare_v7`).
RESULTS_PATH = re.compile(r"benchmarks/results/|\bcompare_v\d+\b")
# This project's issues ("issue 13", "#12"); an upstream repository's ("owner/repo#1528") passes.
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w/&])#\d+\b", re.IGNORECASE)


def offences(text: str) -> list[str]:
    """What in one comment or docstring line breaks the rule, in order of appearance."""
    found = [(m.start(), m.group(0)) for p in (FIGURE, RESULTS_PATH, ISSUE)
             for m in p.finditer(text)]
    return [s for _, s in sorted(found)]


def prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line of a module."""
    lines = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                start = body[0].lineno
                lines += [(start + i, s) for i, s in enumerate(body[0].value.value.splitlines())]
    return sorted(lines)


def product_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_product_comments_carry_no_figure_path_or_issue() -> None:
    bad = [f"{path.relative_to(ROOT)}:{line}: {found}: {text.strip()}"
           for path in product_files()
           for line, text in prose(path.read_text())
           if (found := offences(text))]
    assert bad == [], "comments and docstrings must not quote figures, result paths or " \
                      "issue numbers (move them to docs/experiments/):\n" + "\n".join(bad)


@pytest.mark.parametrize("text", [
    "# a stage runs 3.5x faster than before",
    "# 1.34x at 64 agents",
    "# 10x slower when it competes for every core",
    "# optimal % went from 67.7 to 87.5 over seeds 0-4",
    "# valid 87.5 % on the validation split",
    "# 4.1e6 env-steps/s on the CPU",
    "# measured: 451,871 env-steps/s",
    "# see benchmarks/results/compare_v8/report.md",
    "# stayed level (compare_v7)",
    "# issue 13 section 4",
    "# as in #12",
    "# Issues #7 and #9",
])
def test_pattern_flags_a_planted_offence(text: str) -> None:
    assert offences(text), text


@pytest.mark.parametrize("text", [
    "# views are 11 x 11 x 4 uint8",
    "# a 10x10 map, 3×3 at least",
    "# shape (B, 5), gae_lambda default 0.95",
    "# fits in 90% of the device's memory",
    "# an upstream XLA hang (PyAutoLabs/PyAutoFit#1528)",
    "# the colour #1f77b4",
    "# x = 2 * y",
    "# v += (a - 1) * force - cos(3 x) * gravity",
    "# reward 0.3 at 3x the optimum",
    "# twice the batch: 2× the memory",
    "# 0x1F is the mask",
])
def test_pattern_passes_ordinary_numbers(text: str) -> None:
    assert offences(text) == [], text


def test_prose_reads_comments_and_docstrings_only() -> None:
    source = ('"""Module: 3.5x."""\n'
              'X = "issue 13"  # from 1.0 to 2.0\n'
              'def f():\n    """See #4."""\n    return "87.5 %"\n')
    found = [(line, offences(text)) for line, text in prose(source) if offences(text)]
    assert found == [(1, ["3.5x"]), (2, ["from 1.0 to 2.0"]), (4, ["#4"])]
