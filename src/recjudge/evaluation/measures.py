"""Per-query × per-system measure matrices, with ir-measures as the reference semantics.

:func:`per_query_matrix` scores every run on every query once; the meta-evaluation aggregates and
resamples those matrices instead of re-running an evaluator.

Two backends compute the same numbers. ``ir_measures`` calls ``ir_measures.evaluator(...).iter_calc``
run by run. ``numpy`` reproduces ir-measures 0.4.3 (pytrec_eval for nDCG, Bpref, P, R, Success,
RR, AP; its Python providers for Judged and Compat) to 1e-9 (observed: 0 for all but Compat,
~1e-14 for Compat). ``auto`` uses numpy for the measures it covers (:func:`fast_supported`) and
ir-measures for the rest.

How the numpy path is fast: the reader gives ids as integer codes (one lookup per distinct id
maps a run's documents to each label set's); each run is put in score order once
(:func:`~recjudge.evaluation.ties.policy.score_order`: a linear pass for runs written grouped by
user, best first); its rows are joined with the judgments of their query only, by a hash bucket
of a few documents (:meth:`Judgments.join`); and every measure is a few vectorised passes over the
judged rows (bincount per query). Compat uses a closed form: a document in both
the ranking and the ideal list adds ``sum_{i >= max(rank, ideal rank)} p^i / (i + 1)`` to the
RBO numerator, so no per-depth set intersection is needed.

Two names are recjudge's own (:func:`describe_measure` states each measure's definition in words):

- ``nDCGexp@k`` (and ``nDCGexp``) is the exponential-gain nDCG of Penha et al. 2025: it expands to
  the ir-measures string ``nDCG(gains={0:0,1:1,2:3,3:7,4:15,5:31,6:63,7:127})@k``, gain 2^rel − 1
  over the 0–7 interest scale. The map is fixed (not derived from the data, so the name always
  means one thing); a label above 7 under it is an error, since trec_eval would give it the linear
  gain rel, and negative labels carry no gain (as in every trec_eval nDCG). ``nDCG@k`` stays
  trec_eval's linear gain.
- ``CompatHM(p)`` is Compatibility as computed by the trec-health-misinfo/Compatibility script, the
  script the ML-32M-ext release evaluates with (claclark/Compatibility computes the same). It
  differs from ir-measures' ``Compat``, which Penha et al. 2025 use (see :func:`_compat_hm`).
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data.trec import IdDictionary, Qrels, Run
from .ties.policy import ScoreOrder, ensure_tie_free, is_tie_free, score_order
from ..errors import ConfigError

__all__ = [
    "DEFAULT_MEASURES",
    "EXP_GAINS",
    "describe_measure",
    "BACKENDS",
    "FAST_MEASURES",
    "parse_measures",
    "measure_names",
    "takes_rel",
    "RelConflict",
    "TREC_NAMES",
    "ACCEPTED_FORMS",
    "measure_key",
    "fast_supported",
    "per_query_matrix",
    "score_runs",
    "Scored",
    "Scorer",
    "split_top_level",
    "Judgments",
    "judgments",
    "Rows",
    "Context",
    "MEASURE_FUNCTIONS",
    "safe_ratio",
]

DEFAULT_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref")
BACKENDS = ("auto", "numpy", "ir_measures")
FAST_MEASURES = ("Judged", "Compat", "nDCG", "Bpref", "P", "R", "Success", "RR", "AP", "CompatHM")
EXP_GAINS = {rel: 2**rel - 1 for rel in range(8)}  # nDCGexp: 2^rel - 1 on the 0-7 interest scale
_EXP_ALIAS = "nDCGexp"
_HM_DEPTH = 1000  # the trec-health-misinfo/Compatibility script's fixed RBO depth


# ------------------------------------------------------------------------------------- measures

def split_top_level(spec: str) -> list[str]:
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


def parse_measures(spec: str | Sequence | None = None, rel: int | None = None) -> tuple:
    """ir-measures ``Measure`` objects from ``"Judged@100,Compat(p=0.95),nDCG@100,Bpref"`` or a list.

    ``None`` gives :data:`DEFAULT_MEASURES`. A trec_eval name ir-measures does not parse itself is read
    by ``ir_measures.parse_trec_measure`` (``map`` → AP, ``ndcg_cut_10`` → nDCG@10, ``P_10`` → P@10,
    ``recip_rank`` → RR). ``nDCGexp@k`` becomes ir-measures' ``nDCG(gains={0:0,1:1,2:3,…,7:127})@k``;
    ``CompatHM(p=…)`` is recjudge's own measure object. ``rel``: the lowest label counted as relevant,
    set on every measure that takes one (trec_eval's ``-l``; :func:`measure_names`).
    Raises ConfigError for a name or parameter ir-measures does not accept (saying the nearest known
    name), a measure no installed provider computes, or a measure given twice.
    """
    return tuple(m for _, m in _resolved(spec, rel))


def measure_names(spec: str | Sequence | None = None, rel: int | None = None) -> tuple[str, ...]:
    """The name recjudge prints for each measure of ``spec`` (one per :func:`parse_measures` item).

    An ir-measures string keeps the caller's spelling (``Compat(p=0.95)``); a trec_eval name is
    given in ir-measures spelling (``ndcg_cut_10`` → ``nDCG@10``), and so is a measure ``rel`` sets
    a threshold on (``P@10`` with ``rel=2`` → ``P(rel=2)@10``). Measures without a relevance
    threshold (nDCG, Compat, Judged) are left as they are: their gain is the label itself, as
    trec_eval's ``-l`` leaves its nDCG.
    """
    return tuple(name for name, _ in _resolved(spec, rel))


class RelConflict(ConfigError):
    """A measure whose own ``rel=`` differs from the ``rel`` asked for every measure."""

    def __init__(self, given: str, own: int, rel: int):
        super().__init__(f"measure {given!r} sets rel={own}, which contradicts rel {rel} for every measure; "
                         "drop one of the two")
        self.given, self.own, self.rel = given, own, rel


def takes_rel(measure) -> bool:
    """Whether ``measure`` has a relevance threshold (``rel=``) for trec_eval's ``-l`` to set."""
    return "rel" in getattr(measure, "SUPPORTED_PARAMS", {})


def _resolved(spec, rel: int | None) -> list[tuple[str, object]]:
    import ir_measures

    if spec is None:
        spec = DEFAULT_MEASURES
    items = split_top_level(spec) if isinstance(spec, str) else list(spec)
    if not items:
        raise ConfigError('no measures given; example: --measures "nDCG@100,Bpref"')
    out, seen = [], {}
    for item in items:
        name = item.strip() if isinstance(item, str) else item
        if isinstance(item, str) and item.strip().startswith("CompatHM"):
            m = _parse_compat_hm(item.strip())
            _check_params(m, item)
        elif isinstance(item, str):
            m, trec = _parse_one(item.strip())
            if trec:
                name = str(m)
        elif isinstance(item, ir_measures.measures.Measure):
            m = item
        else:
            raise ConfigError(f"measure {item!r} is neither a string nor an ir-measures Measure")
        if rel is not None and takes_rel(m):
            own = m.params.get("rel")
            if own is not None and own != rel:
                raise RelConflict(str(name), own, rel)
            if own is None:
                m = m(rel=rel)
                name = str(m)
        if m.NAME != "CompatHM":  # ours: checked by _parse_compat_hm, no ir-measures provider
            _check_params(m, item)
            if not ir_measures.DefaultPipeline.supports(m):
                raise ConfigError(f"measure {item!r} is not computed by any installed ir-measures provider")
        key = measure_key(m)
        if key in seen:
            raise ConfigError(f"measure {key} is given twice ({seen[key]!r} and {item!r})")
        seen[key] = item
        out.append((name, m))
    return out


# trec_eval's names that ir-measures maps (ir_measures.parse_trec_measure), for suggestions
TREC_NAMES = ("map", "map_cut", "ndcg", "ndcg_cut", "P", "recall", "recip_rank", "bpref", "Rprec", "success",
              "infAP", "num_q", "num_ret", "num_rel", "num_rel_ret", "set_P", "set_recall", "set_map", "set_F",
              "set_relative_P", "iprec_at_recall")
_OWN_NAMES = ("Hit", _EXP_ALIAS, "CompatHM")
ACCEPTED_FORMS = ("ir-measures names (nDCG@10, P@10, P(rel=2)@10, AP, RR, R@100, Bpref, Compat(p=0.95), "
                  "Judged@100), trec_eval names (ndcg_cut_10, P_10, map, recip_rank, bpref, recall_100, "
                  "success_10, Rprec) and recjudge's Hit@k, nDCGexp@k, CompatHM(p=0.95)")
_BASE = re.compile(r"([^\W\d][\w]*?)((?:[._]?\d|[@(]).*)?", re.S)


def _parse_one(item: str, suggest: bool = True):
    """(the measure of one string, whether it was a trec_eval name)."""
    import ir_measures

    try:
        m = ir_measures.parse_measure(_expand_alias(item))
        m.validate_params()
        return m, False
    except Exception as exc:  # ir-measures raises ValueError, NameError, AssertionError, ...
        first = exc
    why = ""
    try:
        found = _trec_measures(item)
    except ValueError as exc:
        found, why = None, str(exc)
    if found is not None and len(found) == 1:
        return found[0], True
    if found:
        shown = ", ".join(map(str, found[:4])) + (", …" if len(found) > 4 else "")
        cut = found[1].params.get("cutoff") if len(found) > 1 else None
        example = f", e.g. {item}_{cut} ({found[1]})" if item in TREC_NAMES and cut else ""
        raise ConfigError(f"measure {item!r} is trec_eval's family of {len(found)} measures ({shown}); "
                          f"name each one you want{example}")
    if "not yet supported" in why:
        raise ConfigError(f"measure {item!r} is a trec_eval measure that ir-measures does not compute; "
                          f"accepted: {ACCEPTED_FORMS}")
    # a name no one knows gets the nearest known one; a known name with a bad parameter, ir-measures' reason
    hint = _suggestion(item) if suggest and isinstance(first, NameError) else ""
    raise ConfigError(f"unknown measure {item!r} ({first}){hint}; accepted: {ACCEPTED_FORMS}") from None


def _trec_measures(item: str) -> list | None:
    """``ir_measures.parse_trec_measure(item)``, quiet (it prints the measures of a set it skips)."""
    import contextlib
    import io

    import ir_measures

    if not _BASE.fullmatch(item) or any(c in item for c in "@()= "):
        return None
    with contextlib.redirect_stdout(io.StringIO()):
        return list(ir_measures.parse_trec_measure(item))


@functools.cache
def _known_names() -> tuple[str, ...]:
    from ir_measures.measures import registry

    return (*sorted(registry), *_OWN_NAMES)


def _suggestion(item: str) -> str:
    """``"; did you mean nDCG@10?"`` for ``ndcg@10``: the known name its name matches case-insensitively,
    else the closest (difflib), with the rest of the string kept; the ir-measures spelling first."""
    import difflib

    match = _BASE.fullmatch(item)
    if match is None:
        return ""
    base, rest = match.group(1), match.group(2) or ""
    ir_names, trec = _known_names(), TREC_NAMES
    by_lower: dict[str, list[str]] = {}
    for n in (*ir_names, *trec):
        by_lower.setdefault(n.lower(), []).append(n)
    same = base.lower() in by_lower
    close = [base.lower()] if same else difflib.get_close_matches(base.lower(), list(by_lower), n=3, cutoff=0.6)
    cutoff = re.fullmatch(r"[._@]?(\d+)", rest)
    for low in close:
        for name in by_lower[low]:
            tails = [rest]
            if cutoff:  # P_10 ↔ P@10: the cutoff in the other family's spelling
                tails.append(("@" if name in ir_names else "_") + cutoff.group(1))
            for tail in tails:
                try:
                    m = _parse_compat_hm(name + tail) if name == "CompatHM" else _parse_one(name + tail, False)[0]
                except ConfigError:
                    continue
                shown = (name + tail if name in _OWN_NAMES else str(m) if name in ir_names
                         else f"{name}{tail} ({m})")
                return f"; did you mean {shown}?"
    if same:  # the name, but not these parameters
        for name in by_lower[base.lower()]:
            try:
                m = _parse_compat_hm(name) if name == "CompatHM" else _parse_one(name, False)[0]
            except ConfigError:
                continue
            shown, params = name if name in _OWN_NAMES else m.NAME, ", ".join(m.SUPPORTED_PARAMS) or "no parameter"
            return f"; did you mean {shown}? ({shown} takes {params})"
    return ""


_MAX_CUTOFF = 2**31 - 1  # trec_eval keeps cutoffs in a C int


def _expand_alias(item: str) -> str:
    """The aliases every command accepts: ``nDCGexp@k`` → the ir-measures string with gains 2^rel − 1
    for rel 0–7; ``Hit@k`` → ``Success@k`` (the recommender name of ir-measures' measure)."""
    if item == "Hit" or item.startswith(("Hit@", "Hit(")):
        return "Success" + item[3:]
    if item != _EXP_ALIAS and not item.startswith(_EXP_ALIAS + "@"):
        return item
    return f"nDCG(gains={_gains_text(EXP_GAINS)})" + item[len(_EXP_ALIAS):]


@functools.cache
def _compat_hm_class():
    """The ``CompatHM`` measure class, built on first use (ir-measures is imported lazily)."""
    from ir_measures.measures import Measure, ParamInfo

    class CompatHM(Measure):
        """Compatibility as the trec-health-misinfo/Compatibility script computes it (the ML-32M-ext release's)."""

        __name__ = "CompatHM"
        NAME = "CompatHM"
        SUPPORTED_PARAMS = {"p": ParamInfo(dtype=float, default=0.95, desc="persistence")}  # noqa: RUF012 - as ir-measures declares it

    return CompatHM


def _parse_compat_hm(item: str):
    """``CompatHM`` or ``CompatHM(p=0.9)``: the one parameter is the persistence p."""
    import ast

    cls = _compat_hm_class()
    rest = item[len("CompatHM"):].replace(" ", "")
    if rest == "":
        return cls()
    try:
        call = ast.parse("f" + rest, mode="eval").body
        ok = isinstance(call, ast.Call) and not call.args and [k.arg for k in call.keywords] == ["p"]
        p = ast.literal_eval(call.keywords[0].value) if ok else None
    except (SyntaxError, ValueError):
        ok, p = False, None
    if not ok or isinstance(p, bool) or not isinstance(p, (int, float)):
        raise ConfigError(f"unknown measure {item!r}; CompatHM takes one parameter, the persistence: CompatHM(p=0.95)")
    return cls(p=float(p))


def _check_params(m, given) -> None:
    """Parameter ranges ir-measures leaves unchecked: they would give NaN, 0 or a crash in pytrec_eval."""
    params = m.params
    cutoff = params.get("cutoff")
    if cutoff is not None and not (isinstance(cutoff, int) and 1 <= cutoff <= _MAX_CUTOFF):
        raise ConfigError(f"measure {given!r}: the cutoff must be a whole number from 1 to {_MAX_CUTOFF}, "
                          f"not {cutoff!r}; example: {m.NAME}@10")
    if "p" in params and not (isinstance(params["p"], (int, float)) and 0 < params["p"] < 1):
        raise ConfigError(f"measure {given!r}: the persistence p must lie strictly between 0 and 1; "
                          "example: Compat(p=0.95)")
    if "rel" in params and not (isinstance(params["rel"], int) and 1 <= params["rel"] <= _MAX_CUTOFF):
        raise ConfigError(f"measure {given!r}: rel is the lowest label counted as relevant and must be a whole "
                          f"number of at least 1 (trec_eval counts unjudged documents as relevant below 1); "
                          f"example: {m.NAME}(rel=1)")


def measure_key(measure) -> str:
    """The name ir-measures prints, which omits default parameters: ``Compat(p=0.95)`` is ``Compat``."""
    return str(measure)


def _gains_text(gains: dict) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in sorted(gains.items())) + "}"


def describe_measure(measure) -> str:
    """One line saying what ``measure`` computes, gain function and variant included.

    ``"nDCG@100, linear gain (trec_eval)"``, ``"nDCGexp@100: nDCG@100, exponential gain 2^rel − 1,
    labels 0–7"``, ``"Compat(p=0.95), ir-measures / claclark"``; for reports, JSON and cards.
    """
    m = parse_measures([measure])[0] if isinstance(measure, str) else measure
    name, params = m.NAME, m.params
    at = f"@{params['cutoff']}" if "cutoff" in params else ""
    if name == "nDCG":
        gains = params.get("gains")
        extra = ", judged documents only" if params.get("judged_only") else ""
        extra += f", discount {params['dcg']}" if params.get("dcg", "log2") != "log2" else ""
        if gains is None:
            return f"nDCG{at}, linear gain (trec_eval){extra}"
        if gains == EXP_GAINS:
            return f"nDCGexp{at}: nDCG{at}, exponential gain 2^rel − 1, labels 0–7{extra}"
        return (f"nDCG{at}, gains {_gains_text(gains)} (trec_eval; an unlisted label gains its own value)"
                f"{extra}")
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


def fast_supported(measure) -> bool:
    """Whether the numpy path computes ``measure`` (else ``auto`` asks ir-measures)."""
    name, params = measure.NAME, measure.params
    if name not in FAST_MEASURES or params.get("judged_only", False):
        return False
    if name == "nDCG":
        gains = params.get("gains")
        whole = gains is None or all(isinstance(v, int) and not isinstance(v, bool) for v in gains.values())
        return whole and params.get("dcg", "log2") == "log2"
    if name == "RR" and "cutoff" in params:  # pytrec_eval has no RR@k; another provider does it
        return False
    if name in ("P", "R", "Success", "RR", "AP", "Bpref"):
        # rel <= 0 would make trec_eval count its internal "unjudged" codes as relevant
        return int(measure["rel"] if "rel" in measure.SUPPORTED_PARAMS else 1) >= 1
    return True


# -------------------------------------------------------------------------------------- encoding

class _Lookup:
    """Position of each value among ``keys`` (-1 when absent)."""

    def __init__(self, keys: np.ndarray):
        self.keys = np.asarray(keys, dtype=object)
        self._index = pd.Index(self.keys)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return self._index.get_indexer(np.asarray(values, dtype=object)).astype(np.int64, copy=False)


def _group_starts(codes: np.ndarray, *more: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in ``codes`` (and equal ``more``, when given)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    change = codes[1:] != codes[:-1]
    for other in more:
        change |= other[1:] != other[:-1]
    return np.flatnonzero(np.r_[True, change])


def _within_group_position(codes: np.ndarray, *more: np.ndarray) -> np.ndarray:
    """0-based position of each element inside its run of equal ``codes`` (and ``more``)."""
    starts = _group_starts(codes, *more)
    lengths = np.diff(np.r_[starts, len(codes)])
    return np.arange(len(codes), dtype=np.int64) - np.repeat(starts, lengths)


_MULT = np.uint32(0x9E3779B1)  # Knuth's multiplicative hash: a document's bucket inside its query


def _bucket_shift(counts: np.ndarray) -> np.ndarray:
    """Per query, the right shift that maps a 32-bit hash to one of 2^b buckets, 2^b about half its
    judgments (at most a few documents per bucket)."""
    bits = np.maximum(np.ceil(np.log2(np.maximum(counts, 1))).astype(np.int64) - 1, 0)
    return (32 - bits).astype(np.uint32)


def _buckets(dcode: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Each document's bucket inside its query (uint32: the product wraps modulo 2^32, as the hash wants)."""
    h = dcode.astype(np.uint32) * _MULT
    # a shift by 32 (a query of one or two documents: one bucket) is not defined on uint32
    return np.where(shift < 32, h >> np.minimum(shift, np.uint32(31)), np.uint32(0)) if (shift >= 32).any() \
        else h >> shift


@dataclass(frozen=True, eq=False)
class Judgments:
    """The qrels of the evaluated queries as integer codes, grouped by query.

    Inside a query, documents are ordered by a hash bucket (then code): a document is looked up
    among the few of its bucket (``bstart[boff[q] + bucket]`` to the next), the join of a ranked
    row being a few vectorised gathers. ``qrow`` orders a query's judgments as the qrels list them
    (Compat's ideal list breaks full ties by qrels order; :func:`_rows_in_query`); ``above`` is, for
    a label > 0, the number of documents of the query with a higher label; ``starts[q]:starts[q + 1]``
    are the rows of query ``q``.
    """

    queries: list[str]
    qlookup: _Lookup
    dlookup: _Lookup
    ndoc: int
    qcode: np.ndarray   # the narrowest unsigned integers that hold the query codes
    dcode: np.ndarray   # int32, by bucket inside each query
    label: np.ndarray   # int8 for labels within ±63, else int16 or int32
    qrow: np.ndarray    # per judgment, its qrels row less its query's first (uint16 when they fit, else int32)
    above: np.ndarray   # the narrowest unsigned integers that hold the counts
    starts: np.ndarray  # int64, nq + 1
    shift: np.ndarray   # uint32 per query: see _bucket_shift
    boff: np.ndarray    # int64 per query: its first bucket
    bstart: np.ndarray  # per bucket + 1: its first judgment

    @property
    def nq(self) -> int:
        return len(self.queries)

    def join(self, qmap: np.ndarray, dmap: np.ndarray, qidx: np.ndarray, didx: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows that are judged, their index in the judgments arrays and their query code.

        Row r names the query ``qmap[qidx[r]]`` and the document ``dmap[didx[r]]`` (codes of these
        judgments; a negative index or code is absent). Returns ``(rows, j, q)``, int64, in row
        order: each row is compared with the judgments of its query's bucket only.
        """
        qmap = np.r_[np.asarray(qmap, dtype=np.int32), -1]
        dmap = np.r_[np.asarray(dmap, dtype=np.int32), -1]
        q = qmap[qidx if qidx.min(initial=0) >= 0 else np.where(qidx < 0, -1, qidx)]
        d = dmap[didx if didx.min(initial=0) >= 0 else np.where(didx < 0, -1, didx)]
        valid = (q >= 0) & (d >= 0)
        live = None if valid.all() else np.flatnonzero(valid)
        if live is not None:
            q, d = q[live], d[live]
        f = self.boff[q] + _buckets(d, self.shift[q])
        at, end = self.bstart[f], self.bstart[f + 1]
        del f
        # the first document of each row's bucket, for every row at once; then the rows whose bucket
        # holds more, a few rounds on fewer and fewer rows
        first = self.dcode[np.minimum(at, len(self.dcode) - 1)]
        j = np.where((at < end) & (first == d), at, -1).astype(np.int64)
        # a bucket holds its documents in code order: past a larger code, the row's document is not there
        todo = np.flatnonzero((first < d) & (at + 1 < end))
        step = 1
        while len(todo):
            a = at[todo] + step
            got, want = self.dcode[a], d[todo]
            hit = got == want
            j[todo[hit]] = a[hit]
            todo = todo[(got < want) & (a + 1 < end[todo])]
            step += 1
        found = np.flatnonzero(j >= 0)
        rows = found if live is None else live[found]
        return rows, j[found], q[found].astype(np.int64)

    def find(self, qcode: np.ndarray, dcode: np.ndarray) -> np.ndarray:
        """Row of each (query code, document code) in the judgments arrays, -1 when not judged
        (``dcode`` is -1 for a document no query judges)."""
        rows, j, _ = self.join(np.arange(self.nq), np.arange(self.ndoc, dtype=np.int32), qcode, dcode)
        out = np.full(len(qcode), -1, dtype=np.int64)
        out[rows] = j
        return out

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per query, how many judged documents satisfy ``mask``."""
        return np.bincount(self.qcode[mask], minlength=self.nq).astype(np.int64)

    def segment(self, q: int) -> tuple[int, int]:
        """Rows of query ``q`` in the judgments arrays (sorted by query first)."""
        return int(self.starts[q]), int(self.starts[q + 1])

    def ideal_dcg(self, cutoff: int | None, gains: Mapping[int, int] | None = None) -> np.ndarray:
        """trec_eval's ideal DCG per query: gains > 0 in descending order, log2 discount."""
        gain = self.label if gains is None else _apply_gains(self.label, gains)
        pos_mask = gain > 0
        q, lab = self.qcode[pos_mask], gain[pos_mask]
        order = np.lexsort((-lab, q))
        q, lab = q[order], lab[order]
        pos = _within_group_position(q)
        keep = pos < cutoff if cutoff is not None else np.ones(len(q), bool)
        gains = lab[keep] / np.log2(pos[keep] + 2.0)
        return np.bincount(q[keep], weights=gains, minlength=self.nq)


def _rows_in_query(qrow: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The qrels rows made relative to their query's first row, 16-bit when they fit (qrels written
    user by user): only compared within one query (Compat's qrels order), they keep that order."""
    if len(qrow) <= np.iinfo(np.uint16).max:  # every row number fits as it is
        return qrow.astype(np.uint16)
    nonempty = starts[:-1] < starts[1:]
    first = np.zeros(len(starts) - 1, dtype=qrow.dtype)
    first[nonempty] = np.minimum.reduceat(qrow, starts[:-1][nonempty])
    rel = qrow - np.repeat(first, np.diff(starts))
    return rel.astype(np.uint16) if int(rel.max()) <= np.iinfo(np.uint16).max else qrow


def _apply_gains(label: np.ndarray, gains: Mapping[int, int]) -> np.ndarray:
    """Labels mapped through ``gains`` as ir-measures does before calling trec_eval (an unlisted
    label keeps its value; a gain <= 0 then counts nothing)."""
    out = label.astype(np.int64)  # a gain may not fit the labels' int32
    for rel, gain in gains.items():
        out[label == rel] = gain
    return out


def _labels_above(qcode: np.ndarray, label: np.ndarray, nq: int) -> np.ndarray:
    """For each judged document, how many documents of its query have a higher label."""
    if len(label) == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(label.min()), int(label.max())
    width = hi - lo + 1
    if nq * width <= 50_000_000:  # counting, no sort: labels are small integers in practice
        flat = qcode.astype(np.int32) * np.int32(width) + (label - lo).astype(np.int32)  # below 5e7
        counts = np.bincount(flat, minlength=nq * width).reshape(nq, width)
        above = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1] - counts  # labels strictly higher
        return above.ravel().astype(np.int32)[flat]  # counts within one query
    by_label = np.lexsort((-label, qcode))
    sq, sl = qcode[by_label], label[by_label]

    def first_of_group(*keys: np.ndarray) -> np.ndarray:
        starts = _group_starts(*keys)
        return np.repeat(starts, np.diff(np.r_[starts, len(sq)]))

    out = np.empty(len(label), dtype=np.int64)
    out[by_label] = first_of_group(sq, sl) - first_of_group(sq)
    return out


def _narrowest(lo: int, hi: int, margin: int = 1) -> type:
    """The narrowest of int8/int16/int32 (uint16 for non-negative values) holding ``margin`` × [lo, hi]."""
    if lo >= 0 and hi * margin <= np.iinfo(np.uint16).max and margin == 1:
        return np.uint8 if hi <= np.iinfo(np.uint8).max else np.uint16
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min < lo * margin and hi * margin < np.iinfo(t).max:
            return t
    return np.int64


def judgments(qrels: Qrels, queries: list[str]) -> Judgments:
    """The judgments of ``queries`` (sorted query ids; query code = index) coded for lookups."""
    qlookup = _Lookup(np.array(queries, dtype=object))
    codes = qrels.codes  # the reader's codes: no string is hashed again
    # int32 throughout (labels have at most nine digits, read_qrels): a few row-length arrays at a
    # time, since one label set of 100,000 users holds 60 million judgments
    small = np.int32 if len(codes.qcode) < 2**31 else np.int64
    qcode = qlookup(codes.qids).astype(np.int32)[codes.qcode]
    keep = None
    if (qcode < 0).any():
        keep = np.flatnonzero(qcode >= 0)
        qcode = qcode[keep]
    dcode = codes.dcode if keep is None else codes.dcode[keep]
    docs = codes.docids
    ndoc = max(len(docs), 1)
    nq = len(queries)
    shift = _bucket_shift(np.bincount(qcode, minlength=nq))
    nbucket = np.left_shift(np.int64(1), (32 - shift).astype(np.int64))
    boff = np.cumsum(nbucket) - nbucket
    bucket = boff.astype(small)[qcode] + _buckets(dcode, shift[qcode]).astype(small)  # below the judgments' count
    bstart = np.r_[0, np.cumsum(np.bincount(bucket, minlength=int(nbucket.sum())))].astype(small)
    # the keys are unique (one label per pair), so any sort gives this one order
    key = bucket.astype(np.int64) * ndoc
    del bucket
    key += dcode
    order = np.argsort(key)
    del key
    qrow = (order if keep is None else keep[order]).astype(small)
    qcode, dcode = qcode[order], dcode[order].astype(np.int32)
    table_label = qrels.table.label  # narrow: no int64 copy of every label
    label = (table_label if keep is None else table_label[keep])[order].astype(np.int32)
    del order
    starts = np.searchsorted(qcode, np.arange(nq + 1)).astype(np.int64)
    above = _labels_above(qcode, label, nq)
    # the smallest integers that hold them (a few labels, a few hundred judgments per query: a
    # quarter of the memory): labels within ±63, so that a difference or a negation still fits
    above = above.astype(_narrowest(0, int(above.max(initial=0))))
    label = label.astype(_narrowest(int(label.min(initial=0)), int(label.max(initial=0)), margin=2))
    qcode = qcode.astype(_narrowest(0, nq))
    qrow = _rows_in_query(qrow, starts)
    return Judgments(queries, qlookup, _Lookup(docs), ndoc, qcode, dcode, label, qrow, above, starts, shift, boff,
                     bstart)


class RankedRun(NamedTuple):
    """A tie-free run in score order (query by query in string order, best first): what each label
    set scores. Built once per run (:func:`ranked_run`) and shared by every label set."""

    qids: np.ndarray    # object: the run's distinct qids in string order
    qrank: np.ndarray   # int32 per row: index into qids (non-decreasing)
    dcode: np.ndarray   # int32 per row: index into docids
    docids: np.ndarray  # object: the run's distinct docids
    score: np.ndarray   # float64 per row
    pos: np.ndarray     # int32 per row: 0-based rank inside its query
    counts: np.ndarray  # int64 per query (index into qids): its ranked rows


def ranked_run(run: Run, order: ScoreOrder | None = None) -> RankedRun:
    """``run`` (tie-free: :func:`~recjudge.evaluation.ties.policy.ensure_tie_free`) in its one score
    order (``order``, or :func:`~recjudge.evaluation.ties.policy.score_order`: no sort when the file
    is written in that order)."""
    so = order if order is not None else score_order(run)
    c = run.codes
    dcode = c.dcode if so.in_place else c.dcode[so.order]
    return RankedRun(so.qids, so.qrank, dcode, c.docids, so.score, so.pos, so.lengths)


def _resolved_ranking(run: Run, so: ScoreOrder, order: np.ndarray) -> RankedRun:
    """What ``ranked_run(resolve_ties(run, ...))`` gives, from the run's score order ``so`` and the
    policy's row ``order`` (:func:`~recjudge.evaluation.ties.policy.tie_order`): the scores rewritten
    as n, n-1, …, 1 per query; the policy moves rows inside blocks only, so queries and positions stay."""
    n = np.repeat(so.lengths, so.lengths)
    n -= so.pos
    return RankedRun(so.qids, so.qrank, run.codes.dcode[order], run.codes.docids, n.astype(np.float64), so.pos,
                     so.lengths)


class Rows(NamedTuple):
    """Ranked rows with their judgments: what every measure in :data:`MEASURE_FUNCTIONS` reads.

    Rows of one group (one query of one run) are contiguous and in rank order. They hold at least
    every judged row of the group (unjudged rows add nothing to any measure, so the engine leaves
    them out); ``length`` is the group's whole ranking. In :func:`per_query_matrix` a group is a
    query of one run; the tie audit builds them for one tie order of one run.
    """

    group: np.ndarray   # per row; groups are contiguous, rows in rank order inside
    pos: np.ndarray     # per row: 0-based rank
    score: np.ndarray   # per row
    j: np.ndarray       # per row: index into the judgments arrays, -1 when not judged
    judged: np.ndarray  # per row
    label: np.ndarray   # per row: the label, or the int64 minimum when not judged
    gq: np.ndarray      # per group: query code
    length: np.ndarray  # per group: ranked documents (0 when the run lacks the query)
    gstart: np.ndarray  # per group: first row
    nrows: np.ndarray   # per group: rows held here (length, or fewer when unjudged rows are left out)

    @property
    def ng(self) -> int:
        return len(self.gq)


_UNJUDGED = np.int64(np.iinfo(np.int64).min)  # a NumPy scalar: it makes an int32 label array int64


def _judged_rows(ranked: RankedRun, qmap: np.ndarray, doc_of_unique: np.ndarray, jd: Judgments,
                 joined: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Rows:
    """The judged rows of a ranked run, one group per query of ``jd`` (group = query code).

    ``qmap`` is the judgments' code of each of the run's queries (-1: not evaluated),
    ``doc_of_unique`` of each of its distinct docids; ``joined``: :meth:`Judgments.join`'s result,
    when the caller has it (:class:`_SharedJoin`).
    """
    at, j, group = joined if joined is not None else jd.join(qmap, doc_of_unique, ranked.qrank, ranked.dcode)
    nrows = np.bincount(group, minlength=jd.nq)
    length = np.zeros(jd.nq, dtype=np.int64)
    evaluated = qmap >= 0
    length[qmap[evaluated]] = ranked.counts[evaluated]
    return Rows(group, ranked.pos[at], ranked.score[at], j, np.ones(len(j), dtype=bool), jd.label[j],
                np.arange(jd.nq, dtype=np.int64), length, np.cumsum(nrows) - nrows, nrows)


_JOIN_SLICE = 1 << 20  # judgments joined at a time when label sets are matched (_SharedJoin)


class _SharedJoin:
    """One join of a run's rows for several label sets, when their judged pairs allow it.

    A label set whose every (query, document) pair is also judged by the first one (the same pool
    labelled twice, or part of it) takes its judged rows from the first one's join: ``of_first``
    maps each judgment of the first label set to its own (-1: not judged here). Others join alone.
    """

    def __init__(self, judgments: list[Judgments]):
        self.of_first: list[np.ndarray | None] = [None] * len(judgments)
        if len(judgments) < 2:
            return
        a = judgments[0]
        small = np.int32 if max(len(jd.qcode) for jd in judgments) < 2**31 else np.int64
        for i, b in enumerate(judgments[1:], start=1):
            qmap, dmap = a.qlookup(np.asarray(b.queries, dtype=object)), a.dlookup(b.dlookup.keys)
            of_first = np.full(len(a.qcode), -1, dtype=small)
            # a slice of b's judgments at a time: the join's temporaries of tens of millions of
            # judgments would set the peak memory of the whole evaluation
            for lo in range(0, len(b.qcode), _JOIN_SLICE):
                hi = min(lo + _JOIN_SLICE, len(b.qcode))
                rows, ja, _ = a.join(qmap, dmap, b.qcode[lo:hi], b.dcode[lo:hi])
                if len(rows) < hi - lo:  # a pair of b that a does not judge: b joins alone
                    of_first = None
                    break
                of_first[ja] = rows + lo
            self.of_first[i] = of_first

    def rows(self, i: int, first: tuple[np.ndarray, np.ndarray, np.ndarray] | None, jd: Judgments):
        """The join of label set ``i`` from the first one's (None: join alone)."""
        if first is None or self.of_first[i] is None:
            return None
        at, ja, _ = first
        j = self.of_first[i][ja]
        keep = np.flatnonzero(j >= 0)
        j = j[keep].astype(np.int64)
        return at[keep], j, jd.qcode[j].astype(np.int64)


class _Vocabulary:
    """The documents of several label sets as one index, so a run's docids are looked up once for all.

    With an :class:`~recjudge.data.trec.IdDictionary` the runs were read with, each dictionary id is
    looked up once for every run: a run then costs a lookup of the ids it added, not of all its ids.
    """

    def __init__(self, judgments: list[Judgments], dictionary: IdDictionary | None = None):
        docs = [jd.dlookup.keys for jd in judgments]
        self.lookup = _Lookup(pd.unique(np.concatenate(docs)) if docs else np.zeros(0, dtype=object))
        shared = self.lookup.keys
        # per label set: its document code of each shared document, with -1 appended for "absent"
        self.to_jd = [np.r_[jd.dlookup(shared), -1].astype(np.int32) for jd in judgments]
        self.dictionary = dictionary
        self.mapped = [np.zeros(0, dtype=np.int32) for _ in judgments]  # per label set: code of each dictionary id
        self._lock = threading.Lock()  # the reading thread and the scoring one both map runs

    def doc_codes(self, docids: np.ndarray) -> list[np.ndarray]:
        """Per label set, the document code (int32) of each of a run's distinct docids (-1: not judged)."""
        if self.dictionary is not None and self.dictionary.issued(docids):
            with self._lock:
                done = len(self.mapped[0]) if self.mapped else 0
                if len(docids) > done:
                    shared = self.lookup(docids[done:])
                    self.mapped = [np.concatenate([m, to_jd[shared]]) for m, to_jd in zip(self.mapped, self.to_jd)]
                return [m[:len(docids)] for m in self.mapped]
        shared = self.lookup(docids)  # -1 indexes the appended "absent"
        return [to_jd[shared] for to_jd in self.to_jd]


# ----------------------------------------------------------------------------- numpy measures

def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, 0.0 where ``den`` is 0 (a query without relevant documents scores 0)."""
    out = np.zeros(len(num), dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


class Context:
    """Per-call caches of per-query quantities (ideal DCG, relevant counts), shared by every run and measure."""

    def __init__(self, jd: Judgments):
        self.jd = jd
        self._cache: dict = {}

    def cached(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def relevant(self, rel: int) -> np.ndarray:
        jd = self.jd
        return self.cached(("R", rel), lambda: jd.count(jd.label >= rel))

    def ideal_dcg(self, cutoff: int | None, gains: Mapping[int, int] | None = None) -> np.ndarray:
        key = ("idcg", cutoff, None if gains is None else tuple(sorted(gains.items())))
        return self.cached(key, lambda: self.jd.ideal_dcg(cutoff, gains))

    def rbo_tables(self, p: float, depth: int) -> tuple[np.ndarray, np.ndarray]:
        tables = self._cache.get(("rbo", p))
        if tables is None or len(tables[0]) <= depth:
            tables = self._cache[("rbo", p)] = _rbo_tables(p, max(depth, 128))
        return tables


def _judged(m, rows: Rows, ctx) -> np.ndarray:
    cutoff = m.params.get("cutoff")
    hit = rows.judged if cutoff is None or _below(rows.pos, cutoff) else rows.judged & (rows.pos < cutoff)
    count = np.bincount(rows.group, weights=None if hit is rows.judged and hit.all() else hit, minlength=rows.ng)
    den = rows.length if cutoff is None else np.minimum(rows.length, cutoff)
    return safe_ratio(count.astype(np.float64), den.astype(np.float64))


def _below(pos: np.ndarray, cutoff: int) -> bool:
    """Whether every position is below ``cutoff`` (a run cut at depth <= k): no row needs masking."""
    return len(pos) == 0 or int(pos.max()) < cutoff


def _log2_ranks(ctx, pos: np.ndarray) -> np.ndarray | None:
    """``log2(pos + 2)`` per row, gathered from a table computed once (np.log2 of the same doubles,
    so every value is the one computed in place), or None when ``pos`` is not an integer array."""
    if pos.dtype.kind not in "iu" or len(pos) == 0:
        return None
    top = int(pos.max())
    table = ctx._cache.get("log2")
    if table is None or len(table) <= top:
        table = ctx._cache["log2"] = np.log2(np.arange(max(top + 1, 1024), dtype=np.float64) + 2.0)
    return table[pos]


def _ndcg(m, rows: Rows, ctx) -> np.ndarray:
    cutoff = m.params.get("cutoff")
    gains = m.params.get("gains")
    gain = rows.label if gains is None else _apply_gains(rows.label, gains)
    log2 = _log2_ranks(ctx, rows.pos) if isinstance(ctx, Context) else None
    if log2 is None:
        hit = gain > 0
        if cutoff is not None:
            hit &= rows.pos < cutoff
        dcg = np.bincount(rows.group[hit], weights=gain[hit] / np.log2(rows.pos[hit] + 2.0), minlength=rows.ng)
    else:
        # every row at once, a row without gain adding 0.0: x + 0.0 == x, so each sum is the one over
        # the rows with gain, in the same order
        w = np.maximum(gain, 0) / log2
        if cutoff is not None and not _below(rows.pos, cutoff):
            w[rows.pos >= cutoff] = 0.0
        dcg = np.bincount(rows.group, weights=w, minlength=rows.ng)
    return safe_ratio(dcg, ctx.ideal_dcg(cutoff, gains)[rows.gq])


def _bpref(m, rows: Rows, ctx) -> np.ndarray:
    rel = int(m["rel"])
    jd = ctx.jd
    big_r = ctx.relevant(rel)
    big_n = ctx.cached(("N", rel), lambda: jd.count((jd.label >= 0) & (jd.label < rel)))
    label = rows.label
    nonrel = (label >= 0) & (label < rel)
    hit = np.flatnonzero(label >= rel)
    g = rows.group[hit]
    # non-relevant rows ranked above each relevant one inside its group: a running count over all
    # rows less the count before the group's first row (a relevant row is not non-relevant itself)
    cum = np.cumsum(nonrel, dtype=np.int64)
    if len(cum):
        at = np.minimum(rows.gstart, len(cum) - 1)
        before_group = cum[at] - nonrel[at]
        nr = cum[hit] - before_group[g]
    else:
        nr = cum
    q = rows.gq[g]
    rr, nn = big_r[q], big_n[q]
    # 1 - min(n, R) / min(N, R), and 1 when n = 0: then the quotient is 0 / (min(N, R) or 1), so one
    # expression gives both, bit for bit (n > 0 implies N >= n > 0 and R >= 1 here)
    den = np.minimum(nn, rr)
    np.maximum(den, 1, out=den)
    frac = np.minimum(nr, rr) / den
    np.subtract(1.0, frac, out=frac)
    total = np.bincount(g, weights=frac, minlength=rows.ng)
    return safe_ratio(total, big_r[rows.gq].astype(np.float64))


def _precision_family(m, rows: Rows, ctx) -> np.ndarray:
    rel = int(m["rel"])
    cutoff = m.params.get("cutoff")
    hit = rows.label >= rel
    if cutoff is not None:
        hit &= rows.pos < cutoff
    count = np.bincount(rows.group[hit], minlength=rows.ng).astype(np.float64)
    if m.NAME == "P":
        return count / cutoff
    if m.NAME == "Success":
        return (count > 0).astype(np.float64)
    return safe_ratio(count, ctx.relevant(rel)[rows.gq].astype(np.float64))  # R@k


def _rr(m, rows: Rows, ctx) -> np.ndarray:
    hit = rows.label >= int(m["rel"])
    cutoff = m.params.get("cutoff")  # RR@k: the tie audit's closed form (pytrec_eval has no RR@k)
    if cutoff is not None:
        hit &= rows.pos < cutoff
    hit = np.flatnonzero(hit)
    out = np.zeros(rows.ng)
    g = rows.group[hit]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    out[g[first]] = 1.0 / (rows.pos[hit][first] + 1.0)
    return out


def _ap(m, rows: Rows, ctx) -> np.ndarray:
    rel = int(m["rel"])
    cutoff = m.params.get("cutoff")
    hit = rows.label >= rel
    if cutoff is not None:
        hit &= rows.pos < cutoff
    g = rows.group[hit]
    seen = _within_group_position(g) + 1.0  # relevant documents up to and including this one
    total = np.bincount(g, weights=seen / (rows.pos[hit] + 1.0), minlength=rows.ng)
    return safe_ratio(total, ctx.relevant(rel)[rows.gq].astype(np.float64))


def _rbo_tables(p: float, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """``C[d] = sum_{i<d} p^i/(i+1)`` and ``W[d] = sum_{i<d} p^i``, weights multiplied as ir-measures does."""
    w = np.cumprod(np.r_[1.0, np.full(max(depth - 1, 0), p)])[:depth]
    return np.r_[0.0, np.cumsum(w / np.arange(1, depth + 1))], np.r_[0.0, np.cumsum(w)]


def _n_ideal(ctx) -> np.ndarray:
    """Per query, the length of the ideal list (documents with a label > 0)."""
    jd = ctx.jd
    return ctx.cached("n_ideal", lambda: jd.count(jd.label > 0))


def _ideal_ranks(rows: Rows, jd: Judgments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows with a label > 0, their groups, and their ideal rank among the retrieved: higher
    labels first (the query's documents above them), then same-label documents in run order."""
    hit = np.flatnonzero(rows.label > 0)
    g, lab = rows.group[hit], rows.label[hit]
    ahead = np.empty(len(g), dtype=np.int64)
    if lab.dtype.itemsize <= 2:
        # NumPy's stable sort of 8- and 16-bit integers is a radix sort: one linear pass, rows kept
        # in group, then rank order inside each label
        by_label = np.argsort(lab, kind="stable")
        ahead[by_label] = _within_group_position(lab[by_label], g[by_label])
        return hit, g, jd.above[rows.j[hit]] + ahead
    top = int(lab.max()) if len(lab) else 0
    # the labels present, counted rather than sorted when they are small (they are > 0 here)
    values = np.flatnonzero(np.bincount(lab)) if top < 4096 else np.unique(lab)
    if len(values) <= 32:  # labels are a few small integers: one pass per label, no sort
        for v in values:
            same = np.flatnonzero(lab == v)  # rows stay in group, then rank order
            ahead[same] = _within_group_position(g[same])
    else:
        by_label = np.lexsort((-lab, g))  # stable: rank order inside each (group, label)
        ahead[by_label] = _within_group_position(g[by_label], lab[by_label])
    return hit, g, jd.above[rows.j[hit]] + ahead


def _compat(m, rows: Rows, ctx) -> np.ndarray:
    """RBO(ranking, ideal) / RBO(ideal, ideal), in closed form.

    The overlap at depth d counts the documents in both lists whose later position is < d, so
    each such document contributes ``C[depth] - C[max(rank, ideal rank)]``.
    """
    jd = ctx.jd
    p = float(m["p"])
    n_ideal = _n_ideal(ctx)[rows.gq]
    depth = np.maximum(rows.length, n_ideal)
    c_tab, w_tab = ctx.rbo_tables(p, int(depth.max(initial=0)))
    # ideal rank: higher labels first, then retrieved same-label documents by run score
    # (unretrieved ones score 0.0), then qrels order
    hit, g, ideal = _ideal_ranks(rows, jd)
    s = rows.score[hit]
    if np.any(s <= 0):
        ideal += _unretrieved_ahead(rows, jd, hit, s)
    later = np.maximum(rows.pos[hit], ideal)
    num = np.bincount(g, weights=c_tab[depth[g]] - c_tab[later], minlength=rows.ng)
    if not m["normalize"]:
        return safe_ratio(num, w_tab[depth])
    return safe_ratio(num, _best_rbo(c_tab, n_ideal, depth, ctx, p))


def _compat_hm(m, rows: Rows, ctx) -> np.ndarray:
    """Compatibility as the trec-health-misinfo/Compatibility script (the ML-32M-ext release's) computes it.

    claclark/Compatibility computes the same. Both lists are scored by RBO and the run's RBO is
    divided by the ideal list's, as ir-measures' ``Compat`` does, but:

    - depth: a fixed 1000 (the script's ``DEPTH``), not max(len(ranking), len(ideal)); an item at
      rank >= 1000 in either list adds nothing;
    - ideal order inside one label: retrieved items by run rank, then the unretrieved ones (their
      order cannot change the value: they overlap nothing). ir-measures orders them by run score
      with unretrieved items at score 0.0, so a retrieved item scoring < 0 goes after them;
    - which users count: the script reports and averages only users the run ranks and that have a
      label > 0. Such a user's value here is NaN (no value), so a system mean, which skips NaN,
      averages the same users; ir-measures gives both 0.0 and averages over every judged user;
    - RBO scale: the script divides RBO by ``sum_{i<1000} p^i``; the ratio of two RBOs cancels it.

    In closed form, as :func:`_compat`: an item in both lists adds ``C[1000] - C[min(later, 1000)]``
    with ``later`` the larger of its two ranks; RBO(ideal, ideal) over n relevant items is
    ``sum_{k < min(n, 1000)} (C[1000] - C[k])``.
    """
    depth = _HM_DEPTH
    c_tab, _ = ctx.rbo_tables(float(m["p"]), depth)
    hit, g, ideal = _ideal_ranks(rows, ctx.jd)
    later = np.minimum(np.maximum(rows.pos[hit], ideal), depth)
    num = np.bincount(g, weights=c_tab[depth] - c_tab[later], minlength=rows.ng)
    n_ideal = np.minimum(_n_ideal(ctx)[rows.gq], depth)
    best = n_ideal * c_tab[depth] - np.r_[0.0, np.cumsum(c_tab[:depth])][n_ideal]
    out = np.full(rows.ng, np.nan)
    ok = (n_ideal > 0) & (rows.length > 0)
    out[ok] = num[ok] / best[ok]
    return out


def _best_rbo(c_tab, n_ideal, depth, ctx, p) -> np.ndarray:
    """RBO(ideal, ideal) numerators, computed once per distinct (ideal length, depth)."""
    n_ideal, depth = np.asarray(n_ideal, dtype=np.int64), np.asarray(depth, dtype=np.int64)
    width = int(depth.max(initial=0)) + 1
    pairs, inverse = np.unique(n_ideal * width + depth, return_inverse=True)  # one int64 key per pair
    cache = ctx.cached(("best", p), dict)
    vals = np.empty(len(pairs))
    for i, (k, dep) in enumerate(zip((pairs // width).tolist(), (pairs % width).tolist())):
        if (k, dep) not in cache:
            cache[(k, dep)] = float(np.sum(c_tab[dep] - c_tab[:k])) if k else 0.0
        vals[i] = cache[(k, dep)]
    return vals[inverse.ravel()]


def _unretrieved_ahead(rows: Rows, jd: Judgments, hit: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Unretrieved same-label documents (score 0.0) ranked ahead of a retrieved one scoring <= 0."""
    extra = np.zeros(len(hit), dtype=np.int64)
    for i in np.flatnonzero(s <= 0):
        row = hit[i]
        j = rows.j[row]
        g = rows.group[row]
        in_run = rows.j[rows.gstart[g]:rows.gstart[g] + rows.nrows[g]]
        lo, hi = jd.segment(int(jd.qcode[j]))
        same = np.zeros(len(jd.label), dtype=bool)
        same[lo:hi] = jd.label[lo:hi] == jd.label[j]
        same[in_run[in_run >= 0]] = False
        extra[i] = int(same.sum()) if s[i] < 0 else int((same & (jd.qrow < jd.qrow[j])).sum())
    return extra


MEASURE_FUNCTIONS = {
    "Judged": _judged, "nDCG": _ndcg, "Bpref": _bpref, "Compat": _compat,
    "P": _precision_family, "R": _precision_family, "Success": _precision_family,
    "RR": _rr, "AP": _ap, "CompatHM": _compat_hm,
}


# ------------------------------------------------------------------------------------- matrix

def _query_index(qrels: Qrels, queries: Sequence[str] | None) -> list[str]:
    if queries is None:
        return qrels.qids
    judged = set(qrels.codes.qids)
    wanted = sorted({str(q) for q in queries})
    missing = [q for q in wanted if q not in judged]
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise ConfigError(
            f"{len(missing)} requested queries have no judgments in qrels {qrels.name!r} ({shown}); "
            "a measure is undefined there — pass only judged queries")
    return wanted


def _tie_free(run: Run) -> Run:
    if is_tie_free(run):
        return run
    warnings.warn(f"run {run.name!r} has equal scores within a query (compared as float32, as trec_eval "
                  "does); ordered them with the default 'hash' policy (seed 0) — call "
                  "recjudge.data.trec.ensure_tie_free or resolve_ties to choose", stacklevel=3)
    return ensure_tie_free(run, "hash", 0)


def _check_exp_labels(measures, jd: Judgments, qrels: Qrels) -> None:
    """nDCGexp's gains cover labels 0-7; trec_eval would give a higher label the linear gain rel."""
    if not any(m.NAME == "nDCG" and m.params.get("gains") == EXP_GAINS for m in measures):
        return
    high = jd.label > max(EXP_GAINS)
    if high.any():
        at = int(np.flatnonzero(high)[0])
        raise ConfigError(
            f"qrels {qrels.name!r}: label {int(jd.label[at])} (user {jd.queries[int(jd.qcode[at])]!r}) is outside "
            "the 0-7 scale of nDCGexp (gain 2^rel - 1); map the labels onto 0-7 or give the gains yourself, "
            "e.g. nDCG(gains={0:0,1:1,2:3,...,8:255})@100")


def per_query_matrix(runs: Mapping[str, Run], qrels: Qrels, measures=DEFAULT_MEASURES,
                     queries: Sequence[str] | None = None, backend: str = "auto") -> dict[str, pd.DataFrame]:
    """Score every run on every query: one DataFrame per measure.

    Returns ``{measure_key(m): frame}``; keys are the names ir-measures prints (``nDCG@100``,
    ``Judged@100``, ``Bpref``; ``Compat(p=0.95)`` prints as ``Compat`` since 0.95 is its default).
    Each frame has index = query ids (sorted strings; the qrels' queries, or ``queries``, which
    must all be judged), columns = run names in the order given, float64 values.

    Semantics (those of ir-measures 0.4.3, which the ``numpy`` path reproduces):

    - A query the run does not rank scores 0.0 (trec_eval ``-c``); queries the run ranks but the
      qrels lack are ignored.
    - Runs must be tie-free (:func:`recjudge.data.trec.ensure_tie_free`): trec_eval compares scores
      as float32 and breaks ties by docid descending, ir-measures' Python providers by docid
      ascending. A run whose scores tie in float32 (whatever its ``tie_policy`` says) is resolved
      here with the ``hash`` policy (seed 0) and a warning.
    - Negative labels count as judged for ``Judged`` and are otherwise ignored: trec_eval reads
      them as "in the pool but unjudged" (no gain, neither relevant nor non-relevant for Bpref).
    - ``nDCG@k``: gain = label, discount log2(rank + 1), ideal from every label > 0 of the query
      in the qrels (cut at k); 0.0 when the query has no label > 0.
    - ``Bpref``: R = labels >= rel, N = labels in [0, rel); each retrieved relevant document adds
      ``1 - min(n, R) / min(N, R)`` with n the judged non-relevant documents above it (1 when
      n = 0); divided by R; 0.0 when R = 0.
    - ``Judged@k``: judged documents in the top k / min(k, run length); any label counts,
      including 0 and negative ones, so a query without relevant documents still scores.
    - ``Compat(p)``: RBO(ranking, ideal, p, depth) / RBO(ideal, ideal, p, depth) with ideal = the
      documents with label > 0 by label desc, then run score desc (unretrieved = 0.0), then qrels
      order, and depth = max(len(ranking), len(ideal)); 0.0 when the ideal list is empty.
    - ``P@k`` divides by k, ``R@k`` and ``AP`` by the query's number of relevant documents,
      ``RR`` is 1 / rank of the first relevant document (0.0 when none is retrieved).
    - ``nDCG(gains={…})@k`` and its alias ``nDCGexp@k``: each label is mapped through the gains
      first (an unlisted label keeps its value), then as ``nDCG@k``. nDCGexp refuses labels above 7.
    - ``CompatHM(p)``: the trec-health-misinfo/Compatibility script's Compatibility
      (:func:`_compat_hm`); NaN for a query the run does not rank or without a label > 0, as the
      script leaves them out of its mean. Computed here whatever the backend.

    ``backend``: ``auto`` (numpy where :func:`fast_supported`, ir-measures otherwise), ``numpy``
    (ConfigError for a measure it does not cover) or ``ir_measures`` (the reference).
    """
    parsed = _checked(measures, backend)
    names = list(runs)
    scorer = Scorer(qrels, parsed, queries, backend, len(names))
    for col, name in enumerate(names):
        scorer.add(_tie_free(runs[name]), col)
    return scorer.frames(names)


class Scored(NamedTuple):
    """What :func:`score_runs` gives: per label set, the matrices of :func:`per_query_matrix`; per run,
    its tied-user share at k before tie resolution; per label set and run, the judged users it ranks."""

    matrices: dict[str, dict[str, pd.DataFrame]]
    tied_user_share: dict[str, float]
    users_ranked: dict[str, dict[str, int]]  # label set → run → judged users the run ranks


def score_runs(runs: Mapping[str, Run | str | os.PathLike], label_sets: Mapping[str, Qrels | tuple],
               measures=DEFAULT_MEASURES, tie_policy: str = "hash", seed: int = 0, k: int | None = 100,
               backend: str = "auto", timings: dict[str, float] | None = None) -> Scored:
    """Score every run under every label set in one pass, holding one run in memory at a time.

    ``runs`` maps a name to a :class:`~recjudge.data.trec.Run` or to a run file, read when its turn
    comes and dropped after (:func:`recjudge.data.trec.run_paths` names the files of a folder), so
    the peak memory does not grow with the number of runs: the next file is read in a second thread
    while the current run is scored (polars parses without the GIL), so at most two
    runs are in memory. Each run is put in score order once (:func:`~recjudge.data.trec.score_order`,
    no sort when the file is written that way); its tied-user share at ``k`` is taken from that
    order before :func:`~recjudge.data.trec.ensure_tie_free` applies ``tie_policy`` / ``seed``, and
    the tie-free order is what every label set scores. ``label_sets`` maps a name to qrels, or to
    ``(qrels, queries)`` with ``queries`` as in :func:`per_query_matrix`. The matrices equal
    ``per_query_matrix(tie_free_runs, qrels, measures, queries, backend)``.

    ``timings``, when given, gets the seconds spent per stage added to it (``judgments``, ``read
    runs`` — waiting for the reading thread —, ``tie share``, ``ensure_tie_free``, ``docid lookup``,
    ``matrices, <label set>``), summed over the runs: the per-stage split of the benchmark.
    """
    from concurrent.futures import ThreadPoolExecutor

    from ..data.trec import read_run
    from .ties.policy import tie_free, tie_order, tied_user_share

    clock = _StageClock(timings)
    parsed = _checked(measures, backend)
    names = list(runs)
    dictionary = IdDictionary()
    vocabulary: _Vocabulary | None = None  # set once the judgments are built

    def load(name: str) -> tuple[Run, list[np.ndarray] | None]:
        # in the reading thread: the file, then its documents' codes in every label set
        run = runs[name]
        if not isinstance(run, Run):
            run = read_run(run, name=name, dictionary=dictionary)
        return run, None if vocabulary is None else vocabulary.doc_codes(run.codes.docids)

    def scorer(value) -> Scorer:
        qrels, queries = value if isinstance(value, tuple) else (value, None)
        return Scorer(qrels, parsed, queries, backend, len(names))

    shares: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="recjudge-read") as reader:
        # the label sets' judgments one after the other (side by side, their sorts would add up to the
        # peak memory), then the first run
        scorers = {label: scorer(value) for label, value in label_sets.items()}
        ahead = reader.submit(load, names[0]) if names else None
        vocabulary = _Vocabulary([sc.jd for sc in scorers.values()], dictionary)
        shared = _SharedJoin([sc.jd for sc in scorers.values()])
        keep_runs = any(sc.reference is not None for sc in scorers.values())  # ir-measures reads the run
        clock.lap("judgments")
        for col, name in enumerate(names):
            run, doc_codes = ahead.result()
            ahead = reader.submit(load, names[col + 1]) if col + 1 < len(names) else None
            clock.lap("read runs")
            so = score_order(run)  # once: the tie share, the tie policy and the measures share it
            shares[name] = tied_user_share(run, k, order=so)
            clock.lap("tie share")
            docids = run.codes.docids
            if keep_runs or is_tie_free(run, order=so):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # 'input' warns once per run; the caller says it once
                    run, so = tie_free(run, tie_policy, seed, so)
                ranked = ranked_run(run, so)
            else:  # no measure needs the resolved run itself: its ranking alone, as resolve_ties orders it
                ranked = _resolved_ranking(run, so, tie_order(run, so, tie_policy, seed))
            clock.lap("ensure_tie_free")
            if doc_codes is None or ranked.docids is not docids:  # read before the judgments were ready
                doc_codes = vocabulary.doc_codes(ranked.docids)
            clock.lap("docid lookup")
            first = None
            for i, ((label, scorer), doc_of_unique) in enumerate(zip(scorers.items(), doc_codes)):
                joined = scorer.add(run, col, doc_of_unique, ranked, shared.rows(i, first, scorer.jd))
                first = joined if i == 0 else first
                clock.lap(f"matrices, {label}")
            del run, ranked, so
    return Scored({label: sc.frames(names) for label, sc in scorers.items()}, shares,
                  {label: dict(zip(names, sc.users_ranked.tolist())) for label, sc in scorers.items()})


class _StageClock:
    """Seconds since the last lap, added to ``timings[stage]``; does nothing without ``timings``."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
            self.last = now


def _checked(measures, backend: str) -> tuple:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    parsed = parse_measures(measures)
    if backend == "numpy":
        slow = [measure_key(m) for m in parsed if not fast_supported(m)]
        if slow:
            raise ConfigError(f"the numpy backend does not compute {', '.join(slow)}; use backend='auto'")
    return parsed


class Scorer:
    """One label set's scoring: its judgments and caches, and the query × run matrices filled run by run
    (``parsed``: :func:`parse_measures`; ``queries`` as in :func:`per_query_matrix`)."""

    def __init__(self, qrels: Qrels, parsed: tuple, queries: Sequence[str] | None, backend: str, n_runs: int,
                 context: Context | None = None):
        # CompatHM has no ir-measures provider: every backend computes it here
        self.fast = [m for m in parsed if (backend != "ir_measures" or m.NAME == "CompatHM") and fast_supported(m)]
        slow = [m for m in parsed if m not in self.fast]
        self.index = _query_index(qrels, queries)
        # ``context``: these very judgments and their caches, when the caller built them already
        if context is not None and list(context.jd.queries) != self.index:
            raise ConfigError("the given judgments are of other queries")
        self.ctx = context if context is not None else Context(judgments(qrels, self.index))
        self.jd = self.ctx.jd
        _check_exp_labels(parsed, self.jd, qrels)
        # a query a run does not rank: 0 (trec_eval -c), or no value for CompatHM (as its script)
        self._start = {measure_key(m): np.nan if m.NAME == "CompatHM" else 0.0 for m in parsed}
        self.reset(n_runs)
        self.reference = _Reference(qrels, slow, self.index) if slow else None

    def reset(self, n_runs: int) -> None:
        """Empty matrices for ``n_runs`` runs; the judgments and their caches are kept."""
        self.values = {k: np.full((len(self.index), n_runs), start) for k, start in self._start.items()}
        self.users_ranked = np.zeros(n_runs, dtype=np.int64)  # per run: judged users it ranks

    def add(self, run: Run, col: int, doc_of_unique: np.ndarray | None = None, ranked: RankedRun | None = None,
            joined: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        """Fill column ``col`` with the scores of ``run`` (tie-free; ``ranked`` is its :func:`ranked_run`,
        ``doc_of_unique`` the judgments' code of each of its distinct docids, ``joined`` its judged rows,
        when the caller has them). Returns the judged rows (:meth:`Judgments.join`), or None."""
        jd = self.jd
        if ranked is None:
            ranked = ranked_run(run)
        if doc_of_unique is None:
            doc_of_unique = jd.dlookup(ranked.docids).astype(np.int32)
        qmap = jd.qlookup(ranked.qids)
        self.users_ranked[col] = int((qmap >= 0).sum())
        if self.fast and len(ranked.qrank):
            if joined is None:
                joined = jd.join(qmap, doc_of_unique, ranked.qrank, ranked.dcode)
            rows = _judged_rows(ranked, qmap, doc_of_unique, jd, joined)
            for m in self.fast:
                self.values[measure_key(m)][:, col] = MEASURE_FUNCTIONS[m.NAME](m, rows, self.ctx)
        if self.reference is not None:
            self.reference.fill(run, col, self.values)
        return joined

    def frames(self, names: list[str]) -> dict[str, pd.DataFrame]:
        return {k: pd.DataFrame(v, index=pd.Index(self.index, name="qid"), columns=pd.Index(names, name="run"))
                for k, v in self.values.items()}


class _Reference:
    """ir-measures' ``iter_calc`` (the reference semantics), one evaluator per measure, run by run.

    pytrec_eval hangs or crashes on a query whose labels are all negative (it sizes an array by
    the largest label + 1), so the measures it serves get the qrels without such queries; each
    of those measures is 0.0 there anyway (no relevant document), which ir-measures' default fills.
    Judged and Compat (Python providers) see every query.
    """

    def __init__(self, qrels: Qrels, measures, index: list[str]):
        import ir_measures

        self.wanted = set(index)
        self.row = {q: i for i, q in enumerate(index)}
        qf = qrels.frame
        keep = qf.qid.isin(self.wanted).to_numpy()
        qrels_dict: dict[str, dict[str, int]] = {}
        for q, d, lab in zip(qf.qid.to_numpy()[keep], qf.docid.to_numpy()[keep], qf.label.to_numpy()[keep]):
            qrels_dict.setdefault(q, {})[d] = int(lab)
        usable = {q: labels for q, labels in qrels_dict.items() if max(labels.values()) >= 0}
        # One evaluator per measure: pytrec_eval takes one gain map and one judged_only switch per
        # evaluator, so nDCG@10 beside nDCG(gains=…)@10 in one evaluator gets one of the two settings
        # (which one depends on set order, i.e. on PYTHONHASHSEED).
        self.evaluators = []
        for m in measures:
            labels = qrels_dict if m.NAME in ("Judged", "Compat") else usable
            if labels:
                self.evaluators.append((measure_key(m), ir_measures.evaluator([m], labels)))

    def fill(self, run: Run, col: int, values: dict[str, np.ndarray]) -> None:
        f = run.frame
        run_dict: dict[str, dict[str, float]] = {}
        for q, d, s in zip(f.qid.to_numpy(), f.docid.to_numpy(), f.score.to_numpy()):
            if q in self.wanted:
                run_dict.setdefault(q, {})[d] = float(s)
        for key, evaluator in self.evaluators:
            for metric in evaluator.iter_calc(run_dict):
                values[key][self.row[metric.query_id], col] = metric.value
