"""Where ``recjudge estimate``'s intervals were measured to cover: the human users below which each
kind of interval is refused or printed with a warning (numbers from ``benchmarks/bench_estimate.py``)."""

from __future__ import annotations

__all__ = ["MIN_HUMAN_USERS", "SYSTEM_OK_USERS", "PAIRS_OK_USERS", "warnings_for"]

# refused below: no interval here (nor the human-only t interval) covered 90% at 95%
MIN_HUMAN_USERS = 10
# per-system intervals: 87-92% coverage at n = 10-25 for nDCG@10 in the simulation, 93.6-94.5% from 50
SYSTEM_OK_USERS = 50
# simultaneous pairwise intervals: 64-91% at n = 10-50 in the simulation (0.5-34% over 1,953 pairs on
# TREC DL 2021 at n = 10-20), 94-95% at n = 200; the rank sets covered 95.5-100% in every cell measured
PAIRS_OK_USERS = 200


def warnings_for(n: int) -> list[str]:
    """The warnings printed beside the intervals of an estimate from ``n`` human users."""
    out = []
    if n < SYSTEM_OK_USERS:
        out.append(f"with {n} human users (< {SYSTEM_OK_USERS}) the per-system intervals are approximate: the "
                   "benchmark measured 87-92% coverage at 95% for a skewed measure (nDCG@10) at 10-25 users")
    if n < PAIRS_OK_USERS:
        out.append(f"with {n} human users (< {PAIRS_OK_USERS}) the simultaneous pairwise intervals cover less "
                   "than they claim (64-91% in the benchmark, far less over hundreds of near-equal pairs): read "
                   "'apart' as a lead, not a finding; the rank sets covered at least 95% in every case measured")
    return out
