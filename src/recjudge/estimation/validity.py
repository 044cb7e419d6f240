"""Where ``recjudge estimate``'s intervals were measured to cover: the human users below which each
kind of interval is refused or printed with a warning (numbers from ``benchmarks/bench_estimate.py``,
500 replications per cell: simulation with N = 1,000 and 10,000, and TREC DL 2021 with n = 10-20 of
27 queries)."""

from __future__ import annotations

__all__ = ["MIN_HUMAN_USERS", "SYSTEM_OK_USERS", "PARTIAL_NOTE", "warnings_for"]

# refused below: at 10 the per-system intervals covered 84-94% at 95% (a skewed measure, nDCG@10, the
# least), the pairs far less; fewer users only make a mean of skewed per-user metrics less normal
MIN_HUMAN_USERS = 10
# per-system intervals, averaged over the systems: 84-94% at n = 10, 90-95% at 25, 93-96% at 50 (one
# cell 92.7%), 93.5-96% at 200; the worst system of a cell 2-3 points lower (on TREC DL 2021, Bpref's
# worst system 42-70% at n = 10-20)
SYSTEM_OK_USERS = 200


# partly judged pools (bench_estimate.py --partial 5 / 10, P@10 by HT within users, 500 replications):
# per-system 92.6-96.2% averaged over systems at n = 10-200 (worst system 90-95%), 94-96% with n = N = 50
PARTIAL_NOTE = ("partly judged users: in the benchmark (5 or 10 of 30 items judged by hand per user, P@10) the "
                "per-system intervals covered 93-96% at 95% from 10 human users (the worst system 90-95%), "
                "94-96% with every user judged in part; pairs 76-94%. A Horvitz-Thompson value is unbiased but not "
                "bounded: a P@k above 1 (or below 0) can print, and says the true value is near that bound")


def warnings_for(n: int, partial: int = 0) -> list[str]:
    """The warnings printed beside the intervals of an estimate from ``n`` human users (``partial``
    of them judged on part of their pool)."""
    out = [PARTIAL_NOTE] if partial else []
    if n < SYSTEM_OK_USERS:
        out.append(f"with {n} human users (< {SYSTEM_OK_USERS}) the per-system intervals are approximate: the "
                   "benchmark measured 84-94% coverage at 95% with 10 users, 90-95% with 25, 93-96% with 50 "
                   "(averaged over systems; a skewed measure such as nDCG@10 or Bpref the least)")
    out.append("the simultaneous pairwise intervals cover less than they claim (91-95% at 200 human users in the "
               "benchmark, 63-92% at 10-50, 1-30% over 1,953 pairs of 63 TREC runs at 10-20 queries): read "
               "'apart' as a lead, not a finding; the rank sets built from them covered 96-100% in every case "
               "measured")
    return out
