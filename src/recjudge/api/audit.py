"""The audit commands' work: each audit of the judge's biases as a function of its settings.

``recjudge audit popularity`` is ``audit_popularity_with(settings)`` here and the verb
``recjudge.audit_popularity(llm, human, collection, …)``; likewise consistency, injection-scan
(``audit_injection_scan``), position and injection. Each returns an :class:`AuditReport`: the
library's record (``result``), what ``--json`` writes (``to_json()``), its table (``to_frame()``) and
what the command prints (``format()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .judge_settings import (
    AuditConsistencySettings,
    AuditInjectionSettings,
    AuditPopularitySettings,
    AuditPositionSettings,
    AuditInjectionScanSettings,
    audit_judge_settings,
)

__all__ = ["AuditReport", "audit_popularity_with", "audit_consistency_with", "audit_injection_scan_with",
           "audit_position_with", "audit_injection_with"]


@dataclass(frozen=True)
class AuditReport:
    """One audit's result: the record of :mod:`recjudge.judging.bias`, its JSON, its table and its text."""

    audit: str
    result: Any
    payload: dict
    text: str
    frame: Any = None
    settings: Any = field(default=None, repr=False)

    def to_json(self) -> dict:
        """What ``--json`` writes (with the protocol, when one was followed)."""
        return self.settings.stamp(self.payload) if self.settings is not None else self.payload

    def to_frame(self):
        """The audit's table (popularity bins, κ per pair, flagged fields …) as a pandas DataFrame."""
        import pandas as pd

        return self.frame if self.frame is not None else pd.DataFrame([self.payload])

    def format(self) -> str:
        """What ``recjudge audit`` prints."""
        return self.text


def _finish(s, report: AuditReport) -> AuditReport:
    if s.json:
        from .._io import write_json

        write_json(s.json, report.to_json())
    return report


def _check(s, inputs, **outputs) -> None:
    from .._io import check_outputs

    check_outputs({"--json": s.json, **outputs}, inputs=[i for i in inputs if i])


def _load(s):
    """The collection and the interactions its popularity and profiles come from (the split's training part)."""
    from ..data.collections import Collection, load_collection, read_collection_config

    if isinstance(s.collection, Collection):
        collection = s.collection
    else:
        options = read_collection_config(s.collection_config) if s.collection_config else {}
        collection = load_collection(s.collection, **options)
    history = None
    if s.split != "none":
        from ..data.splits import make_split

        history = make_split(collection, s.split).history()
    return collection, history


def audit_popularity_with(s: AuditPopularitySettings) -> AuditReport:
    """Residual of calibrated LLM labels against human labels by item-popularity decile, and with ``runs``
    which systems the bias lifts (``recjudge audit popularity``)."""
    from ..evaluation.measures import parse_measures
    from ..judging.bias import item_popularity, popularity_bias, popularity_rank_effect
    from .inputs import path_inputs, qrels_input, read_runs_input

    _check(s, [*path_inputs(s.llm, s.human, s.collection_config), *(path_inputs(s.runs) if s.runs else [])])
    if s.runs:
        parse_measures(s.measure)
    llm, human = qrels_input(s.llm, "llm"), qrels_input(s.human, "human")
    collection, history = _load(s)
    popularity = item_popularity(collection.interactions if history is None else history)
    res = popularity_bias(llm, human, popularity, bins=s.bins)
    text = res.format()
    out = {"audit": "popularity", "pairs": res.pairs, "spearman": res.spearman,
           "calibration": {str(k): v for k, v in res.mapping.items()},
           "bins": res.deciles.to_dict(orient="records")}
    if s.runs:
        effect = popularity_rank_effect(res, llm, popularity, read_runs_input(s.runs), s.measure)
        text += (f"\n\nsystems ranked on {effect.attrs['measure']} with and without the popularity bias "
                 f"(shift > 0: the bias lifted the system)\n{effect.round(4).to_string()}")
        out["systems"] = effect.reset_index().rename(columns={"run": "system", "index": "system"}).to_dict(
            orient="records")
        out["measure"] = effect.attrs["measure"]
    return _finish(s, AuditReport("popularity", res, out, text, res.deciles, settings=s))


def audit_consistency_with(s: AuditConsistencySettings) -> AuditReport:
    """κ and α between repeated experiments of the same judge (``recjudge audit consistency``)."""
    import pandas as pd

    from ..judging.bias import self_consistency
    from .inputs import path_inputs, qrels_input

    qrels = list(s.qrels) if isinstance(s.qrels, (list, tuple)) else [s.qrels]
    _check(s, path_inputs(qrels))
    res = self_consistency([qrels_input(q, f"qrels[{i}]") for i, q in enumerate(qrels)])
    pairs = [{"a": a, "b": b, "kappa": k} for (a, b), k in res.kappa.items()]
    out = {"audit": "consistency", "pairs": res.pairs, "alpha_interval": res.alpha, "kappa_linear": pairs}
    return _finish(s, AuditReport("consistency", res, out, res.format(), pd.DataFrame(pairs), settings=s))


def audit_injection_scan_with(s: AuditInjectionScanSettings) -> AuditReport:
    """Item fields whose text reads like an instruction to the judge (``recjudge audit injection-scan``)."""
    from ..judging.bias import scan_injections

    _check(s, [s.collection_config])
    collection, _ = _load(s)
    flagged = scan_injections(collection)
    text = "\n".join(f"{r.item}\t{r.field}\t{r.text}" for r in flagged.itertuples())
    out = {"audit": "injection-scan", "flagged": flagged.to_dict(orient="records")}
    return _finish(s, AuditReport("injection-scan", flagged, out, text, flagged, settings=s))


def _llm_setup(s):
    """The judge's settings, the collection, its history and the pairs of an audit that calls the judge."""
    from ..judging import select_pairs
    from ..judging.client import quiet_http_loggers
    from .inputs import path_inputs, read_runs_input, runs_label

    quiet_http_loggers()
    config = audit_judge_settings(s)
    _check(s, [*path_inputs(s.runs), s.collection_config], **{"--cache": s.cache})
    collection, history = _load(s)
    pairs = select_pairs(read_runs_input(s.runs), depth=None if s.per_user else s.depth, per_user=s.per_user,
                         seed=s.seed)
    if not pairs:
        raise ConfigError(f"the runs {runs_label(s.runs)} select no pair to judge")
    return config, collection, history, pairs


def audit_position_with(s: AuditPositionSettings, progress=None) -> AuditReport:
    """The same multi-item calls in a seeded shuffled order, and one item per call: label flip rate and
    agreement (``recjudge audit position``)."""
    import pandas as pd

    from ..judging.bias import position_bias

    config, collection, history, pairs = _llm_setup(s)
    res = position_bias(pairs, collection, config, seed=s.seed, cache_path=s.cache, history=history,
                        progress=progress)
    out = {"audit": "position", "items_per_call": res.items_per_call, "pairs": res.pairs,
           "flip_rate": res.flip_rate, "mean_abs_change": res.mean_abs_change,
           "exact_vs_single": {"in_order": res.exact_vs_single[0], "shuffled": res.exact_vs_single[1]},
           "mean_label_by_position": list(res.mean_label_by_position), "seed": s.seed}
    frame = pd.DataFrame({"position": range(1, len(res.mean_label_by_position) + 1),
                          "mean_label": list(res.mean_label_by_position)})
    return _finish(s, AuditReport("position", res, out, res.format(), frame, settings=s))


def audit_injection_with(s: AuditInjectionSettings, progress=None) -> AuditReport:
    """Label inflation on a copy of the collection whose items carry an instruction
    (``recjudge audit injection``)."""
    from ..judging.bias import INJECTION, injection_inflation

    config, collection, history, pairs = _llm_setup(s)
    res = injection_inflation(pairs, collection, config, fraction=s.fraction, seed=s.seed, field=s.field,
                              cache_path=s.cache, history=history, progress=progress)
    out = {"audit": "injection", "instruction": INJECTION, "items": list(res.items), "pairs": res.pairs,
           "inflation": res.inflation, "share_raised": res.share_raised,
           "others_change": res.others_change, "seed": s.seed}
    return _finish(s, AuditReport("injection", res, out, res.format(), settings=s))
