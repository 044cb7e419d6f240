"""MkDocs hook: each command page's options, written from the command line's own parser.

A page under ``docs/commands/`` holds ``<!-- options: COMMAND -->`` where the options go; the hook
replaces it with the command's usage and a table of every option (flags, value, help with its
default), so the pages cannot drift from ``recjudge COMMAND --help``. The build fails when a
command of the parser has no page or a page names a command the parser lacks.
"""

from __future__ import annotations

import argparse
import html
import re

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"<!-- options: ([\w -]+?) -->")
_rendered: set[str] = set()


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command and sub-command (``audit position``) by its name as typed."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix}{name}"
                found[full] = sub
                found.update(_commands(sub, full + " "))
    return found


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from recjudge.cli import build_parser

    return _commands(build_parser())


def _cell(text: str) -> str:
    """Help text as one table cell: Markdown's own characters escaped outside `code` spans."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([\\*_\[\]|])", r"\\\1", html.escape(parts[i], quote=False))
    return "`".join(parts)  # a | inside a code span does not split a table cell


def options_table(name: str, parser: argparse.ArgumentParser) -> str:
    """The usage line and one table row per option of ``parser``, as Markdown."""
    formatter = parser._get_formatter()
    usage = parser.format_usage().strip().removeprefix("usage: ")
    lines = ["```text", usage, "```", "", "| option | value | what it does |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        flags = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}` (positional)"
        value = ""
        if action.nargs != 0:
            value = (" \\| ".join(f"`{c}`" for c in action.choices) if action.choices
                     else f"`{action.metavar or action.dest.upper()}`")
            if action.nargs in ("+", "*"):
                value += " …"
        help_text = formatter._expand_help(action) if action.help else ""
        if action.required and action.option_strings:
            help_text = "required; " + help_text
        lines.append(f"| {flags} | {value} | {_cell(help_text)} |")
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in subs:
        lines += ["", "Its sub-commands each have their own options, below."]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown, page, config, files):
    if not page.file.src_uri.startswith("commands/"):
        return markdown
    parsers = None

    def replace(match: re.Match) -> str:
        nonlocal parsers
        parsers = parsers or _parsers()
        name = match.group(1)
        if name not in parsers:
            raise PluginError(f"{page.file.src_path}: no command '{name}' in recjudge's parser "
                              f"(commands: {', '.join(sorted(parsers))})")
        _rendered.add(name)
        return options_table(name, parsers[name])

    return MARKER.sub(replace, markdown)


def on_pre_build(config):
    _rendered.clear()


def on_post_build(config):
    missing = sorted(set(_parsers()) - _rendered)
    if missing:
        raise PluginError("commands with no options on any page: " + ", ".join(missing)
                          + " (fix: add '<!-- options: NAME -->' to its page under docs/commands/)")
