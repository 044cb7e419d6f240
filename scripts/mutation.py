"""The project's mutation run: hand-written mutants of the newest modules, each a bug a developer could
plausibly write, and whether the tests chosen for it catch it.

    python scripts/mutation.py                     # every mutant of scripts/mutants.toml
    python scripts/mutation.py --module protocol   # the mutants of modules whose path contains "protocol"
    python scripts/mutation.py --id holm-bonferroni --verbose
    python scripts/mutation.py --check             # only that the list still matches the code (seconds)

Each mutant (see scripts/mutants.toml) names a module, a snippet that must occur exactly once in it,
its replacement, the bug it stands for and the pytest selection that should fail on it. The mutant is
applied to a temporary copy of ``src/`` (first on PYTHONPATH; the worktree is never written), the
selection runs in a fresh process with a timeout, and the mutant is killed when that run fails. A
table per module gives mutants, killed, survivors and the score; the exit status is 1 when any
module scores below ``--min-score``, 2 when the mutant list no longer matches the code.

Why not mutmut or cosmic-ray (not tried here): both mutate every operator, number and string of a
module (hundreds of mutants for the reproduction's tables alone, most of them in report wording) and run
the tests covering each; with the end-to-end reproduce tests at 5-20 s each on two shared cores that
would take hours, and mutmut 3 first runs the whole suite (about 6 minutes) in its own copy. The hand
list holds the bugs worth catching (off-by-one, < for <=, wrong column, wrong K, Bonferroni for Holm,
…); the whole list runs in about 12 minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "scripts" / "mutants.toml"
_KEYS = {"id", "module", "find", "replace", "why", "tests"}


class MutantListError(Exception):
    """The mutant list does not match the code (a snippet moved or changed): the list needs updating."""


@dataclass(frozen=True)
class Mutant:
    id: str
    module: str      # path from the repository root, e.g. src/recjudge/protocol.py
    find: str        # occurs exactly once in the module
    replace: str
    why: str         # the plausible bug, in one line
    tests: tuple[str, ...]  # pytest selections, each run alone: "path", "path::test" or "path -k expr"

    def apply(self, text: str) -> str:
        return text.replace(self.find, self.replace, 1)


def load_mutants(path: Path = MUTANTS, root: Path = ROOT) -> list[Mutant]:
    """The mutants of ``path``, each checked against the code under ``root``: the snippet occurs exactly
    once in its module and the replacement changes it. Any mismatch is a :class:`MutantListError`
    naming the mutant."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    entries = data.get("mutant")
    if not isinstance(entries, list) or not entries:
        raise MutantListError(f"{path}: expected [[mutant]] tables")
    out, seen = [], set()
    for n, entry in enumerate(entries, 1):
        name = entry.get("id", f"#{n}")
        missing, extra = _KEYS - set(entry), set(entry) - _KEYS
        if missing or extra:
            raise MutantListError(f"{path}: mutant {name}: " + "; ".join(
                [f"missing {', '.join(sorted(missing))}"] * bool(missing) + [f"unknown {', '.join(sorted(extra))}"]
                * bool(extra)))
        if name in seen:
            raise MutantListError(f"{path}: mutant {name}: the id is used twice")
        seen.add(name)
        tests = entry["tests"]
        tests = (tests,) if isinstance(tests, str) else tuple(tests)
        m = Mutant(name, entry["module"], entry["find"], entry["replace"], entry["why"], tests)
        module = root / m.module
        if not module.is_file():
            raise MutantListError(f"{path}: mutant {name}: no module {m.module}")
        count = module.read_text("utf-8").count(m.find)
        if count != 1:
            raise MutantListError(f"{path}: mutant {name}: its snippet occurs {count} times in {m.module}, not once "
                                  f"(update the snippet to the code):\n{m.find}")
        if m.find == m.replace:
            raise MutantListError(f"{path}: mutant {name}: the replacement does not change the code")
        if not m.tests:
            raise MutantListError(f"{path}: mutant {name}: no tests to kill it")
        if not m.why.strip() or "\n" in m.why:
            raise MutantListError(f"{path}: mutant {name}: 'why' must be the bug in one line")
        for selection in m.tests:
            if not (root / selection.split("::")[0].split()[0]).is_file():
                raise MutantListError(f"{path}: mutant {name}: no test file for the selection {selection!r}")
        out.append(m)
    return out


def _run_selections(tests: tuple[str, ...], env: dict, timeout: float) -> tuple[str, float, str]:
    """Each selection in its own pytest process (a ``-k`` applies to its own paths only), stopping at
    the first that does not pass: ('pass' | 'fail' | 'timeout', seconds, output tail)."""
    total, status, out = 0.0, "pass", ""
    for selection in tests:
        status, secs, out = _run(selection.split(), env, max(1.0, timeout - total))
        total += secs
        if status != "pass":
            break
    return status, total, out


def _run(args: list[str], env: dict, timeout: float) -> tuple[str, float, str]:
    """('pass' | 'fail' | 'timeout', seconds, output tail) of pytest ``args`` in a fresh process group."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
                             "-o", "addopts=", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        status = "pass" if proc.returncode == 0 else "fail"
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, status = proc.communicate()[0] or "", "timeout"
    except BaseException:
        _kill(proc)
        raise
    if status == "fail" and proc.returncode in (4, 5):  # usage error, no test collected: the list is wrong
        raise MutantListError(f"pytest {' '.join(args)} selected nothing or was misused:\n{out[-2000:]}")
    return status, time.monotonic() - start, out[-3000:]


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _copy_tree(dest: Path) -> Path:
    """A copy of src/ under ``dest`` (prompts/ linked beside it, where an editable install finds them)."""
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (dest / "prompts").symlink_to(ROOT / "prompts", target_is_directory=True)
    return dest / "src"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=Path, default=MUTANTS)
    ap.add_argument("--module", action="append", default=[], help="only modules whose path contains this")
    ap.add_argument("--id", action="append", default=[], help="only this mutant (repeatable)")
    ap.add_argument("--min-score", type=float, default=0.90, help="fail when a module scores below (default 0.90)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run (a timeout kills)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the check that the selections pass unmutated")
    ap.add_argument("--verbose", action="store_true", help="print each survivor's test output")
    ap.add_argument("--check", action="store_true", help="only check that the list matches the code, run nothing")
    args = ap.parse_args(argv)
    try:
        mutants = load_mutants(args.mutants)
    except MutantListError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"mutation: all {len(mutants)} mutants match the code once and change it")
        return 0
    if args.module:
        mutants = [m for m in mutants if any(s in m.module for s in args.module)]
    if args.id:
        unknown = set(args.id) - {m.id for m in mutants}
        if unknown:
            print(f"mutation: no mutant {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in args.id]
    if not mutants:
        print("mutation: no mutant selected", file=sys.stderr)
        return 2

    results: dict[str, list[tuple[Mutant, str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="recjudge-mutation-") as tmp:
        src = _copy_tree(Path(tmp))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep), "PYTHONDONTWRITEBYTECODE": "1"}
        # the copy, not the worktree, must be what the tests import
        where = subprocess.run([sys.executable, "-c", "import recjudge; print(recjudge.__file__)"], env=env, cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        if not where.startswith(str(src)):
            print(f"mutation: the tests would import recjudge from {where}, not from the mutated copy", file=sys.stderr)
            return 2
        try:
            if not args.no_baseline:
                selection = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
                status, secs, out = _run_selections(selection, env, args.timeout * len(selection))
                print(f"baseline: {len(selection)} selections {status} unmutated in {secs:.0f} s", flush=True)
                if status != "pass":
                    print(out, file=sys.stderr)
                    print("mutation: the selected tests fail without any mutant; fix them first", file=sys.stderr)
                    return 2
            for n, m in enumerate(mutants, 1):
                path = src.parent / m.module
                original = path.read_text("utf-8")
                try:
                    path.write_text(m.apply(original), "utf-8")
                    status, secs, out = _run_selections(m.tests, env, args.timeout)
                finally:
                    path.write_text(original, "utf-8")
                verdict = "survived" if status == "pass" else "killed" + (" (timeout)" if status == "timeout" else "")
                print(f"[{n}/{len(mutants)}] {m.id}: {verdict} ({secs:.0f} s)", flush=True)
                if verdict == "survived" and args.verbose:
                    print(out)
                results.setdefault(m.module, []).append((m, status, secs))
        except MutantListError as exc:
            print(f"mutation: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("mutation: interrupted; the worktree was never modified", file=sys.stderr)
            return 130
    return report(results, args.min_score)


def report(results: dict[str, list[tuple[Mutant, str, float]]], min_score: float) -> int:
    width = max(len(m) for m in results)
    print(f"\n{'module':<{width}}  mutants  killed  survived  score")
    low, total, killed_all = [], 0, 0
    for module, rows in results.items():
        killed = sum(s != "pass" for _, s, _ in rows)
        score = killed / len(rows)
        total, killed_all = total + len(rows), killed_all + killed
        print(f"{module:<{width}}  {len(rows):>7}  {killed:>6}  {len(rows) - killed:>8}  {score:>5.0%}")
        for m, s, _ in rows:
            if s == "pass":
                print(f"{'':<{width}}    survived: {m.id} — {m.why}")
        if score < min_score:
            low.append(module)
    print(f"{'all':<{width}}  {total:>7}  {killed_all:>6}  {total - killed_all:>8}  {killed_all / total:>5.0%}")
    if low:
        print(f"\nbelow the minimum score {min_score:.0%}: {', '.join(low)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
