"""The Python API: one verb per command, each a function of its inputs and its command's settings.

    import recjudge as rj
    result = rj.compare("runs/example", "qrels/example-human.qrels", "qrels/example-llm.qrels")
    print(result.format()); result.to_json(); result.to_frame()
    rj.evaluate(runs, qrels, measures="nDCG@10,P@10")
    rj.agreement(human, [llm_a, llm_b], missing="drop")
    rj.compare(runs, human, llm, protocol="penha2025")

The main inputs come first, by position (runs, labels); every other setting is a keyword with the
default of the command's settings model (``recjudge.CompareSettings`` …), which also builds the
command line: the verbs are plain functions written from the models (:mod:`recjudge.api.verbs`), so
``help(recjudge.compare)``, an IDE and a type checker see every parameter. Each verb's work is a
function of its ready settings here (``compare_with(settings)`` …, the audits' in :mod:`.audit`),
which the command line calls. A verb is named as its command: ``recjudge compare-settings`` is
``compare_settings``, ``recjudge audit injection-scan`` is ``audit_injection_scan``. Inputs may be
paths (files, folders), objects already read (``Run``, ``Qrels``), pandas DataFrames in TREC
columns, lists of these or ``{name: run}`` mappings (:mod:`recjudge.api.inputs`).
``protocol="penha2025"`` starts from a protocol's settings; the result names it and every setting
that differs. A verb writes files only when given an output option (``json``, ``report``, ``out``).
Heavy libraries load inside the verbs, never on import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import ConfigError, InputError
from ..estimation.settings import EstimateSettings
from . import results as _results
from .annotate import AnnotateSettings, annotate_with
from .audit import (
    AuditReport,
    audit_consistency_with,
    audit_injection_scan_with,
    audit_injection_with,
    audit_popularity_with,
    audit_position_with,
)
from .inputs import check_distinct as _distinct
from .inputs import group_table as _group_table
from .inputs import is_path as _is_path
from .inputs import label_sets as _label_sets
from .inputs import lazy_runs as _lazy_runs
from .inputs import named_label_sets as _named
from .inputs import path_inputs as _path_inputs
from .inputs import qrels_input as _qrels
from .inputs import read_runs_input as _runs
from .inputs import run_files as _run_files
from .inputs import runs_label as _label
from .inputs import some_ids as _some
from .inputs import systems_input as _systems
from .results import AblateReport, JudgeReport, Result, TrainReport
from .settings import (
    AblateSettings,
    JudgeCommandSettings,
    AgreementSettings,
    AuditConsistencySettings,
    AuditInjectionScanSettings,
    AuditInjectionSettings,
    AuditPopularitySettings,
    AuditPositionSettings,
    CompareSettings,
    EvaluateSettings,
    FillSettings,
    SettingsComparisonSettings,
    TiesSettings,
    TrainSettings,
)
from .verbs import (
    ablate,
    annotate,
    agreement,
    audit_consistency,
    audit_injection,
    audit_injection_scan,
    audit_popularity,
    audit_position,
    compare,
    compare_settings,
    demo,
    estimate,
    evaluate,
    fill,
    judge,
    ties,
    train,
)

if TYPE_CHECKING:
    from ..estimation.report import EstimateReport
    from ..evaluation.agreement_report import AgreementReport
    from ..evaluation.calibration import FillReport
    from ..evaluation.metaeval import CompareResult, EvaluationResult
    from ..evaluation.settings_comparison import SettingsComparison
    from ..evaluation.ties import TieAudit
    from ..experiments.demo import DemoResult, DemoSettings

__all__ = [
    "load_collection", "split", "train", "judge", "evaluate", "compare", "agreement", "fill", "ablate",
    "ties", "compare_settings", "audit_popularity", "audit_consistency", "audit_injection_scan", "audit_position",
    "audit_injection", "demo", "estimate", "EstimateSettings", "annotate", "annotate_with", "AnnotateSettings",
    "train_with", "judge_with", "evaluate_with", "compare_with", "agreement_with", "fill_with", "ablate_with",
    "ties_with", "compare_settings_with", "audit_popularity_with", "audit_consistency_with",
    "audit_injection_scan_with", "audit_position_with", "audit_injection_with", "demo_with", "estimate_with",
    "CompareSettings", "EvaluateSettings", "AgreementSettings", "FillSettings", "TiesSettings", "TrainSettings",
    "AblateSettings", "SettingsComparisonSettings", "JudgeCommandSettings", "AuditPopularitySettings",
    "AuditConsistencySettings", "AuditInjectionScanSettings", "AuditPositionSettings", "AuditInjectionSettings",
    "Result", "JudgeReport", "TrainReport", "AblateReport", "AuditReport",
]

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

def train_with(s: TrainSettings, progress=None, verbose: bool = False) -> TrainReport:
    """Train a grid of systems and write tie-free top-k runs (``recjudge train``); ``collection`` may be a
    name, a path, a Collection or a Split."""
    from .._io import check_output_dir
    from ..data.collections import COLLECTIONS, Collection
    from ..data.splits import Split
    from ..systems import resolve_systems, train_systems

    split_options = s.split_options()
    systems = s.system_names()
    resolve_systems(s.grid, systems)  # unknown names fail before any data is read
    given = s.collection
    in_memory = isinstance(given, (Collection, Split))
    registered = not in_memory and given in COLLECTIONS and not COLLECTIONS[given].needs_path
    inputs = [p for p in (None if registered or in_memory else given, s.collection_config) if p is not None]
    # the output folder is checked before loading and training: neither is cheap
    if s.out is not None:
        check_output_dir(s.out, "--out", inputs)
    if s.historical_qrels is not None:
        from .._io import check_outputs

        check_outputs({"--historical-qrels": s.historical_qrels}, inputs)
    data = given if in_memory else load_collection(given, s.collection_config)
    if s.sample_users is not None or s.min_interactions is not None or s.min_rating is not None:
        if isinstance(data, Split):
            raise ConfigError("--min-rating, --sample-users and --min-interactions apply to a collection, not a "
                              "ready split")
        if s.min_rating is not None:  # the positives first, as the release's implicit-ratings.csv is made
            data = data.min_rating(s.min_rating)
        if s.sample_users is not None:
            data = data.sample_users(s.sample_users, s.sample_seed)
        if s.min_interactions is not None:
            data = data.min_interactions(s.min_interactions)
    name = data.collection.name if isinstance(data, Split) else data.name
    out = s.out if s.out is not None else os.path.join("runs", name)
    if s.out is None:
        check_output_dir(out, "--out (default runs/<collection>)", inputs)
    if s.historical_qrels is not None:
        from ..data.splits import historical_qrels, make_split
        from ..data.trec import write_qrels

        # one split for the systems and the qrels, made (and checked) before any training
        if not isinstance(data, Split):
            data, split_options = make_split(data, s.split, **split_options), None
        qrels = historical_qrels(data, s.historical_mapping)
    results = train_systems(
        data, grid=s.grid, out_dir=out, k=s.k, device=s.device, systems=systems, split=s.split,
        split_options=split_options, tie_policy=s.tie_policy, tie_seed=s.tie_seed, epochs=s.epochs,
        threads=s.threads, force=s.force, evaluate=s.evaluate, keep_checkpoints=s.keep_checkpoints,
        verbose=verbose, progress=progress, protocol=s.protocol)
    if s.historical_qrels is not None:
        write_qrels(qrels, s.historical_qrels)
    return TrainReport(tuple(results), settings=s)


# ----------------------------------------------------------------------------------------- judge

def _pairs_given(value) -> bool:
    """Whether ``value`` is (user, item) pairs rather than runs."""
    if value is None or _is_path(value) or isinstance(value, Mapping):
        return False
    from ..judging import Pair

    items = value if isinstance(value, (list, tuple)) else None
    return bool(items) and all(isinstance(p, Pair) or (isinstance(p, tuple) and len(p) == 2
                                                       and all(isinstance(x, str) for x in p)) for p in items)


def judge_with(s: JudgeCommandSettings, progress=None) -> JudgeReport:
    """Judge the pairs of runs (their top-``depth``, or ``per_user`` items each), the items of a
    ``reference`` qrels, or (user, item) pairs given as ``runs`` (``recjudge judge``). The judge's own
    settings (``model``, ``fields``, ``profile_size`` …) are :class:`~recjudge.judging.JudgeSettings`'.
    Writes the qrels, a judgments log and a summary when ``out`` is given."""
    from pathlib import Path

    from ..judging import judge_pairs, read_topics
    from ..judging.client import quiet_http_loggers

    quiet_http_loggers()
    config = s.judge_settings()
    out = Path(s.out) if s.out is not None else None
    cache = s.cache if config.judge == "openai" else None
    if out is not None and not config.dry_run:  # a dry run writes nothing
        _check_judge_outputs(s, out, cache, config)
    collection = _judge_collection(s)
    history = s.history
    if history is None and s.topics is None and s.split != "none":
        from ..data.splits import make_split

        history = make_split(collection, s.split).history()
    say = progress or (lambda m: None)
    pairs, source = _judge_pairs(s, collection, say)
    topics = read_topics(s.topics) if s.topics else None
    if topics is not None and not {p[0] for p in pairs} & set(topics):
        raise ConfigError(f"no query of the topics file {s.topics} is a query of {source} (topics {_some(topics)}; "
                          f"run queries {_some({p[0] for p in pairs})}); give the topics of these runs")
    name = s.name or (out.name.removesuffix(".qrels") if out is not None else "judge")
    say(f"judging {len(pairs):,} pairs of {len({p[0] for p in pairs}):,} {'queries' if topics else 'users'} "
        f"with the {config.judge} judge")
    result = judge_pairs(pairs, collection, config, cache_path=cache, history=history, topics=topics,
                         topics_source=os.fspath(s.topics) if s.topics else "<topics>", name=name, progress=progress)
    paths = {}
    if out is not None and not config.dry_run:
        paths = result.write(out, s.judgments, protocol=s.protocol)
    return JudgeReport(result, paths, settings=s)


def _check_judge_outputs(s: JudgeCommandSettings, out, cache, config) -> None:
    """Every output checked before any work: no LLM call is paid for and then lost to an unwritable
    path, and no input (a run, the template, the prices) is overwritten."""
    from pathlib import Path

    from .._io import check_outputs
    from ..judging import output_paths

    judgments, summary = output_paths(out)
    inputs = [*([] if _pairs_given(s.runs) else _path_inputs(s.runs)), s.collection_config, s.topics, config.prices,
              *_path_inputs(s.only_unjudged), *(() if s.reference == "collection" else _path_inputs(s.reference))]
    inputs += [p for p in (s.collection, config.prompt) if _is_path(p) and Path(p).exists()]
    check_outputs({"--out": out, "--judgments": s.judgments or judgments, "summary": summary, "--cache": cache},
                  inputs=[i for i in inputs if i])


def _judge_collection(s: JudgeCommandSettings):
    from ..data.collections import Collection, read_collection_config

    if isinstance(s.collection, Collection):
        return s.collection
    options = read_collection_config(s.collection_config) if s.collection_config else {}
    return load_collection(s.collection, **options)


def _judge_pairs(s: JudgeCommandSettings, collection, say) -> tuple[tuple, str]:
    """The pairs to judge and how to name where they came from (in errors)."""
    from ..judging.select import judge_selection

    if _pairs_given(s.runs):
        return tuple(sorted({(str(q), str(d)) for q, d in s.runs})), "the pairs given"
    reference = None
    if s.reference == "collection":
        if collection.qrels is None:
            raise ConfigError(f"collection {collection.name!r} has no human qrels for reference 'collection'")
        reference = collection.qrels
    elif s.reference is not None:
        reference = _qrels(s.reference, "reference")
    runs = _runs(s.runs) if s.runs is not None else {}
    only = _qrels(s.only_unjudged, "only_unjudged") if s.only_unjudged is not None else None
    pairs = judge_selection(runs, reference, depth=s.depth, per_user=s.per_user, only_unjudged=only, seed=s.seed,
                            tie_policy=s.tie_policy, say=say)
    source = (f"the runs {_label(s.runs)}" if reference is None else
              f"the qrels {s.reference if _is_path(s.reference) else reference.name}")
    if reference is not None and s.depth is not None:
        source = f"the runs {_label(s.runs)} and {source}"
    if not pairs:
        judged = os.fspath(s.only_unjudged) if _is_path(s.only_unjudged) else "the qrels given"
        raise ConfigError(f"{source} select no (query, item) pair to judge"
                          + (f" once the pairs judged in {judged} are left out" if only is not None else "")
                          + f"; check {s.name_of('depth')}/{s.name_of('per_user')} and the inputs")
    return pairs, source


# ------------------------------------------------------------------------------------ evaluation

def evaluate_with(s: EvaluateSettings) -> EvaluationResult:
    """Score and rank systems under one label set (``recjudge evaluate``)."""
    from .._io import check_output_dir, check_outputs, write_json
    from ..evaluation.metaeval import evaluate as score

    inputs = _path_inputs(s.runs, s.qrels, s.groups)
    per_query = None if s.per_query is None or os.fspath(s.per_query) == "-" else s.per_query
    check_outputs({"--json": s.json, "--per-query": per_query}, inputs=inputs)
    check_output_dir(s.report, "--report", inputs)
    runs, groups, ties = _systems(s.runs, s.groups)
    result = score(runs, _qrels(s.qrels), s.measures, tie_policy=s.tie_policy, seed=s.seed, export_ties=ties,
                   tie_note=s.tie_note)
    by_group = _group_table(result.table.scores_frame(), groups, s.groups)
    report = replace(result, source=os.fspath(s.qrels) if _is_path(s.qrels) else None, groups=by_group,
                     per_query=bool(s.per_query), protocol=s.protocol)
    if per_query is not None:
        from .._io import atomic_write

        with atomic_write(per_query) as fh:
            report.to_frame(per_query=True).to_csv(fh, sep="\t", index=False, lineterminator="\n")
    if s.json:
        write_json(s.json, report.to_json())
    if s.report:
        from ..report.evaluation import write_evaluation_report

        report = replace(report, report_path=write_evaluation_report(result, s.report, protocol=s.protocol))
    return report


def compare_with(s: CompareSettings) -> CompareResult:
    """Compare system rankings under a reference and candidate label sets (``recjudge compare``)."""
    from .._io import check_output_dir, check_outputs, write_json
    from ..evaluation.metaeval import compare as rank_agreement

    candidates = _label_sets(s.candidates)
    _distinct(candidates)
    inputs = _path_inputs(s.runs, s.reference, candidates, s.groups)
    check_outputs({"--json": s.json}, inputs=inputs)
    check_output_dir(s.report, "--report", inputs)
    runs, groups, ties = _systems(s.runs, s.groups)
    reference, named, sources = _named(s.reference, candidates)
    result = rank_agreement(runs, reference, {q.name: q for q in named}, measures=s.measures,
                            queries=s.queries, tie_policy=s.tie_policy, seed=s.seed, bootstrap=s.bootstrap,
                            export_ties=ties, bootstrap_seed=s.bootstrap_seed, ci_method=s.ci_method,
                            sources=sources, spelled=s.name_of, tie_note=s.tie_note, baselines=s.baselines)
    by_group = None
    if groups:
        import pandas as pd

        tables = {"reference": result.reference, **result.candidates}
        by_group = pd.concat({name: _group_table(t.scores_frame(), groups, s.groups)
                              for name, t in tables.items()}, names=["labels", "group"])
    report = replace(result, groups=by_group, protocol=s.protocol)
    if s.json:
        write_json(s.json, report.to_json())
    if s.report:
        from ..report.evaluation import write_compare_report

        report = replace(report, report_path=write_compare_report(result, s.report, protocol=s.protocol))
    return report


def agreement_with(s: AgreementSettings) -> AgreementReport:
    """Item-level agreement of each candidate with the reference (``recjudge agreement``)."""
    from .._io import check_outputs, write_json
    from ..evaluation.agreement import agreement as item_agreement
    from ..evaluation.agreement import parse_clip

    candidates = _label_sets(s.candidates)
    _distinct(candidates)
    check_outputs({"--json": s.json}, inputs=_path_inputs(s.reference, candidates))
    clip = parse_clip(s.clip)
    reference, named, sources = _named(s.reference, candidates)
    results = {c.name: item_agreement(reference, c, s.missing, clip, s.bootstrap, s.seed) for c in named}
    trivial = {}
    if s.baselines:
        from ..evaluation.baselines import agreement_baselines

        trivial = {c.name: agreement_baselines(reference, c, results[c.name].missing, clip, s.baselines, s.seed)
                   for c in named}
    from ..evaluation.agreement_report import AgreementReport

    report = AgreementReport(reference.name, results, sources,
                             {"reference_path": sources[reference.name], "missing": s.missing, "clip": s.clip},
                             baselines=trivial, protocol=s.protocol)
    if s.json:
        write_json(s.json, report.to_json())
    return report


def fill_with(s: FillSettings) -> FillReport:
    """Calibrate LLM labels, fill the unjudged top-k of human qrels, compare scenarios (``recjudge fill``)."""
    from .._io import check_outputs, write_json
    from ..evaluation.calibration import calibrate, fill_gaps, scenarios, sources_path, validate_fill, write_filled

    # Nothing is written until everything has been read, checked and computed: a refused option or
    # input leaves no output behind, and no output may overwrite an input.
    outputs = {"--json": s.json}
    if s.out is not None:
        outputs = {"--out": s.out, "--out's .sources.tsv": sources_path(s.out), **outputs}
    check_outputs(outputs, inputs=_path_inputs(s.human, s.llm, s.runs))
    human, llm = _qrels(s.human, "human"), _qrels(s.llm, "llm")
    runs = _runs(s.runs)
    cal = calibrate(human, llm, s.min_overlap)
    result = fill_gaps(human, llm, runs, cal, s.k, s.tie_policy, s.seed, allow_weak=s.allow_weak_calibration)
    rep = scenarios(runs, {"Human-only": human, "LLM fills gaps": result.qrels, "Full LLM": llm},
                    s.k, s.tie_policy, s.seed, measures=s.measures, tie_note=s.tie_note)
    val = None
    if s.validate is not None:
        val = validate_fill(human, llm, runs, s.validate, s.k, s.min_overlap, s.tie_policy, s.seed,
                            measures=s.measures, allow_weak=s.allow_weak_calibration)
    paths = {}
    if s.out is not None:
        paths["qrels"], paths["sources"] = write_filled(result, s.out)
    from ..evaluation.calibration import FillReport, fewer_human_users

    report = FillReport(cal, result, rep, val, {"k": s.k, "tie_policy": s.tie_policy, "seed": s.seed,
                                                "allow_weak_calibration": s.allow_weak_calibration},
                        paths, s.validate, protocol=s.protocol, users=fewer_human_users(human, llm, s.human, s.llm))
    if s.json:
        write_json(s.json, report.to_json())
    return report


def ties_with(s: TiesSettings) -> TieAudit:
    """Tie prevalence, every tie treatment and the permutation test (``recjudge ties``)."""
    from .._io import check_outputs, read_text, write_json
    from ..evaluation.ties import audit_ties as audit

    run_files = (_run_files(s.runs) or []) if s.runs else []  # checks every path before the long work starts
    check_outputs({"--json": s.json}, inputs=[*_path_inputs(s.runs, s.qrels), s.catalogue])
    labels = _qrels(s.qrels) if s.qrels is not None else None
    record = None
    if s.sampled_candidates is None:
        runs = _runs(s.runs) if not run_files else _lazy_runs(run_files)
    else:
        from ..systems.sampled import sampled_candidate_protocol

        catalogue, where = None, None
        if s.catalogue:
            src, text = read_text(s.catalogue, "catalogue")
            catalogue = list(dict.fromkeys(line.strip() for line in text.splitlines() if line.strip()))
            if not catalogue:
                raise InputError(src, "the catalogue is empty", "write one item id per line")
            where = f"{len(catalogue)} items of {src}"
        elif s.collection is not None:
            coll = load_collection(s.collection) if _is_path(s.collection) else s.collection
            catalogue = [str(i) for i in coll.items.index]
            where = f"{len(catalogue)} items of collection {coll.name}"
        given = list(_runs(s.runs).values()) if s.runs else []
        sampled = sampled_candidate_protocol(labels, given, s.sampled_candidates, s.seed, catalogue, where)
        runs, labels, record = sampled.runs, sampled.qrels, sampled.record
    result = audit(runs, labels, measures=s.measures, cutoffs=s.cutoffs, seeds=s.seeds,
                   permutations=s.permutations, seed=s.seed, mc_samples=s.mc_samples)
    report = replace(result, sampled_candidates=record, protocol=s.protocol)
    if s.json:
        write_json(s.json, report.to_json())
    return report


def compare_settings_with(s: SettingsComparisonSettings) -> SettingsComparison:
    """The same systems ranked in two settings, e.g. historical vs Cranfield (``recjudge compare-settings``)."""
    from .._io import check_outputs, write_json
    from ..evaluation.settings_comparison import compare_settings as correlate

    check_outputs({"--json": s.json}, _path_inputs(s.runs_a, s.qrels_a, s.runs_b, s.qrels_b))
    result = correlate(_runs(s.runs_a, "runs_a"), _qrels(s.qrels_a, "qrels_a"), _runs(s.runs_b, "runs_b"),
                       _qrels(s.qrels_b, "qrels_b"), s.measures, s.tie_policy, s.seed,
                       labels=(_label(s.runs_a), _label(s.runs_b)))
    result = replace(result, protocol=s.protocol)
    if s.json:
        write_json(s.json, result.to_json())
    return result


def estimate_with(s: EstimateSettings) -> EstimateReport:
    """Prediction-powered estimates of each system's mean under human labels from a few human-judged
    users and LLM labels on all N, with intervals, rank sets and a plan (``recjudge estimate``)."""
    from ..estimation.command import run_estimate

    return run_estimate(s)


# ----------------------------------------------------------------------------------- experiments

def ablate_with(s: AblateSettings, progress=None) -> AblateReport:
    """Run an experiment file's judge variants against the reference (``recjudge ablate``)."""
    from ..experiments.ablate import RESULT_FILES, load_experiment, run_experiment, with_settings

    exp = s.experiment if not _is_path(s.experiment) else load_experiment(s.experiment)
    exp = with_settings(exp, s)
    rows = run_experiment(exp, dry_run=s.dry_run, progress=progress, protocol=s.protocol)
    paths = {} if s.dry_run else {name: exp.out / name for name in RESULT_FILES}
    return AblateReport(exp, tuple(rows), s.dry_run, paths, settings=s)


def demo_with(s: DemoSettings, progress=None) -> DemoResult:
    """The whole pipeline on MovieLens-100K, offline unless an LLM is asked for (``recjudge demo``)."""
    from ..experiments.demo import run_demo

    return run_demo(s, progress=progress)

