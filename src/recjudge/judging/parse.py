"""Reading labels out of a model's answer: JSON, fenced JSON, or ``score: N`` text.

Anything that does not yield an in-range integer for every expected candidate is a failure with a
reason — never a label 0.
"""

from __future__ import annotations

import json
import re
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from .cache import CallRecord, Usage

__all__ = ["ParseResult", "parse_answer", "SINGLE", "outcome_from_answer", "record_from_body", "union_records",
           "usage_of"]

SINGLE = "_"  # the key of the only candidate when a call judges one item
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
# a number that starts a range ("0-7", "0 to 7") describes the scale, it is not an answer
_NUMBER = r"(-?\d+(?:\.\d+)?)(?!\d)(?!\.\d)(?!\s*(?:-|–|—|to)\s*-?\d)"
_SCORE = re.compile(r"\b(label|score|rating|interest|relevance|overall)\s*[\"']?\s*[:=]\s*" + _NUMBER, re.I)
# keys read first; "rating" last, since an answer may quote the user's ratings from the profile
_SCORE_GROUPS = (("label", "score", "overall", "relevance", "interest"), ("rating",))
# separators between key and number may hold a dash ("c1 - 2") but a dash touching the digits
# is the number's sign ("c1: -1" is -1, out of range)
_KEYED = re.compile(r"^\W*?\[?(c\d+)\]?(?:[^\w\n-]|-(?=\s))*(?:[a-z ]*[:=])?\s*" + _NUMBER + r"\s*$",
                    re.I | re.M)
_LABEL_KEYS = ("label", "score", "overall", "relevance", "interest", "rating")


@dataclass(frozen=True)
class ParseResult:
    labels: Mapping[str, int]
    errors: Mapping[str, str] = field(default_factory=dict)  # key -> reason
    criteria: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


def _json_candidates(text: str):
    yield text
    for m in _FENCE.finditer(text):
        yield m.group(1)
    start = text.find("{")
    if start >= 0:
        end = text.rfind("}")
        if end > start:
            yield text[start:end + 1]


def _load_json(text: str):
    for chunk in _json_candidates(text.strip()):
        try:
            return json.loads(chunk), True
        except (json.JSONDecodeError, ValueError):
            continue
    return None, False


def _as_int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(?:\.0+)?\s*", value):
        return int(float(value))
    return None


def _one(value, criteria: Sequence[str]) -> tuple[int | None, dict[str, int], str | None]:
    """A label (and criteria) from one answer value; the reason when it is not usable."""
    crit: dict[str, int] = {}
    if isinstance(value, Mapping):
        if criteria:
            src = value.get("criteria", value)
            if not isinstance(src, Mapping):
                return None, crit, "missing_criterion"
            for c in criteria:
                v = _as_int(src.get(c))
                if v is None:
                    return None, crit, "missing_criterion"
                crit[c] = v
        raw = next((value[k] for k in _LABEL_KEYS if k in value), None)
        if raw is None:
            return None, crit, "unparseable"
        value = raw
    label = _as_int(value)
    if label is None:
        return None, crit, "unparseable"
    return label, crit, None


_CONFLICT = object()


def _looks_like_json(text: str) -> bool:
    t = text.lstrip()
    return t.startswith(("{", "```")) or re.match(r"\[\s*[{\[\"\d]", t) is not None


def _single_text(text: str) -> str | None:
    """The label in a text answer by key priority; ``"conflicting"`` when one priority level
    holds different numbers (which one is the answer cannot be told)."""
    found: dict[str, set[str]] = {}
    for m in _SCORE.finditer(text):
        found.setdefault(m.group(1).lower(), set()).add(m.group(2))
    for group in _SCORE_GROUPS:
        values = set().union(*(found.get(k, set()) for k in group))
        if len(values) > 1 and len({float(v) for v in values}) > 1:
            return "conflicting"
        if values:
            return min(values)
    return None


def parse_answer(text: str | None, scale: tuple[int, int], keys: Sequence[str] | None = None,
                 criteria: Sequence[str] = (), finish_reason: str | None = None) -> ParseResult:
    """Labels for ``keys`` (or the single candidate, keyed :data:`SINGLE`) from an answer text."""
    expected = list(keys) if keys is not None else [SINGLE]

    def fail(reason: str) -> ParseResult:
        return ParseResult({}, {k: reason for k in expected})

    if text is None or not text.strip():
        return fail("truncated" if finish_reason == "length" else "empty")
    obj, is_json = _load_json(text)
    if is_json:
        values = _json_values(obj, keys)
    elif _looks_like_json(text) or (finish_reason == "length" and "{" in text):
        # a broken or cut-off JSON answer: numbers inside it (quoted ratings, half a reasoning
        # field) are not labels
        return fail("truncated" if finish_reason == "length" else "unparseable")
    else:
        values = _text_values(text, keys)
        if keys is None and values.get(SINGLE) is _CONFLICT:
            return fail("conflicting")
        if criteria:
            values = {}  # criteria answers must be JSON
    if not values:
        return fail("truncated" if finish_reason == "length" else "unparseable")
    return _checked_labels(values, expected, scale, criteria)


def _json_values(obj, keys: Sequence[str] | None) -> dict[str, object]:
    """The answer value per candidate key in a JSON answer: the whole answer for a single candidate,
    else a mapping (bare or under ``labels``/``judgments``) or a list of entries naming their key."""
    values: dict[str, object] = {}
    if keys is None:
        values[SINGLE] = obj
    elif isinstance(obj, Mapping):
        inner = obj.get("labels", obj.get("judgments", obj))
        if isinstance(inner, Mapping):
            values = {str(k): v for k, v in inner.items()}
        elif isinstance(inner, list):
            obj = inner
    if keys is not None and isinstance(obj, list):
        for entry in obj:
            if isinstance(entry, Mapping):
                k = next((entry[n] for n in ("key", "item", "id", "candidate") if n in entry), None)
                if k is not None:
                    values[str(k)] = entry
    return values


def _text_values(text: str, keys: Sequence[str] | None) -> dict[str, object]:
    """The answer value per candidate key in a text answer (``score: N``, ``c1: N`` lines);
    :data:`_CONFLICT` where one key holds different numbers."""
    values: dict[str, object] = {}
    if keys is None:
        found = _single_text(text)
        if found == "conflicting":
            values[SINGLE] = _CONFLICT
        elif found is not None:
            values[SINGLE] = found
        elif re.fullmatch(r"\s*-?\d+\s*\.?\s*", text):
            values[SINGLE] = text.strip().rstrip(".")
    else:
        for m in _KEYED.finditer(text):
            k = m.group(1).lower()
            if k in values and values[k] != m.group(2):
                values[k] = _CONFLICT
            else:
                values[k] = m.group(2)
    return values


def _checked_labels(values: Mapping[str, object], expected: Sequence[str], scale: tuple[int, int],
                    criteria: Sequence[str]) -> ParseResult:
    """Each expected candidate's label (and criteria) when present, unambiguous and on the scale;
    otherwise its reason."""
    lo, hi = scale
    labels: dict[str, int] = {}
    crits: dict[str, dict[str, int]] = {}
    errors: dict[str, str] = {}
    for k in expected:
        if k not in values:
            errors[k] = "missing_item"
            continue
        if values[k] is _CONFLICT:
            errors[k] = "conflicting"
            continue
        label, crit, reason = _one(values[k], criteria)
        if reason is None and not lo <= label <= hi:
            reason = "out_of_range"
        if reason is None and any(not lo <= v <= hi for v in crit.values()):
            reason = "out_of_range"
        if reason is not None:
            errors[k] = reason
            continue
        labels[k] = label
        if crit:
            crits[k] = crit
    return ParseResult(labels, errors, crits)


def _count(value) -> int:
    """A token count; anything that is not a non-negative number counts 0."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return 0
    return int(value)


def usage_of(resp_usage) -> Usage:
    """The token counts of a chat completion's ``usage`` object (anything malformed counts 0)."""
    if not isinstance(resp_usage, Mapping):
        return Usage()
    pt = resp_usage.get("prompt_tokens_details")
    ct = resp_usage.get("completion_tokens_details")
    pt = pt if isinstance(pt, Mapping) else {}
    ct = ct if isinstance(ct, Mapping) else {}
    return Usage(_count(resp_usage.get("prompt_tokens")), _count(pt.get("cached_tokens")),
                 _count(resp_usage.get("completion_tokens")), _count(ct.get("reasoning_tokens")))


def outcome_from_answer(req, template, content: str | None, finish: str | None,
                        refusal: str | None, usage: Usage, latency: float, attempts: int, via: str,
                        mode: str, endpoint: str | None = None) -> CallRecord:
    """Parse an answer into a call record keyed by item id (status ok, partial or failed)."""
    if refusal:
        parsed = ParseResult({}, {k: "refused" for k in (req.keys or [SINGLE])})
    else:
        parsed = parse_answer(content, template.scale, req.keys, template.criteria, finish)
    to_item = dict(zip(req.keys, req.items)) if req.keys is not None else {SINGLE: req.items[0]}
    labels = {to_item[k]: v for k, v in parsed.labels.items() if k in to_item}
    criteria = {to_item[k]: v for k, v in parsed.criteria.items() if k in to_item}
    errors = {to_item[k]: v for k, v in parsed.errors.items() if k in to_item}
    status = "ok" if not errors and len(labels) == len(req.items) else ("partial" if labels else "failed")
    reason = None if status == "ok" else next(iter(errors.values()), "unparseable")
    return CallRecord(req.key, req.qid, req.items, req.repeat, status, reason,
                      None if status == "ok" else f"answer not usable: {reason}",
                      content if content is not None else refusal, labels, criteria, errors, usage, latency,
                      attempts, via, mode, endpoint)


def record_from_body(req, template, body: Mapping, latency: float, via: str, mode: str,
                     endpoint: str | None, redact: Callable[[str | None], str | None]) -> CallRecord:
    """A call record from a chat completion body; a body of the wrong shape is ``bad_response``. The
    raw answer is stored ``redact``-ed: a model that echoes the key must not put it in the cache."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    refusal = message.get("refusal") if isinstance(message, Mapping) else None
    usage = usage_of(body.get("usage")) if isinstance(body, Mapping) else Usage()
    if not isinstance(message, Mapping) or not isinstance(content, (str, type(None))) \
            or not isinstance(refusal, (str, type(None))):
        return CallRecord(req.key, req.qid, req.items, req.repeat, "failed", "bad_response",
                          "the answer has no chat message (choices[0].message)",
                          redact(json.dumps(body, default=str)[:2000]), usage=usage, latency=latency,
                          attempts=1, via=via, mode=mode, endpoint=endpoint)
    finish = choice.get("finish_reason")
    rec = outcome_from_answer(req, template, content, finish if isinstance(finish, str) else None,
                              refusal, usage, latency, 1, via, mode, endpoint)
    raw = redact(rec.raw)
    return rec if raw == rec.raw else replace(rec, raw=raw)


def union_records(req, a: CallRecord | None, b: CallRecord) -> CallRecord:
    """What two answers to ``req`` (or to requests for subsets of its items) say together, keyed by
    item id: ``ok`` once every item of ``req`` has a label."""
    labels = {**(a.labels if a else {}), **b.labels}
    criteria = {**(a.criteria if a else {}), **b.criteria}
    # the latest word on an item wins: its own error, the latest attempt's reason, an earlier error
    errors = {i: b.item_errors.get(i) or b.reason or (a.item_errors.get(i) if a else None) or "unparseable"
              for i in req.items if i not in labels}
    raw = "\n\n".join(r for r in ((a.raw if a else None), b.raw) if r) if a is not None and a is not b else b.raw
    if not errors:
        return replace(b, key=req.key, qid=req.qid, items=req.items, status="ok", reason=None, error=None,
                       labels=labels, criteria=criteria, item_errors={}, raw=raw)
    return replace(b, key=req.key, qid=req.qid, items=req.items, status="partial" if labels else "failed",
                   reason=b.reason or next(iter(errors.values())), labels=labels, criteria=criteria,
                   item_errors=errors, raw=raw)
