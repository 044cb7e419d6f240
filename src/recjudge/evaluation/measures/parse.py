"""Measure names: ir-measures strings, trec_eval names and recjudge's aliases, parsed, checked and suggested.

``parse_measures("Judged@100,Compat(p=0.95),nDCG@100,Bpref")`` gives ir-measures ``Measure`` objects.
recjudge's aliases: ``Hit@k`` is ir-measures' ``Success@k``; ``nDCGexp@k`` (and ``nDCGexp``) is
ir-measures' ``nDCG(dcg='exp-log2')@k``, the exponential-gain nDCG of Penha et al. 2025 (gain
2^rel − 1); ``CompatHM(p)`` is a measure recjudge registers with ir-measures
(:mod:`~recjudge.evaluation.measures.compat_hm`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from ...errors import ConfigError
from . import compat_hm  # noqa: F401 - registers CompatHM with ir-measures before any name is parsed

DEFAULT_MEASURES = ("Judged@100", "Compat(p=0.95)", "nDCG@100", "Bpref")
EXP_ALIAS = "nDCGexp"
_MAX_CUTOFF = 2**31 - 1  # trec_eval keeps cutoffs in a C int

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
    ``recip_rank`` → RR). ``nDCGexp@k`` becomes ir-measures' ``nDCG(dcg='exp-log2')@k`` and ``Hit@k``
    ``Success@k``; ``CompatHM(p=…)`` is the measure recjudge registers with ir-measures. ``rel``: the lowest label counted as relevant,
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
        if isinstance(item, str):
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
_ALIASES = ("Hit", EXP_ALIAS)  # recjudge's spellings of ir-measures measures
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
    # a name no one knows gets the nearest known one; a known name with a bad parameter, the ones it takes
    hint = "" if not suggest else _suggestion(item) if isinstance(first, NameError) else _params_hint(item)
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

    return (*sorted(registry), *_ALIASES)


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
                    m = _parse_one(name + tail, False)[0]
                except ConfigError:
                    continue
                shown = (name + tail if name in _ALIASES else str(m) if name in ir_names
                         else f"{name}{tail} ({m})")
                return f"; did you mean {shown}?"
    if same:  # the name, but not these parameters
        for name in by_lower[base.lower()]:
            try:
                m = _parse_one(name, False)[0]
            except ConfigError:
                continue
            shown, params = name if name in _ALIASES else m.NAME, ", ".join(m.SUPPORTED_PARAMS) or "no parameter"
            return f"; did you mean {shown}? ({shown} takes {params})"
    return ""


def _params_hint(item: str) -> str:
    """``"; CompatHM takes one parameter, p (persistence): e.g. CompatHM(p=0.95)"`` for a known name."""
    from ir_measures.measures import registry

    match = _BASE.fullmatch(item)
    m = registry.get(match.group(1)) if match else None
    if m is None:
        return ""
    params = m.SUPPORTED_PARAMS
    if len(params) != 1:
        return f"; {m.NAME} takes {', '.join(params) or 'no parameter'}"
    (key, info), = params.items()
    return f"; {m.NAME} takes one parameter, {key} ({info.desc}): e.g. {m.NAME}({key}={info.default!r})"


def _expand_alias(item: str) -> str:
    """The aliases every command accepts: ``nDCGexp@k`` → ``nDCG(dcg='exp-log2')@k`` (gain 2^rel − 1);
    ``Hit@k`` → ``Success@k`` (the recommender name of ir-measures' measure)."""
    if item == "Hit" or item.startswith(("Hit@", "Hit(")):
        return "Success" + item[3:]
    if item != EXP_ALIAS and not item.startswith(EXP_ALIAS + "@"):
        return item
    return "nDCG(dcg='exp-log2')" + item[len(EXP_ALIAS):]


def _check_params(m, given) -> None:
    """Parameter ranges ir-measures leaves unchecked: they would give NaN, 0 or a crash in pytrec_eval."""
    params = m.params
    cutoff = params.get("cutoff")
    if cutoff is not None and not (isinstance(cutoff, int) and 1 <= cutoff <= _MAX_CUTOFF):
        raise ConfigError(f"measure {given!r}: the cutoff must be a whole number from 1 to {_MAX_CUTOFF}, "
                          f"not {cutoff!r}; example: {m.NAME}@10")
    if "p" in params and not (isinstance(params["p"], (int, float)) and 0 < params["p"] < 1):
        raise ConfigError(f"measure {given!r}: the persistence p must lie strictly between 0 and 1; "
                          f"example: {m.NAME}(p=0.95)")
    if "rel" in params and not (isinstance(params["rel"], int) and 1 <= params["rel"] <= _MAX_CUTOFF):
        raise ConfigError(f"measure {given!r}: rel is the lowest label counted as relevant and must be a whole "
                          f"number of at least 1 (trec_eval counts unjudged documents as relevant below 1); "
                          f"example: {m.NAME}(rel=1)")


def measure_key(measure) -> str:
    """The name ir-measures prints, which omits default parameters: ``Compat(p=0.95)`` is ``Compat``."""
    return str(measure)

