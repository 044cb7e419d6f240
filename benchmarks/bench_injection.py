"""Detection and false alarms of the injection scan (``recjudge audit injection-scan``).

    python benchmarks/bench_injection.py

Prints, per set of texts: how many the scan flags. The attack sets are paraphrases written for
recjudge (tests/injection_phrases.py; the second and third were used to widen the patterns after
they were written, so their rates are not held-out rates); the false-alarm sets are benign
catalogue strings and every title of MovieLens-100K (shipped in the recbole wheel; skipped without it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from injection_phrases import BENIGN, FIRST, SECOND, THIRD  # noqa: E402

from recjudge.judging.injection import find_instruction  # noqa: E402


def main() -> int:
    rows = [("attacks: first set", FIRST, True), ("attacks: second set", SECOND, True),
            ("attacks: third set", THIRD, True), ("benign catalogue strings", BENIGN, False)]
    try:
        from recjudge.data.collections import load_collection

        titles = tuple(t for t in load_collection("ml-100k").items["title"] if isinstance(t, str))
        rows.append(("MovieLens-100K titles", titles, False))
    except Exception as exc:  # noqa: BLE001 - the table says why the row is missing
        print(f"MovieLens-100K titles: not available ({exc})")
    print(f"{'set':<28} {'texts':>6} {'flagged':>8} {'rate':>7} {'ms/text':>8}")
    for name, texts, attack in rows:
        t0 = time.perf_counter()
        flagged = sum(find_instruction(t) is not None for t in texts)
        ms = (time.perf_counter() - t0) * 1000 / max(1, len(texts))
        what = "detected" if attack else "false alarms"
        print(f"{name:<28} {len(texts):>6} {flagged:>8} {flagged / len(texts):>7.1%} {ms:>8.3f}  ({what})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
