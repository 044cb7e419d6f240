"""Item text that talks to the judge: instructions, requests for a label, role markers.

Text is compared in a normalised form first: Unicode NFKC (full-width and compatibility forms),
format characters (zero-width spaces and joiners) removed, each character that Unicode's
confusables data (``confusable_homoglyphs``) lists as a look-alike of an ASCII letter replaced by
it (a Greek omicron in "ignοre", a Cyrillic "г" in "disгegard"), the rest transliterated to ASCII
by ``unidecode``, and finally case-folded with runs of white space made one.
The patterns then look for what a catalogue entry has no reason to say: an imperative addressed to
the assessor, a request for a label or score, or a chat role marker.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

__all__ = ["Finding", "InjectionCheck", "check_injections", "find_instruction", "normalise", "scan_injections"]

_ACTORS = (r"(assessor|judge|grader|rater|reviewer|evaluator|annotator|labell?er|model|ai|llm|assistant|gpt|"
           r"chatgpt|classifier|system)")
_LABEL = r"(label|score|rating|grade|mark|relevance|interest|number|digit|value)"
_PREVIOUS = r"(previous|prior|above|earlier|preceding|foregoing|former|original|system|all|other|existing)"
_RULES = r"(instructions?|guidance|guidelines|prompts?|rules|directions|directives|context|orders|messages?|text)"
_NUMBER = r"(\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten)"
_OBJECT = r"(this|it|that|the|these)( (item|movie|film|product|title|book|show|song|candidate|one|pair|entry|recommendation))?"
_IGNORE = r"(ignore|disregard|forget|override|bypass|skip|drop|discard|pay no attention to|do not follow|don'?t follow|" \
          r"stop following|set aside|never mind)"

_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple((kind, re.compile(rx)) for kind, rx in (
    # "Ignore the previous instructions", "disregard prior guidance", "pay no attention to earlier rules"
    ("override", rf"\b{_IGNORE}\b( (all|any|every|the|your|of|my|these|those))*( {_PREVIOUS})+ {_RULES}\b"),
    ("override", rf"\b{_IGNORE}\b( (all|any|the|your))* ({_RULES}|everything) (above|before|so far|you (were|have been) given)\b"),
    ("override", rf"\b(new|updated|real|actual|hidden|secret|true|revised) ({_RULES}|task)\s*[:\-]"),
    # "Note to the assessor", "Attention judge:", "to whoever grades this"
    ("addressed", rf"\b(note|message|instructions?|memo|request|reminder|hint) (to|for) (the |this |any |all |our )?{_ACTORS}s?\b"),
    ("addressed", rf"\b(dear|attention|attn|hey|hello|hi|to|for) (the |an? )?([a-z]+ )?{_ACTORS}s?\b\s*[:,!-]"),
    ("addressed", r"\b(whoever|whomever|anyone who|the person who|the one who) (grades|judges|rates|scores|labels|"
                  r"reviews|evaluates|assesses|reads)\b"),
    ("addressed", rf"\b(as|if you are) (an? |the )?([a-z]+ )?{_ACTORS}\b.{{0,40}}\b(you|must|should|rate|score|label|answer|give)\b"),
    ("addressed", rf"\byou (are|must|should|will|shall|need to|have to)( now)?( be)?( an?| the)? "
                  rf"({_ACTORS}\b|rate\b|score\b|label\b|grade\b|answer\b|respond\b|reply\b|output\b|ignore\b|give\b)"),
    ("addressed", rf"\b(the )?{_ACTORS}s? (should|must|shall|needs to|has to|will) (answer|rate|score|label|give|"
                  r"output|respond|assign|mark)\b"),
    # a request for a label: "answer 7", "rate this 7", "give it a 10", "score: 7", "the label is 7"
    ("label request", rf"\b(answer|respond|reply|output|return|print|say|write|put)( only| just)?( with)?"
                      rf"( a| an| the)?( {_LABEL})?( of)? {_NUMBER}\b"),
    ("label request", rf"\b(rate|rank|score|label|grade|mark|give|assign|award|judge|put) {_OBJECT}( as| with| a| an| at| to)* "
                      rf"{_NUMBER}\b"),
    ("label request", rf"\b(rate|rank|score|label|grade|mark|assign|award) (as|with|at|a|an)( a| an)? {_NUMBER}\b"),
    ("label request", rf"\b{_LABEL}\s*(is|should be|must be|=|:)\s*{_NUMBER}\b"),
    ("label request", rf"\b(this|it) (deserves|merits|earns|warrants|gets|is worth)( a| an)? {_NUMBER}\b"),
    ("label request", rf"\b(pick|choose|select|use|treat {_OBJECT} as)( the| a| an)?( {_LABEL})? {_NUMBER}\b"),
    ("label request", rf"\b{_LABEL} (override|overwrite|forced?|fixed)\s*[:=]?\s*{_NUMBER}\b"),
    ("label request", rf"\b(highest|maximum|max|top|perfect|best possible) (possible )?{_LABEL}\b.{{0,30}}"
                      rf"\b(give|assign|answer|rate|must|should|always)\b"),
    ("label request", rf"\b(give|assign|answer|rate|award)\b.{{0,30}}\b(highest|maximum|max|top|perfect) "
                      rf"(possible )?{_LABEL}\b"),
    # chat role markers and template tokens (a role name then what a judge is asked for)
    ("role marker", r"(^|[\s\[(<{\"'])(system|assistant|developer|user|judge)\s*:\s*.{0,40}"
                    r"(\d|label|score|rating|answer|respond|ignore|rate|output|instruction)"),
    ("role marker", r"<\|?\s*(im_start|im_end|system|endoftext|eot_id|start_header_id)\s*\|?>"),
    ("role marker", r"\[/?(inst|sys)\]|<<\s*/?sys\s*>>|#{2,}\s*(instruction|system|response)\b"),
))


class Finding(NamedTuple):
    kind: str      # override, addressed, label request, role marker
    matched: str   # the normalised text that matched


def normalise(text: str) -> str:
    """The form ``text`` is scanned in: NFKC, no format characters, homoglyphs as ASCII, case-folded."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return " ".join(text.casefold().split())
    return " ".join("".join(_ascii(ch) for ch in text).casefold().split())


@lru_cache(maxsize=65536)
def _ascii(ch: str) -> str:
    """One character as the ASCII it reads as: "" for a format character, its ASCII look-alike, else
    its transliteration."""
    if ch.isascii():
        return ch
    if unicodedata.category(ch) == "Cf":
        return ""
    from confusable_homoglyphs import confusables
    from unidecode import unidecode

    for found in confusables.is_confusable(ch, greedy=True, preferred_aliases=["latin"]) or ():
        for glyph in found.get("homoglyphs", ()):
            if len(glyph["c"]) == 1 and glyph["c"].isascii() and glyph["c"].isalnum():
                return glyph["c"]
    return unidecode(ch)


def find_instruction(text: str) -> Finding | None:
    """The first instruction-like passage of ``text``, or None."""
    if not isinstance(text, str) or not text:
        return None
    norm = normalise(text)
    for kind, rx in _PATTERNS:
        m = rx.search(norm)
        if m:
            return Finding(kind, m.group(0).strip())
    return None


# ------------------------------------------------------------------------------ items and judged pairs

def scan_injections(collection, fields: Sequence[str] | None = None, items: Sequence[str] | None = None
                    ) -> pd.DataFrame:
    """Items whose text metadata reads like an instruction to the judge (:mod:`recjudge.judging.injection`):
    item, field, text, kind (override, addressed, label request, role marker) and the passage matched.
    ``items`` limits the scan to those item ids."""
    table = collection.items
    if items is not None:
        table = table[table.index.isin([str(i) for i in items])]
    cols = [c for c in (fields or table.columns) if c in table.columns]
    rows = []
    for col in cols:
        for item, value in table[col].items():
            texts = value if isinstance(value, (list, tuple)) else [value]
            for t in texts:
                found = find_instruction(t) if isinstance(t, str) else None
                if found is not None:
                    rows.append((str(item), col, t, found.kind, found.matched))
    return pd.DataFrame(rows, columns=["item", "field", "text", "kind", "matched"])


@dataclass(frozen=True)
class InjectionCheck:
    """Judged pairs whose candidate's shown text reads like an instruction, and whether their labels stand out."""

    items: tuple[str, ...]     # flagged candidate items
    pairs: int                 # judged pairs of those items
    flagged_mean: float        # their mean label
    others_mean: float         # the mean label of the other judged pairs (NaN: none)
    stands_out: bool           # at least 3 flagged pairs and a mean at least one label above the others'

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def format(self) -> str:
        shown = ", ".join(self.items[:5]) + (" …" if len(self.items) > 5 else "")
        text = (f"{self.pairs:,} judged pair(s) of {len(self.items)} item(s) whose text reads like an instruction "
                f"to the judge ({shown}): mean label {self.flagged_mean:.2f} against {self.others_mean:.2f} for the "
                "other pairs")
        if self.stands_out:
            text += " — their labels stand out: check them (recjudge audit injection-scan lists the texts)"
        return text


def check_injections(labels: Mapping[tuple[str, str], int], collection, fields: Sequence[str]) -> InjectionCheck | None:
    """The judged pairs (``labels``: (user, item) -> label) whose candidate's ``fields`` read like an
    instruction to the judge; None when there are none."""
    if not labels:
        return None
    flagged = set(scan_injections(collection, fields, items={d for _, d in labels}).item)
    if not flagged:
        return None
    hit = np.array([v for (_, d), v in labels.items() if d in flagged], dtype=float)
    rest = np.array([v for (_, d), v in labels.items() if d not in flagged], dtype=float)
    others = float(rest.mean()) if len(rest) else math.nan
    stands_out = len(hit) >= 3 and len(rest) > 0 and float(hit.mean()) - others >= 1.0
    return InjectionCheck(tuple(sorted(flagged)), len(hit), float(hit.mean()), others, bool(stands_out))
