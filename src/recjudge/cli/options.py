"""A command's options from its settings model, and its settings back from the parsed options."""

from __future__ import annotations

import argparse


def add_settings(parser: argparse.ArgumentParser, model, func) -> None:
    """Every field of ``model`` as an option of ``parser``; ``func(args)`` runs the command."""
    model.add_arguments(parser)
    parser.set_defaults(func=func, settings_model=model)


def settings_from(args: argparse.Namespace, model):
    """The command's settings: the options given over the protocol's (``--protocol``) over the model's
    defaults. Under a protocol, one line on stderr names it and every setting that differs."""
    settings = model.from_args(args)
    if settings.protocol is not None:
        progress(args)(settings.protocol.describe())
    return settings


def progress(args: argparse.Namespace, stream=None):
    """How a command says what it is doing: a line on ``stream`` (default stderr), flushed at once, and
    long work's progress as a live bar on a terminal (:class:`recjudge.progress.Reporter`); nothing
    under ``--quiet``, which keeps only results, warnings and errors."""
    if getattr(args, "quiet", False):
        return lambda message: None
    from ..progress import Reporter

    return Reporter(stream)
