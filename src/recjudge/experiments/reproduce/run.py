"""The run of ``recjudge reproduce penha2025``: systems trained or read, the plan priced and confirmed,
every job judged through one shared cache, the cells computed and the report written."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .cells import CELL_COLUMNS, ReproduceResult
from .jobs import plan_jobs
from .judges import base_judge, training_positives
from .plan import format_plan, plan
from .settings import JOBS_OF, STUDY, ReproduceSettings, protocol_settings

def _train(settings: ReproduceSettings, collection, out: Path, historical: bool, say) -> tuple[Path, Path | None]:
    """Train the protocol's grid on its positives (Cranfield: all of them; historical: a split, with its qrels)."""
    from ... import api

    train = protocol_settings("train")
    opts = {"grid": settings.grid or train.get("grid", "penha2025-defaults"), "systems": settings.systems,
            "k": int(train.get("k", 100)), "device": settings.device, "epochs": settings.epochs,
            "sample_users": (settings.sample_users if settings.sample_users is not None
                             else train.get("sample_users")),
            "min_interactions": (settings.min_interactions if settings.min_interactions is not None
                                 else train.get("min_interactions")),
            "min_rating": training_positives(settings) or None}
    qrels = None
    if historical:
        # the held-out interactions of the split: every one relevant (label 1), as a train-test split scores them
        qrels = out / "historical.qrels"
        opts.update(split=settings.historical_split, historical_qrels=os.fspath(qrels),
                    historical_mapping="binary")
    else:
        opts.update(split=train.get("split", "full"))
    folder = out / "runs" / ("historical" if historical else "cranfield")
    say(f"train {'historical' if historical else 'Cranfield'} systems into {folder}")
    api.train(collection=collection, out=os.fspath(folder), progress=lambda m: say(f"  {m}"), **opts)
    return folder, qrels


def _read_runs(path: Path) -> tuple[dict, list]:
    from ...data.trec import iter_run_files, read_runs

    files = iter_run_files([os.fspath(path)])
    return read_runs(files), files


def run_reproduce(settings: ReproduceSettings, progress: Callable[[str], None] | None = None) -> ReproduceResult:
    """Plan (``dry_run``) or run the reproduction; writes report.md, report.html, figures and one JSON."""
    from ..published import load_published

    say = progress or print
    s = settings.resolved()
    published = load_published(STUDY)
    base, not_applied, collection = _checked_inputs(s)
    human, history = collection.qrels, collection.interactions
    cache = s.out / "judgments.sqlite"
    runs, run_files, unpriced = _cranfield_runs(s, collection, say)
    historical = _historical_systems(s, collection, say)
    jobs = _jobs(s, human, base, collection, runs)
    say(f"{len(jobs)} judge jobs for {', '.join(s.only)}")
    rows = plan(jobs, collection, history, cache if cache.exists() else None, s.concurrency, s.call_seconds,
                {g: s.group_title(g) for g in s.job_groups()})
    plan_text = format_plan(rows, base.model, s.concurrency, s.call_seconds, published) + \
        (f"\n{unpriced}" if unpriced and "pool" in s.job_groups() else "")
    if s.dry_run:
        import pandas as pd

        return ReproduceResult(pd.DataFrame(columns=CELL_COLUMNS), {}, {}, (), tuple(rows), False, None, {},
                               s.as_dict(), plan_text)
    say(plan_text)
    _confirm(s, base, rows, say)
    s.out.mkdir(parents=True, exist_ok=True)
    labels, stopped, failures = _judge_all(s, jobs, collection, history, cache, say)
    from .tables import compute  # the cells, one module per table family

    result = compute(s, collection, human, runs, run_files, labels, published, base, not_applied, rows, stopped, say,
                     historical)
    if failures:
        result.extras["judge_failures"] = dict(failures)
    from ...report.reproduce import write_reproduce_report

    paths = write_reproduce_report(result, s.out)
    say(f"report: {paths['md']}")
    return dataclasses.replace(result, paths=paths)


def _checked_inputs(s: ReproduceSettings):
    """The protocol's judge (its template, and its price under a budget, checked), the collection and
    its human qrels, all before any work; the out folder refused when it would overwrite an input."""
    from ... import api
    from ..._io import check_output_dir

    inputs = [p for p in (s.collection, s.collection_config, s.runs, s.historical_runs, s.historical_qrels,
                          s.groups) if p is not None]
    if not s.dry_run:
        check_output_dir(s.out, "--out", inputs)
    base, not_applied = base_judge(s)  # its settings check the baseline template, before any work
    if s.max_cost is not None and not s.dry_run:
        from ...judging.budget import model_entry

        model_entry(base.replace(max_cost=s.max_cost))  # an unpriced model refused before training and judging
    collection = api.load_collection(s.collection, s.collection_config)
    if collection.qrels is None:
        raise ConfigError(f"{s.collection}: the collection has no human qrels (qrels/*interest*.qrels or "
                          "p2-ratings.csv); reproduce needs the participants' labels")
    return base, not_applied, collection


def _cranfield_runs(s: ReproduceSettings, collection, say) -> tuple[dict, list, str]:
    """The systems' runs (read, or trained when the targets need them) and, for a dry run without
    them, why Table 5 is not priced."""
    needs_runs = any(t in s.only for t in ("table1", "table4", "table5", "table9", "figure2", "figure5"))
    runs, run_files, unpriced = {}, [], ""
    if needs_runs:
        if s.runs is not None:
            runs, run_files = _read_runs(s.runs)
        elif not s.dry_run:
            folder, _ = _train(s, collection, s.out, False, say)
            runs, run_files = _read_runs(folder)
        else:
            unpriced = ("Table 5 is not priced: its depth-100 pool needs the systems' runs (give --runs, or run "
                        "without --dry-run to train them)")
    return runs, run_files, unpriced


def _historical_systems(s: ReproduceSettings, collection, say) -> tuple[dict, Any] | None:
    """Table 1's and Figure 2's historical runs and qrels, trained (or read) before any call, so a
    failure here costs nothing."""
    if not ({"table1", "figure2"} & set(s.only) and not s.dry_run):
        return None
    from ...data.trec import read_qrels

    if s.historical_runs is not None:
        return _read_runs(s.historical_runs)[0], read_qrels(s.historical_qrels)
    folder, qrels_path = _train(s, collection, s.out, True, say)
    return _read_runs(folder)[0], read_qrels(qrels_path)


def _jobs(s: ReproduceSettings, human, base, collection, runs: dict) -> list:
    """The judge jobs; a dry run without runs plans all but the pool (said in the plan)."""
    unpooled = tuple(t for t in s.only if "pool" not in JOBS_OF.get(t, ()))
    if runs or "pool" not in s.job_groups():
        jobs = plan_jobs(s, human, base, collection, runs or None)
    else:
        jobs = plan_jobs(s.replace(only=unpooled), human, base, collection, None) if unpooled else []
    return jobs


def _confirm(s: ReproduceSettings, base, rows, say) -> None:
    """The whole plan confirmed once, on its total (:func:`recjudge.judging.budget.confirm_spend`)."""
    from ...judging.budget import Plan, confirm_spend

    priced = all(r.cost is not None for r in rows)
    confirm_spend(Plan(sum(r.pairs for r in rows), sum(r.calls for r in rows), sum(r.cache_hits for r in rows),
                       ", ".join(base.public_endpoints()), base.model, sum(r.input_tokens for r in rows),
                       sum(r.cost for r in rows) if priced else None, what="reproduce"), s, say)


def _judge_all(s: ReproduceSettings, jobs, collection, history, cache: Path, say):
    """Every job judged through the shared cache, in order, until one stops (a budget, failing calls):
    the labels by (group, row, experiment), why judging stopped (or None) and the failures counted."""
    from ...judging import judge_pairs

    labels: dict[tuple[str, str, int], Any] = {}
    spent, stopped, failures = 0.0, None, Counter()
    for n, job in enumerate(jobs, 1):
        config = job.config.replace(yes=True)  # the whole plan was confirmed above
        if s.max_cost is not None:
            left = s.max_cost - spent
            if left <= 0:
                stopped = f"--max-cost ${s.max_cost:g} reached"
                break
            config = config.replace(max_cost=left)
        say(f"[{n}/{len(jobs)}] judge {job.group} {job.row} (experiment {job.experiment + 1}): {len(job.pairs):,} pairs")
        res = judge_pairs(job.pairs, collection, config, cache_path=cache, history=history, name=job.name)
        failures.update(res.summary.failures)
        spent += res.summary.cost or 0.0
        if res.summary.stopped or res.summary.stopped_early:  # a budget, or calls that fail: no next job
            stopped = res.summary.stopped or f"stopped early: {res.summary.stopped_early}"
            say(f"  stopped: {stopped}; what is cached stays, run again to resume")
            break
        labels[(job.group, job.row, job.experiment)] = res.qrels()
    return labels, stopped, failures
