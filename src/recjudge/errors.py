"""Error classes. The CLI maps each class to an exit code; messages say what was expected and the fix."""

from __future__ import annotations


class RecjudgeError(Exception):
    """Base class of every error recjudge raises on purpose."""

    exit_code = 1


class InputError(RecjudgeError):
    """Bad input data: names the source, the line (when there is one) and how to fix it."""

    exit_code = 2

    def __init__(self, source: str, problem: str, fix: str = "", line: int | None = None):
        self.source = source
        self.line = line
        self.problem = problem
        self.fix = fix
        where = f"{source}:{line}" if line is not None else source
        message = f"{where}: {problem}"
        if fix:
            message += f" (fix: {fix})"
        super().__init__(message)


class OutputError(RecjudgeError):
    """An output that cannot be written, or would overwrite an input."""

    exit_code = 2

    def __init__(self, path: str, problem: str, fix: str = "choose another output path"):
        self.path = path
        super().__init__(f"{path}: {problem}" + (f" (fix: {fix})" if fix else ""))


class ConfigError(RecjudgeError):
    """An option or configuration value that cannot work."""

    exit_code = 2


class NotConfirmed(ConfigError):
    """Paid calls not started: their estimate passed the confirmation threshold and nobody confirmed."""


class MissingExtraError(RecjudgeError):
    """An optional dependency is not installed; names the extra that brings it."""

    exit_code = 3

    def __init__(self, module: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the '{module}' package, which is not installed. "
            f'Install the extra: pip install "recjudge[{extra}]"'
        )
