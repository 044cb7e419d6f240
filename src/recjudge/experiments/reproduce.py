"""``recjudge reproduce penha2025``: every table and figure of Penha et al. 2025 from an ML-32M-ext
release folder, each cell beside the published number.

The protocol (``protocols/penha2025.toml``) gives the settings; :func:`plan_jobs` turns the chosen
targets into judge jobs (one judge configuration over a set of pairs); :func:`plan` prices them
without a call; :func:`run_reproduce` trains or reads the systems, judges through one shared cache
(a prompt two targets share is asked once; an interrupted run resumes with no repeated call),
computes the cells (:mod:`.reproduce_tables`) and hands them to :mod:`recjudge.report.reproduce`.

What each target computes, as the paper defines it (section numbers are the paper's):

- table1: Judged@100 per system group (pooled / non-pooled), historical runs under the held-out
  interactions of an 80/20 split vs Cranfield runs under the human qrels (Section 4);
- figure2: the same systems ranked by nDCG@100 in both settings: Kendall's τ, its p-value and
  the rank shifts of NCEPLRec, SimpleX, DGCF and MultiVAE (Section 4); every held-out interaction
  is relevant with label 1;
- table3: agreement / tie / disagreement over pairs of one participant's items the human labels
  0 and 1-7, on the LLM's raw labels, per metadata field set, K = 50 items per participant
  (Section 5.1); figure3: the same per profile size (number of history items); figure4: the
  same over every pair of distinct human labels, by label distance;
- table4: Kendall's τ and weighted τ between the system ranking under the LLM's labels of K
  random human-judged items per participant and the ranking under the complete human qrels, on
  Compat, nDCG@100 and Bpref, K = 10/50/100/200 (Section 5.2); figure5: each system's rank under
  the LLM's labels at K = 100 vs its human rank on nDCG@100, the ranks of SimpleX, DGCF and
  NCEPLRec and the median displacement (1 for the LLM, 8 for the train-test split);
- table5: the systems' depth-100 pool judged by the LLM; Human-only, LLM fills gaps (human labels,
  calibrated LLM labels for the unjudged top-100 items: calibration from the pool items both label)
  and Full LLM (the LLM's labels of the top-100 items only); τ on Compat between the three, and
  average Judged@100 (Section 5.2);
- table8: the baseline and the defined-scale prompt, item agreement as Table 3 (Appendix B);
  table9: both prompts at K = 100, τ on Compat, nDCG@100 and Bpref (Appendix B).
- Beyond the paper: significance agreement (paired sign-flip tests, Holm) on the pool; the
  judge's popularity bias; the release's statistics against Section 3.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import reproduce_plan
from .reproduce_plan import *  # noqa: F403 -- the study's definitions, importable from here as before
from .reproduce_plan import (
    CELL_COLUMNS,
    JOBS_OF,
    STUDY,
    ReproduceResult,
    ReproduceSettings,
    base_judge,
    format_plan,
    plan,
    plan_jobs,
    protocol_settings,
    training_positives,
)

__all__ = [*reproduce_plan.__all__, "run_reproduce"]


def _train(settings: ReproduceSettings, collection, out: Path, historical: bool, say) -> tuple[Path, Path | None]:
    """Train the protocol's grid on its positives (Cranfield: all of them; historical: a split, with its qrels)."""
    from .. import api

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
    from ..data.trec import iter_run_files, read_runs

    files = iter_run_files([os.fspath(path)])
    return read_runs(files), files


def run_reproduce(settings: ReproduceSettings, progress: Callable[[str], None] | None = None) -> ReproduceResult:
    """Plan (``dry_run``) or run the reproduction; writes report.md, report.html, figures and one JSON."""
    from .. import api
    from .._io import check_output_dir
    from ..judging import judge_pairs
    from .published import load_published

    say = progress or print
    s = settings.resolved()
    published = load_published(STUDY)
    inputs = [p for p in (s.collection, s.collection_config, s.runs, s.historical_runs, s.historical_qrels,
                          s.groups) if p is not None]
    if not s.dry_run:
        check_output_dir(s.out, "--out", inputs)
    base, not_applied = base_judge(s)  # its settings check the baseline template, before any work
    if s.max_cost is not None and not s.dry_run:
        from ..judging.budget import model_entry

        model_entry(base.replace(max_cost=s.max_cost))  # an unpriced model refused before training and judging
    collection = api.load_collection(s.collection, s.collection_config)
    human = collection.qrels
    if human is None:
        raise ConfigError(f"{s.collection}: the collection has no human qrels (qrels/*interest*.qrels or "
                          "p2-ratings.csv); reproduce needs the participants' labels")
    history = collection.interactions
    cache = s.out / "judgments.sqlite"
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
    historical = None
    if {"table1", "figure2"} & set(s.only) and not s.dry_run:
        # trained (or read) before any call, so a failure here costs nothing
        from ..data.trec import read_qrels

        if s.historical_runs is not None:
            historical = (_read_runs(s.historical_runs)[0], read_qrels(s.historical_qrels))
        else:
            folder, qrels_path = _train(s, collection, s.out, True, say)
            historical = (_read_runs(folder)[0], read_qrels(qrels_path))
    # a dry run without runs plans all but the pool (said in the plan)
    unpooled = tuple(t for t in s.only if "pool" not in JOBS_OF.get(t, ()))
    if runs or "pool" not in s.job_groups():
        jobs = plan_jobs(s, human, base, collection, runs or None)
    else:
        jobs = plan_jobs(s.replace(only=unpooled), human, base, collection, None) if unpooled else []
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
    from ..judging.budget import Plan, confirm_spend

    priced = all(r.cost is not None for r in rows)
    confirm_spend(Plan(sum(r.pairs for r in rows), sum(r.calls for r in rows), sum(r.cache_hits for r in rows),
                       ", ".join(base.public_endpoints()), base.model, sum(r.input_tokens for r in rows),
                       sum(r.cost for r in rows) if priced else None, what="reproduce"), s, say)

    s.out.mkdir(parents=True, exist_ok=True)
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
    from .reproduce_tables import compute  # the cells, one function per target

    result = compute(s, collection, human, runs, run_files, labels, published, base, not_applied, rows, stopped, say,
                     historical)
    if failures:
        result.extras["judge_failures"] = dict(failures)
    from ..report.reproduce import write_reproduce_report

    paths = write_reproduce_report(result, s.out)
    say(f"report: {paths['md']}")
    return dataclasses.replace(result, paths=paths)
