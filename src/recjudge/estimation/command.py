"""``recjudge estimate`` end to end: read the inputs, refuse what has no valid interval, estimate,
plan, and write the JSON through the command's output set."""

from __future__ import annotations

import os

from ..errors import ConfigError
from .engine import estimate_sample
from .planning import check_pair, llm_price, make_plan
from .report import EstimateReport
from .pools import nonlinear_reason, read_pools
from .sample import check_users, inclusion_probabilities, measure_map, user_matrices
from .settings import EstimateSettings

__all__ = ["run_estimate"]


def _source(value, fallback: str) -> str:
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else fallback


def _read(s: EstimateSettings):
    from ..api.inputs import qrels_input, runs_input, run_files
    from ..data.trec import run_paths

    human, llm = qrels_input(s.human, "human"), qrels_input(s.llm, "llm")
    memory, _ = runs_input(s.runs)
    runs = memory if memory is not None else run_paths(run_files(s.runs))
    if not runs:
        raise ConfigError("no runs given; pass run files or a folder of runs")
    return runs, human, llm


def _linear_only(measures: dict[str, str], pools) -> tuple[dict[str, str], dict[str, str]]:
    """The measures partly judged pools can estimate, and the reason for each refused one."""
    from ..evaluation.measures import parse_measures

    if not pools.partial:
        return measures, {}
    refused = {name: reason for name, key in measures.items()
               if (reason := nonlinear_reason(parse_measures([key])[0])) is not None}
    if len(refused) == len(measures):
        i = int((pools.judged < pools.size).argmax())
        raise ConfigError(
            f"{pools.partial} of the {len(pools.users)} human users are judged by hand on part of the pool the LLM "
            f"judged for them (user {pools.users[i]}: {pools.judged[i]} of its {pools.size[i]} pairs), and no "
            f"measure asked for can be estimated so: {', '.join(refused)} are "
            + next(iter(refused.values()))
            + ". Ask for P@k or Judged@k (--measures P@10,Judged@100)")
    return {k: v for k, v in measures.items() if k not in refused}, refused


def run_estimate(s: EstimateSettings) -> EstimateReport:
    """The estimate the settings ask for (``recjudge estimate`` / ``recjudge.estimate``)."""
    from .._io import check_outputs, write_json
    from ..api.inputs import path_inputs

    check_outputs({"--json": s.json}, inputs=path_inputs(s.runs, s.human, s.llm, s.inclusion, s.judge_summary))
    price = None if s.judge_summary is None else llm_price(s.judge_summary)
    measures = measure_map(s.measures)
    runs, human, llm = _read(s)
    check_pair(s, list(runs))
    users, llm_users = check_users(human, llm)
    pools = read_pools(human, llm, users)
    measures, refused = _linear_only(measures, pools)
    pi = None if s.inclusion is None else inclusion_probabilities(s.inclusion, users)
    sample = user_matrices(runs, human, llm, measures, s.tie_policy, s.seed, pi, pools)
    results = estimate_sample(sample, 1 - s.level, s.population, s.draws, s.seed)
    # labels a further human user costs: its pool, or as many pairs as the partly judged users had
    pool = float(pools.judged.mean()) if pools.partial else float(pools.size.mean())
    plan = make_plan(sample, results, s, pairs_per_user=pool, price=price)
    report = EstimateReport(sample.systems, results, len(users), len(llm_users), s.population, pi is not None,
                            plan, settings=s, partial=pools.partial, refused=refused,
                            inputs={"human": _source(s.human, human.name), "llm": _source(s.llm, llm.name)})
    if s.json:
        write_json(s.json, report.to_json())
    return report
