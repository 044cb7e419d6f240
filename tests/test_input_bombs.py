"""Input that inflates far beyond its size fails on its first bytes, in bounded memory: a gzip file of
NUL bytes, or of lines that are no TREC line, is refused before it is decompressed whole."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recjudge.data.trec import read_qrels, read_run
from recjudge.errors import InputError

SRC = Path(__file__).resolve().parent.parent / "src"


def _bomb(path: Path, chunk: bytes, size: int) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as fh:
        block = chunk * (1 << 20 // len(chunk))
        for _ in range(size // len(block)):
            fh.write(block)
    return path


_MEASURE = """
import resource, sys
from recjudge.data.trec import read_run
from recjudge.errors import InputError
try:
    read_run(sys.argv[1])
except InputError as exc:
    print("refused:", exc)
# this process's own high-water mark: ru_maxrss would include the parent's RSS at fork (the test runner's)
try:
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("peak", peak)  # KiB
"""


@pytest.mark.parametrize("chunk, message", [(b"\0", ":1: "), (b"0\n", ":1: ")])
def test_a_gzip_bomb_is_refused_at_once_in_bounded_memory(tmp_path, chunk, message):
    path = _bomb(tmp_path / "bomb.run.gz", chunk, 512 << 20)  # 512 MiB of text in a few hundred KB
    assert path.stat().st_size < 4 << 20
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert "refused:" in done.stdout and message in done.stdout, done.stdout + done.stderr
    peak_kib = int(done.stdout.rsplit("peak", 1)[1])
    # the interpreter, NumPy and polars take ~150 MB; the 512 MiB of text never comes into memory
    assert peak_kib < 400 * 1024, peak_kib


def test_nul_bytes_and_a_bad_first_line_name_the_file_and_line(tmp_path):
    (tmp_path / "a.run").write_bytes(b"u1 Q0 d1 1 2.0 r\n\0\0\0\n")
    with pytest.raises(InputError, match=r"a.run:2: "):
        read_run(tmp_path / "a.run")
    with pytest.raises(InputError, match=r":1: "):
        read_qrels("just one field\nu1 0 d1 1\n")
    # a good file still reads, its head checked and nothing else changed
    assert read_run("u1 Q0 d1 1 2.0 r\nu1 Q0 d2 2 1.0 r\n").frame.docid.tolist() == ["d1", "d2"]


def test_a_rank_that_fits_no_integer_is_refused_saying_ranks_are_ignored():
    with pytest.raises(InputError, match=r":1: rank '99999999999999999999' does not fit a 64-bit integer; recjudge "
                                         r"ranks by score and ignores the rank column"):
        read_run("u1 Q0 d1 99999999999999999999 2.0 r\nu1 Q0 d2 1 1.0 r\n")


def _peak_reading(path: Path) -> tuple[str, int]:
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert "peak" in done.stdout, done.stdout + done.stderr
    return done.stdout, int(done.stdout.rsplit("peak", 1)[1])


@pytest.mark.parametrize("last, message", [("u9 Q0 dX 1 high r\n", "score 'high' is not a number"),
                                           ("u9 Q0 dX 1 2.0\n", "expected 6 columns")])
def test_a_run_broken_on_its_last_line_is_refused_holding_no_more_than_its_table(tmp_path, last, message):
    # 1.5 million valid lines, then a broken one: polars' parse refuses the file, and the careful reader
    # that names the line goes through the text piece by piece (it held the whole text, as bytes, a
    # string and a string per line: ~300 MB more than reading the valid file)
    n = 1_500_000
    body = "".join(f"u{i // 100} Q0 d{i % 7919} {i % 100 + 1} {1000 - i % 100}.5 r\n" for i in range(n))
    good, bad = tmp_path / "good.run.gz", tmp_path / "bad.run.gz"
    with gzip.open(good, "wt", compresslevel=1) as fh:
        fh.write(body)
    with gzip.open(bad, "wt", compresslevel=1) as fh:
        fh.write(body + last)
    out, peak_bad = _peak_reading(bad)
    assert f"bad.run.gz:{n + 1}: " in out and message in out, out
    _, peak_good = _peak_reading(good)
    assert peak_bad < peak_good + 80 * 1024, (peak_bad, peak_good)  # KiB


def test_a_line_without_end_is_refused_naming_it_not_read_whole(tmp_path):
    path = tmp_path / "long.run.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b"u1 Q0 d1 1 2.0 r\n" + b"x" * (20 << 20))  # 20 MiB with no newline after the first line
    with pytest.raises(InputError, match=r"long.run.gz:2: a line longer than 16 MiB"):
        read_run(path)
