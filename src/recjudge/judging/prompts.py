"""Prompt templates as data: loaded from ``prompts/``, validated on load, rendered per request.

A template file has a ``key: value`` header and ``=== system`` / ``=== user`` sections (see
``prompts/README.md``). recjudge writes the ``{candidates}`` block and the ``{answer_format}``
instruction itself, so one template serves one candidate per call and ``M`` candidates per call.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError, InputError

__all__ = ["Template", "Messages", "check_template", "load_template", "template_names", "prompts_dir", "parse_template"]

REQUIRED = ("profile", "candidates", "answer_format")
OPTIONAL = ("scale_min", "scale_max", "rating_min", "rating_max")
# the rating range a history is shown with when the caller names no collection scale (1–5 stars)
DEFAULT_RATING_RANGE = ("1", "5")
HEADER_KEYS = ("name", "scale", "answer", "criteria", "profile")
ANSWERS = ("label", "criteria")
PROFILE_KINDS = ("history", "query")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Messages:
    system: str
    user: str

    def as_openai(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    def text(self) -> str:
        return self.system + "\n" + self.user


@dataclass(frozen=True)
class Template:
    """A validated template. ``sha256`` hashes the file's bytes; it is recorded with every judgment."""

    name: str
    source: str
    scale: tuple[int, int]
    answer: str
    criteria: tuple[str, ...]
    profile_kind: str
    system: str
    user: str
    sha256: str

    @property
    def hash(self) -> str:
        return self.sha256[:16]

    def answer_format(self, keys: Sequence[str] | None) -> str:
        """The answer instruction for one candidate (``keys`` None) or for the keyed candidates."""
        lo, hi = self.scale
        if self.answer == "criteria":
            one = "{" + ", ".join(f'"{c}": N' for c in self.criteria) + ', "label": N}'
        else:
            one = "N"
        if keys is None:
            shape = one if self.answer == "criteria" else '{"label": N}'
            return (f"Answer with JSON only, in the form {shape}, where every N is an integer "
                    f"from {lo} to {hi}.")
        example = ", ".join(f'"{k}": {one}' for k in keys[:2])
        more = ", ..." if len(keys) > 2 else ""
        return (f'Answer with JSON only, in the form {{"labels": {{{example}{more}}}}}, with one entry '
                f"for each candidate key ({', '.join(keys)}), where every N is an integer from {lo} to {hi}.")

    def render(self, profile: str, candidates: str, keys: Sequence[str] | None,
               rating_scale=None) -> Messages:
        """The messages for one request. ``rating_scale`` (the collection's
        :class:`~recjudge.data.collections.RatingScale`, e.g. ``profiles.rating_scale``) fills
        ``{rating_min}``/``{rating_max}``; without it they read 1 and 5."""
        low, high = DEFAULT_RATING_RANGE if rating_scale is None else (rating_scale.low_text, rating_scale.high_text)
        values = {
            "profile": profile,
            "candidates": candidates,
            "answer_format": self.answer_format(keys),
            "scale_min": str(self.scale[0]),
            "scale_max": str(self.scale[1]),
            "rating_min": low,
            "rating_max": high,
        }
        # one pass, so text inside a profile that looks like a placeholder is never expanded
        user = _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.user)
        return Messages(self.system, user)

    def json_schema(self, keys: Sequence[str] | None) -> dict:
        """A strict JSON schema for structured output (``response_format``)."""
        return _schema(self, None if keys is None else tuple(keys))


@functools.lru_cache(maxsize=256)
def _schema(t: Template, keys: tuple[str, ...] | None) -> dict:
    # memoised: one schema per answer shape, shared read-only by every request of that shape
    lo, hi = t.scale
    integer = {"type": "integer", "minimum": lo, "maximum": hi}
    if t.answer == "criteria":
        names = (*t.criteria, "label")
        one: dict = {"type": "object", "properties": {c: integer for c in names},
                     "required": list(names), "additionalProperties": False}
    else:
        one = integer
    if keys is None:
        body = one if t.answer == "criteria" else {
            "type": "object", "properties": {"label": integer}, "required": ["label"],
            "additionalProperties": False}
    else:
        body = {"type": "object",
                "properties": {"labels": {"type": "object", "properties": {k: one for k in keys},
                                          "required": list(keys), "additionalProperties": False}},
                "required": ["labels"], "additionalProperties": False}
    return {"name": "judgment", "strict": True, "schema": body}


def prompts_dir() -> Path:
    """The shipped templates: ``recjudge/prompts`` in a wheel, the repository's ``prompts/`` otherwise."""
    here = Path(__file__).resolve().parent.parent  # src/recjudge
    for candidate in (here / "prompts", here.parent.parent / "prompts"):
        if candidate.is_dir() and any(candidate.glob("*.txt")):
            return candidate
    raise ConfigError("the prompt templates are missing from this installation (expected "
                      f"{here / 'prompts'}); reinstall recjudge")


def template_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in prompts_dir().glob("*.txt")))


def load_template(name_or_path: str | Path) -> Template:
    """A shipped template by name (``baseline``, ``defined-scale``, ``criteria``, ``relevance``) or a file."""
    text = str(name_or_path)
    path = Path(text)
    if not (path.suffix or "/" in text or "\\" in text):
        path = prompts_dir() / f"{text}.txt"
        if not path.exists():
            raise ConfigError(f"unknown prompt template {text!r}; choose one of "
                              f"{', '.join(template_names())} or give the path of a template file")
    if not path.is_file():
        raise InputError(str(path), "prompt template not found", "check the path")
    stat = path.stat()
    return _load(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def check_template(name_or_path: str | Path) -> Template:
    """:func:`load_template`, with a path that does not exist refused as an unknown name (ConfigError);
    a template file that exists but is malformed keeps its InputError, which names its file and line."""
    text = str(name_or_path)
    if (Path(text).suffix or "/" in text or "\\" in text) and not Path(text).is_file():
        raise ConfigError(f"no prompt template named {text!r} and no such file (fix: give a shipped template's "
                          f"name, one of {', '.join(template_names())}, or the path of an existing template file)")
    return load_template(name_or_path)


@functools.lru_cache(maxsize=64)
def _load(path: str, _mtime: int, _size: int) -> Template:
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})", "save the template as UTF-8") from None
    return parse_template(text, path, hashlib.sha256(raw).hexdigest())


def parse_template(text: str, source: str = "<template>", sha256: str | None = None) -> Template:
    """Parse and validate a template; every error names ``source`` and the line."""
    if sha256 is None:
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    header: dict[str, tuple[str, int]] = {}
    sections: dict[str, list[str]] = {}
    starts: dict[str, int] = {}
    current: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("==="):
            current = line[3:].strip()
            if current not in ("system", "user"):
                raise InputError(source, f"unknown section {current!r}", "use '=== system' and '=== user'",
                                 line=number)
            if current in sections:
                raise InputError(source, f"section {current!r} appears twice", "keep one of each", line=number)
            sections[current] = []
            starts[current] = number
        elif current is not None:
            sections[current].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition(":")
            key = key.strip()
            if not sep or key not in HEADER_KEYS:
                raise InputError(source, f"unexpected header line {line.strip()!r}",
                                 f"header lines are 'key: value' with key one of {', '.join(HEADER_KEYS)}",
                                 line=number)
            if key in header:
                raise InputError(source, f"header key {key!r} given twice", "keep one", line=number)
            header[key] = (value.strip(), number)
    for key in ("name", "scale"):
        if key not in header:
            raise InputError(source, f"header has no '{key}:' line", "add it before the first '===' section")
    for sec in ("system", "user"):
        if sec not in sections:
            raise InputError(source, f"no '=== {sec}' section", f"add a '=== {sec}' section")

    scale_text, scale_line = header["scale"]
    scale_match = re.fullmatch(r"(-?\d+)\s*-\s*(-?\d+)", scale_text)
    if not scale_match or int(scale_match.group(1)) >= int(scale_match.group(2)):
        raise InputError(source, f"scale {scale_text!r} is not a range LO-HI", "write e.g. 'scale: 0-7'",
                         line=scale_line)
    answer, answer_line = header.get("answer", ("label", None))
    if answer not in ANSWERS:
        raise InputError(source, f"answer {answer!r} is not one of {', '.join(ANSWERS)}", "fix the header",
                         line=answer_line)
    criteria: tuple[str, ...] = ()
    if answer == "criteria":
        if "criteria" not in header:
            raise InputError(source, "answer is 'criteria' but no 'criteria:' line names them",
                             "add e.g. 'criteria: topic, creators'")
        crit_text, crit_line = header["criteria"]
        criteria = tuple(c.strip() for c in crit_text.split(",") if c.strip())
        bad = [c for c in criteria if not re.fullmatch(r"[a-z][a-z0-9_]*", c) or c == "label"]
        if not criteria or bad or len(set(criteria)) != len(criteria):
            raise InputError(source, f"criteria {crit_text!r} must be distinct lower-case names other than "
                             "'label'", "write e.g. 'criteria: topic, creators'", line=crit_line)
    elif "criteria" in header:
        raise InputError(source, "a 'criteria:' line needs 'answer: criteria'", "add it or drop the line",
                         line=header["criteria"][1])
    profile_kind, profile_line = header.get("profile", ("history", None))
    if profile_kind not in PROFILE_KINDS:
        raise InputError(source, f"profile {profile_kind!r} is not one of {', '.join(PROFILE_KINDS)}",
                         "fix the header", line=profile_line)

    system = "\n".join(sections["system"]).strip()
    user = "\n".join(sections["user"]).strip()
    for sec, body in (("system", system), ("user", user)):
        for m in _PLACEHOLDER.finditer(body):
            ph = m.group(1)
            allowed = (*REQUIRED, *OPTIONAL) if sec == "user" else ()
            if ph not in allowed:
                line = starts[sec] + 1 + "\n".join(sections[sec]).count("\n", 0, _offset(sections[sec], ph))
                raise InputError(source, f"unknown placeholder {{{ph}}} in the {sec} section",
                                 ("placeholders go in the user section: " if sec == "system" else "")
                                 + f"use {', '.join('{' + p + '}' for p in (*REQUIRED, *OPTIONAL))}",
                                 line=line)
    for ph in REQUIRED:
        count = len(re.findall(r"\{" + ph + r"\}", user))
        if count != 1:
            raise InputError(source, f"the user section holds {{{ph}}} {count} times, expected once",
                             f"put {{{ph}}} once in the user section", line=starts["user"])
    if user.index("{profile}") > user.index("{candidates}"):
        raise InputError(source, "{candidates} comes before {profile}",
                         "put the profile first so that providers' prefix caching applies",
                         line=starts["user"])
    return Template(
        name=header["name"][0], source=source,
        scale=(int(scale_match.group(1)), int(scale_match.group(2))),
        answer=answer, criteria=criteria, profile_kind=profile_kind, system=system, user=user,
        sha256=sha256)


def _offset(lines: list[str], placeholder: str) -> int:
    return "\n".join(lines).find("{" + placeholder + "}")


def template_provenance(t: Template) -> dict:
    return {"name": t.name, "sha256": t.sha256, "scale": list(t.scale), "answer": t.answer,
            "criteria": list(t.criteria), "source": Path(t.source).name}


__all__ += ["template_provenance"]
