"""``recjudge demo``: the whole pipeline, offline, on the MovieLens-100K copy inside the recbole wheel.

global time split → train the ``quick`` grid → tie-free runs → historical qrels from the held-out
ratings → judge a depth-D pool (plus K historical items per user, for calibration and agreement)
with the offline ``overlap`` judge, or with an LLM only when asked for (``judge="openai"`` or a
``base_url``; an API key in the environment is not a request to spend money) → calibrated gap
filling, refused (and said why) when the calibration cannot calibrate → compare historical vs judge
(vs filled) → tie audit of the trained systems' rankings before tie-breaking, and of the sampled-
candidate protocol → report with figures and an evaluation card.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import field_validator, model_validator

import pandas as pd

from .._io import check_output_dir, check_outputs, write_json
from ..data.trec import Qrels, read_run, write_qrels
from ..evaluation.ties.policy import ensure_tie_free
from ..errors import ConfigError
from ..judging.config import FieldSet
from ..settings import Cli, Conflict, Count, PathText, Positive, Seed, Settings, TiePolicy, option
from ..urls import public_url

__all__ = ["DemoSettings", "DemoResult", "run_demo", "HISTORICAL_MAPPING", "REDUCED_SYSTEMS", "DEMO_JUDGES",
           "fill_needs"]

# 1 star = not interested (0) … 5 stars = extremely interested (4): the interest scale's first levels
HISTORICAL_MAPPING = {1.0: 0, 2.0: 1, 3.0: 2, 4.0: 3, 5.0: 4}
REDUCED_SYSTEMS = ("Pop", "Random", "EASE", "ItemKNN")
PROFILE_SIZES = (5, 10, 25, 50, 100)
# the offline judges cost nothing; "openai" (any OpenAI-compatible endpoint) is used only when asked for
DEMO_JUDGES = ("overlap", "popularity", "openai")
RAW_RUNS = "raw-runs"  # the report folder's copy of each system's ranking before the tie policy


def fill_needs(cal) -> str:
    """Why a fill could work and how to get one: the calibration's requirements, and the way round them."""
    return (f"{cal.requirements()}. A judge whose grades follow the {cal.reference} labels passes (an LLM judge, "
            "--judge openai, may); recjudge fill --allow-weak-calibration fills anyway, marked as weak")


class DemoSettings(Settings):
    """``recjudge demo``: every step's settings, checked on construction (see :mod:`recjudge.settings`)."""

    command: ClassVar[str] = "demo"
    out: PathText = option("out/demo", "report folder", cli=Cli(metavar="DIR"))
    runs_dir: PathText | None = option(None, "where runs go (default: runs/<collection>)", cli=Cli(metavar="DIR"))
    qrels_dir: PathText = option("qrels", "where the qrels go", cli=Cli(metavar="DIR"))
    collection: str = option("ml-100k", "the collection (the copy inside the recbole wheel)", cli=Cli(hidden=True))
    grid: str = option("quick", "system grid")
    systems: tuple[str, ...] | None = option(None, "train only these systems of the grid (default: all of them)",
                                             cli=Cli(nargs="+", metavar="SYSTEM"))
    epochs: Positive | None = option(None, "override the epochs of neural systems (default: each system's own)",
                                     cli=Cli(metavar="N"))
    max_users: Positive | None = option(None, "sample this many users (seeded) before splitting (default: all)",
                                        cli=Cli(metavar="N"))
    depth: Positive = option(10, "judge the union of every run's top-D", cli=Cli(metavar="D"))
    per_user: Positive = option(20, "also judge K historical items per user, for calibration and agreement",
                                cli=Cli(metavar="K"))
    judge: Literal[DEMO_JUDGES] | None = option(
        None, "overlap and popularity are offline non-LLM baselines; openai calls an LLM (OPENAI_API_KEY, or "
              "--base-url) and costs money (default: openai when --base-url is given, else overlap; an API key "
              "alone never selects it)")
    model: str = option("gpt-4o-mini", "the LLM judge's model")
    base_url: str | None = option(None, "an OpenAI-compatible endpoint for the LLM judge (default: none: the "
                                        "offline judge)", cli=Cli(metavar="URL"))
    fields: FieldSet = option("title+genres", "item fields the judge sees, joined by +", cli=Cli(metavar="SET"))
    profile_size: Positive = option(50, "rated history items shown per user", cli=Cli(metavar="N"))
    profile_sizes: tuple[Positive, ...] = option(PROFILE_SIZES, "the profile-size sweep", min_length=1,
                                                 cli=Cli(hidden=True))
    seed: Seed = option(0, "seed of every random step: users, pairs, profiles, ties, bootstrap")
    tie_policy: TiePolicy = option("hash", "order of equal scores", cli=Cli(hidden=True))
    bootstrap: Count = option(1000, "resamples for the CIs (0: none)", cli=Cli(metavar="N"))
    negatives: Positive = option(30, "sampled negatives per user of the tie audit", cli=Cli(hidden=True))
    reduced: bool = option(False, "a small, fast setting for checks: 4 systems, 1 epoch, 200 users")

    @field_validator("out", "runs_dir", "qrels_dir", mode="after")
    @classmethod
    def _paths(cls, value):
        return None if value is None else Path(value)

    @model_validator(mode="after")
    def _judge_and_endpoint(self):
        if self.base_url and self.judge not in (None, "openai"):
            raise Conflict(f"{{base_url}} {public_url(self.base_url)} names an LLM endpoint but {{judge}} is "
                           f"{self.judge!r}, an offline judge; drop one of them", "base_url", "judge")
        return self

    def resolved(self) -> DemoSettings:
        """Apply ``reduced`` (a few fast systems, 1 epoch, 200 users) and the judge choice."""
        s = self
        if s.reduced:
            s = s.replace(systems=s.systems or REDUCED_SYSTEMS, epochs=s.epochs or 1, max_users=s.max_users or 200,
                          bootstrap=min(s.bootstrap, 200))
        if s.judge is None:
            s = s.replace(judge="openai" if s.base_url else "overlap")
        return s


@dataclass(frozen=True, eq=False)
class DemoResult:
    report: Path
    runs: Mapping[str, Path]
    qrels: Mapping[str, Path]
    summary: Mapping[str, Any] = field(default_factory=dict)


class _Steps:
    """Progress lines with the time each step took."""

    def __init__(self, say: Callable[[str], None], total: int):
        self.say, self.total, self.n, self.t0 = say, total, 0, time.perf_counter()
        self.times: dict[str, float] = {}
        self._name: str | None = None
        self._start = 0.0

    def start(self, name: str) -> None:
        self._finish()
        self.n += 1
        self._name, self._start = name, time.perf_counter()
        self.say(f"[{self.n}/{self.total}] {name} …")

    def _finish(self) -> None:
        if self._name is not None:
            self.times[self._name] = time.perf_counter() - self._start
            self.say(f"      done in {self.times[self._name]:.1f} s")
            self._name = None

    def close(self) -> float:
        self._finish()
        return time.perf_counter() - self.t0


def run_demo(settings: DemoSettings | None = None, progress: Callable[[str], None] | None = None) -> DemoResult:
    """Run the end-to-end demo; returns where the report, runs and qrels are."""
    from ..data.splits import historical_qrels

    s = (settings or DemoSettings()).resolved()
    say = progress or print
    config, systems = _checked(s)
    out, qrels_dir = Path(s.out), Path(s.qrels_dir)
    steps, raw_dir = _Steps(say, 9), out / RAW_RUNS
    steps.start(f"load {s.collection} and split it by global time (quantile 0.8)")
    collection, split, runs_dir, judge_name = _load(s, out, qrels_dir, systems, raw_dir, say)
    steps.start(f"train the {'reduced ' if s.reduced else ''}{s.grid} grid and export top-100 runs")
    results, runs = _train(s, split, runs_dir, raw_dir, say)
    steps.start("historical qrels from the held-out ratings (rating − 1 → 0–4)")
    historical = historical_qrels(split, HISTORICAL_MAPPING, name=f"{collection.name}-historical")
    paths = {"historical": write_qrels(historical, qrels_dir / f"{collection.name}-historical.qrels")}
    steps.start(f"judge the depth-{s.depth} pool and {s.per_user} historical items per user with "
                f"the {'LLM' if s.judge == 'openai' else s.judge + ' (non-LLM baseline)'} judge")
    aligned, judged = _judge(s, config, collection, split, runs, historical, judge_name, out, say)
    judge_q = judged.qrels()
    if judge_q is None:
        raise ConfigError("the judge labelled no pair; see the failures above")
    paths["judge"] = judged.write(qrels_dir / f"{collection.name}-{judge_name}.qrels")["qrels"]

    steps.start("item-level agreement with the historical labels"
                + (", and agreement against profile size" if s.judge != "openai" else ""))
    item_agreement, sweep = _item_agreement(s, collection, split, aligned, historical, judge_q)

    steps.start(f"calibrate the judge to the historical scale; fill the top-{s.depth} gaps if it holds")
    cal, filled = _calibrate_and_fill(s, historical, judge_q, runs, judge_name, qrels_dir,
                                      f"{collection.name}-filled", paths, say)

    labels = {judge_name: judge_q, **({"filled": filled.qrels} if filled is not None else {})}
    steps.start(f"compare system rankings: historical vs {' vs '.join(labels)}")
    cmp, scen = _compare(s, runs, historical, labels, judge_name, judge_q, filled)

    steps.start(f"tie audit: the {len(runs)} systems' rankings before tie-breaking, and sampled candidates "
                f"(1 held-out + {s.negatives} negatives, relevant first)")
    audit = _tie_audit(s, collection, split, {r.system: raw_dir / f"{r.system}.run" for r in results if r.ok},
                       historical)
    audit["raw_runs"] = raw_dir
    say("      " + _tie_summary(audit["systems"]))

    steps.start("write the report")
    from ..outputs import output_set
    from ..report.demo import write_demo_report

    with output_set():  # the report, its figures and card.json replace the old ones together
        report = write_demo_report(
            out, settings=s, collection=collection, split_info=dict(split.info), train_results=results,
            historical=historical, judge_q=judge_q, judged=judged, judge_name=judge_name, filled=filled,
            calibration=cal, item_agreement=item_agreement, sweep=sweep, compare_result=cmp, scenario=scen,
            audit=audit, paths=paths, step_times=steps.times, fill_needs=fill_needs(cal) if filled is None else "")
    total = steps.close()
    summary = _summary(total, results, judge_name, cal, filled, cmp, scen, audit)
    write_json(out / "summary.json", {"summary": summary, "settings": _settings_json(s)})
    say(f"finished in {total:.0f} s")  # where the report is: the caller says it, once
    qrels = {k: v for k, v in paths.items() if k != "sources"}
    return DemoResult(report, {n: runs_dir / f"{n}.run" for n in runs}, qrels, summary)


def _checked(s: DemoSettings):
    """Everything that can be refused, refused before the collection loads and the systems train: the
    judge's settings, the fields, the grid and its systems, the output folders."""
    from ..judging import JudgeSettings, parse_fields
    from ..systems import resolve_systems

    config = JudgeSettings(judge=s.judge, model=s.model, base_url=s.base_url, fields=s.fields,
                           profile_size=s.profile_size, seed=s.seed)
    parse_fields(s.fields)
    resolve_systems(s.grid, None)  # the grid is checked even when --systems (or --reduced) picks the systems
    systems = [c.name for c in resolve_systems(s.grid, s.systems)]
    check_output_dir(Path(s.out), "--out")
    check_output_dir(Path(s.qrels_dir), "--qrels-dir")
    check_output_dir(s.runs_dir, "--runs-dir")
    return config, systems


def _load(s: DemoSettings, out: Path, qrels_dir: Path, systems: list[str], raw_dir: Path, say):
    """The collection (users sampled when asked), its global-time split, the runs' folder and the judge's name."""
    from ..data.collections import load_collection
    from ..data.splits import make_split
    from ..report.evaluation import slug

    collection = load_collection(s.collection)
    if s.max_users:
        collection = collection.sample_users(s.max_users, s.seed)
    runs_dir = Path(s.runs_dir) if s.runs_dir else Path("runs") / collection.name
    judge_name = s.judge if s.judge != "openai" else f"llm-{slug(s.model, keep='.')}"
    _check_output_files(out, runs_dir, qrels_dir, collection.name, judge_name, systems, raw_dir)
    out.mkdir(parents=True, exist_ok=True)
    split = make_split(collection, "global_time", quantile=0.8)
    info = dict(split.info)
    say(f"      {collection!r}; train {info['train_interactions']:,} interactions, test "
        f"{info['test_interactions']:,} from {info['test_users']} users with training history "
        f"({info['cold_test_users_dropped']} cold test users dropped)")
    return collection, split, runs_dir, judge_name


def _train(s: DemoSettings, split, runs_dir: Path, raw_dir: Path, say):
    """The grid trained and its top-100 runs exported; at least two must train."""
    from ..systems import train_systems

    results = train_systems(split, s.grid, out_dir=runs_dir, k=100, systems=s.systems, epochs=s.epochs,
                            tie_policy=s.tie_policy, tie_seed=s.seed, progress=lambda m: say(f"      {m}"),
                            raw_dir=raw_dir)
    ok = [r for r in results if r.ok]
    if len(ok) < 2:
        raise ConfigError("fewer than two systems trained; see the messages above")
    runs = {r.system: read_run(r.run_path, r.system) for r in ok}
    # exported runs are tie-free on disk: checked (not trusted) once, so no later step re-decides ties
    return results, {name: ensure_tie_free(run, s.tie_policy, s.seed) for name, run in runs.items()}


def _judge(s: DemoSettings, config, collection, split, runs, historical: Qrels, judge_name: str, out: Path, say):
    """The depth-D pool and K historical items per user judged (an LLM's spend said before the first call)."""
    from ..judging import judge_pairs, select_pairs

    pool = select_pairs(runs, depth=s.depth, tie_policy=s.tie_policy, seed=s.seed)
    aligned = select_pairs(reference=historical, per_user=s.per_user, seed=s.seed)
    pairs = tuple(sorted(set(pool) | set(aligned)))
    if s.judge == "openai":
        # what this step will spend, said before the first call (a dry run: no network)
        plan = judge_pairs(pairs, collection, config.replace(dry_run=True), cache_path=out / "judgments.sqlite",
                           history=split.train, name=f"{collection.name}-{judge_name}")
        say(f"      LLM judge: endpoint {public_url(s.base_url) or 'https://api.openai.com/v1 (OPENAI_API_KEY)'}, "
            f"model {s.model}")
        say("      " + plan.summary.format().replace("\n", "\n      "))
    elif os.environ.get("OPENAI_API_KEY"):
        say("      (OPENAI_API_KEY is set, but the demo judges offline unless asked: --judge openai uses the LLM)")
    judged = judge_pairs(pairs, collection, config, cache_path=out / "judgments.sqlite", history=split.train,
                         name=f"{collection.name}-{judge_name}", progress=lambda m: say(f"      {m}"))
    say("      " + judged.summary.format().replace("\n", "\n      "))
    return aligned, judged


def _item_agreement(s: DemoSettings, collection, split, aligned, historical: Qrels, judge_q: Qrels):
    """Agreement on the sampled historical items only (pool items are what systems ranked, not a random
    sample), and, for an offline judge, agreement against profile size."""
    from ..evaluation.agreement import agreement

    aligned_ref = Qrels.from_frame(historical.frame.merge(pd.DataFrame(aligned, columns=["qid", "docid"]),
                                                          on=["qid", "docid"]), historical.name)
    item_agreement = agreement(aligned_ref, judge_q, missing="drop", bootstrap=s.bootstrap, seed=s.seed)
    sweep = _profile_sweep(s, collection, split.train, aligned, historical) if s.judge != "openai" else []
    return item_agreement, sweep


def _calibrate_and_fill(s: DemoSettings, historical: Qrels, judge_q: Qrels, runs, judge_name: str,
                        qrels_dir: Path, name: str, paths: dict, say):
    """The calibration, and the top-D gaps filled when it holds (written, with its sources, into
    ``paths``); a refused fill removes an earlier demo's filled qrels and says why."""
    from ..evaluation.calibration import CalibrationError, calibrate, fill_gaps, sources_path, write_filled

    cal = calibrate(historical, judge_q, min_overlap=30, reference="historical", candidate=judge_name)
    filled_path = qrels_dir / f"{name}.qrels"
    try:
        filled = fill_gaps(historical, judge_q, runs, cal, k=s.depth, tie_policy=s.tie_policy, seed=s.seed,
                           name=name)
    except CalibrationError:
        # a filled ranking would show the fill, not the judge: not computed, and the report says why
        for stale in (filled_path, sources_path(filled_path)):
            if stale.is_file():  # an earlier demo's file at this path would now contradict the report
                stale.unlink()
        say("      gap filling refused: the calibration cannot carry the judge's order, so a filled ranking "
            "would show the fill, not the judge:")
        for problem in cal.problems():
            say(f"        - {problem}")
        say(f"      ({fill_needs(cal)})")
        return cal, None
    paths["filled"], sources = write_filled(filled, filled_path)
    if sources:
        paths["sources"] = sources
    return cal, filled


def _compare(s: DemoSettings, runs, historical: Qrels, labels, judge_name: str, judge_q: Qrels, filled):
    """System rankings under each label set against the historical ones, and the three scenarios."""
    from ..evaluation.calibration import scenarios
    from ..evaluation.metaeval import compare

    cmp = compare(runs, historical, labels, queries="own", tie_policy=s.tie_policy, seed=s.seed,
                  bootstrap=s.bootstrap)
    scen = scenarios(runs, {"Historical only": historical,
                            **({f"{judge_name} fills gaps": filled.qrels} if filled is not None else {}),
                            f"Full {judge_name}": judge_q}, k=100, tie_policy=s.tie_policy, seed=s.seed)
    return cmp, scen


def _summary(total: float, results, judge_name: str, cal, filled, cmp, scen, audit) -> dict:
    return {
        "seconds": round(total, 1),
        "systems": [r.system for r in results if r.ok],
        "failed_systems": {r.system: r.error for r in results if not r.ok},
        "judge": judge_name,
        "fill_refused": list(cal.problems()) if filled is None else [],
        "kendall_tau": {c: {m: ra.kendall_tau for m, ra in by.items()} for c, by in cmp.agreement.items()},
        "judged_at_100": {k: float(v) for k, v in scen.judged.items()},
        "tie_audit": {r.name: {"tied_users": r.prevalence.tied,
                               **{m.measure: {"input_minus_expected": round(m.input_order - m.expected, 6) + 0.0}
                                  for m in r.measures}} for r in audit["systems"].runs},
    }


def _check_output_files(out: Path, runs_dir: Path, qrels_dir: Path, collection: str, judge_name: str,
                        systems: list[str], raw_dir: Path) -> None:
    """Every file the demo writes can be written (not a folder, parent not a file, folder writable)."""
    from ..judging import output_paths

    check_output_dir(runs_dir, "--runs-dir")
    judge_qrels = qrels_dir / f"{collection}-{judge_name}.qrels"
    judgments, judge_summary = output_paths(judge_qrels)
    filled = qrels_dir / f"{collection}-filled.qrels"
    check_outputs({
        "--out report.md": out / "report.md", "--out report.html": out / "report.html",
        "--out card.json": out / "card.json", "--out summary.json": out / "summary.json",
        "--out judgments.sqlite": out / "judgments.sqlite",
        "--qrels-dir historical qrels": qrels_dir / f"{collection}-historical.qrels",
        "--qrels-dir judge qrels": judge_qrels, "--qrels-dir judgments log": judgments,
        "--qrels-dir judge summary": judge_summary, "--qrels-dir filled qrels": filled,
        "--qrels-dir filled sources": filled.with_name(filled.name + ".sources.tsv"),
        **{f"--runs-dir {name}.run": runs_dir / f"{name}.run" for name in systems},
        **{f"--runs-dir {name}.json": runs_dir / f"{name}.json" for name in systems},
        **{f"--out {RAW_RUNS}/{name}.run": raw_dir / f"{name}.run" for name in systems},
    })


def _settings_json(s: DemoSettings) -> dict:
    d = s.given()
    d["base_url"] = public_url(d["base_url"])
    return {k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def _profile_sweep(s: DemoSettings, collection, history, aligned, historical) -> list[dict]:
    """Pairwise agreement with the historical labels against profile size (the offline judge is free)."""
    from ..evaluation.agreement import agreement
    from ..judging import JudgeSettings, judge_pairs

    out = []
    for size in s.profile_sizes:
        cfg = JudgeSettings(judge=s.judge, fields=s.fields, profile_size=size, seed=s.seed)
        res = judge_pairs(aligned, collection, cfg, history=history, name=f"profile-{size}")
        q = res.qrels()
        if q is None:
            continue
        a = agreement(historical, q, missing="drop", bootstrap=min(s.bootstrap, 300), seed=s.seed)
        out.append({"profile_size": size, "agree": a.pairwise.agree, "agree_ci": a.pairwise.agree_ci,
                    "tie": a.pairwise.tie, "disagree": a.pairwise.disagree, "kappa": a.cohen_kappa,
                    "pairs": a.pairwise.n_pairs})
    return out


def _tie_summary(audit) -> str:
    """One line: which systems' rankings had ties, and the largest move of a measure they cause."""
    tied = [r for r in audit.runs if r.prevalence.tied > 0]
    if not tied:
        return "no system's ranking has an exact score tie: tie-breaking changes nothing here"
    worst = max(((abs(m.input_order - m.expected), r.name, m.measure) for r in audit.runs for m in r.measures),
                default=(0.0, "", ""))
    return (f"{len(tied)} of {len(audit.runs)} systems rank tied items ("
            + ", ".join(f"{r.name} {r.prevalence.tied:.0%} of users" for r in tied)
            + f"); largest effect of the input order vs a random order within ties: {worst[1]} {worst[2]} "
              f"{worst[0]:.4f}")


def _tie_audit(s: DemoSettings, collection, split, raw_paths: Mapping[str, Path], historical):
    """The trained systems' rankings before tie-breaking against the historical labels, then the
    sampled-candidate protocol (the tie paper's setting) with two tie-heavy scorers."""
    from ..evaluation.ties import audit_ties

    systems = audit_ties({name: read_run(path, name) for name, path in raw_paths.items()}, historical,
                         seeds=50, permutations=10, seed=s.seed)
    from ..systems.sampled import attribute_overlap_scorer, popularity_scorer, sampled_candidate_run

    test = split.test[split.test.rating >= 4]
    # one held-out item per user: the earliest liked test interaction (deterministic)
    held = test.sort_values(["user", "timestamp", "item"]).drop_duplicates("user")[["user", "item"]]
    catalogue = sorted(set(split.train.item))
    held = held[held.item.isin(set(catalogue))]
    exclude = split.train[["user", "item"]]
    scorers = {
        "popularity": popularity_scorer(split.train),
        "genre-overlap": attribute_overlap_scorer(split.train, collection.items, ["genres"]),
    }
    runs, qrels = {}, None
    for name, scorer in scorers.items():
        sc = sampled_candidate_run(held, catalogue, scorer, n_negatives=s.negatives, seed=s.seed,
                                   exclude=exclude, name=name, qrels_name="held-out")
        runs[name], qrels = sc.run, sc.qrels
    audit = audit_ties(runs, qrels, measures="Hit@10,nDCG@10", cutoffs=(10,), seeds=50, permutations=10,
                       seed=s.seed)
    return {"systems": systems, "audit": audit, "users": len(held), "negatives": s.negatives,
            "catalogue": len(catalogue)}
