"""The judge: profiles, prompt templates, an OpenAI-compatible client with a resumable cache, pair
selection, offline baseline judges, the judge registry and the run loop that turns pairs into qrels.

    from recjudge.judging import JudgeSettings, judge_pairs, select_pairs
    pairs = select_pairs(runs, depth=10)
    result = judge_pairs(pairs, collection, JudgeSettings(judge="overlap"), history=split.train)
    result.write("qrels/overlap.qrels")
"""

from .profile import FIELD_SETS, HistoryProfiles, QueryProfiles, parse_fields, read_topics
from .prompts import Template, load_template, template_names
from .budget import estimate_tokens, load_prices
from .config import AGGREGATIONS, JudgeSettings
from .registry import JudgeContext, JudgeSpec, get_judge, judge_names, register_judge
from .run import judge_pairs
from .results import Agreement, JudgeResult, Judgment, Summary, aggregate_labels, output_paths, repeat_agreement
from .select import Pair, select_pairs

__all__ = [
    "FIELD_SETS", "HistoryProfiles", "QueryProfiles", "parse_fields", "read_topics",
    "Template", "load_template", "template_names",
    "AGGREGATIONS", "Agreement", "JudgeSettings", "JudgeResult", "JudgeSpec", "Judgment", "Summary",
    "aggregate_labels", "estimate_tokens", "get_judge", "judge_names", "judge_pairs", "load_prices",
    "register_judge", "repeat_agreement", "Pair", "select_pairs", "JudgeContext", "output_paths",
]
