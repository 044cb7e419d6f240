"""Every option of every command says what it does and what it defaults to, in --help."""

from __future__ import annotations

import argparse

import pytest

from recjudge.cli import build_parser

PARSER = build_parser()
COMMANDS = dict(next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)).choices)
# Options that need no default: flags (off unless given) and argparse's own.
NO_DEFAULT_ACTIONS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                      argparse._VersionAction, argparse.BooleanOptionalAction)
CHECKED = sorted(COMMANDS)


def _options(command: str):
    for action in COMMANDS[command]._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            yield action


@pytest.mark.parametrize("command", CHECKED)
def test_every_option_has_a_help_line_that_shows_its_default(command):
    parser = COMMANDS[command]
    missing, no_default = [], []
    formatter = parser._get_formatter()
    for action in _options(command):
        name = "/".join(action.option_strings)
        if not (action.help or "").strip():
            missing.append(name)
            continue
        if action.dest == "protocol" or action.required or isinstance(action, NO_DEFAULT_ACTIONS):
            continue
        text = formatter._expand_help(action)
        if "default" not in text.lower():
            no_default.append(f"{name}: {text!r}")
    assert not missing, f"recjudge {command}: options without a help line: {', '.join(missing)}"
    assert not no_default, f"recjudge {command}: help that does not state the default:\n" + "\n".join(no_default)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_renders_without_format_escapes(command):
    text = COMMANDS[command].format_help()
    assert "%%" not in text and "%(" not in text

