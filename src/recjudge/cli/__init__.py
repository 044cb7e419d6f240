"""The ``recjudge`` command line: argument parsing only; every command calls a library function.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)``, which adds its sub-command and
sets ``func`` (taking the parsed namespace, returning an exit code). Modules import heavy
dependencies inside ``func`` only, so ``recjudge compare`` never loads torch or RecBole.
"""

from __future__ import annotations

import argparse
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
    "recjudge.cli.settings",
    "recjudge.cli.reproduce",
)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="recjudge",
        description="Cranfield-style evaluation of recommender systems with LLM judges.",
    )
    parser.add_argument("--version", action="version", version=f"recjudge {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for command_parser in sub.choices.values():
        command_parser.add_argument(
            "--protocol", metavar="NAME_OR_FILE",
            help="a named protocol (e.g. penha2025) or protocol file: its settings become this command's "
                 "defaults; options given here win, and the outputs list every setting that differs")
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so temp files are removed and caches closed on the way out."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    warnings.simplefilter("default")
    warnings.formatwarning = lambda msg, cat, *a, **k: f"warning: {msg}\n"
    previous = _install_sigterm()
    try:
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
