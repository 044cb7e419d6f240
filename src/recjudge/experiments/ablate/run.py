"""Running the grid: every variant in each of N experiments judged, scored against the reference, written."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from ..._io import check_output_dir, check_outputs
from ...data.trec import Qrels, Run
from .experiment import RESULT_FILES, Experiment, Variant, historical_mapping, is_historical, variants
from .outcomes import ExperimentOutcome, VariantRow, variant_row
from .preflight import preflight
from .tables import write_results
from .jobs import jobs, sampled_pairs, variant_config

def reference_and_history(exp: Experiment, collection):
    """The reference qrels and the interactions that serve as user histories."""
    from ...data.splits import historical_qrels, make_split

    split = make_split(collection, exp.split, **dict(exp.split_options))
    if is_historical(exp.reference):
        return historical_qrels(split, historical_mapping(exp.reference)), split.train
    from ...data.trec import read_qrels

    # external (e.g. human) qrels: profiles use the whole rated history
    return read_qrels(exp.reference), collection.interactions


def run_experiment(exp: Experiment, dry_run: bool = False,
                   progress: Callable[[str], None] | None = None, protocol=None) -> list[VariantRow]:
    """Judge every variant in each of the N experiments and score it against the reference; writes
    ``<out>/ablation.{csv,json,md}`` (naming ``protocol``, a ProtocolUse, when the run follows one)."""
    from ...judging.probe import probe_session

    with probe_session():  # every variant and experiment judges through the same endpoints: probed once
        return _run_experiment(exp, dry_run, progress, protocol)


def _run_experiment(exp: Experiment, dry_run: bool, progress: Callable[[str], None] | None,
                    protocol) -> list[VariantRow]:
    from ...data.collections import load_collection

    say = progress or (lambda m: None)

    check_experiment_outputs(exp)
    collection = load_collection(exp.collection, **dict(exp.collection_options))
    reference, history = reference_and_history(exp, collection)
    runs: dict[str, Run] = {}
    if exp.runs:
        from ...data.trec import read_runs

        runs = read_runs(exp.runs)
    all_variants = variants(exp)
    preflight(exp, all_variants, collection, history, reference, runs, dry_run, say=progress)
    if not dry_run:
        exp.out.mkdir(parents=True, exist_ok=True)
    cache = None if dry_run else exp.out / "judgments.sqlite"
    # one question for the whole grid: its variants' calls together, not each variant's alone
    confirmed = not dry_run and _confirm_grid(exp, all_variants, collection, reference, history, cache, progress)
    outcomes: dict[int, list[ExperimentOutcome]] = {}
    for n, var, e, pairs_seed, history_seed in jobs(exp, all_variants):
        label = f" (experiment {e + 1}/{exp.experiments})" if exp.experiments > 1 else ""
        say(f"[{n}/{len(all_variants)}] {var.name}{label}")
        config = variant_config(exp, var, seed=history_seed, dry_run=dry_run or var.settings.get("dry_run", False),
                                **({"yes": True} if confirmed else {}))
        name = f"{exp.name}-{n}" + (f"-e{e + 1}" if e else "")
        outcomes.setdefault(n, []).append(_one_experiment(exp, var, e, pairs_seed, config, collection, reference,
                                                          history, runs, cache, dry_run, name))
    rows = [variant_row(var, outcomes[n]) for n, var in enumerate(all_variants, start=1)]
    if not dry_run:
        write_results(exp, rows, protocol)
    return rows


def _confirm_grid(exp: Experiment, all_variants: Sequence[Variant], collection, reference: Qrels, history,
                  cache: Path | None, progress: Callable[[str], None] | None) -> bool:
    """Plan every variant's and experiment's calls (a dry run of each, the cache's answers counted),
    show the sum and confirm it once (:func:`recjudge.judging.budget.confirm_spend`); True when the
    grid pays for calls and they were confirmed, False when its judge pays for none."""
    from ...judging import judge_pairs
    from ...judging.budget import Plan, confirm_spend
    from ...judging.registry import get_judge

    first = variant_config(exp, all_variants[0]) if all_variants else None
    if first is None or get_judge(first.judge).kind != "llm":
        return False  # an offline judge: nothing is paid, nothing to plan
    pairs = calls = cached = tokens = 0
    cost: float | None = 0.0
    for n, var, e, pairs_seed, history_seed in jobs(exp, all_variants):
        config = variant_config(exp, var, seed=history_seed, dry_run=True)
        s = judge_pairs(sampled_pairs(reference, var.per_user, pairs_seed), collection, config,
                        cache_path=cache if cache is not None and cache.exists() else None, history=history,
                        name=f"{exp.name}-{n}-plan").summary
        pairs += s.pairs
        calls += s.planned_calls - s.cache_hits - s.shared_calls
        cached += s.cache_hits
        tokens += s.estimated_input_tokens
        cost = None if cost is None or s.estimated_cost is None else cost + s.estimated_cost
    plan = Plan(pairs, calls, cached, ", ".join(first.public_endpoints()), first.model, tokens, cost,
                what=f"ablation {exp.name!r} ({len(all_variants)} variants × {exp.experiments} experiments)")
    confirm_spend(plan, first, say=progress)
    return True


def _one_experiment(exp: Experiment, var: Variant, index: int, pairs_seed: int, config, collection,
                    reference: Qrels, history, runs: Mapping[str, Run], cache: Path | None,
                    dry_run: bool, name: str) -> ExperimentOutcome:
    from ...evaluation.agreement import agreement
    from ...evaluation.metaeval import compare
    from ...judging import judge_pairs

    pairs = sampled_pairs(reference, var.per_user, pairs_seed)
    result = judge_pairs(pairs, collection, config, cache_path=cache, history=history, name=name)
    s = result.summary
    nan, nan2 = math.nan, (math.nan, math.nan)
    counts = {"experiment": index + 1, "pairs_seed": pairs_seed, "history_seed": config.seed, "pairs": s.pairs,
              "judged": s.judged, "cache_hits": s.cache_hits, "est_input_tokens": s.estimated_input_tokens}
    cand = None if dry_run else result.qrels()
    if cand is None:
        return ExperimentOutcome(**counts, calls=s.planned_calls if dry_run else s.calls, agree=nan, agree_ci=nan2,
                                 tie=nan, tie_ci=nan2, disagree=nan, disagree_ci=nan2, kappa=nan,
                                 alpha_ordinal=nan, tau={}, weighted_tau={})
    # item-level agreement on the judged pairs only ...
    sampled = reference.frame.merge(pd.DataFrame(pairs, columns=["qid", "docid"]), on=["qid", "docid"])
    sampled_ref = Qrels.from_frame(sampled, reference.name)
    ag = agreement(sampled_ref, cand, missing="drop", bootstrap=exp.bootstrap, seed=pairs_seed)
    taus: dict[str, float] = {}
    wtaus: dict[str, float] = {}
    if len(runs) >= 2:
        # ... system rankings against the complete reference: cutting the reference down to the K
        # sampled pairs would compare the LLM with a reference as sparse as itself (Penha et al. 2025,
        # Tables 4 and 9, score every K against the full human qrels)
        cmp = compare(runs, reference, {"variant": cand}, measures=list(exp.measures), queries="own",
                      tie_policy=exp.tie_policy, seed=exp.seed, bootstrap=0, baselines=exp.baselines)
        for m, ra in cmp.agreement["variant"].items():
            taus[m], wtaus[m] = ra.kendall_tau, ra.weighted_tau
    pw = ag.pairwise
    return ExperimentOutcome(**counts, calls=s.calls, agree=pw.agree, agree_ci=pw.agree_ci, tie=pw.tie,
                             tie_ci=pw.tie_ci, disagree=pw.disagree, disagree_ci=pw.disagree_ci,
                             kappa=ag.cohen_kappa, alpha_ordinal=ag.krippendorff_alpha_ordinal, tau=taus,
                             weighted_tau=wtaus, ci_note=pw.ci_note, ci_summary=pw.ci_summary,
                             ci_missing=pw.ci_missing,
                             baselines=_trivial(exp, sampled_ref, cand, pairs_seed, cmp if len(runs) >= 2 else None),
                             warnings=_one_label(var.name, cand))


def _trivial(exp: Experiment, sampled: Qrels, cand: Qrels, seed: int, cmp) -> dict[str, dict[str, float]]:
    """Trivial judge → κ, agree and τ per measure on this experiment's pairs (none when ``baselines`` = 0)."""
    from ...evaluation.baselines import agreement_baselines

    if not exp.baselines:
        return {}
    item = agreement_baselines(sampled, cand, "drop", draws=exp.baselines, seed=seed)
    out = {judge: {"kappa": st["cohen_kappa"].mean, "agree": st["agree"].mean} for judge, st in item.items()}
    for m, by_judge in (cmp.baselines.get("variant", {}) if cmp is not None else {}).items():
        for judge, st in by_judge.items():
            out[judge][f"tau {m}"] = st["kendall_tau"].mean
    return out


def _one_label(variant: str, cand: Qrels) -> tuple[str, ...]:
    from ...evaluation.baselines import single_label, single_label_warning

    label = single_label(cand)
    return () if label is None else (single_label_warning(variant, label, kind="variant")
                                     + "; its κ is 0 by construction",)


def check_experiment_outputs(exp: Experiment) -> None:
    """Refuse, before any work, an ``out`` folder (or a result file in it) that is an input or unwritable."""
    inputs = [exp.source, exp.collection]
    if not is_historical(exp.reference):
        inputs.append(exp.reference)
    if exp.runs is not None:
        inputs += [exp.runs] if isinstance(exp.runs, str) else list(exp.runs)
    inputs = [p for p in inputs if Path(p).exists()]
    option = f"key 'out' of {exp.source}"
    check_output_dir(exp.out, option, inputs)
    check_outputs({f"{option} ({name})": exp.out / name for name in RESULT_FILES}, inputs)


