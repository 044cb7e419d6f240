"""Named protocols: one shipped file sets a published study's settings for every command at once.

A protocol file (TOML, ``protocols/<name>.toml`` or any path) has ``name``, ``title``, ``source``
and one table per command (``[train]``, ``[judge]``, ``[compare]`` …) whose keys are that command's
option names with dashes as underscores. ``recjudge COMMAND --protocol NAME`` makes those values the
defaults; an option given on the command line wins, and every output then names the protocol and
lists each setting that differs from it, so a reader never mistakes a variant for the protocol.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError

__all__ = ["Protocol", "ProtocolUse", "load_protocol", "protocol_names",
           "PROTOCOL_DIR", "same_value"]

PROTOCOL_DIR = Path(__file__).with_name("protocols")
_HEADER_KEYS = ("name", "title", "source", "notes")


@dataclass(frozen=True)
class Protocol:
    """A protocol's settings per command, as its file declares them."""

    name: str
    title: str
    source: str
    path: str
    commands: Mapping[str, Mapping[str, Any]]
    notes: str = ""

    def settings(self, command: str) -> dict[str, Any]:
        """The option values the protocol sets for ``command`` (empty when it sets none)."""
        return dict(self.commands.get(command, {}))

    def differences(self, command: str, used: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Each protocol setting of ``command`` whose value in ``used`` is not the protocol's."""
        out = {}
        for key, want in self.settings(command).items():
            if key in used and not same_value(used[key], want):
                out[key] = {"protocol": want, "used": used[key]}
        return out


@dataclass(frozen=True)
class ProtocolUse:
    """A protocol as one command used it: its name and the settings that differ from it."""

    protocol: Protocol
    command: str
    differs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the settings whose value is the protocol's because the caller gave none (a file's own key beats these)
    followed: frozenset[str] = frozenset()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.protocol.name, "title": self.protocol.title, "source": self.protocol.source,
                "command": self.command, "follows_protocol": not self.differs,
                "differs": {k: dict(v) for k, v in self.differs.items()}}

    def describe(self) -> str:
        """One line for logs and reports."""
        if not self.differs:
            return f"protocol {self.protocol.name}: every setting as the protocol declares"
        parts = [f"{k} = {_show(v['used'])} (protocol: {_show(v['protocol'])})" for k, v in self.differs.items()]
        return f"protocol {self.protocol.name}, except: " + "; ".join(parts)


def same_value(used: Any, want: Any) -> bool:
    """Whether a setting's value is the protocol's (600 is 600.0; lists compared item by item)."""
    if isinstance(used, bool) or isinstance(want, bool):
        return used is want or used == want
    if isinstance(used, (int, float)) and isinstance(want, (int, float)):
        return float(used) == float(want)
    if isinstance(used, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(used) == len(want) and all(same_value(u, w) for u, w in zip(used, want))
    return str(used) == str(want)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def protocol_names() -> list[str]:
    """The protocols shipped with recjudge."""
    return sorted(p.stem for p in PROTOCOL_DIR.glob("*.toml"))


def load_protocol(name_or_path: str | os.PathLike) -> Protocol:
    """A shipped protocol by name, or a protocol file by path."""
    from ._io import read_toml

    text = str(name_or_path)
    path = Path(text)
    if not (path.suffix == ".toml" or os.sep in text or path.exists()):
        path = PROTOCOL_DIR / f"{text}.toml"
        if not path.is_file():
            raise ConfigError(f"--protocol {text!r}: no such protocol; shipped: {', '.join(protocol_names())}, "
                              "or give the path of a protocol file (TOML)")
    data = read_toml(path, "protocol file")
    src = str(path)
    for key in ("name", "title"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise InputError(src, f"missing or empty top-level key {key!r}", f'add {key} = "..." at the top')
    commands = {}
    for key, value in data.items():
        if key in _HEADER_KEYS:
            continue
        if not isinstance(value, dict):
            raise InputError(src, f"top-level key {key!r} is not a command table",
                             f"put command settings under [{key}] or use one of {', '.join(_HEADER_KEYS)}")
        for opt, v in value.items():
            if isinstance(v, dict):
                raise InputError(src, f"[{key}] {opt}: a table is not an option value",
                                 "give a string, number, boolean or list")
        commands[key] = dict(value)
    return Protocol(name=data["name"], title=data["title"], source=str(data.get("source", "")), path=src,
                    commands=commands, notes=str(data.get("notes", "")))
