"""Every command's settings: one frozen model each, the single declaration of its options.

The command line (``recjudge compare --help``), protocol files (``[compare]`` in a protocol) and the
Python verbs (``recjudge.compare(runs, reference, candidates, measures=…)``) are built from these
models; see :mod:`recjudge.settings` for how. The judge and audit commands' models live in
:mod:`recjudge.api.judge_settings` and are listed here too.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import field_validator, model_validator

from ..data.splits import SplitName
from ..evaluation.baselines import DEFAULT_DRAWS
from ..evaluation.intervals import DEFAULT_TAU_METHOD, TAU_METHODS
from ..evaluation.measures import DEFAULT_MEASURES
from ..settings import (
    MAX_COUNT,
    MAX_SEED,
    Cli,
    Conflict,
    Count,
    Inputs,
    PathText,
    Positive,
    Seed,
    Settings,
    TiePolicy,
    checked,
    option,
)
from .judge_settings import (
    AuditConsistencySettings,
    AuditInjectionSettings,
    AuditPopularitySettings,
    AuditPositionSettings,
    AuditInjectionScanSettings,
    JudgeCommandSettings,
)

__all__ = ["CompareSettings", "EvaluateSettings", "AgreementSettings", "FillSettings", "TiesSettings",
           "JudgeCommandSettings", "AuditPopularitySettings", "AuditConsistencySettings", "AuditInjectionScanSettings",
           "AuditPositionSettings", "AuditInjectionSettings",
           "TrainSettings", "AblateSettings", "SettingsComparisonSettings", "DEFAULT_MEASURE_STRING",
           "MAX_SEED", "MAX_COUNT", "MAX_THREADS", "MAX_EPOCHS", "Seed", "Count", "Positive"]

DEFAULT_MEASURE_STRING = ",".join(DEFAULT_MEASURES)
# beyond these a typo, not a plan: torch would spawn the threads, training would never end
MAX_THREADS = 1024
MAX_EPOCHS = 100_000

_TIE_HELP = ("order of equal scores before any measure runs: trec_eval (score, then docid descending as strings, trec_eval's rule), hash (disclosed hash of seed+user+item), docid (ascending) or input (file order); default trec_eval")
_TIE_NOTE_HELP = ("print one line on how far ties could move the result (the other tie policy and the expected "
                  "value under random order, on the systems' means and τ) when some run's share of tie-sensitive "
                  "lists exceeds this: lists whose equal scores, within the depth the measures read, hold "
                  "differently judged items (default 0.01: below it no run's mean moves by more than 0.01; "
                  "0: whenever one does; 1: off, nothing computed)")
_GROUPS_HELP = ("'system group' per line (e.g. pooled / non-pooled): every measure averaged per group "
                "(default: the groups `recjudge train` recorded beside the runs, if any)")
_GROUPS_DOC = ("a file of 'system group' lines or a {system: group} mapping (e.g. pooled / non-pooled): every "
               "measure averaged per group (default: the groups `recjudge train` recorded beside run files, if any)")
_JSON_HELP = "write the result as JSON (default: none)"
_REPORT_HELP = "write report.md, report.html and the figures into DIR (default: none)"


def _measures(value: str) -> str:
    """ir-measures strings, checked before any file is read (an unknown measure is refused)."""
    from ..evaluation.measures import parse_measures

    return checked(parse_measures, value)


_MEASURES_HELP = ("ir-measures strings or trec_eval names, comma-separated (nDCG@10 or ndcg_cut_10, AP or map, "
                  "P(rel=2)@10 or P_10 with --rel 2); printed in ir-measures spelling")
_REL_HELP = ("the lowest label counted as relevant, set on every measure that takes one (P, R, AP, RR, Bpref, "
             "Success …): trec_eval's -l N, ir-measures' P(rel=N)@10; nDCG, Compat and Judged have none (their "
             "gain is the label; trec_eval's -l leaves its nDCG alike) (default: 1, or each measure's rel=)")


class _Measured(Settings):
    """A command whose ``measures`` are ir-measures strings (or trec_eval names, given back in ir-measures
    spelling, ``rel`` applied: the commands downstream see ir-measures strings only)."""

    @field_validator("measures", check_fields=False)
    @classmethod
    def _check_measures(cls, value):
        return value if value is None else _measures(value)

    @model_validator(mode="after")
    def _ir_measures_spelling(self):
        from ..evaluation.measures import RelConflict, measure_names, parse_measures, split_top_level, takes_rel

        value, rel = getattr(self, "measures", None), getattr(self, "rel", None)
        if value is None:
            return self
        try:
            names = measure_names(value, rel)
        except RelConflict as exc:
            raise Conflict(f"{{rel}} {rel} contradicts rel={exc.own} in {{measures}} item {exc.given!r}; "
                           "drop one of the two", "rel", "measures") from None
        if rel is not None and not any(takes_rel(m) for m in parse_measures(names)):
            raise Conflict(f"{{rel}} {rel} sets the relevance threshold of no measure in {{measures}} ({value}): "
                           "nDCG, Compat and Judged have none (their gain is the label); add e.g. P@10 or AP",
                           "rel", "measures")
        if list(names) != split_top_level(value):
            object.__setattr__(self, "measures", ",".join(names))  # frozen: set once, while validating
        return self


# the main inputs: files on the command line; in Python also objects already read (recjudge.api.inputs)
_RUNS_HELP = "run files (TREC, a table with a header, or ranx JSON; .gz too) or folders of them"
_RUNS_DOC = ("run files or folders, Runs, DataFrames (qid, docid, score), a list of these or a {name: run} "
             "mapping")
_LABELS_DOC = "a qrels path, a Qrels or a DataFrame (qid, docid, label)"
_CANDIDATES_HELP = "candidate labels (e.g. LLM): one or more qrels files, after one --candidate or each after its own"
_CANDIDATES_DOC = ("candidate labels (e.g. LLM): a qrels path, Qrels or DataFrame, a list of them, or a "
                   "{name: labels} mapping (each named by its key)")
_CANDIDATE_CLI = Cli(flag="--candidate", nargs="+", metavar="QRELS")

_BASELINES_HELP = ("trivial judges on each candidate's own pairs, shown beside it (constant: its most frequent "
                   "label; random: its labels shuffled, mean of N draws; popularity: its labels by item "
                   "popularity); N = the random draws (0: no trivial judges)")


class CompareSettings(_Measured):
    command: ClassVar[str] = "compare"
    runs: Inputs = option(help=_RUNS_HELP, doc=_RUNS_DOC, cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    reference: Inputs = option(help="reference labels (e.g. human): a qrels file",
                               doc=f"reference labels (e.g. human): {_LABELS_DOC}", cli=Cli(metavar="QRELS"))
    candidates: Inputs = option(help=_CANDIDATES_HELP, doc=_CANDIDATES_DOC, cli=_CANDIDATE_CLI)
    measures: str = option(DEFAULT_MEASURE_STRING, _MEASURES_HELP)
    queries: Literal["own", "shared"] | None = option(
        None, "own: each label set over the users it judges; shared: only users judged by both (default: own, "
              "but a candidate that shares no user with the reference is refused unless own is given)")
    rel: Positive | None = option(None, _REL_HELP, cli=Cli(metavar="N"))
    tie_policy: TiePolicy = option("trec_eval", _TIE_HELP)
    seed: Seed = option(0, "seed for the hash tie policy (and the bootstrap, unless --bootstrap-seed is given)")
    tie_note: float = option(0.01, _TIE_NOTE_HELP, ge=0, le=1, cli=Cli(metavar="SHARE"))
    bootstrap: Count = option(1000, "bootstrap resamples of users for the τ CIs (0: no CI)")
    bootstrap_seed: Seed | None = option(None, "seed for the bootstrap alone (default: --seed); varies the CIs, "
                                               "never the rankings")
    ci_method: Literal[tuple(TAU_METHODS)] = option(
        DEFAULT_TAU_METHOD, f"τ confidence interval ({DEFAULT_TAU_METHOD}: "
        f"{TAU_METHODS[DEFAULT_TAU_METHOD].description}; of these, the closest to 95% coverage of the population "
        "τ in recjudge's coverage benchmark, see the Statistics page of the docs; the others are there for "
        "comparison)")
    groups: Inputs = option(None, _GROUPS_HELP, doc=_GROUPS_DOC, cli=Cli(metavar="FILE"))
    baselines: Count = option(DEFAULT_DRAWS, _BASELINES_HELP, cli=Cli(metavar="N"))
    json: PathText | None = option(None, _JSON_HELP, cli=Cli(metavar="PATH"))
    report: PathText | None = option(None, _REPORT_HELP, cli=Cli(metavar="DIR"))



class EvaluateSettings(_Measured):
    command: ClassVar[str] = "evaluate"
    runs: Inputs = option(help=_RUNS_HELP, doc=_RUNS_DOC, cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    qrels: Inputs = option(help="the labels to score the runs with: a qrels file",
                           doc=f"the labels to score the runs with: {_LABELS_DOC}", cli=Cli(metavar="QRELS"))
    measures: str = option(DEFAULT_MEASURE_STRING, _MEASURES_HELP + "; systems are ranked by the first "
                                                   "that is not a coverage measure (Judged)")
    rel: Positive | None = option(None, _REL_HELP, cli=Cli(metavar="N"))
    tie_policy: TiePolicy = option("trec_eval", _TIE_HELP)
    seed: Seed = option(0, "seed for the hash tie policy")
    tie_note: float = option(0.01, _TIE_NOTE_HELP, ge=0, le=1, cli=Cli(metavar="SHARE"))
    groups: Inputs = option(None, _GROUPS_HELP, doc=_GROUPS_DOC, cli=Cli(metavar="FILE"))
    per_query: PathText | None = option(
        None, "write every user's score per run and measure as TSV rows run, query, measure, value (trec_eval -q) "
              "to PATH, or - for stdout (the table then goes to stderr); with --json the rows are in the JSON too; a "
              "user a run does not rank scores 0 (trec_eval -c) (default: none)", cli=Cli(metavar="PATH"))
    json: PathText | None = option(None, _JSON_HELP, cli=Cli(metavar="PATH"))
    report: PathText | None = option(None, _REPORT_HELP, cli=Cli(metavar="DIR"))





class AgreementSettings(Settings):
    command: ClassVar[str] = "agreement"
    reference: Inputs = option(help="reference labels (e.g. human): a qrels file",
                               doc=f"reference labels (e.g. human): {_LABELS_DOC}", cli=Cli(metavar="QRELS"))
    candidates: Inputs = option(help=_CANDIDATES_HELP, doc=_CANDIDATES_DOC, cli=_CANDIDATE_CLI)
    missing: Literal["zero", "drop"] | None = option(
        None, "a reference pair the candidate lacks: zero counts it as label 0 (the LLMJudge convention), drop "
              "leaves it out (default: zero while at most 1% of the pairs are missing, else refused until you "
              "choose)")
    clip: str | None = option(None, "clip candidate labels, e.g. 0..3 (default: no clipping)",
                              cli=Cli(metavar="LO..HI"))
    bootstrap: Count = option(1000, "bootstrap resamples of users (0: no CI)")
    seed: Seed = option(0, "seed for the bootstrap (and the random trivial judge)")
    baselines: Count = option(DEFAULT_DRAWS, _BASELINES_HELP, cli=Cli(metavar="N"))
    json: PathText | None = option(None, _JSON_HELP, cli=Cli(metavar="PATH"))

    @field_validator("clip")
    @classmethod
    def _check_clip(cls, value):
        from ..evaluation.agreement import parse_clip

        return checked(parse_clip, value)


class FillSettings(Settings):
    command: ClassVar[str] = "fill"
    human: Inputs = option(help="human (reference) qrels", doc=f"human (reference) labels: {_LABELS_DOC}",
                           cli=Cli(metavar="QRELS"))
    llm: Inputs = option(help="LLM qrels covering the pool", doc=f"LLM labels covering the pool: {_LABELS_DOC}",
                         cli=Cli(metavar="QRELS"))
    runs: Inputs = option(help=_RUNS_HELP + ": their top-k is the pool to fill",
                          doc=_RUNS_DOC + ": their top-k is the pool to fill", cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    out: PathText | None = option(None, "mixed qrels to write (+ .sources.tsv)",
                                  doc="mixed qrels to write (+ .sources.tsv) (default: None, nothing written)",
                                  cli=Cli(metavar="QRELS", required=True))
    k: Positive = option(100, "fill the top-k of every run")
    min_overlap: Count = option(30, "an LLM grade with fewer shared pairs cannot be calibrated")
    allow_weak_calibration: bool = option(False, "fill even when the calibration cannot calibrate (too few "
                                                 "shared pairs, a flat or non-monotone mapping, no signal); every "
                                                 "output then carries the warning (default: refused)")
    tie_policy: TiePolicy = option("trec_eval", "order of equal scores when taking each run's top-k (default trec_eval: docid descending)")
    seed: Seed = option(0, "seed for the hash tie policy and the --validate sample")
    tie_note: float = option(0.01, _TIE_NOTE_HELP + "; under the human labels", ge=0, le=1, cli=Cli(metavar="SHARE"))
    validate: float | None = option(None, "also hide a seeded fraction F (0 < F < 1) of human labels, fill them "
                                          "and check against them (default: no validation)",
                                    cli=Cli(metavar="F"), gt=0, lt=1)
    measures: str | None = option(None, "ir-measures strings the scenarios are compared on, read as compare's "
                                        "--measures (default: Compat(p=0.95),nDCG@K with K = --k); Judged@K is "
                                        "always reported", cli=Cli(metavar="LIST"))
    json: PathText | None = option(None, _JSON_HELP, cli=Cli(metavar="PATH"))

    @model_validator(mode="after")
    def _measure_list(self):
        from ..evaluation.calibration import scenario_measures

        # an unknown measure is refused before any file is read
        checked(lambda m: scenario_measures(m, self.k), self.measures)
        return self

    def measure_list(self) -> tuple[str, ...]:
        """The measures compared, as spelled (the default made concrete for ``k``)."""
        from ..evaluation.calibration import scenario_measures

        return scenario_measures(self.measures, self.k)


def _cutoffs(text: str) -> tuple[int, ...]:
    """Comma-separated positive cutoffs, e.g. 10,100 (the command line's form of ``cutoffs``)."""
    import argparse

    try:
        ks = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        ks = ()
    if not ks:
        raise argparse.ArgumentTypeError(f"expects comma-separated positive integers such as 10,100, not {text!r}")
    return ks


class TiesSettings(_Measured):
    command: ClassVar[str] = "ties"
    runs: Inputs = option((), _RUNS_HELP + " (default: none, allowed with --sampled-candidates only: every "
                                           "candidate then scores 0)",
                          doc=_RUNS_DOC + " (default: none, allowed with sampled_candidates only: every candidate "
                                          "then scores 0)",
                          cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    qrels: Inputs = option(None, "relevance labels (default: none, and only prevalence is shown)",
                           doc=f"relevance labels, {_LABELS_DOC} (default: none, and only prevalence is shown)",
                           cli=Cli(metavar="QRELS"))
    measures: str | None = option(None, 'comma-separated ir-measures names, Hit@k = Success@k (default with '
                                        '--qrels: "Hit@10,nDCG@10,nDCG@100")', cli=Cli(metavar="LIST"))
    cutoffs: tuple[Positive, ...] = option((10, 100), "cutoffs for prevalence", min_length=1,
                                           cli=Cli(flag="--k", metavar="LIST", parse=_cutoffs))
    seeds: int = option(100, "hash seeds for mean and sd", ge=2, le=100_000)
    permutations: int = option(20, "shuffles of each user's rows in the permutation test", ge=0, le=100_000)
    mc_samples: int = option(100, "random tie orders for measures without a closed form", ge=2, le=100_000)
    seed: Seed = option(0, "seed of the hash policy (hash seeds run from it) and of every shuffle")
    sampled_candidates: Positive | None = option(
        None, "audit the sampled-candidate protocol: per user the held-out positive of --qrels plus N sampled "
              "negatives, relevant first (default: off)", cli=Cli(metavar="N"))
    catalogue: PathText | None = option(None, "with --sampled-candidates: the items negatives are drawn from, one id "
                                         "per line (default: every item the runs and the qrels name)",
                                   cli=Cli(metavar="FILE"))
    collection: Inputs = option(None, "with --sampled-candidates: draw negatives from this collection's items "
                                      "(default: none; see --catalogue)", cli=Cli(metavar="NAME_OR_PATH"))
    json: PathText | None = option(None, "also write the results as JSON (default: none)", cli=Cli(metavar="PATH"))

    @field_validator("cutoffs", mode="before")
    @classmethod
    def _cutoff_text(cls, value: Any) -> Any:
        # "10,100" or 10 in Python or a file, as on the command line
        if isinstance(value, str):
            return _cutoffs(value)
        return (value,) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _together(self):
        sampled = self.sampled_candidates is not None
        if self.measures is not None and self.qrels is None:
            raise Conflict("{measures} needs {qrels} (measures need relevance labels)", "measures", "qrels")
        if sampled and self.qrels is None:
            raise Conflict("{sampled_candidates} needs {qrels}: each user's held-out positive",
                           "sampled_candidates", "qrels")
        if self.catalogue is not None and self.collection is not None:
            raise Conflict("give {catalogue} or {collection}, not both: they are two sources of negatives",
                           "catalogue", "collection")
        if not sampled and (self.catalogue or self.collection):
            raise Conflict("{catalogue} and {collection} go with {sampled_candidates}", "catalogue", "collection",
                           "sampled_candidates")
        if not self.runs and not sampled:
            raise Conflict("no runs given ({runs}); pass run files or a folder of runs", "runs")
        return self



class TrainSettings(Settings):
    command: ClassVar[str] = "train"
    collection: Inputs = option("ml-100k", "registered name or path",
                                doc="a registered name, a path, a Collection or a Split")
    collection_config: PathText | None = option(None, "loader options, e.g. [movie_columns] for ML-32M-ext's "
                                                 "database-movies.csv (default: none)", cli=Cli(metavar="TOML"))
    grid: str = option("quick", "system grid: quick, all18, paper52, penha2025-defaults or a grid file (TOML with "
                                "[[system]] tables)", cli=Cli(metavar="GRID"))
    systems: str | None = option(None, "comma-separated system names of the grid (default: every system of "
                                       "--grid)")
    out: PathText | None = option(None, "output folder for runs (default: runs/<collection>)")
    k: Positive = option(100, "list length per user")
    device: str = option("cpu", "cpu, cuda or cuda:N")
    split: SplitName = option("global_time", "split method")
    quantile: float | None = option(None, "global_time: cut at this quantile of timestamps, in (0, 1) "
                                          "(default 0.8)", gt=0, lt=1)
    cut: int | None = option(None, "global_time: cut at this exact timestamp (default: none; see --quantile)",
                             ge=-MAX_SEED - 1, le=MAX_SEED)
    ratio: float | None = option(None, "user_ratio: share of each user's history for training, in (0, 1) "
                                       "(default 0.8)", gt=0, lt=1)
    tie_policy: TiePolicy = option("hash", "order of equal scores")
    tie_seed: Seed = option(0, "seed of the hash tie policy")
    epochs: int | None = option(None, "override every neural system's epochs (quick checks; default: each "
                                      "system's own)", ge=1, le=MAX_EPOCHS)
    threads: int = option(1, "torch threads while training (more rarely helps on small data)",
                          ge=1, le=MAX_THREADS)
    force: bool = option(False, "retrain systems found in the cache")
    evaluate: bool = option(False, "also record RecBole's own test NDCG@10/Recall@10")
    keep_checkpoints: bool = option(False, "keep RecBole's data and checkpoints in <out>/.work")
    min_rating: float | None = option(None, "train on the ratings at or above R only, as positives (ML-32M-ext's "
                                            "implicit-ratings.csv keeps >= 4; applied before --sample-users and "
                                            "--min-interactions); default: every rating is a positive",
                                      ge=0, cli=Cli(metavar="R"))
    sample_users: Positive | None = option(None, "train on N users drawn by a seeded hash, plus every user the "
                                                 "human qrels judge (Penha et al. 2025: 10,000 + the 51 "
                                                 "participants; default: every user)", cli=Cli(metavar="N"))
    sample_seed: Seed = option(0, "seed of --sample-users")
    min_interactions: Positive | None = option(None, "keep users and items with at least N interactions, "
                                                     "iterated to a fixed point (the paper: 20), after "
                                                     "--sample-users; judged users are kept (default: no filter)",
                                               cli=Cli(metavar="N"))
    historical_qrels: PathText | None = option(None, "also write qrels from the split's held-out ratings here (the "
                                                "historical setting of Penha et al. 2025, Table 1; default: none)",
                                          cli=Cli(metavar="QRELS"))
    historical_mapping: str = option("rating", "rating → label for --historical-qrels: rating (whole stars), "
                                               "half_stars (2 × rating), binary, or threshold:T",
                                     cli=Cli(metavar="MAPPING"))
    json: bool = option(False, "print results as JSON instead of a table")

    @field_validator("grid")
    @classmethod
    def _check_grid(cls, value: str) -> str:
        from ..systems.registry import grid_names

        names = grid_names()
        if value in names or value.endswith(".toml"):
            return value
        raise ValueError(f"must be one of {', '.join(names)} or a grid file (.toml), not {value!r}")

    # the option → the split function's keyword; which split takes which keyword is the split's own
    # signature (make_split), not a second table here
    SPLIT_OPTIONS: ClassVar[dict[str, str]] = {"quantile": "quantile", "cut": "timestamp", "ratio": "ratio"}

    def split_options(self) -> dict:
        """The options given for the split; one the split method does not take is refused by name."""
        import inspect

        from ..data.splits import SPLITS
        from ..errors import ConfigError

        fn = SPLITS[self.split]
        accepted = {p for p, v in inspect.signature(fn).parameters.items() if v.kind is inspect.Parameter.KEYWORD_ONLY}
        opts = {}
        for name, key in self.SPLIT_OPTIONS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if key not in accepted:
                raise ConfigError(f"{self.name_of(name)} does not apply to split {self.split!r}")
            opts[key] = value
        return opts

    def system_names(self) -> list[str] | None:
        if self.systems is None:
            return None
        names = [s.strip() for s in self.systems.split(",") if s.strip()]
        if not names:
            from ..errors import ConfigError

            raise ConfigError(f"{self.name_of('systems')} names no system; give comma-separated names or leave it "
                              "out for the grid")
        return names


class AblateSettings(Settings):
    command: ClassVar[str] = "ablate"
    experiment: Inputs = option(help="the experiment file (TOML)", doc="the experiment file (TOML) or an Experiment",
                                cli=Cli(metavar="EXPERIMENT.toml", positional=True))
    dry_run: bool = option(False, "count calls and estimated input tokens per variant; call nothing")
    experiments: Positive | None = option(
        None, "N independent experiments, each with its own sample of judged items and of history items (seeds "
              "derived from the file's seed and recorded), every metric averaged with a 95% interval across them; "
              "replaces the file's `experiments`, a protocol's fills only a file without one (default: the "
              "file's, else the protocol's, else 1). Not the judge's `repeats`, which asks the same prompt R "
              "times", cli=Cli(metavar="N"))
    per_user: Positive | None = option(None, "K judged items per user; replaces the file's `per_user`, a "
                                             "protocol's fills only a file without one (default: the file's, "
                                             "else the protocol's, else 20; Penha et al. 2025: 50)",
                                       cli=Cli(metavar="K"))


class SettingsComparisonSettings(_Measured):
    command: ClassVar[str] = "compare-settings"
    runs_a: Inputs = option(help="runs of setting A (e.g. trained on a historical split)",
                            cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    qrels_a: Inputs = option(help="qrels of setting A (e.g. historical qrels)", cli=Cli(metavar="QRELS"))
    runs_b: Inputs = option(help="runs of setting B (e.g. Cranfield runs)", cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    qrels_b: Inputs = option(help="qrels of setting B (e.g. human qrels)", cli=Cli(metavar="QRELS"))
    measures: str = option(DEFAULT_MEASURE_STRING, _MEASURES_HELP)
    rel: Positive | None = option(None, _REL_HELP, cli=Cli(metavar="N"))
    tie_policy: TiePolicy = option("trec_eval", _TIE_HELP)
    seed: Seed = option(0, "seed for the hash tie policy")
    json: PathText | None = option(None, _JSON_HELP, cli=Cli(metavar="PATH"))
