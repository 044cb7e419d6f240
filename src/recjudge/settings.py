"""Settings: one frozen, validated model per command, built on pydantic.

A command's settings are a :class:`Settings` subclass whose fields each declare, in one place, their
type, range, default and help (:func:`option`); the command line (:meth:`Settings.add_arguments`,
:meth:`Settings.from_args`), files (:meth:`Settings.from_file`), protocols
(:meth:`Settings.from_protocol`) and the Python verbs (:mod:`recjudge.api.verbs`, generated from the
fields; :meth:`Settings.from_call`) are all built from it. Unknown keys are refused, values are checked strictly (``"50"`` is not a number, ``true``
is not 1), and every error names the field as the caller wrote it: ``--tie-policy`` on the command
line, ``key 'tie_policy'`` in a file, ``tie_policy=`` in Python.

Adding an option to a command is one field::

    class CompareSettings(Settings):
        command: ClassVar[str] = "compare"
        top: int = option(5, "systems listed as most displaced", ge=1, le=100, cli=Cli(metavar="N"))
"""

from __future__ import annotations

import argparse
import contextvars
import os
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator
from pydantic_core import PydanticUndefined

from .data.trec.records import TIE_POLICIES
from .errors import ConfigError, InputError


__all__ = ["Cli", "Conflict", "Settings", "option", "checked", "comma_list", "PYTHON", "CLI", "FILE", "Seed", "Count", "Positive",
           "TiePolicy", "Inputs", "PathText", "MAX_SEED", "MAX_COUNT"]

MAX_SEED = 2**63 - 1     # numpy's Generator and the tie hash both take it
MAX_COUNT = 2**31 - 1    # cutoffs, depths and resample counts beyond this only fail later, deep inside
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Positive = Annotated[int, Field(ge=1, le=MAX_COUNT)]
TiePolicy = Literal[TIE_POLICIES]
# a path (str or os.PathLike) or what was read from one (a Run, Qrels, DataFrame …): checked when read
Inputs = Any
# a file or folder to read or write: text or a path object
PathText = str | os.PathLike

PYTHON, CLI, FILE = "python", "cli", "file"  # how the caller spelled the settings
_RAW: contextvars.ContextVar[bool] = contextvars.ContextVar("recjudge_settings_raw", default=False)


class Cli(NamedTuple):
    """How a field appears on the command line (when it is not ``--field-name VALUE``)."""

    flag: str | None = None        # e.g. "--retries" for max_attempts
    metavar: str | None = None
    nargs: str | None = None       # "+" or "*": several values, after one flag or each after its own
    action: str | None = None      # an argparse action ("append" is read as nargs="+")
    positional: bool = False
    parse: Callable[[str], Any] | None = None  # command-line text → the value validated
    hidden: bool = False           # not on the command line (Python and files only)
    required: bool = False         # required on the command line although Python may leave it out
    help: str | None = None        # the --help text (set by option())


def option(default: Any = PydanticUndefined, help: str = "", *, doc: str | None = None, cli: Cli = Cli(),
           **constraints: Any) -> Any:
    """A settings field: its default, its help (one line, shown by --help with the default), its
    command-line spelling and pydantic constraints (``ge``, ``le``, ``gt``, ``min_length`` …).

    ``help`` is written for the command line (flags, files); ``doc``, where it differs, for Python
    (the verb's docstring and the field's description: parameters, objects, ``None``)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("give sequence defaults as tuples: settings are frozen")
    info = Field(default, description=doc or help, **constraints)
    info.metadata.append(cli._replace(help=help))
    return info


class Conflict(ValueError):
    """Two or more settings that do not go together. ``template`` names them as ``{field}``, so the
    message spells them as the caller did (``--qrels``, ``qrels=``, ``key 'qrels'``)."""

    def __init__(self, template: str, *fields: str):
        super().__init__(template.format(**{f: f for f in fields}))
        self.template, self.fields = template, fields


_NOUNS = {"int_type": "a whole number", "int_from_float": "a whole number", "float_type": "a number",
          "bool_type": "true or false", "string_type": "text", "is_instance_of": "a path", "tuple_type": "a list",
          "list_type": "a list", "finite_number": "a finite number", "dict_type": "a table", "mapping_type": "a table"}


def _show(value: Any) -> Any:
    if isinstance(value, tuple):
        value = list(value)
    return repr(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else value


def _cli(info) -> Cli:
    return next((m for m in info.metadata if isinstance(m, Cli)), Cli())


def _is_tuple(annotation: Any) -> bool:
    origins = {typing.get_origin(a) or a for a in (annotation, *typing.get_args(annotation))}
    return tuple in origins


class _Meta(type(BaseModel)):
    def __new__(mcs, *args: Any, **kwargs: Any):
        # "json", "validate" and the like are the names users type (--json, --validate); pydantic warns that
        # they shadow BaseModel's deprecated methods of the same names, which settings never call
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r'Field name "\w+" in "\w+" shadows an attribute in parent',
                                    category=UserWarning)
            return super().__new__(mcs, *args, **kwargs)


class Settings(BaseModel, metaclass=_Meta):
    """The base of every command's settings."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False,
                              arbitrary_types_allowed=True)
    command: ClassVar[str] = ""
    # fields set by recjudge itself (where a file came from), never by a caller: not listed as known keys
    internal: ClassVar[frozenset[str]] = frozenset()
    _protocol: Any = PrivateAttr(None)  # the ProtocolUse these settings were resolved with, if any
    _spelled: str = PrivateAttr(PYTHON)  # how the caller wrote them: later errors name fields the same way
    # fields the caller wrote under names of their own (an ablation file's judge settings: "key 'judge.model'")
    _names: dict = PrivateAttr(default_factory=dict)

    def __init__(self, **data: Any):
        # built directly in Python (rj.CompareSettings(...)): refusals name parameters as Python does.
        # pydantic calls this for model_validate too; build() and from_protocol() then translate errors
        # themselves, in the caller's spelling
        try:
            super().__init__(**data)
        except ValidationError as exc:
            if _RAW.get():
                raise
            raise type(self)._error(exc, PYTHON, None) from None

    def __eq__(self, other: object) -> bool:
        # the values, not how they were spelled or which protocol they came through
        return type(other) is type(self) and self.given() == other.given()

    __hash__ = None  # inputs may be lists and mappings

    @classmethod
    def _validate(cls, data: Mapping[str, Any]):
        token = _RAW.set(True)
        try:
            return cls.model_validate(dict(data))
        finally:
            _RAW.reset(token)

    @model_validator(mode="before")
    @classmethod
    def _sequences(cls, data: Any) -> Any:
        # a list (from TOML, JSON or Python) where the field holds a tuple: frozen means tuple
        if isinstance(data, Mapping):
            data = {k: tuple(v) if isinstance(v, list) and k in cls.model_fields
                    and _is_tuple(cls.model_fields[k].annotation) else v for k, v in data.items()}
        return data

    # ----------------------------------------------------------------------------- construction

    @classmethod
    def build(cls, values: Mapping[str, Any] | None = None, *, spelled: str = PYTHON, source: str | None = None,
              names: Mapping[str, str] | None = None, **more: Any):
        """Validated settings from ``values`` (and keywords); a ValidationError becomes a ConfigError
        (Python, command line) or an InputError naming ``source`` (a file), in the caller's words.
        ``names`` gives fields the caller wrote otherwise than ``spelled`` does (a table nested in a
        file: ``{"model": "key 'judge.model'"}``); this and every later refusal uses them."""
        data = {**(values or {}), **more}
        try:
            settings = cls._validate(data)
        except ValidationError as exc:
            raise cls._error(exc, spelled, source, names=names) from None
        settings._spelled = spelled
        settings._names = dict(names or {})
        return settings

    def replace(self, **changes: Any):
        """A copy with ``changes``, validated as a whole again (and keeping its protocol record)."""
        new = type(self).build({**self.given(), **changes}, spelled=self._spelled, names=self._names)
        new._protocol = self._protocol
        return new

    def given(self) -> dict[str, Any]:
        """The field values (what ``replace`` starts from; read-only tables as plain ones)."""
        from types import MappingProxyType

        return {name: dict(v) if isinstance(v := getattr(self, name), MappingProxyType) else v
                for name in type(self).model_fields}

    @classmethod
    def from_file(cls, data: Mapping[str, Any], source: str):
        """Settings from a parsed file (TOML): errors name the file and the key."""
        if not isinstance(data, Mapping):
            raise InputError(source, f"expected a table of key = value, found {type(data).__name__}",
                             "write key = value lines")
        return cls.build(dict(data), spelled=FILE, source=source)

    @classmethod
    def from_protocol(cls, protocol: Any, /, *, spelled: str = PYTHON, **overrides: Any):
        """Settings from a protocol (a shipped name, a file, or a loaded :class:`~recjudge.protocol.Protocol`)
        with ``overrides`` winning; the result records which of the protocol's settings it does not follow
        (:attr:`protocol`)."""
        from .protocol import Protocol, ProtocolUse, load_protocol, same_value

        proto = protocol if isinstance(protocol, Protocol) else load_protocol(protocol)
        declared = proto.settings(cls.command)
        unknown = sorted(set(declared) - set(cls.model_fields))
        if unknown:
            raise InputError(proto.path, f"[{cls.command}] sets {', '.join(unknown)}, which `recjudge {cls.command}` "
                             "does not have", f"use its settings: {', '.join(cls.model_fields)}")
        from_protocol = {k: v for k, v in declared.items() if k not in overrides}
        try:
            settings = cls._validate({**declared, **overrides})
        except ValidationError as exc:
            # a value the protocol set is the protocol file's error; a value given here is the caller's
            theirs = [e for e in exc.errors() if e["loc"] and e["loc"][0] in from_protocol]
            if theirs:
                raise cls._error(exc, FILE, f"{proto.path} [{cls.command}]", only=theirs) from None
            raise cls._error(exc, spelled, None) from None
        settings._spelled = spelled
        overridden = set(declared) & set(overrides)
        differs = {}
        if overridden:
            try:  # what following the protocol in full gives, to compare in the field's own type (600 == 600.0)
                follow = cls._validate({**overrides, **declared})
                values = {k: getattr(follow, k) for k in overridden}
            except ValidationError:  # the protocol's values clash with another setting given: compare as written
                values = {k: declared[k] for k in overridden}
            differs = {k: {"protocol": declared[k], "used": _plain(getattr(settings, k))}
                       for k in sorted(overridden, key=list(declared).index)
                       if not same_value(getattr(settings, k), values[k])}
        settings._protocol = ProtocolUse(proto, cls.command, differs, frozenset(from_protocol))
        return settings

    @property
    def protocol(self):
        """The :class:`~recjudge.protocol.ProtocolUse` these settings follow, or None."""
        return self._protocol

    def stamp(self, payload: dict) -> dict:
        """``payload`` with a ``protocol`` entry when these settings follow a protocol (every JSON output)."""
        if self._protocol is None or "protocol" in payload:
            return payload
        return {**payload, "protocol": self._protocol.as_dict()}

    # ----------------------------------------------------------------------------- errors

    def name_of(self, name: str) -> str:
        """How the caller of these settings wrote field ``name`` (``--cut``, ``cut=``, ``key 'cut'``)."""
        return self.spelled(name, self._spelled, self._names)

    @classmethod
    def spelled(cls, name: str, spelled: str, names: Mapping[str, str] | None = None) -> str:
        """How a caller who spelled the settings ``spelled`` wrote field ``name`` (``names`` first)."""
        if names and name in names:
            return names[name]
        info = cls.model_fields.get(name)
        if spelled == CLI and info is not None:
            cli = _cli(info)
            return name.upper() if cli.positional else cli.flag or "--" + name.replace("_", "-")
        if spelled == FILE:
            return f"key {name!r}"
        return f"{name}="

    @classmethod
    def _error(cls, exc: ValidationError, spelled: str, source: str | None, only: list | None = None,
               names: Mapping[str, str] | None = None):
        errors = list(only if only is not None else exc.errors())
        # a list whose items all failed is also "too short" after validation: the items' errors say it
        itemised = {str(e["loc"][0]) for e in errors if len(e.get("loc") or ()) > 1 and str(e["loc"][1]).isdigit()}
        errors = [e for e in errors if not (e.get("type") == "too_short" and e.get("loc")
                                            and str(e["loc"][0]) in itemised)]
        # a value that fits no member of a union (a path or a list of paths) is one error, not one per member
        by_field: dict[str, list] = {}
        for err in errors:
            loc = err.get("loc") or ()
            if len(loc) == 2 and not str(loc[1]).isdigit() and err.get("type") in _NOUNS:
                by_field.setdefault(str(loc[0]), []).append(err)
        lines = []
        for err in errors:
            loc = err.get("loc") or ()
            group = by_field.get(str(loc[0])) if loc else None
            if group and len(group) > 1 and err in group:
                if err is group[0]:
                    nouns = " or ".join(dict.fromkeys(_NOUNS[e["type"]] for e in group))
                    lines.append(f"{cls.spelled(str(loc[0]), spelled, names)} must be {nouns}, "
                                 f"not {_show(err.get('input'))}")
                continue
            lines.append(cls._message(err, spelled, names))
        text = "; ".join(dict.fromkeys(lines))
        if spelled == FILE and source is not None:
            return InputError(source, text, "correct the value, or see the settings of "
                              f"`recjudge {cls.command} --help`" if cls.command else "correct the value")
        return ConfigError(text)

    @classmethod
    def _message(cls, err: Mapping[str, Any], spelled: str, names: Mapping[str, str] | None = None) -> str:
        loc = [str(p) for p in err.get("loc", ())]
        field = loc[0] if loc else ""
        name = cls.spelled(field, spelled, names) if field else ""
        kind, value = err.get("type", ""), err.get("input")
        ctx = err.get("ctx") or {}
        shown = _show(value)
        if spelled == FILE and isinstance(value, bool):
            shown = "true" if value else "false"  # as the file wrote it
        where = f" (item {loc[1]})" if len(loc) > 1 and loc[1].isdigit() else ""
        if kind == "extra_forbidden":
            known = ", ".join(cls.spelled(f, CLI) if spelled == CLI else f for f in cls.model_fields
                              if f not in cls.internal and (spelled != CLI or not _cli(cls.model_fields[f]).hidden))
            what = {PYTHON: "unexpected parameter", FILE: "unknown", CLI: "unknown option"}[spelled]
            return f"{what} {name}; known: {known}"
        if kind == "missing":
            return f"{name} is required"
        if kind == "value_error" and isinstance(ctx.get("error"), Conflict):
            conflict = ctx["error"]
            return conflict.template.format(**{f: cls.spelled(f, spelled, names) for f in conflict.fields})
        if kind == "value_error":
            text = str(ctx.get("error", err.get("msg")))
            # a validator that names the key itself (a nested one: key 'grid.fields') is not named twice
            return f"{name}: {text}" if name and not text.startswith("key '") else text
        if kind == "too_short":
            return f"{name} must hold at least {ctx.get('min_length')} item(s), not {shown}"
        if kind == "literal_error":
            return f"{name} must be {ctx.get('expected')}, not {shown}{where}"
        bounds = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
                  "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}
        if kind in bounds:
            words, key = bounds[kind]
            bound = ctx.get(key)
            if isinstance(bound, float) and bound.is_integer() and not isinstance(value, float):
                bound = int(bound)  # timeout 86401: "at most 86400", not 86400.0
            return f"{name} must be {words} {bound}, not {shown}{where}"
        if kind in _NOUNS:
            return f"{name} must be {_NOUNS[kind]}, not {shown}{where}"
        return f"{name}: {err.get('msg')}" if name else str(err.get("msg"))

    # ----------------------------------------------------------------------------- command line

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One argument per field: its flag, help with the default, choices and parsing. Defaults are
        left to the model (argparse's is SUPPRESS), so :meth:`from_args` knows what was given."""
        for name, info in cls.model_fields.items():
            cli = _cli(info)
            if cli.hidden:
                continue
            kwargs: dict[str, Any] = {"help": _help(info)}
            choices = _choices(info.annotation)
            if choices and not cli.parse:  # a parser of its own (a comma list) leaves the choices to the model
                kwargs["choices"] = choices
            if cli.metavar:
                kwargs["metavar"] = cli.metavar
            if _bool(info.annotation):
                kwargs["action"] = argparse.BooleanOptionalAction if info.default is True else "store_true"
            else:
                kwargs["type"] = cli.parse or _parser(info.annotation)
                if cli.nargs:
                    kwargs["nargs"] = cli.nargs
                if (cli.nargs or cli.action == "append") and not cli.positional:
                    # several values, in every command alike: after one flag, or each after its own
                    kwargs.update(nargs=cli.nargs or "+", action="extend")
                elif cli.action:
                    kwargs["action"] = cli.action
            if cli.positional:
                default = argparse.SUPPRESS
                if not info.is_required():
                    kwargs.setdefault("nargs", "?")
                    if "choices" in kwargs:  # argparse checks an optional positional's default against them
                        default = info.default
                parser.add_argument(name, default=default, **kwargs)
                continue
            parser.add_argument(cli.flag or "--" + name.replace("_", "-"), dest=name, default=argparse.SUPPRESS,
                                required=info.is_required() or cli.required, **kwargs)

    @classmethod
    def from_args(cls, args: argparse.Namespace):
        """Settings from parsed arguments: what was given, over the protocol's settings (``--protocol``)
        when one is named, over the model's defaults."""
        given = {name: getattr(args, name) for name in cls.model_fields if hasattr(args, name)}
        given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}
        protocol = getattr(args, "protocol", None)
        if protocol:
            return cls.from_protocol(protocol, spelled=CLI, **given)
        return cls.build(given, spelled=CLI)

    # ----------------------------------------------------------------------------- Python verbs

    @classmethod
    def from_call(cls, values: Mapping[str, Any], protocol: Any = None):
        """A verb's settings from its parameters (its ``locals()``, in :mod:`recjudge.api.verbs`). Under a
        protocol a parameter left at its default follows the protocol: a signature that shows the defaults
        cannot tell one left alone from one typed out (``from_protocol(protocol, key=default)`` can)."""
        chosen = {k: v for k, v in values.items() if k in cls.model_fields
                  and not _left_at_default(cls.model_fields[k], v)}
        if protocol is None:
            return cls.build(chosen, spelled=PYTHON)
        return cls.from_protocol(protocol, spelled=PYTHON, **chosen)


# ---------------------------------------------------------------------------------- helpers

def _left_at_default(info, value: Any) -> bool:
    """Whether a verb's parameter holds its field's default (a table made by a factory: None), compared
    within one type only (an input may be a DataFrame, whose ``==`` is no truth value)."""
    if info.default_factory is not None or info.is_required():
        return value is None and info.default_factory is not None
    default = info.default
    return value is default or (type(value) is type(default) and not isinstance(value, os.PathLike)
                                and value == default)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _bool(annotation: Any) -> bool:
    return annotation is bool


def _choices(annotation: Any) -> tuple | None:
    args = [annotation, *(a for a in typing.get_args(annotation) if a is not type(None))]
    for a in args:
        if typing.get_origin(a) is typing.Literal:
            return typing.get_args(a)
    return None


def _help(info) -> str:
    cli = _cli(info)
    text = (cli.help if cli.help is not None else info.description or "").replace("%", "%%")
    default = info.default
    if info.is_required() or _cli(info).required or "default" in text.lower() or default is None or default == ():
        return text
    if default is False:
        return f"{text} (default: off)".strip()
    shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
    return f"{text} (default: {shown})".strip()


def checked(check: Callable[[Any], Any], value: Any) -> Any:
    """``value`` once ``check(value)`` accepts it; a refusal (ConfigError) becomes the ValueError pydantic
    reports under the field's name, so the library's own check is the field's, in the caller's words."""
    try:
        check(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


def comma_list(kind: type = str) -> Callable[[str], tuple]:
    """A command-line parser of comma-separated values (``--only table1,table3``); the model checks each."""
    def parse(text: str) -> tuple:
        parts = [v.strip() for v in text.split(",") if v.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("give at least one value")
        if kind is str:
            return tuple(parts)
        return tuple(_number(kind, "a whole number" if kind is int else "a number")(v) for v in parts)

    parse.__name__ = "a comma-separated list"
    return parse


def _parser(annotation: Any) -> Callable[[str], Any]:
    """Command-line text → a value of the field's type (the model then checks range and choices)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = annotation
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and args:
        base = args[0]
    if typing.get_origin(base) is tuple:
        base = typing.get_args(base)[0]
    if typing.get_origin(base) is typing.Annotated:
        base = typing.get_args(base)[0]
    if base is int:
        return _number(int, "a whole number")
    if base is float:
        return _number(float, "a number")
    return str


def _number(kind: type, what: str) -> Callable[[str], Any]:
    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} is expected, not {text!r}") from None

    parse.__name__ = what
    return parse
