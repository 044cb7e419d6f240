"""One spelling per option across commands: a setting of the same name has the same flag and takes its
values the same way in every command that has it."""

from __future__ import annotations

import argparse

import pytest

import recjudge as rj
from recjudge.cli import build_parser, main


def _commands() -> dict[str, argparse.ArgumentParser]:
    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, parser in subs.choices.items():
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:  # audit popularity, audit position …
            out.update({f"{name} {k}": p for k, p in nested[0].choices.items()})
        else:
            out[name] = parser
    return out


def test_a_setting_is_spelled_and_read_alike_in_every_command():
    spelled: dict[str, tuple] = {}
    several = set()
    for command, parser in _commands().items():
        for action in parser._actions:
            if action.dest in ("help", "verbose", "quiet", "protocol"):
                continue
            # its flag (or none: positional) is the same wherever the setting appears
            flags = (command, tuple(action.option_strings))
            assert spelled.setdefault(action.dest, flags)[1] == flags[1], f"{action.dest}: {spelled[action.dest]} vs {flags}"
            if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
                several.add((tuple(action.option_strings) != (), action.nargs, type(action).__name__))
    # a flag of several values takes them in one way everywhere: after one flag or each after its own
    assert {s for s in several if s[0]} == {(True, "+", "_ExtendAction")}


@pytest.mark.parametrize("command, model, before", [
    ("compare", rj.CompareSettings, ["--runs", "r", "--reference", "h"]),
    ("agreement", rj.AgreementSettings, ["--reference", "h"]),
])
def test_candidates_are_given_after_one_flag_or_each_after_its_own(command, model, before):
    parser = build_parser()
    one_flag = model.from_args(parser.parse_args([command, *before, "--candidate", "a", "b"]))
    each = model.from_args(parser.parse_args([command, *before, "--candidate", "a", "--candidate", "b"]))
    mixed = model.from_args(parser.parse_args([command, *before, "--candidate", "a", "b", "--candidate", "c"]))
    assert one_flag.candidates == each.candidates == ("a", "b")
    assert mixed.candidates == ("a", "b", "c")


def test_ties_takes_its_runs_after_runs_like_every_command(capsys):
    args = build_parser().parse_args(["ties", "--runs", "a.run", "b_dir", "--qrels", "q"])
    assert rj.TiesSettings.from_args(args) == rj.TiesSettings(runs=("a.run", "b_dir"), qrels="q")
    with pytest.raises(SystemExit) as exit_:
        main(["ties", "a.run", "--qrels", "q"])
    assert exit_.value.code == 2 and "unrecognized arguments: a.run" in capsys.readouterr().err
