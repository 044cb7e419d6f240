"""The Python API: one verb per command, each taking its command's config and returning a Result.

    import recjudge as rj
    collection = rj.load_collection("ml-100k")
    split = rj.split(collection, "global_time", quantile=0.8)
    trained = rj.train(collection=split, systems="Pop,EASE", out="runs/ml-100k")
    result = rj.compare(runs=trained.runs(), reference=human, candidate=[llm])
    print(result.format()); result.to_json(); result.to_frame()

Options are the command's flags with underscores (``tie_policy``, ``bootstrap_seed``), checked by
the command's config (``CompareConfig`` …); files may be given as paths or as objects already read
(a ``Run`` mapping, a ``Qrels``). A verb writes files only when given an output option (``json``,
``report``, ``out``). Heavy libraries load inside the verbs, never on import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError, InputError
from .config import (
    AblateConfig,
    AgreementConfig,
    CommandConfig,
    CompareConfig,
    CompareSettingsConfig,
    EvaluateConfig,
    FillConfig,
    TiesConfig,
    TrainConfig,
)
from . import results as _results
from .config import resolve_config as _config
from .results import (
    AblateReport,
    AgreementReport,
    CompareReport,
    EvaluateReport,
    FillReport,
    JudgeReport,
    Result,
    TiesReport,
    TrainReport,
)

__all__ = [
    "load_collection", "split", "train", "judge", "evaluate", "compare", "agreement", "fill", "ablate",
    "audit_ties", "compare_settings",
    "CommandConfig", "TiesConfig", "CompareSettingsConfig", "CompareConfig", "AgreementConfig", "EvaluateConfig", "FillConfig", "AblateConfig",
    "TrainConfig",
    "Result", "EvaluateReport", "CompareReport", "AgreementReport", "FillReport", "JudgeReport", "TrainReport",
    "TiesReport", "AblateReport",
]


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _paths(values) -> list:
    """A path, or a sequence of paths, as a list (the form the readers and output checks take)."""
    if values is None:
        return []
    return [values] if _is_path(values) else list(values)


def _label_sets(value) -> list:
    """Candidate label sets: one path or Qrels, or a sequence of them."""
    from ..data.trec import Qrels

    return [value] if _is_path(value) or isinstance(value, Qrels) else list(value)


def _runs(value):
    """Runs given as paths (files or folders) are read; a mapping of name → Run is used as it is."""
    if isinstance(value, Mapping):
        return dict(value)
    from ..data.trec import read_runs

    return read_runs(_paths(value))


def _qrels(value):
    from ..data.trec import Qrels, read_qrels

    if isinstance(value, Qrels):
        return value
    if _is_path(value):
        return read_qrels(value)
    raise ConfigError(f"qrels are a path or a Qrels, not {type(value).__name__}")


def _run_files(value) -> list | None:
    """The run files behind ``--runs``, folders expanded once (and their skipped entries said once);
    None for runs given in memory."""
    if isinstance(value, Mapping):
        return None
    from ..data.trec import iter_run_files

    return iter_run_files(_paths(value))


def _groups(value, files: list | None) -> dict[str, str] | None:
    """System → group from a file or mapping, else from the sidecars `recjudge train` wrote."""
    from ..data.groups import groups_from_sidecars, read_groups

    if isinstance(value, Mapping):
        return dict(value)
    if value is not None:
        return read_groups(value)
    if files is None:
        return None
    return groups_from_sidecars(files) or None


def _systems(runs, groups):
    """The runs, their groups and the tie records written beside run files. Runs given as paths come
    back as run name → file (a folder expanded once, names checked unique), to be read one at a time
    while scoring; a mapping of name → Run is used as it is."""
    from ..data.trec import run_paths
    from ..evaluation.metaeval import export_tie_info

    files = _run_files(runs)
    by_system = _groups(groups, files)
    if files is None:
        return dict(runs), by_system, {}
    return run_paths(files), by_system, export_tie_info(files)


def _group_table(scores, groups, source):
    from ..data.groups import group_means

    if not groups:
        return None
    return group_means(scores, groups, os.fspath(source) if _is_path(source) else "groups recorded by train")


def _path_inputs(*values) -> list:
    """The file inputs among the options, for the checks that no output overwrites an input."""
    out = []
    for v in values:
        if isinstance(v, Mapping):
            continue
        out += [p for p in ([v] if _is_path(v) else v if isinstance(v, (list, tuple)) else []) if _is_path(p)]
    return out


def _named(reference, candidates) -> tuple[Any, list, dict[str, str]]:
    """Read reference and candidates; name each by the one naming rule of outputs (paths when given)."""

    from .._io import read_concurrently
    from ..evaluation.metaeval import label_set_names

    items = [reference, *candidates]
    qrels = read_concurrently(_qrels, items)
    paths = [os.fspath(v) if _is_path(v) else q.name for v, q in zip(items, qrels)]
    names = label_set_names([q.name for q in qrels], paths)
    named = [q.renamed(n) for q, n in zip(qrels, names)]
    return named[0], named[1:], dict(zip(names, paths))


def _distinct(candidates: list, option: str = "--candidate") -> None:
    keys = [os.fspath(c) if _is_path(c) else id(c) for c in candidates]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"the same {option} path is given twice; give each label set once")


# ------------------------------------------------------------------------------------------ data

def load_collection(name_or_path: str | os.PathLike, config: str | os.PathLike | None = None, **options):
    """A registered collection (``ml-100k``) or a folder; ``config`` is a collection TOML of loader options."""
    from ..data.collections import load_collection as load
    from ..data.collections import read_collection_config

    if config is not None:
        options = {**read_collection_config(config), **options}
    return load(name_or_path, **options)


def split(collection, method: str = "global_time", **options):
    """Split a collection by a registered method (global_time, user_ratio, leave_one_out, timestamp, …)."""
    from ..data.splits import make_split

    return make_split(collection, method, **options)


# --------------------------------------------------------------------------------------- systems

def train(config: TrainConfig | None = None, /, progress=None, verbose: bool = False, **options) -> TrainReport:
    """Train a grid of systems (``recjudge train``); ``collection`` may be a name, a path, a Collection or a Split."""
    from .._io import check_output_dir
    from ..data.collections import COLLECTIONS, Collection
    from ..data.splits import Split
    from ..systems import resolve_systems, train_systems

    cfg = _config(TrainConfig, config, options)
    split_options = cfg.split_options()
    systems = cfg.system_names()
    resolve_systems(cfg.grid, systems)  # unknown names fail before any data is read
    given = cfg.collection
    in_memory = isinstance(given, (Collection, Split))
    registered = not in_memory and given in COLLECTIONS and not COLLECTIONS[given].needs_path
    inputs = [p for p in (None if registered or in_memory else given, cfg.collection_config) if p is not None]
    # the output folder is checked before loading and training: neither is cheap
    if cfg.out is not None:
        check_output_dir(cfg.out, "--out", inputs)
    if cfg.historical_qrels is not None:
        from .._io import check_outputs

        check_outputs({"--historical-qrels": cfg.historical_qrels}, inputs)
    data = given if in_memory else load_collection(given, cfg.collection_config)
    if cfg.sample_users is not None or cfg.min_interactions is not None:
        if isinstance(data, Split):
            raise ConfigError("--sample-users and --min-interactions apply to a collection, not a ready split")
        if cfg.sample_users is not None:
            data = data.sample_users(cfg.sample_users, cfg.sample_seed)
        if cfg.min_interactions is not None:
            data = data.min_interactions(cfg.min_interactions)
    name = data.collection.name if isinstance(data, Split) else data.name
    out = cfg.out if cfg.out is not None else os.path.join("runs", name)
    if cfg.out is None:
        check_output_dir(out, "--out (default runs/<collection>)", inputs)
    if cfg.historical_qrels is not None:
        from ..data.splits import historical_qrels, make_split
        from ..data.trec import write_qrels

        # one split for the systems and the qrels, made (and checked) before any training
        if not isinstance(data, Split):
            data, split_options = make_split(data, cfg.split, **split_options), None
        qrels = historical_qrels(data, cfg.historical_mapping)
    results = train_systems(
        data, grid=cfg.grid, out_dir=out, k=cfg.k, device=cfg.device, systems=systems, split=cfg.split,
        split_options=split_options, tie_policy=cfg.tie_policy, tie_seed=cfg.tie_seed, epochs=cfg.epochs,
        threads=cfg.threads, force=cfg.force, evaluate=cfg.evaluate, keep_checkpoints=cfg.keep_checkpoints,
        verbose=verbose, progress=progress)
    if cfg.historical_qrels is not None:
        write_qrels(qrels, cfg.historical_qrels)
    return TrainReport(tuple(results))


# ----------------------------------------------------------------------------------------- judge

def judge(pairs: Iterable | None = None, collection=None, config=None, *, runs=None, depth: int | None = None,
          per_user: int | None = None, reference=None, tie_policy: str = "hash",
          history=None, cache_path=None, name: str = "judge", progress=None, **options) -> JudgeReport:
    """Judge (user, item) pairs, or the depth-D pool of ``runs`` (plus ``per_user`` items of ``reference``).

    ``config`` is a ``JudgeConfig``; keyword ``options`` are its fields (``judge="overlap"``,
    ``profile_size=50``, ``seed`` …); the judge's seed also seeds the choice of pairs, as in the
    demo. ``history`` is the interactions shown as profiles (a split's ``train``).
    """
    from ..judge import JudgeConfig, judge_pairs, select_pairs

    if config is None:
        config = JudgeConfig.from_dict(options)
    elif options:
        config = config.replace(**options)
    seed = config.seed
    if pairs is None:
        chosen: set = set()
        if runs is not None:
            chosen |= set(select_pairs(_runs(runs), depth=depth, tie_policy=tie_policy, seed=seed))
        if reference is not None:
            chosen |= set(select_pairs(reference=_qrels(reference), per_user=per_user, seed=seed))
        if runs is None and reference is None:
            raise ConfigError("give the pairs to judge, or runs (with depth) or a reference (with per_user)")
        pairs = sorted(chosen)
    if _is_path(collection):
        collection = load_collection(collection)
    return JudgeReport(judge_pairs(pairs, collection, config, cache_path=cache_path, history=history, name=name,
                                   progress=progress))


# ------------------------------------------------------------------------------------ evaluation

def evaluate(config: EvaluateConfig | None = None, /, **options) -> EvaluateReport:
    """Score and rank systems under one label set (``recjudge evaluate``)."""
    from .._io import check_output_dir, check_outputs, write_json
    from ..evaluation.metaeval import evaluate as score
    from ..evaluation.measures import parse_measures

    cfg = _config(EvaluateConfig, config, options)
    inputs = _path_inputs(cfg.runs, cfg.qrels, cfg.groups)
    check_outputs({"--json": cfg.json}, inputs=inputs)
    check_output_dir(cfg.report, "--report", inputs)
    parse_measures(cfg.measures)  # bad measure strings fail before any file is read
    runs, groups, ties = _systems(cfg.runs, cfg.groups)
    result = score(runs, _qrels(cfg.qrels), cfg.measures, tie_policy=cfg.tie_policy, seed=cfg.seed,
                   export_ties=ties)
    by_group = _group_table(result.table.scores_frame(), groups, cfg.groups)
    report_path = None
    if cfg.json:
        write_json(cfg.json, _results._with_groups(result.to_json(), by_group))
    if cfg.report:
        from ..report.evaluation import write_evaluation_report

        report_path = write_evaluation_report(result, cfg.report)
    return EvaluateReport(result, os.fspath(cfg.qrels) if _is_path(cfg.qrels) else result.settings["qrels"],
                          report_path, by_group)


def compare(config: CompareConfig | None = None, /, **options) -> CompareReport:
    """Compare system rankings under a reference and candidate label sets (``recjudge compare``)."""
    from .._io import check_output_dir, check_outputs, write_json
    from ..evaluation.metaeval import compare as rank_agreement
    from ..evaluation.measures import parse_measures

    cfg = _config(CompareConfig, config, options)
    candidates = list(cfg.candidate.values()) if isinstance(cfg.candidate, Mapping) else _label_sets(cfg.candidate)
    _distinct(candidates)
    inputs = _path_inputs(cfg.runs, cfg.reference, candidates, cfg.groups)
    check_outputs({"--json": cfg.json}, inputs=inputs)
    check_output_dir(cfg.report, "--report", inputs)
    parse_measures(cfg.measures)  # bad measure strings fail before any file is read
    runs, groups, ties = _systems(cfg.runs, cfg.groups)
    reference, named, sources = _named(cfg.reference, candidates)
    result = rank_agreement(runs, reference, {q.name: q for q in named}, measures=cfg.measures,
                            queries=cfg.queries, tie_policy=cfg.tie_policy, seed=cfg.seed, bootstrap=cfg.bootstrap,
                            export_ties=ties, bootstrap_seed=cfg.bootstrap_seed, ci_method=cfg.ci_method,
                            sources=sources)
    by_group = None
    if groups:
        import pandas as pd

        tables = {"reference": result.reference, **result.candidates}
        by_group = pd.concat({name: _group_table(t.scores_frame(), groups, cfg.groups)
                              for name, t in tables.items()}, names=["labels", "group"])
    report_path = None
    if cfg.json:
        write_json(cfg.json, _results._with_groups(result.to_json(), by_group))
    if cfg.report:
        from ..report.evaluation import write_compare_report

        report_path = write_compare_report(result, cfg.report)
    return CompareReport(result, report_path, by_group)


def agreement(config: AgreementConfig | None = None, /, **options) -> AgreementReport:
    """Item-level agreement of each candidate with the reference (``recjudge agreement``)."""
    from .._io import check_outputs, write_json
    from ..evaluation.agreement import agreement as item_agreement
    from ..evaluation.agreement import parse_clip

    cfg = _config(AgreementConfig, config, options)
    candidates = _label_sets(cfg.candidate)
    _distinct(candidates)
    check_outputs({"--json": cfg.json}, inputs=_path_inputs(cfg.reference, candidates))
    clip = parse_clip(cfg.clip)
    reference, named, sources = _named(cfg.reference, candidates)
    results = {c.name: item_agreement(reference, c, cfg.missing, clip, cfg.bootstrap, cfg.seed) for c in named}
    report = AgreementReport(reference.name, results, sources,
                             {"reference_path": sources[reference.name], "missing": cfg.missing, "clip": cfg.clip})
    if cfg.json:
        write_json(cfg.json, report.to_json())
    return report


def fill(config: FillConfig | None = None, /, **options) -> FillReport:
    """Calibrate LLM labels, fill the unjudged top-k of human qrels, compare scenarios (``recjudge fill``)."""
    from .._io import check_outputs, write_json
    from ..evaluation.calibration import calibrate, fill_gaps, scenarios, sources_path, validate_fill, write_filled

    cfg = _config(FillConfig, config, options)
    # Nothing is written until everything has been read, checked and computed: a refused option or
    # input leaves no output behind, and no output may overwrite an input.
    outputs = {"--json": cfg.json}
    if cfg.out is not None:
        outputs = {"--out": cfg.out, "--out's .sources.tsv": sources_path(cfg.out), **outputs}
    check_outputs(outputs, inputs=_path_inputs(cfg.human, cfg.llm, cfg.runs))
    human, llm = _qrels(cfg.human), _qrels(cfg.llm)
    runs = _runs(cfg.runs)
    cal = calibrate(human, llm, cfg.min_overlap)
    result = fill_gaps(human, llm, runs, cal, cfg.k, cfg.tie_policy, cfg.seed, allow_weak=cfg.allow_weak_calibration)
    rep = scenarios(runs, {"Human-only": human, "LLM fills gaps": result.qrels, "Full LLM": llm},
                    cfg.k, cfg.tie_policy, cfg.seed, measures=cfg.measures)
    val = None
    if cfg.validate is not None:
        val = validate_fill(human, llm, runs, cfg.validate, cfg.k, cfg.min_overlap, cfg.tie_policy, cfg.seed,
                            measures=cfg.measures, allow_weak=cfg.allow_weak_calibration)
    paths = {}
    if cfg.out is not None:
        paths["qrels"], paths["sources"] = write_filled(result, cfg.out)
    report = FillReport(cal, result, rep, val, {"k": cfg.k, "tie_policy": cfg.tie_policy, "seed": cfg.seed,
                                                "allow_weak_calibration": cfg.allow_weak_calibration},
                        paths, cfg.validate)
    if cfg.json:
        write_json(cfg.json, report.to_json())
    return report


def audit_ties(config: TiesConfig | Any = None, qrels=None, /, **options) -> TiesReport:
    """Tie prevalence, every tie treatment and the permutation test (``recjudge ties``).

    Takes a ``TiesConfig`` or its options (``runs``, ``qrels``, ``measures``, ``cutoffs``, ``seeds``,
    ``permutations``, ``mc_samples``, ``seed``, ``sampled_candidates``, ``catalogue``, ``collection``,
    ``json``); ``audit_ties(runs, qrels, ...)`` is short for ``runs=``, ``qrels=``.
    """
    from .._io import check_outputs, read_text, write_json
    from ..evaluation.ties import audit_ties as audit

    if config is not None and not isinstance(config, TiesConfig):
        options = {"runs": config, **options}
        config = None
    if qrels is not None:
        options = {"qrels": qrels, **options}
    cfg = _config(TiesConfig, config, options)
    run_files = _run_files(cfg.runs) or []  # checks every path before the long work starts
    check_outputs({"--json": cfg.json}, inputs=[*_path_inputs(cfg.runs, cfg.qrels), cfg.catalogue])
    labels = _qrels(cfg.qrels) if cfg.qrels is not None else None
    record = None
    if cfg.sampled_candidates is None:
        runs = _runs(cfg.runs) if not run_files else _lazy_runs(run_files)
    else:
        from ..systems.sampled import sampled_candidate_protocol

        catalogue, where = None, None
        if cfg.catalogue:
            src, text = read_text(cfg.catalogue, "catalogue")
            catalogue = list(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))
            if not catalogue:
                raise InputError(src, "the catalogue is empty", "write one item id per line")
            where = f"{len(catalogue)} items of {src}"
        elif cfg.collection is not None:
            coll = load_collection(cfg.collection) if _is_path(cfg.collection) else cfg.collection
            catalogue = [str(i) for i in coll.items.index]
            where = f"{len(catalogue)} items of collection {coll.name}"
        given = list(_runs(cfg.runs).values()) if cfg.runs else []
        sampled = sampled_candidate_protocol(labels, given, cfg.sampled_candidates, cfg.seed, catalogue, where)
        runs, labels, record = sampled.runs, sampled.qrels, sampled.record
    result = audit(runs, labels, measures=cfg.measures, cutoffs=cfg.cutoffs, seeds=cfg.seeds,
                   permutations=cfg.permutations, seed=cfg.seed, mc_samples=cfg.mc_samples)
    report = TiesReport(result, record)
    if cfg.json:
        write_json(cfg.json, report.to_json())
    return report


def _lazy_runs(files: list):
    """Runs read one at a time, so a folder of large runs is audited in bounded memory."""
    import logging

    from ..data.trec import read_run, run_paths

    by_name = run_paths(files)  # names checked unique before the first run is read
    log = logging.getLogger("recjudge.evaluation.ties")

    def lazily():
        for i, (name, f) in enumerate(by_name.items(), start=1):
            log.info("auditing %s (%d/%d)", f, i, len(by_name))
            yield read_run(f, name=name)

    return lazily()


def compare_settings(config: CompareSettingsConfig | None = None, /, **options):
    """The same systems ranked in two settings, e.g. historical vs Cranfield (``recjudge compare-settings``)."""
    from .._io import check_outputs, write_json
    from ..evaluation.measures import parse_measures
    from .settings import compare_settings as correlate

    cfg = _config(CompareSettingsConfig, config, options)
    check_outputs({"--json": cfg.json}, _path_inputs(cfg.runs_a, cfg.qrels_a, cfg.runs_b, cfg.qrels_b))
    parse_measures(cfg.measures)
    result = correlate(cfg.runs_a, cfg.qrels_a, cfg.runs_b, cfg.qrels_b, cfg.measures, cfg.tie_policy, cfg.seed)
    if cfg.json:
        write_json(cfg.json, result.to_json())
    return result


# ----------------------------------------------------------------------------------- experiments

def ablate(config: AblateConfig | None = None, /, progress=None, **options) -> AblateReport:
    """Run an experiment file's judge variants against the reference (``recjudge ablate``)."""
    from ..experiments.ablate import RESULT_FILES, load_experiment, run_experiment

    cfg = _config(AblateConfig, config, options)
    exp = cfg.experiment if not _is_path(cfg.experiment) else load_experiment(cfg.experiment)
    rows = run_experiment(exp, dry_run=cfg.dry_run, progress=progress)
    paths = {} if cfg.dry_run else {name: exp.out / name for name in RESULT_FILES}
    return AblateReport(exp, tuple(rows), cfg.dry_run, paths)
