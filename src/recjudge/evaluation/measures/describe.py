"""One line per measure saying what it computes, gain function and variant included (reports, JSON, cards)."""

from __future__ import annotations

from .fast import FAST_MEASURES
from .ndcg import EXP_GAINS
from .parse import measure_key, parse_measures


def gains_text(gains: dict) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in sorted(gains.items())) + "}"


def describe_measure(measure) -> str:
    """One line saying what ``measure`` computes, gain function and variant included.

    ``"nDCG@100, linear gain (trec_eval)"``, ``"nDCGexp@100: nDCG@100, exponential gain 2^rel − 1"``,
    ``"Compat(p=0.95), ir-measures / claclark"``; for reports, JSON and cards.
    """
    m = parse_measures([measure])[0] if isinstance(measure, str) else measure
    name, params = m.NAME, m.params
    at = f"@{params['cutoff']}" if "cutoff" in params else ""
    if name == "nDCG":
        return _describe_ndcg(params, at)
    if name == "Compat":
        norm = "" if m["normalize"] else ", not normalised by the ideal list's RBO"
        return f"Compat(p={m['p']}), ir-measures / claclark{norm}"
    if name == "CompatHM":
        return (f"CompatHM(p={m['p']}), Compatibility as computed by the trec-health-misinfo/Compatibility "
                "script (the ML-32M-ext release's): depth 1000, ideal ties by run rank, mean over users with a "
                "relevant item that the run ranks")
    if name == "Judged":
        return f"Judged{at}, share of the top{at[1:] and ' ' + at[1:]} that is judged (ir-measures)"
    return f"{measure_key(m)}, ir-measures ({'trec_eval' if name in FAST_MEASURES else 'its providers'})"


def _describe_ndcg(params: dict, at: str) -> str:
    gains = params.get("gains")
    extra = ", judged documents only" if params.get("judged_only") else ""
    if params.get("dcg", "log2") == "exp-log2" and gains is None:
        return f"nDCGexp{at}: nDCG{at}, exponential gain 2^rel − 1{extra}"
    extra += f", discount {params['dcg']}" if params.get("dcg", "log2") != "log2" else ""
    if gains is None:
        return f"nDCG{at}, linear gain (trec_eval){extra}"
    if gains == EXP_GAINS:
        return (f"nDCG{at}, gains 2^rel − 1 for labels 0–7 (trec_eval; a label above 7 gains its own value; "
                f"nDCGexp{at} gains 2^rel − 1 for every label){extra}")
    return (f"nDCG{at}, gains {gains_text(gains)} (trec_eval; an unlisted label gains its own value)"
            f"{extra}")
