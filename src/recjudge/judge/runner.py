"""Compatibility: the names ``recjudge.judge.runner`` held before the judge was split into config,
results, registry, budget, orchestrate and the backends. Import them from :mod:`recjudge.judge`."""

from .budget import estimate_messages_tokens, estimate_tokens, load_prices
from .config import AGGREGATIONS, STRUCTURED, TRANSPORTS, JudgeConfig
from .registry import JudgeContext, JudgeSpec, get_judge, judge_names, judge_pairs, register_judge
from .results import Agreement, JudgeResult, Judgment, Summary, aggregate_labels, output_paths, repeat_agreement

__all__ = [
    "JudgeConfig", "Judgment", "JudgeResult", "Summary", "Agreement", "JudgeSpec", "JudgeContext",
    "register_judge", "get_judge", "judge_names", "judge_pairs", "aggregate_labels", "repeat_agreement",
    "estimate_tokens", "estimate_messages_tokens", "load_prices", "output_paths", "AGGREGATIONS", "STRUCTURED",
    "TRANSPORTS",
]
