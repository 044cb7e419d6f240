"""The settings of ``recjudge reproduce penha2025``: the study's targets, their K values and measures, and
:class:`ReproduceSettings` (the protocol's values for what is left None)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import field_validator, model_validator

from ...errors import ConfigError
from ...judging.config import confirm_above_calls_option, confirm_above_usd_option, yes_option
from ...settings import Cli, Conflict, Count, PathText, Positive, Seed, Settings, checked, comma_list, option

STUDY = "penha2025"
TARGETS = ("table1", "table3", "table4", "table5", "table8", "table9",
           "figure2", "figure3", "figure4", "figure5")
K_VALUES = (10, 50, 100, 200)                 # Table 4's rows
TABLE9_K = 100                                # Table 9 and Figure 5: "100 predictions per user"
PROFILE_SIZES = (10, 50, 100, 500, 1000)      # Figure 3 (the image with its sizes is not in our copy)
# Table 3's rows (the paper's names) and the field set each shows
FIELD_ROWS = {
    "Title + Average rating": "title+avg_rating",
    "Title": "title",
    "Title + Genres": "title+genres",
    "Title + Directors": "title+directors",
    "Title + Overview": "title+overview",
    "Title + Cast": "title+cast",
    "Title + Runtime": "title+runtime",
    "Title + Number ratings": "title+num_ratings",
    "Title + Year": "title+year",
    "Title + Languages": "title+languages",
    "Title + All metadata": "all",
}
FALLBACK_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCGexp@100", "Bpref")
# which judge jobs a target needs: "base" is the protocol's judge, which every alignment and
# ranking target reads on its own sample (nested: the K = 50 items are among the K = 100 ones)
JOBS_OF = {"table3": ("base", "fields"), "figure3": ("base", "profiles"), "figure4": ("base",),
            "table8": ("base", "prompts"), "table4": ("base",), "table9": ("base", "prompts"),
            "figure5": ("base",), "table5": ("pool",)}
_TARGET_NAME = {"table1": "Table 1", "table3": "Table 3", "table4": "Table 4", "table5": "Table 5",
                "table8": "Table 8", "table9": "Table 9", "figure2": "Figure 2", "figure3": "Figure 3",
                "figure4": "Figure 4", "figure5": "Figure 5"}


def protocol_settings(command: str) -> dict[str, Any]:
    """The study protocol's option values for ``command`` (train, judge, compare, evaluate, fill, ablate)."""
    from ...protocol import load_protocol

    return load_protocol(STUDY).settings(command)


class ReproduceSettings(Settings):
    """``recjudge reproduce penha2025``: what it runs. None means the protocol's value; every field is
    checked on construction (see :mod:`recjudge.settings`)."""

    command: ClassVar[str] = "reproduce"
    study: Literal[STUDY] = option(STUDY, "the study to reproduce", cli=Cli(positional=True))
    collection: PathText = option(help="the ML-32M-ext release folder", cli=Cli(metavar="PATH"))
    out: PathText = option(help="report, figures, JSON, runs and the judge cache", cli=Cli(metavar="DIR"))
    model: str | None = option(None, "judge model (default: the protocol's, gpt-5-2025-08-07)")
    base_url: str | None = option(None, "OpenAI-compatible endpoint, key from OPENAI_API_KEY (default: the OpenAI "
                                        "API)", cli=Cli(metavar="URL"))
    collection_config: PathText | None = option(
        None, "loader options, e.g. [movie_columns] when database-movies.csv names its columns otherwise (default: "
              "the release's own names)", cli=Cli(metavar="TOML"))
    prompt: str | None = option(None, "the baseline prompt: the paper's Figure 1 text as a template file "
                                      "(prompts/README.md); default: the protocol's, recjudge's wording of its design",
                                cli=Cli(metavar="TEMPLATE"))
    defined_scale_prompt: str = option("defined-scale", "the defined-scale variant of Tables 8 and 9 (a name or a "
                                                        "template file)", cli=Cli(metavar="TEMPLATE"))
    dry_run: bool = option(False, "print the plan per job group; no call, nothing written")
    only: tuple[Literal[TARGETS], ...] = option(TARGETS, f"targets to compute, among {','.join(TARGETS)} "
                                                         "(default: all)", min_length=1,
                                                cli=Cli(metavar="LIST", parse=comma_list(str)))
    max_cost: float | None = option(None, "stop cleanly before the judge's estimated spend exceeds USD; rerun to "
                                          "resume (default: no limit)", ge=0, le=1e9, cli=Cli(metavar="USD"))
    prices: str | None = option(None, "price table overriding or adding models, USD per Mtok (default: the shipped "
                                      "table)", cli=Cli(metavar="JSON"))
    # the whole plan is confirmed once, before the first job (see recjudge.judging.budget.confirm_spend)
    yes: bool = yes_option()
    confirm_above_usd: float = confirm_above_usd_option()
    confirm_above_calls: int = confirm_above_calls_option()
    concurrency: int = option(8, "judge requests in flight", ge=1, le=4096, cli=Cli(metavar="C"))
    context_tokens: Positive | None = option(None, "the most prompt tokens the model accepts (default: the price "
                                                   "table's limit); a longer prompt is never cut or sent, its user "
                                                   "reported", cli=Cli(metavar="N"))
    call_seconds: float = option(30.0, "assumed seconds per call for the plan's wall time", gt=0, le=86400,
                                 cli=Cli(metavar="S"))
    runs: PathText | None = option(None, "Cranfield runs already trained (default: the protocol's grid is trained)",
                                   cli=Cli(metavar="DIR"))
    historical_runs: PathText | None = option(None, "runs trained on a historical split, for Table 1 and Figure 2 "
                                                    "(default: trained here)", cli=Cli(metavar="DIR"))
    historical_qrels: PathText | None = option(None, "that split's held-out interactions, every one relevant with "
                                                     "label 1 (default: made from the split)",
                                               cli=Cli(metavar="QRELS"))
    groups: PathText | None = option(None, "'system group' lines (pooled / non-pooled) for Table 1; default: the "
                                           "groups the grid file gave the runs", cli=Cli(metavar="FILE"))
    grid: str | None = option(None, "grid name or file, e.g. the paper's 52 configurations (default: the "
                                    "protocol's)")
    systems: str | None = option(None, "comma-separated system names of the grid (default: all of them)")
    epochs: int | None = option(None, "override epochs, for quick checks (default: each system's own)", ge=1,
                                le=10_000, cli=Cli(metavar="N"))
    device: str = option("cpu", "cpu, cuda or cuda:N")
    sample_users: Positive | None = option(None, "ML-32M users sampled for training, the participants always "
                                                 "added (default: the protocol's 10000)",
                                           cli=Cli(metavar="N"))
    min_interactions: Positive | None = option(None, "ratings a sampled user needs (default: the protocol's 20)",
                                               cli=Cli(metavar="N"))
    min_rating: float | None = option(None, "training positives: the ratings at or above R (default: the protocol's "
                                            "4, the rule of the release's implicit-ratings.csv; 0: every rating, "
                                            "0.5 stars included)", ge=0, le=5, cli=Cli(metavar="R"))
    historical_split: str = option("user_ratio", "split of the historical setting, 80/20")
    experiments: int | None = option(None, "repeated experiments (default: the protocol's 3)", ge=1, le=100,
                                     cli=Cli(metavar="N"))
    per_user: Positive | None = option(None, "items per participant of Tables 3 and 8, Figures 3 and 4 (default: "
                                             "the protocol's 50)", cli=Cli(metavar="K"))
    k_values: tuple[Positive, ...] = option(K_VALUES, "Table 4's K values", min_length=1,
                                            cli=Cli(metavar="LIST", parse=comma_list(int)))
    depth: Positive = option(100, "pool depth of Table 5", cli=Cli(metavar="D"))
    field_sets: tuple[str, ...] | None = option(None, "Table 3's rows (default: the paper's 11 that the collection "
                                                      "can show)", min_length=1,
                                                cli=Cli(metavar="LIST", parse=comma_list(str)))
    profile_sizes: tuple[Positive, ...] = option(PROFILE_SIZES, "Figure 3's history sizes", min_length=1,
                                                 cli=Cli(metavar="LIST", parse=comma_list(int)))
    profile_size: Positive | None = option(None, "history items per profile (default: the protocol's 1000)",
                                           cli=Cli(metavar="N"))
    fields: str | None = option(None, "the judge's base field set (default: the protocol's 'all')")
    seed: Seed = option(0, "seed of experiment 1 (experiment e uses seed + e - 1): samples, history, ties")
    permutations: Positive = option(10_000, "sign flips per significance test", cli=Cli(metavar="N"))
    bootstrap: Count = option(1000, "resamples of the agreement CIs (0: none)", cli=Cli(metavar="N"))
    allow_weak_calibration: bool = option(False, "compute Table 5's LLM fills gaps column even when the calibration "
                                                 "is weak (too few shared pairs in a grade, under 3 levels, not "
                                                 "monotone, no association), with the warning beside its cells")
    alpha: float = option(0.05, "significance level", gt=0, lt=1, cli=Cli(hidden=True))

    @field_validator("collection", "out", "collection_config", "runs", "historical_runs", "historical_qrels",
                     "groups", mode="after")
    @classmethod
    def _paths(cls, value):
        return None if value is None else Path(value)

    @field_validator("prompt", "defined_scale_prompt")
    @classmethod
    def _templates(cls, value: str | None) -> str | None:
        # a missing or malformed template stops here, before anything is trained or judged
        from ...judging.prompts import check_template

        return value if value is None else checked(check_template, value)

    @model_validator(mode="after")
    def _historical_pair(self):
        if (self.historical_runs is None) != (self.historical_qrels is None):
            raise Conflict("{historical_runs} and {historical_qrels} go together: give both, or neither (then the "
                           "historical systems are trained)", "historical_runs", "historical_qrels")
        return self

    def resolved(self) -> ReproduceSettings:
        """The protocol's values for what was left None."""
        ablate = protocol_settings("ablate")
        return self.replace(experiments=self.experiments or int(ablate.get("experiments", 3)),
                            per_user=self.per_user or int(ablate.get("per_user", 50)))

    def job_groups(self) -> list[str]:
        return list(dict.fromkeys(g for t in self.only for g in JOBS_OF.get(t, ())))

    def base_k(self) -> int:
        """Items per participant the protocol's judge labels: the largest sample a chosen target reads."""
        only = set(self.only)
        ks = [self.per_user] if only & {"table3", "table8", "figure3", "figure4"} else []
        if "table4" in only:
            ks += list(self.k_values)
        if only & {"table9", "figure5"}:
            ks.append(TABLE9_K)
        return max(ks, default=self.per_user)

    def prompts_k(self) -> int:
        """Items per participant the defined-scale prompt labels (Table 9's K = 100, Table 8's K = 50)."""
        only = set(self.only)
        return max([TABLE9_K] * ("table9" in only) + [self.per_user] * ("table8" in only), default=self.per_user)

    def targets_of(self, group: str) -> str:
        """The chosen targets a job group serves, as the paper names them ("Tables 3, 4, Figure 5")."""
        served = [_TARGET_NAME[t] for t in TARGETS if t in self.only and group in JOBS_OF.get(t, ())]
        parts = []
        for kind in ("Table", "Figure"):
            numbers = [n.split()[1] for n in served if n.startswith(kind)]
            if numbers:
                parts.append(f"{kind}{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}")
        return ", ".join(parts)

    def group_title(self, group: str) -> str:
        """A job group as the plan names it, with the targets it serves."""
        what = {"base": f"the protocol's judge, K = {self.base_k()} per participant",
                "fields": f"metadata field sets, K = {self.per_user}",
                "profiles": f"profile sizes, K = {self.per_user}",
                "prompts": f"the defined-scale prompt, K = {self.prompts_k()}",
                "pool": f"the systems' depth-{self.depth} pool"}[group]
        return f"{what} ({self.targets_of(group)})"

    def as_dict(self) -> dict[str, Any]:
        return {k: os.fspath(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
                for k, v in self.given().items()}


def target_measures() -> tuple[list[str], str]:
    """The protocol's measures when this recjudge knows them all, else the ir-measures ones (noted)."""
    from ...evaluation.measures import parse_measures

    wanted = str(protocol_settings("compare").get("measures", ",".join(FALLBACK_MEASURES)))
    try:
        parse_measures(wanted)
        return [m.strip() for m in wanted.split(",")], ""
    except ConfigError as exc:
        return list(FALLBACK_MEASURES), (f"the protocol's measures {wanted} are not all known here ({exc}); "
                                        f"used {', '.join(FALLBACK_MEASURES)}")


def pick_measure(measures: Sequence[str], prefix: str) -> str | None:
    return next((m for m in measures if m.startswith(prefix)), None)
