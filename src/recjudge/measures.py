"""Per-query × per-system measure matrices, with ir-measures as the reference semantics.

:func:`per_query_matrix` scores every run on every query once; the meta-evaluation aggregates and
resamples those matrices instead of re-running an evaluator.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import ConfigError
from .trec import Qrels, Run, resolve_ties

__all__ = [
    "DEFAULT_MEASURES",
    "BACKENDS",
    "parse_measures",
    "measure_key",
    "per_query_matrix",
]

DEFAULT_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref")
BACKENDS = ("auto", "numpy", "ir_measures")


def _split_top_level(spec: str) -> list[str]:
    """Split on commas outside parentheses: ``Compat(p=0.9,normalize=False),nDCG@10``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(spec[start:i])
            start = i + 1
    parts.append(spec[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_measures(spec: str | Sequence | None = None) -> tuple:
    """ir-measures ``Measure`` objects from ``"Judged@100,Compat(p=0.95),nDCG@100,Bpref"`` or a list.

    Raises ConfigError for a name ir-measures does not know, a measure no installed provider
    computes, or a measure given twice.
    """
    import ir_measures

    if spec is None:
        spec = DEFAULT_MEASURES
    items = _split_top_level(spec) if isinstance(spec, str) else list(spec)
    if not items:
        raise ConfigError("no measures given; example: --measures \"nDCG@100,Bpref\"")
    out, seen = [], {}
    for item in items:
        if isinstance(item, str):
            try:
                m = ir_measures.parse_measure(item.strip())
            except Exception as exc:  # ir-measures raises ValueError/NameError/SyntaxError
                raise ConfigError(
                    f"unknown measure {item!r} ({exc}); use ir-measures syntax such as "
                    f"{', '.join(DEFAULT_MEASURES)}, P@10, RR, AP") from None
        elif isinstance(item, ir_measures.measures.Measure):
            m = item
        else:
            raise ConfigError(f"measure {item!r} is neither a string nor an ir-measures Measure")
        if not ir_measures.DefaultPipeline.supports(m):
            raise ConfigError(f"measure {item!r} is not computed by any installed ir-measures provider")
        key = measure_key(m)
        if key in seen:
            raise ConfigError(f"measure {key} is given twice ({seen[key]!r} and {item!r})")
        seen[key] = item
        out.append(m)
    return tuple(out)


def measure_key(measure) -> str:
    """The canonical name ir-measures prints (default parameters omitted: ``Compat(p=0.95)`` is ``Compat``)."""
    return str(measure)


def _tie_free(run: Run) -> Run:
    if run.tie_policy is None:
        warnings.warn(
            f"run {run.name!r} has not been through resolve_ties; ordering its equal scores with the "
            "default 'hash' policy (seed 0)", stacklevel=3)
        return resolve_ties(run, "hash", 0)
    return run


def _query_index(qrels: Qrels, queries: Sequence[str] | None) -> list[str]:
    judged = set(qrels.frame.qid.unique())
    if queries is None:
        return sorted(judged)
    wanted = sorted({str(q) for q in queries})
    missing = [q for q in wanted if q not in judged]
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise ConfigError(
            f"{len(missing)} requested queries have no judgments in qrels {qrels.name!r} ({shown}); "
            "a measure is undefined there — pass only judged queries")
    return wanted


def per_query_matrix(runs: Mapping[str, Run], qrels: Qrels, measures=DEFAULT_MEASURES,
                     queries: Sequence[str] | None = None, backend: str = "auto") -> dict[str, pd.DataFrame]:
    """One DataFrame per measure: index = query ids (sorted), columns = run names (given order)."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    parsed = parse_measures(measures)
    index = _query_index(qrels, queries)
    names = list(runs)
    tie_free = {name: _tie_free(runs[name]) for name in names}
    values = {measure_key(m): np.zeros((len(index), len(names))) for m in parsed}
    _reference(tie_free, qrels, parsed, index, names, values)
    return {k: pd.DataFrame(v, index=pd.Index(index, name="qid"), columns=pd.Index(names, name="run"))
            for k, v in values.items()}


def _reference(runs: Mapping[str, Run], qrels: Qrels, measures, index: list[str], names: list[str],
               values: dict[str, np.ndarray]) -> None:
    """Fill ``values`` with ir-measures' ``iter_calc`` (the reference semantics)."""
    import ir_measures

    wanted = set(index)
    row = {q: i for i, q in enumerate(index)}
    qf = qrels.frame
    keep = qf.qid.isin(wanted).to_numpy()
    qrels_dict: dict[str, dict[str, int]] = {}
    for q, d, lab in zip(qf.qid.to_numpy()[keep], qf.docid.to_numpy()[keep], qf.label.to_numpy()[keep]):
        qrels_dict.setdefault(q, {})[d] = int(lab)
    evaluator = ir_measures.evaluator(list(measures), qrels_dict)
    keys = {m: measure_key(m) for m in measures}
    for j, name in enumerate(names):
        f = runs[name].frame
        run_dict: dict[str, dict[str, float]] = {}
        for q, d, s in zip(f.qid.to_numpy(), f.docid.to_numpy(), f.score.to_numpy()):
            if q in wanted:
                run_dict.setdefault(q, {})[d] = float(s)
        for metric in evaluator.iter_calc(run_dict):
            values[keys[metric.measure]][row[metric.query_id], j] = metric.value
