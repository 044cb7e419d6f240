"""Read-only folders in tests that also run as root (CI does), where the kernel lets root write
anywhere and a chmod alone proves nothing.

- :func:`unprivileged`: run a check in a forked child that has dropped to the ``nobody`` user, so the
  kernel itself refuses the write (the real check, as a user meets it).
- :func:`owner_permissions`: make ``os.access`` answer as the kernel does for a file's owner who is
  not root (the write bit decides), which is the boundary recjudge's output checks ask.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import traceback
from pathlib import Path

NOBODY = 65534


def is_root() -> bool:
    return os.geteuid() == 0


def shared_tmp() -> Path:
    """A temporary folder every user can enter (pytest's tmp_path is 0700 under root's own folder)."""
    path = Path(tempfile.mkdtemp(prefix="recjudge-perm-"))
    path.chmod(0o755)
    return path


def unprivileged(check) -> tuple[bool, str]:
    """Run ``check()`` in a child process as the ``nobody`` user: (passed, what went wrong)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        os.close(r)
        code, message = 1, ""
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            check()
            code = 0
        except BaseException:
            message = traceback.format_exc()
        os.write(w, message.encode()[-4000:])
        os.close(w)
        sys.stdout.flush()
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        message = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0, message


def owner_permissions(monkeypatch) -> None:
    """``os.access`` for writing answers from the owner's write bit, as for an owner who is not root."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and os.path.exists(path) and not os.stat(path).st_mode & stat.S_IWUSR:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
