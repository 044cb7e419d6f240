"""Prompt templates as data: TOML files in ``prompts/``, checked on load, rendered per request.

A template is a TOML file: ``name``, ``scale = [LO, HI]``, optionally ``answer``, ``criteria`` and
``profile``, and the ``system`` and ``user`` texts, whose placeholders (``{profile}``,
``{candidates}``, ...) are ``str.format`` fields (see ``prompts/README.md``). recjudge writes the
``{candidates}`` block and the ``{answer_format}`` instruction itself, so one template serves one
candidate per call and ``M`` candidates per call.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError, InputError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

__all__ = ["Template", "Messages", "check_template", "load_template", "template_names", "prompts_dir", "parse_template",
           "content_sha256"]

REQUIRED = ("profile", "candidates", "answer_format")
OPTIONAL = ("scale_min", "scale_max", "rating_min", "rating_max")
# the rating range a history is shown with when the caller names no collection scale (1–5 stars)
DEFAULT_RATING_RANGE = ("1", "5")
KEYS = ("name", "scale", "answer", "criteria", "profile", "system", "user")
ANSWERS = ("label", "criteria")
PROFILE_KINDS = ("history", "query")
SUFFIX = ".toml"


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
    """A validated template. ``sha256`` hashes its content as parsed (:func:`content_sha256`: not the
    file's bytes, so comments and layout do not count); it keys the cache and is recorded with every
    judgment."""

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
        # str.format expands the template once: text inside a profile that looks like a placeholder
        # is never expanded
        return Messages(self.system, self.user.format_map(values))

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
        if candidate.is_dir() and any(candidate.glob("*" + SUFFIX)):
            return candidate
    raise ConfigError("the prompt templates are missing from this installation (expected "
                      f"{here / 'prompts'}); reinstall recjudge")


def template_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in prompts_dir().glob("*" + SUFFIX)))


def load_template(name_or_path: str | Path) -> Template:
    """A shipped template by name (``baseline``, ``defined-scale``, ``criteria``, ``relevance``) or a file."""
    text = str(name_or_path)
    path = Path(text)
    if not (path.suffix or "/" in text or "\\" in text):
        path = prompts_dir() / f"{text}{SUFFIX}"
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
    return parse_template(text, path)


def content_sha256(name: str, scale: tuple[int, int], answer: str, criteria: Sequence[str], profile_kind: str,
                   system: str, user: str) -> str:
    """The template's identity: SHA-256 of its parsed content, so that comments, key order, quoting
    and the file format do not change it (the cache's key, the judgments' provenance)."""
    blob = json.dumps({"name": name, "scale": list(scale), "answer": answer, "criteria": list(criteria),
                       "profile": profile_kind, "system": system, "user": user},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_FORMAT = ('write it as TOML: name = "...", scale = [0, 7], then system = \'\'\'...\'\'\' and user = \'\'\'...\'\'\' '
           "(see prompts/README.md)")


def parse_template(text: str, source: str = "<template>") -> Template:
    """Parse and validate a template (TOML text); every error names ``source``, the line where it
    can, and the fix."""
    table = _toml(text, source)
    at = functools.partial(_key_line, text)
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        raise InputError(source, f"unknown key {unknown[0]!r}", f"the keys are {', '.join(KEYS)}",
                         line=at(unknown[0]))
    for key in ("name", "scale", "system", "user"):
        if key not in table:
            raise InputError(source, f"no {key!r} key", _FORMAT)
    for key in ("name", "answer", "profile", "system", "user"):
        if key in table and not isinstance(table[key], str):
            raise InputError(source, f"{key!r} must be a string, not {type(table[key]).__name__}",
                             f'quote it: {key} = "..."', line=at(key))
    name = table["name"].strip()
    if not name:
        raise InputError(source, "'name' is empty", 'give the template a name: name = "my-template"',
                         line=at("name"))
    scale = _scale(table["scale"], source, at("scale"))
    answer, criteria = _answer(table, source, at)
    profile_kind = table.get("profile", "history")
    if profile_kind not in PROFILE_KINDS:
        raise InputError(source, f"profile {profile_kind!r} is not one of {', '.join(PROFILE_KINDS)}",
                         'write profile = "history" or profile = "query"', line=at("profile"))
    system = _text(table["system"], "system", text, source, allowed=())
    user = _text(table["user"], "user", text, source, allowed=(*REQUIRED, *OPTIONAL))
    _check_user(user, text, source)
    return Template(name=name, source=source, scale=scale, answer=answer, criteria=criteria,
                    profile_kind=profile_kind, system=system.format(), user=user,
                    sha256=content_sha256(name, scale, answer, criteria, profile_kind, system.format(), user))


def _toml(text: str, source: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column \d+\)", message)
        line = int(found.group(1)) if found else None
        problem = message[:found.start()].strip() if found else message
        if re.search(r"(?m)^===\s*(system|user)\b", text):
            raise InputError(source, "a template in the former format ('key: value' lines and '=== system' / "
                             "'=== user' sections)", _FORMAT, line=line) from None
        raise InputError(source, f"not valid TOML: {problem}", "see prompts/README.md for the format",
                         line=line) from None


def _key_line(text: str, key: str) -> int | None:
    """The line of the file that sets ``key`` (None when it is written in a way this does not find)."""
    found = re.search(rf"(?m)^[ \t]*[\"']?{re.escape(key)}[\"']?[ \t]*=", text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def _scale(value, source: str, line: int | None) -> tuple[int, int]:
    ok = (isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)
          and value[0] < value[1])
    if not ok:
        raise InputError(source, f"scale {value!r} is not a range [LO, HI] of integers, LO below HI",
                         "write e.g. scale = [0, 7]", line=line)
    return value[0], value[1]


def _answer(table: dict, source: str, at) -> tuple[str, tuple[str, ...]]:
    answer = table.get("answer", "label")
    if answer not in ANSWERS:
        raise InputError(source, f"answer {answer!r} is not one of {', '.join(ANSWERS)}",
                         'write answer = "label" or answer = "criteria"', line=at("answer"))
    if answer != "criteria":
        if "criteria" in table:
            raise InputError(source, "a 'criteria' key needs answer = \"criteria\"", "add it or drop the key",
                             line=at("criteria"))
        return answer, ()
    example = 'write e.g. criteria = ["topic", "creators"]'
    if "criteria" not in table:
        raise InputError(source, "answer is 'criteria' but no 'criteria' key names them", example,
                         line=at("answer"))
    value = table["criteria"]
    names = tuple(value) if isinstance(value, list) and all(isinstance(c, str) for c in value) else None
    if not names or len(set(names)) != len(names) or any(
            not re.fullmatch(r"[a-z][a-z0-9_]*", c) or c == "label" for c in names):
        raise InputError(source, f"criteria {value!r} must be a list of distinct lower-case names other than "
                         "'label'", example, line=at("criteria"))
    return answer, names


def _text(value: str, key: str, text: str, source: str, allowed: tuple[str, ...]) -> str:
    """``value`` stripped, its str.format fields checked: only ``allowed`` names, each a plain field."""
    value = value.strip()
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(value) if f is not None]
    except ValueError as exc:
        raise InputError(source, f"the {key} text has a brace that opens or closes no placeholder ({exc})",
                         "write a literal brace twice: {{ or }}", line=_key_line(text, key)) from None
    for field, spec, conv in fields:
        if field not in allowed or spec or conv:
            shown = "{" + field + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            hint = ("the system text takes no placeholders (they go in the user text); " if key == "system" else
                    "use " + ", ".join("{" + p + "}" for p in allowed) + "; ")
            raise InputError(source, f"unknown placeholder {shown} in the {key} text",
                             hint + "a literal brace is written twice ({{ and }})",
                             line=_line_of(text, key, "{" + field))
    return value


def _line_of(text: str, key: str, needle: str) -> int | None:
    """The line where ``needle`` first occurs at or after the line setting ``key``."""
    start = _key_line(text, key)
    offset = 0 if start is None else len("".join(text.splitlines(keepends=True)[:start - 1]))
    pos = text.find(needle, offset)
    return start if pos < 0 else text.count("\n", 0, pos) + 1


def _check_user(user: str, text: str, source: str) -> None:
    fields = [f for _, f, _, _ in string.Formatter().parse(user) if f is not None]
    for ph in REQUIRED:
        if fields.count(ph) != 1:
            raise InputError(source, f"the user text holds {{{ph}}} {fields.count(ph)} times, expected once",
                             f"put {{{ph}}} once in the user text", line=_key_line(text, "user"))
    if fields.index("profile") > fields.index("candidates"):
        raise InputError(source, "{candidates} comes before {profile}",
                         "put the profile first so that providers' prefix caching applies",
                         line=_line_of(text, "user", "{candidates}"))


def template_provenance(t: Template) -> dict:
    return {"name": t.name, "sha256": t.sha256, "scale": list(t.scale), "answer": t.answer,
            "criteria": list(t.criteria), "source": Path(t.source).name}


__all__ += ["template_provenance"]
