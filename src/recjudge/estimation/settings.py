"""``EstimateSettings``: every option of ``recjudge estimate`` (and ``recjudge.estimate(...)``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import field_validator

from ..evaluation.measures import DEFAULT_MEASURES
from ..settings import Cli, Inputs, PathText, Positive, Seed, Settings, TiePolicy, checked, option

__all__ = ["EstimateSettings"]


def _pair(text: str) -> tuple[str, str]:
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"expects two different system names as A,B, not {text!r}")
    return parts[0], parts[1]


class EstimateSettings(Settings):
    command: ClassVar[str] = "estimate"
    runs: Inputs = option(help="run files or folders, Runs, a {name: run} mapping or DataFrames",
                          cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    human: Inputs = option(help="human qrels of the n users judged by hand (each on the whole pool the LLM "
                                "judged for that user, or on a random part of it for P@k and Judged@k)",
                           cli=Cli(metavar="QRELS"))
    llm: Inputs = option(help="LLM qrels of the N users to generalise over (the human users among them)",
                         cli=Cli(metavar="QRELS"))
    measures: str = option(",".join(DEFAULT_MEASURES), "ir-measures strings, comma-separated")
    level: float = option(0.95, "confidence level of every interval", gt=0.5, lt=1, cli=Cli(metavar="P"))
    population: Literal["judged", "sampled"] = option(
        "judged", "judged: the mean over the N users the LLM judged (the human users a random sample of them); "
                  "sampled: the N are themselves a random sample of a larger population")
    inclusion: Inputs = option(None, "'user probability' per line: each human user's chance of having been chosen "
                                     "for human labels, for inverse-probability weights (default: a uniform "
                                     "sample)", cli=Cli(metavar="FILE"))
    tie_policy: TiePolicy = option("trec_eval", "order of equal scores before any measure runs (default trec_eval)")
    seed: Seed = option(0, "seed for the hash tie policy and the simultaneous intervals' multipliers")
    draws: Positive = option(2000, "Gaussian multiplier draws for the simultaneous pairwise intervals")
    target_width: float | None = option(None, "plan: the human users needed for intervals of this half-width "
                                              "(default: no plan)", gt=0, cli=Cli(metavar="H"))
    separate: str | None = option(None, "plan: the human users needed to tell systems A and B apart "
                                        "(default: none)", cli=Cli(metavar="A,B"))
    power: float = option(0.8, "plan: the power to separate --separate's pair with", gt=0, lt=1)
    cost_human: float | None = option(None, "plan: the cost of one human label (or of one user's labels, "
                                            "with --cost-per user), to price the plan (default: not priced)",
                                      ge=0, cli=Cli(metavar="COST"))
    cost_per: Literal["label", "user"] = option("label", "plan: what --cost-human is the price of")
    judge_summary: PathText | None = option(
        None, "plan: the NAME.summary.json recjudge judge wrote for the LLM labels, to price them (from the judge's "
              "prices and token counts) beside the human users they were worth (default: not priced)",
        cli=Cli(metavar="PATH"))
    json: PathText | None = option(None, "write the result as JSON (default: none)", cli=Cli(metavar="PATH"))

    @field_validator("measures")
    @classmethod
    def _check_measures(cls, value):
        from ..evaluation.measures import parse_measures

        checked(parse_measures, value)
        return value

    @field_validator("separate")
    @classmethod
    def _check_pair(cls, value):
        if value is not None:
            _pair(value)
        return value

    def pair(self) -> tuple[str, str] | None:
        return None if self.separate is None else _pair(self.separate)
