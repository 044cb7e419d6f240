"""The ``recjudge`` command line: argument parsing only; every command calls a library function.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)``, which adds its sub-command and
sets ``func`` (taking the parsed namespace, returning an exit code). Modules import heavy
dependencies inside ``func`` only, so ``recjudge compare`` never loads torch or RecBole.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import signal
import sys
import threading
import warnings

from ..errors import RecjudgeError

COMMAND_MODULES = (
    "recjudge.cli.evaluation",  # compare, agreement, evaluate
    "recjudge.cli.fill",
    "recjudge.cli.ablate",
    "recjudge.cli.demo",
    "recjudge.cli.judge",
    "recjudge.cli.ties",
    "recjudge.cli.train",
    "recjudge.cli.audit",
    "recjudge.cli.compare_settings",
    "recjudge.cli.reproduce",
    "recjudge.cli.estimate",
    "recjudge.cli.annotate",
)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="recjudge",
        description="Cranfield-style evaluation of recommender systems with LLM judges.",
    )
    parser.add_argument("--version", action="version", version=f"recjudge {__version__}")
    _add_output_options(parser, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for command_parser in sub.choices.values():
        # `recjudge --quiet compare ...` and `recjudge compare ... --quiet` alike; SUPPRESS keeps the
        # sub-command's default from overwriting a flag given before the command name
        _add_output_options(command_parser, argparse.SUPPRESS)
        command_parser.add_argument(
            "--protocol", metavar="NAME_OR_FILE",
            help="a named protocol (e.g. penha2025) or protocol file: its settings become this command's "
                 "defaults; options given here win, and the outputs list every setting that differs")
    return parser


def _add_output_options(parser: argparse.ArgumentParser, default) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true", default=default, help="log debug messages (default: info and warnings)")
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="print no progress or info lines on stderr; warnings and errors still show (default: off)")


# recjudge's own loggers: INFO by default; every other library's only from WARNING up (matplotlib's
# font cache, RecBole, the HTTP stack say what a user of recjudge has no use for)
_OWN_LOGGER = "recjudge"


@contextlib.contextmanager
def _logging(verbose: bool, quiet: bool):
    """stderr logging for one command; the levels it changes are put back afterwards (main can be
    called again in the same process, as the tests do)."""
    root, own = logging.getLogger(), logging.getLogger(_OWN_LOGGER)
    saved = root.level, own.level
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    own.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    try:
        yield
    finally:
        root.setLevel(saved[0])
        own.setLevel(saved[1])


# Commands whose outputs are one set, committed when the command returns (recjudge.outputs). train
# commits each system's run with its sidecar (a killed training keeps the systems done), reproduce
# and demo their report; each reads files it wrote earlier in the run.
_ONE_SET = ("evaluate", "compare", "compare-settings", "agreement", "fill", "ties", "judge", "audit", "ablate",
            "estimate", "annotate")


def _outputs(command: str):
    from ..outputs import output_set

    return output_set() if command in _ONE_SET else contextlib.nullcontext()


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so temp files are removed and caches closed on the way out."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.verbose, args.quiet = getattr(args, "verbose", False), getattr(args, "quiet", False)
    if args.verbose and args.quiet:  # one before the command name, the other after it
        parser.error("-v/--verbose and -q/--quiet exclude each other; give one of them")
    warnings.simplefilter("default")
    warnings.formatwarning = lambda msg, cat, *a, **k: f"warning: {msg}\n"
    previous = _install_sigterm()
    try:
        with _logging(args.verbose, args.quiet), _outputs(args.command):
            return int(args.func(args) or 0)
    except RecjudgeError as exc:
        print(f"recjudge {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # the reader went away (`recjudge evaluate ... | head`): not an error of ours, nothing to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        # the library names paths in its own errors; this is the net for what slips through
        where = exc.filename or "a file"
        print(f"recjudge {args.command}: error: {where}: {exc.strerror or exc} "
              "(fix: check that the path exists and is readable or writable)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        code = 143 if isinstance(exc, Terminated) else 130
        print(f"recjudge {args.command}: {'terminated' if code == 143 else 'interrupted'}", file=sys.stderr)
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _install_sigterm():
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
