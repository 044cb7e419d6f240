"""One validated, frozen config per command: names, types, defaults and help, and the CLI built from them.

A field's ``opt(...)`` metadata is the single declaration of its command-line flag, help text and
check; ``add_arguments`` builds the parser from it and ``from_args`` / ``from_mapping`` build the
config (``from_mapping`` refuses unknown keys, so a TOML typo is an error, never a silent default).
Checks reuse the CLI's range-checked types, so Python, TOML and the command line refuse the same
values with the same words.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ..cli import _args
from ..data.trec import TIE_POLICIES
from ..errors import ConfigError
from ..evaluation.intervals import DEFAULT_TAU_METHOD, TAU_METHODS
from ..evaluation.measures import DEFAULT_MEASURES

__all__ = ["opt", "resolve_config", "CommandConfig", "CompareConfig", "AgreementConfig", "EvaluateConfig", "FillConfig",
           "AblateConfig", "TrainConfig", "TiesConfig", "CompareSettingsConfig", "DEFAULT_MEASURE_STRING",
           "MAX_THREADS", "MAX_EPOCHS"]

DEFAULT_MEASURE_STRING = ",".join(DEFAULT_MEASURES)
# beyond these a typo, not a plan: torch would spawn the threads, training would never end
MAX_THREADS = 1024
MAX_EPOCHS = 100_000


def opt(default: Any = dataclasses.MISSING, help: str | None = None, *, check: Callable | None = None,
        choices: Sequence[str] | Callable[[], Sequence[str]] | None = None, cli: bool = True, **argparse_options) -> Any:
    """A config field and its command-line flag (``--name-with-dashes`` unless ``flag=``)."""
    meta = {"help": help, "check": check, "choices": choices if callable(choices) or not choices else tuple(choices),
            "cli": cli,
            "argparse": argparse_options}
    if isinstance(default, (list, dict, set)):
        raise TypeError("give sequence defaults as tuples: configs are frozen")
    return field(default=default, metadata=meta)


def _choices(f: dataclasses.Field) -> tuple[str, ...] | None:
    """A field's choices; a callable is a registry read when needed (e.g. the grids)."""
    choices = f.metadata.get("choices")
    return tuple(choices()) if callable(choices) else choices


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("argparse", {}).get("flag") or "--" + f.name.replace("_", "-")


@dataclass(frozen=True)
class CommandConfig:
    """Base of every command's config: validation on construction, the CLI from the fields."""

    command: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):  # frozen means frozen: a list given in Python becomes a tuple
                value = tuple(value)
                object.__setattr__(self, f.name, value)
            if value is None or isinstance(value, tuple) and not value:
                continue
            meta = f.metadata
            flag = _flag(f)
            choices = _choices(f)
            if choices and value not in choices:
                raise ConfigError(f"{flag} must be one of {', '.join(choices)}, not {value!r}")
            check = meta.get("check")
            if check is not None:
                for item in (value if isinstance(value, tuple) else (value,)):
                    if isinstance(item, bool) and check is not bool:
                        raise ConfigError(f"{flag} takes {check.__name__}, not {item!r}")
                    try:
                        check(str(item))
                    except argparse.ArgumentTypeError as exc:
                        raise ConfigError(f"{flag}: {exc}") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "<config>") -> CommandConfig:
        """Build from a mapping (e.g. TOML); unknown keys are refused with the list of known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown option(s) {', '.join(unknown)} for {cls.command or cls.__name__}; "
                              f"known: {', '.join(sorted(known))}")
        try:
            return cls(**data)
        except TypeError as exc:  # a required option missing
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one flag per field, with the field's default, type, choices and help."""
        for f in fields(cls):
            meta = f.metadata
            if not meta.get("cli", True):
                continue
            kwargs = {k: v for k, v in meta.get("argparse", {}).items() if k not in ("flag", "positional")}
            if meta.get("help") is not None:
                kwargs["help"] = meta["help"]
            if _choices(f):
                kwargs["choices"] = _choices(f)
            if meta.get("check") is not None and kwargs.get("action") is None:
                kwargs["type"] = meta["check"]
            required = f.default is dataclasses.MISSING
            shown = not (f.default is None or f.default is False or f.default == () or required)
            if shown and "default" not in (kwargs.get("help") or "").lower():
                # every option shows its default; a tuple as it is typed (10,100)
                value = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
                kwargs["help"] = f"{kwargs.get('help') or ''} (default: {value})".lstrip()
            if meta.get("argparse", {}).get("positional"):
                parser.add_argument(f.name, **kwargs)
                continue
            if required:
                kwargs["required"] = True
            elif kwargs.get("action") != "store_true":
                kwargs["default"] = f.default
            parser.add_argument(_flag(f), dest=f.name, **kwargs)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CommandConfig:
        values = {f.name: getattr(args, f.name) for f in fields(cls) if f.metadata.get("cli", True)}
        return cls(**values)

    def replace(self, **changes) -> CommandConfig:
        return dataclasses.replace(self, **changes)


def resolve_config(config_cls: type[CommandConfig], config: CommandConfig | None, options: Mapping[str, Any]):
    """The config a verb runs with: ``config`` as given, or built (and checked) from keyword options."""
    if config is not None and options:
        return config.replace(**options)
    if config is not None:
        if not isinstance(config, config_cls):
            raise ConfigError(f"expected a {config_cls.__name__}, not {type(config).__name__}")
        return config
    return config_cls.from_mapping(options, source=f"recjudge.{config_cls.command}()")


PathOrObject = Any  # a path (checked when read) or the object read from it (Run mapping, Qrels)
_TIE_HELP = "order of equal scores before any measure runs (default: hash of seed+user+item)"


_GROUPS_HELP = ("'system group' per line (e.g. pooled / non-pooled): every measure averaged per group "
                "(default: the groups `recjudge train` recorded beside the runs, if any)")


@dataclass(frozen=True)
class CompareConfig(CommandConfig):
    command: ClassVar[str] = "compare"
    runs: PathOrObject = opt(help="run files or folders", nargs="+", metavar="DIR_OR_FILE")
    reference: PathOrObject = opt(help="reference labels (e.g. human)", metavar="QRELS")
    candidate: PathOrObject = opt(help="candidate labels (e.g. LLM); repeat for several", action="append",
                                  metavar="QRELS")
    measures: str = opt(DEFAULT_MEASURE_STRING, f"ir-measures strings (default: {DEFAULT_MEASURE_STRING})")
    queries: str = opt("own", "own: each label set over the users it judges; shared: only users judged by both",
                       choices=("own", "shared"))
    tie_policy: str = opt("hash", _TIE_HELP, choices=TIE_POLICIES)
    seed: int = opt(0, "seed for the hash tie policy (and the bootstrap, unless --bootstrap-seed is given)",
                    check=_args.seed)
    bootstrap: int = opt(1000, "bootstrap resamples of users for the τ CIs (default 1000; 0: no CI)",
                         check=_args.count)
    bootstrap_seed: int | None = opt(None, "seed for the bootstrap alone (default: --seed); varies the CIs, "
                                     "never the rankings", check=_args.seed)
    ci_method: str = opt(DEFAULT_TAU_METHOD, f"τ confidence interval (default {DEFAULT_TAU_METHOD}: "
                         f"{TAU_METHODS[DEFAULT_TAU_METHOD].description}; the closest to 95%% coverage of the "
                         "population τ in benchmarks/bench_tau_ci.py; the others are there for comparison)",
                         choices=tuple(TAU_METHODS))
    groups: PathOrObject | None = opt(None, _GROUPS_HELP, metavar="FILE")
    json: str | None = opt(None, "write the result as JSON (default: none)", metavar="PATH")
    report: str | None = opt(None, "write report.md, report.html and the figures into DIR (default: none)",
                             metavar="DIR")


@dataclass(frozen=True)
class AgreementConfig(CommandConfig):
    command: ClassVar[str] = "agreement"
    reference: PathOrObject = opt(help="reference labels (e.g. human)", metavar="QRELS")
    candidate: PathOrObject = opt(help="candidate labels (e.g. LLM), one or more", nargs="+", metavar="QRELS")
    missing: str | None = opt(None, "a reference pair the candidate lacks: zero counts it as label 0 (the "
                              "LLMJudge convention), drop leaves it out (default: zero while at most 1%% of the "
                              "pairs are missing, else refused until you choose)", choices=("zero", "drop"))
    clip: str | None = opt(None, "clip candidate labels, e.g. 0..3 (default: no clipping)", metavar="LO..HI")
    bootstrap: int = opt(1000, "bootstrap resamples of users (0: no CI)", check=_args.count)
    seed: int = opt(0, "seed for the bootstrap", check=_args.seed)
    json: str | None = opt(None, "write the result as JSON (default: none)", metavar="PATH")


@dataclass(frozen=True)
class EvaluateConfig(CommandConfig):
    command: ClassVar[str] = "evaluate"
    runs: PathOrObject = opt(help="run files or folders", nargs="+", metavar="DIR_OR_FILE")
    qrels: PathOrObject = opt(help="the labels to score the runs with", metavar="QRELS")
    measures: str = opt(DEFAULT_MEASURE_STRING, "ir-measures strings; systems are ranked by the first measure "
                        f"that is not a coverage measure (Judged) (default: {DEFAULT_MEASURE_STRING})")
    tie_policy: str = opt("hash", _TIE_HELP, choices=TIE_POLICIES)
    seed: int = opt(0, "seed for the hash tie policy", check=_args.seed)
    groups: PathOrObject | None = opt(None, _GROUPS_HELP, metavar="FILE")
    json: str | None = opt(None, "write the result as JSON (default: none)", metavar="PATH")
    report: str | None = opt(None, "write report.md, report.html and the figures into DIR (default: none)",
                             metavar="DIR")


@dataclass(frozen=True)
class FillConfig(CommandConfig):
    command: ClassVar[str] = "fill"
    human: PathOrObject = opt(help="human (reference) qrels", metavar="QRELS")
    llm: PathOrObject = opt(help="LLM qrels covering the pool", metavar="QRELS")
    runs: PathOrObject = opt(help="run files or folders: their top-k is the pool to fill", nargs="+",
                             metavar="DIR_OR_FILE")
    out: str | None = opt(help="mixed qrels to write (+ .sources.tsv)", metavar="QRELS")
    k: int = opt(100, "fill the top-k of every run (default 100)", check=_args.positive)
    min_overlap: int = opt(30, "an LLM grade with fewer shared pairs cannot be calibrated (default 30)",
                           check=_args.count)
    allow_weak_calibration: bool = opt(False, "fill even when the calibration cannot calibrate (too few shared "
                                       "pairs, a flat or non-monotone mapping, no signal); every output then "
                                       "carries the warning (default: refused)", action="store_true")
    tie_policy: str = opt("hash", "order of equal scores when taking each run's top-k (default hash)",
                          choices=TIE_POLICIES)
    seed: int = opt(0, "seed for the hash tie policy and the --validate sample (default 0)", check=_args.seed)
    validate: float | None = opt(None, "also hide a seeded fraction F (0 < F < 1) of human labels, fill them "
                                 "and check against them (default: no validation)", metavar="F",
                                 check=_args.float_range(0, 1, lo_open=True, hi_open=True, what="a fraction"))
    measures: str | None = opt(None, "ir-measures strings the scenarios are compared on, read as compare's "
                               "--measures (default: Compat(p=0.95),nDCG@K with K = --k); Judged@K is always "
                               "reported", metavar="LIST")
    json: str | None = opt(None, "write the result as JSON (default: none)", metavar="PATH")

    def __post_init__(self) -> None:
        super().__post_init__()
        from ..evaluation.calibration import scenario_measures

        scenario_measures(self.measures, self.k)  # an unknown measure is refused before any file is read

    def measure_list(self) -> tuple[str, ...]:
        """The measures compared, as spelled (the default made concrete for ``k``)."""
        from ..evaluation.calibration import scenario_measures

        return scenario_measures(self.measures, self.k)


@dataclass(frozen=True)
class AblateConfig(CommandConfig):
    command: ClassVar[str] = "ablate"
    experiment: PathOrObject = opt(metavar="EXPERIMENT.toml", positional=True)
    dry_run: bool = opt(False, "count calls and estimated input tokens per variant; call nothing",
                        action="store_true")
    experiments: int | None = opt(None, "N independent experiments, each with its own sample of judged items and "
                                  "of history items (seeds derived from the file's seed and recorded), every metric "
                                  "averaged with a 95 percent interval across them; replaces the file's "
                                  "`experiments` (default: the file's, else 1). Not the judge's `repeats`, which "
                                  "asks the same prompt R times", check=_args.positive, metavar="N")
    per_user: int | None = opt(None, "K judged items per user for an experiment file that sets no per_user "
                               "(a file's own per_user wins; default 20; Penha et al. 2025: 50)",
                               check=_args.positive, metavar="K")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.experiments is None and self.per_user is None:
            return
        # the verb runs the Experiment it is given: apply the options to it here, once, for the CLI and Python alike
        from ..experiments.ablate import load_experiment, with_options

        exp = self.experiment
        if isinstance(exp, (str, os.PathLike)):
            exp = load_experiment(exp)
        object.__setattr__(self, "experiment", with_options(exp, self.per_user, self.experiments))


@dataclass(frozen=True)
class CompareSettingsConfig(CommandConfig):
    command: ClassVar[str] = "compare-settings"
    runs_a: PathOrObject = opt(help="runs of setting A (e.g. trained on a historical split)", nargs="+",
                               metavar="DIR_OR_FILE")
    qrels_a: PathOrObject = opt(help="qrels of setting A (e.g. historical qrels)", metavar="QRELS")
    runs_b: PathOrObject = opt(help="runs of setting B (e.g. Cranfield runs)", nargs="+", metavar="DIR_OR_FILE")
    qrels_b: PathOrObject = opt(help="qrels of setting B (e.g. human qrels)", metavar="QRELS")
    measures: str = opt(DEFAULT_MEASURE_STRING, f"ir-measures strings (default: {DEFAULT_MEASURE_STRING})")
    tie_policy: str = opt("hash", _TIE_HELP, choices=TIE_POLICIES)
    seed: int = opt(0, "seed for the hash tie policy", check=_args.seed)
    json: str | None = opt(None, "write the result as JSON (default: none)", metavar="PATH")


def _cutoffs(text: str) -> tuple[int, ...]:
    """Comma-separated positive cutoffs, e.g. 10,100."""
    try:
        ks = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        ks = ()
    if not ks or any(not 1 <= k <= _args.MAX_COUNT for k in ks):
        raise argparse.ArgumentTypeError(f"expects comma-separated positive integers such as 10,100, not {text!r}")
    return ks


@dataclass(frozen=True)
class TiesConfig(CommandConfig):
    command: ClassVar[str] = "ties"
    runs: PathOrObject = opt((), "run files (.run/.txt/.trec, optionally .gz) or folders", nargs="*",
                             metavar="RUN", positional=True)
    qrels: PathOrObject | None = opt(None, "relevance labels (default: none, and only prevalence is shown)",
                                     metavar="QRELS")
    measures: str | None = opt(None, 'comma-separated ir-measures names, Hit@k = Success@k (default with --qrels: '
                               '"Hit@10,nDCG@10,nDCG@100")', metavar="LIST")
    cutoffs: tuple[int, ...] = opt((10, 100), "cutoffs for prevalence (default 10,100)", check=_cutoffs,
                                   flag="--k", metavar="LIST")
    seeds: int = opt(100, "hash seeds for mean and sd (default 100)", check=_args.int_range(2, 100_000))
    permutations: int = opt(20, "shuffles of each user's rows in the permutation test (default 20)",
                            check=_args.int_range(0, 100_000))
    mc_samples: int = opt(100, "random tie orders for measures without a closed form (default 100)",
                          check=_args.int_range(2, 100_000))
    seed: int = opt(0, "seed of the hash policy (hash seeds run from it) and of every shuffle (default 0)",
                    check=_args.seed)
    sampled_candidates: int | None = opt(None, "audit the sampled-candidate protocol: per user the held-out "
                                         "positive of --qrels plus N sampled negatives, relevant first "
                                         "(default: off)",
                                         check=_args.int_range(1, _args.MAX_COUNT), metavar="N")
    catalogue: str | None = opt(None, "with --sampled-candidates: the items negatives are drawn from, one id per "
                                "line (default: every item the runs and the qrels name)", metavar="FILE")
    collection: PathOrObject | None = opt(None, "with --sampled-candidates: draw negatives from this collection's "
                                          "items (default: none; see --catalogue)", metavar="NAME_OR_PATH")
    json: str | None = opt(None, "also write the results as JSON (default: none)", metavar="PATH")

    def __post_init__(self) -> None:
        if isinstance(self.cutoffs, (str, int)):  # "10,100" or 10 given in Python or TOML
            try:
                object.__setattr__(self, "cutoffs", _cutoffs(str(self.cutoffs)))
            except argparse.ArgumentTypeError as exc:
                raise ConfigError(f"--k: {exc}") from None
        super().__post_init__()
        sampled = self.sampled_candidates is not None
        if self.measures is not None and self.qrels is None:
            raise ConfigError("--measures needs --qrels (measures need relevance labels)")
        if sampled and self.qrels is None:
            raise ConfigError("--sampled-candidates needs --qrels: each user's held-out positive")
        if self.catalogue is not None and self.collection is not None:
            raise ConfigError("give --catalogue or --collection, not both: they are two sources of negatives")
        if not sampled and (self.catalogue or self.collection):
            raise ConfigError("--catalogue and --collection go with --sampled-candidates N")
        if not self.runs and not sampled:
            raise ConfigError("no runs given; pass run files or a folder of runs")


def _grid(text: str) -> str:
    """A registered grid, a grid file shipped with recjudge, or the path of a grid file (TOML)."""
    from ..systems.registry import grid_names

    names = grid_names()
    if text in names or text.endswith(".toml"):
        return text
    raise argparse.ArgumentTypeError(f"must be one of {', '.join(names)} or a grid file (.toml), not {text!r}")


def _splits() -> list[str]:
    from ..data.splits import SPLITS

    return sorted(SPLITS)


@dataclass(frozen=True)
class TrainConfig(CommandConfig):
    command: ClassVar[str] = "train"
    collection: PathOrObject = opt("ml-100k", "registered name or path (default: ml-100k)")
    collection_config: str | None = opt(None, "loader options, e.g. [movie_columns] for ML-32M-ext's "
                                        "database-movies.csv (default: none)", metavar="TOML")
    grid: str = opt("quick", "system grid: quick, all18, paper52, penha2025-defaults or a grid file (TOML with "
                    "[[system]] tables; default: quick)", check=_grid, metavar="GRID")
    systems: str | None = opt(None, "comma-separated system names of the grid (default: every system of --grid)")
    out: str | None = opt(None, "output folder for runs (default: runs/<collection>)")
    k: int = opt(100, "list length per user (default: 100)", check=_args.positive)
    device: str = opt("cpu", "cpu, cuda or cuda:N (default: cpu)")
    split: str = opt("global_time", "split method (default: global_time)", choices=_splits)
    quantile: float | None = opt(None, "global_time: cut at this quantile of timestamps, in (0, 1) (default 0.8)",
                                 check=_args.float_range(0, 1, True, True, "a quantile"))
    cut: int | None = opt(None, "global_time: cut at this exact timestamp (default: none; see --quantile)",
                          check=_args.int_range(-_args.MAX_SEED - 1, _args.MAX_SEED, "a timestamp"))
    ratio: float | None = opt(None, "user_ratio: share of each user's history for training, in (0, 1) "
                              "(default 0.8)", check=_args.float_range(0, 1, True, True, "a ratio"))
    tie_policy: str = opt("hash", "order of equal scores (default: hash)", choices=TIE_POLICIES)
    tie_seed: int = opt(0, "seed of the hash tie policy (default: 0)", check=_args.seed)
    epochs: int | None = opt(None, "override every neural system's epochs (quick checks; default: each "
                             "system's own)",
                             check=_args.int_range(1, MAX_EPOCHS, "a number of epochs"))
    threads: int = opt(1, "torch threads while training (default: 1; more rarely helps on small data)",
                       check=_args.int_range(1, MAX_THREADS, "a thread count"))
    force: bool = opt(False, "retrain systems found in the cache", action="store_true")
    evaluate: bool = opt(False, "also record RecBole's own test NDCG@10/Recall@10", action="store_true")
    keep_checkpoints: bool = opt(False, "keep RecBole's data and checkpoints in <out>/.work", action="store_true")
    sample_users: int | None = opt(None, "train on N users drawn by a seeded hash, plus every user the human "
                                   "qrels judge (Penha et al. 2025: 10,000 + the 51 participants; default: every "
                                   "user)",
                                   check=_args.positive, metavar="N")
    sample_seed: int = opt(0, "seed of --sample-users (default: 0)", check=_args.seed)
    min_interactions: int | None = opt(None, "keep users and items with at least N interactions, iterated to a "
                                       "fixed point (the paper: 20), after --sample-users (default: no filter)",
                                       check=_args.positive, metavar="N")
    historical_qrels: str | None = opt(None, "also write qrels from the split's held-out ratings here (the "
                                       "historical setting of Penha et al. 2025, Table 1; default: none)",
                                       metavar="QRELS")
    historical_mapping: str = opt("rating", "rating → label for --historical-qrels: rating (whole stars), "
                                  "half_stars (2 × rating), binary, or threshold:T (default: rating)",
                                  metavar="MAPPING")
    json: bool = opt(False, "print results as JSON instead of a table", action="store_true")

    # CLI flag → the split function's keyword; which split takes which keyword is the split's own
    # signature (make_split), not a second table here
    SPLIT_FLAGS: ClassVar[Mapping[str, str]] = {"quantile": "quantile", "cut": "timestamp", "ratio": "ratio"}

    def split_options(self) -> dict:
        """The options given for the split; one the split method does not take is refused by flag."""
        import inspect

        from ..data.splits import SPLITS

        fn = SPLITS[self.split]  # a known method: checked on construction
        accepted = {p for p, v in inspect.signature(fn).parameters.items() if v.kind is inspect.Parameter.KEYWORD_ONLY}
        opts = {}
        for flag, key in self.SPLIT_FLAGS.items():
            value = getattr(self, flag)
            if value is None:
                continue
            if key not in accepted:
                raise ConfigError(f"--{flag} does not apply to --split {self.split}")
            opts[key] = value
        return opts

    def system_names(self) -> list[str] | None:
        if self.systems is None:
            return None
        names = [s.strip() for s in self.systems.split(",") if s.strip()]
        if not names:
            raise ConfigError("--systems names no system; give comma-separated names or leave it out for --grid")
        return names
