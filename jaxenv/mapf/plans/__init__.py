"""Whole plans: the format an LLM writes (docs/plan_format.md), its parser and the verifier."""

from jaxenv.mapf.plans.parse import (
    ParseReport,
    Plan,
    format_plan,
    parse_plan,
    plan_arrays,
    stack_plans,
)
from jaxenv.mapf.plans.verify import (
    CHECKS,
    COSTS,
    Verdict,
    accuracy_reward,
    episode_plans,
    verify_batch,
    verify_episodes,
    verify_one,
    verify_plan,
    verify_text,
    verify_texts,
)

__all__ = ["CHECKS", "COSTS", "ParseReport", "Plan", "Verdict", "accuracy_reward",
           "episode_plans", "format_plan", "parse_plan", "plan_arrays", "stack_plans",
           "verify_batch", "verify_episodes", "verify_one", "verify_plan", "verify_text",
           "verify_texts"]
