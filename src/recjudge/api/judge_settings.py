"""The judge and audit commands' settings: what to judge, where the answers go, and the judge's own.

Each model extends or reuses the fields of :class:`~recjudge.judging.config.JudgeSettings` (one
declaration per judge setting); :mod:`recjudge.api.settings` lists them with the other commands'.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import field_validator, model_validator

from ..judging.config import JudgeSettings
from ..settings import Cli, Conflict, Inputs, PathText, Positive, Settings, TiePolicy, checked, option

__all__ = ["JudgeCommandSettings", "AuditPopularitySettings", "AuditConsistencySettings", "AuditInjectionScanSettings",
           "AuditPositionSettings", "AuditInjectionSettings", "AUDIT_JUDGE_OPTIONS", "audit_judge_settings",
           "parse_params"]


def _param(text: str) -> str:
    """``KEY=VALUE`` as the command line gives it; the value is read as JSON when it parses."""
    import argparse

    key, sep, _ = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def parse_params(items) -> dict[str, Any]:
    """``("top_p=0.9", ...)`` → ``{"top_p": 0.9, ...}`` (values read as JSON when they parse)."""
    import json

    out = {}
    for text in items:
        key, _, value = str(text).partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out



def _collection():
    """The collection field the judge and the audits share (a new FieldInfo each: pydantic owns it)."""
    return option(help="collection with item metadata and rated histories (e.g. ml-100k)",
                  doc="collection with item metadata and rated histories: a registered name (e.g. ml-100k), a path "
                      "or a Collection", cli=Cli(metavar="NAME_OR_PATH"))


def _collection_config():
    return option(None, "loader options, e.g. [movie_columns] for ML-32M-ext's database-movies.csv (default: none, "
                        "the loader's own)", cli=Cli(metavar="TOML"))


class JudgeCommandSettings(JudgeSettings):
    """``recjudge judge``: what to judge, where the answers go, and every judge setting."""

    command: ClassVar[str] = "judge"
    runs: Inputs = option(None, "run files or folders whose pairs to judge (default: none; then --reference with "
                                "--per-user selects the pairs)",
                          doc="run files or folders, Runs or DataFrames whose pairs to judge, or (user, item) pairs "
                              "(None: reference with per_user selects the pairs)",
                          cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    collection: Inputs = _collection()
    collection_config: PathText | None = _collection_config()
    split: str = option("global_time", "profiles come from the split's training (+validation) part; 'none' uses "
                                       "every interaction (as recjudge train)")
    history: Any = option(None, "the interactions shown as profiles (default: from split)",
                          cli=Cli(hidden=True))
    topics: PathText | None = option(None, "queries as profiles: 'qid<TAB>text' lines or JSONL (use --prompt "
                                           "relevance; default: none, users' rated histories are the profiles)",
                                     cli=Cli(metavar="FILE"))
    depth: Positive | None = option(None, "union of every run's top-D; with --reference, judged beside the sampled "
                                          "items (default: all ranked, or none with --reference)",
                                    cli=Cli(metavar="D"))
    per_user: Positive | None = option(None, "K items per user, sampled with --seed (default: every selected item)",
                                       cli=Cli(metavar="K"))
    reference: Inputs = option(None, "with --per-user: sample from the items these qrels judge ('collection': its "
                                     "human qrels); with --runs, only the users the runs rank (default: none)",
                               cli=Cli(metavar="QRELS"))
    only_unjudged: Inputs = option(None, "skip pairs these qrels already judge (default: none, every selected pair)",
                                   cli=Cli(metavar="QRELS"))
    tie_policy: TiePolicy = option("trec_eval", "orders tied scores before the depth cut (default trec_eval: docid descending)")
    temperature: float | None = option(None, "sampling temperature, 0-2 (default: not sent, so the server's own "
                                             "applies: 1 on OpenAI, 0.8 on llama-cpp-python; the summary says which)",
                                       ge=0, le=2, cli=Cli(metavar="T"))
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = option(
        None, "a reasoning model's effort (default: not sent, the model's own); kinds that ignore it are reported")
    max_tokens: Positive | None = option(None, "the answer's token cap, sent under the name the endpoint's kind "
                                               "honours: max_completion_tokens to OpenAI, max_tokens to local "
                                               "servers (default: none)", cli=Cli(metavar="N"))
    param: tuple[str, ...] = option((), "another generation parameter (JSON value), e.g. top_p=0.9; repeat it "
                                        "(default: none)", cli=Cli(action="append", metavar="KEY=VALUE", parse=_param))
    out: PathText | None = option(None, "qrels to write, e.g. qrels/NAME.qrels (beside it NAME.judgments.jsonl and "
                                        "NAME.summary.json)",
                                  doc="qrels to write, e.g. qrels/NAME.qrels (beside it NAME.judgments.jsonl and "
                                      "NAME.summary.json) (default: None, nothing written; the result's write() "
                                      "writes them later)", cli=Cli(metavar="QRELS", required=True))
    judgments: PathText | None = option(None, "judgment log (default: NAME.judgments.jsonl beside --out)",
                                        cli=Cli(metavar="JSONL"))
    cache: PathText | None = option(".recjudge-cache/judge.sqlite", "answer cache of LLM judges; re-runs resume "
                                                                    "from it",
                                    doc="answer cache of LLM judges; re-runs resume from it (None: answers kept in "
                                        "memory only)", cli=Cli(metavar="SQLITE"))
    name: str | None = option(None, "the qrels' name (default: --out's file name, else 'judge')", cli=Cli(hidden=True))

    @field_validator("split")
    @classmethod
    def _check_split(cls, value: str) -> str:
        from ..data.splits import check_split

        return value if value == "none" else checked(check_split, value)

    @model_validator(mode="after")
    def _what_to_judge(self):
        if self.depth is not None and self.runs is None:
            raise Conflict("{depth} cuts the runs' rankings: give {runs} too", "depth", "runs")
        if self.runs is None and self.reference is None:
            raise Conflict("give {runs}, or {reference} QRELS with {per_user} K", "runs", "reference", "per_user")
        return self

    def judge_settings(self) -> JudgeSettings:
        """The judge's own settings: every field JudgeSettings has, the generation options folded into
        its params (temperature, reasoning effort, the token cap and every --param)."""
        params = {**self.params, **parse_params(self.param)}
        for key, value in (("temperature", self.temperature), ("reasoning_effort", self.reasoning_effort),
                           ("max_completion_tokens", self.max_tokens)):
            if value is not None:
                params[key] = value
        values = {k: getattr(self, k) for k in JudgeSettings.model_fields}
        settings = JudgeSettings.build({**values, "params": params}, spelled=self._spelled)
        settings._protocol = self._protocol
        return settings


def _judge_fields(names, **defaults) -> dict:
    """Fields of JudgeSettings by name (one declaration, reused), with other defaults where given."""
    from pydantic.fields import FieldInfo

    out = {}
    for name in names:
        info = JudgeSettings.model_fields[name]
        if name in defaults:
            info = FieldInfo.merge_field_infos(info, default=defaults[name])
        out[name] = (info.annotation, info)
    return out


AUDIT_JUDGE_OPTIONS = ("seed", "model", "base_url", "api_key_env", "endpoint_kind", "prompt", "fields", "profile_size",
                       "items_per_call", "concurrency", "timeout", "max_attempts", "parse_retries", "yes",
                       "confirm_above_usd", "confirm_above_calls", "max_cost", "prices")


class _AuditData(Settings):
    collection: Inputs = _collection()
    collection_config: PathText | None = _collection_config()
    split: str = option("none", "popularity and profiles from the split's training part (none: every interaction)")
    json: PathText | None = option(None, "also write the result as JSON (default: none, printed only)",
                                   cli=Cli(metavar="PATH"))


class AuditPopularitySettings(_AuditData):
    command: ClassVar[str] = "audit popularity"
    llm: Inputs = option(help="the LLM's qrels", doc="the LLM's labels: a qrels path, Qrels or DataFrame",
                         cli=Cli(metavar="QRELS"))
    human: Inputs = option(help="human qrels of (some of) the same pairs",
                           doc="human labels of (some of) the same pairs: a qrels path, Qrels or DataFrame",
                           cli=Cli(metavar="QRELS"))
    bins: int = option(10, "popularity bins of equal item counts (10: deciles)", ge=1, le=1000)
    runs: Inputs = option(None, "also rank these systems with and without the bias: which gain or lose rank "
                                "(default: none)", cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    measure: str = option("nDCG@100", "measure of that ranking")


class AuditConsistencySettings(Settings):
    command: ClassVar[str] = "audit consistency"
    qrels: Inputs = option(help="two or more label sets of the same judge",
                           doc="two or more label sets of the same judge: qrels paths, Qrels or DataFrames",
                           cli=Cli(nargs="+", metavar="QRELS"))
    json: PathText | None = option(None, "also write the result as JSON (default: none, printed only)",
                                   cli=Cli(metavar="PATH"))


class AuditInjectionScanSettings(_AuditData):
    command: ClassVar[str] = "audit injection-scan"


def _audit_llm(name: str, doc: str, items_per_call: int, extra: dict):
    from pydantic import create_model

    fields = {
        "runs": (Inputs, option(help="runs whose pairs to judge", cli=Cli(nargs="+", metavar="DIR_OR_FILE"))),
        "depth": (Positive, option(10, "top-D of every run", cli=Cli(metavar="D"))),
        "per_user": (Positive | None, option(None, "K pairs per user, sampled with --seed (default: every pair of "
                                                   "the top-D pool)", cli=Cli(metavar="K"))),
        **_judge_fields(AUDIT_JUDGE_OPTIONS, items_per_call=items_per_call),
        "cache": (PathText, option(".recjudge-cache/judge.sqlite", "answer cache shared with recjudge judge; "
                                                                   "re-runs resume from it",
                                   cli=Cli(metavar="SQLITE"))),
        **extra,
    }
    model = create_model(name, __base__=_AuditData, __doc__=doc, **fields)
    model.command = f"audit {name.removeprefix('Audit').removesuffix('Settings').lower()}"
    return model


AuditPositionSettings = _audit_llm(
    "AuditPositionSettings", "The same multi-item calls in a seeded shuffled order, and one item per call.", 10, {})
AuditInjectionSettings = _audit_llm(
    "AuditInjectionSettings", "Label inflation on a copy of the collection whose items carry an instruction.", 1,
    {"fraction": (float, option(0.2, "share of the candidate items injected", gt=0, le=1)),
     "field": (str, option("title", "item field the instruction is appended to"))})


def audit_judge_settings(settings) -> JudgeSettings:
    """The judge settings of a position or injection audit."""
    values = {k: getattr(settings, k) for k in AUDIT_JUDGE_OPTIONS}
    judge = JudgeSettings.build(values, spelled=settings._spelled)
    judge._protocol = settings._protocol
    return judge
