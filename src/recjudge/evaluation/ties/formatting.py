"""Plain-text tables of a tie audit: prevalence, then one table per measure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sensitivity import TieAudit


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def format_audit(audit: TieAudit) -> str:
    """Readable tables: prevalence, then one table per measure with every treatment."""
    s = audit.settings
    out = ["Tie prevalence (share of each run's users with an exact tie; before any tie policy)"]
    header = ["run", "users", "tied"]
    for k in s.cutoffs:
        header += [f"tied@{k}", f"cross@{k}", f"inside@{k}"]
    with_rel = audit.qrels is not None
    if with_rel:
        header += ["rel tied"] + [f"rel tied@{k}" for k in s.cutoffs]
    header += ["tied rows", "largest block"]
    rows = []
    for r in audit.runs:
        p = r.prevalence
        row = [r.name, str(p.users), _pct(p.tied)]
        for i, _ in enumerate(s.cutoffs):
            row += [_pct(p.touching_top[i]), _pct(p.crossing_top[i]), _pct(p.inside_top[i])]
        if with_rel:
            row += [_pct(p.relevant_tied)] + [_pct(x) for x in p.relevant_touching_top]
        row += [_pct(p.tied_rows), str(p.largest_block)]
        rows.append(row)
    out += _table(header, rows)
    out.append("  tied@k: a tie block reaches the top k; cross@k: it holds ranks k and k+1 (changes "
               "membership); inside@k: it lies wholly in the top k (changes positions); rel: it holds "
               "an item labelled >= 1.")
    for name in s.measures:
        out.append("")
        out.append(f"{name} (mean over {audit.counted_users} users of qrels {audit.qrels!r}; a user the "
                   "run lacks scores 0)")
        header = ["run", "input order", f"hash (seed {s.seed})", "expected",
                  f"hash seeds mean ± sd ({s.seeds})", "input − expected", "perm max |Δ| input",
                  "perm max |Δ| hash"]
        rows = []
        for r in audit.runs:
            m = next(x for x in r.measures if x.measure == name)
            exp = _num(m.expected)
            if m.expected_ci is not None:
                exp += f" [{_num(m.expected_ci[0])}, {_num(m.expected_ci[1])}] MC"
            rows.append([r.name, _num(m.input_order), _num(m.hash), exp,
                         f"{_num(m.hash_seeds_mean)} ± {_num(m.hash_seeds_sd)}",
                         f"{round(m.input_order - m.expected, 4) + 0.0:+.4f}",  # no "-0.0000"
                         _num(m.permutation), _num(m.permutation_hash)])
        out += _table(header, rows)
    if audit.runs and audit.runs[0].measures:
        mc = any(m.expected_ci is not None for m in audit.runs[0].measures)
        out.append("")
        out.append("expected: uniformly random order within tie blocks (exact closed form"
                   + (f"; MC = Monte Carlo over {s.mc_samples} orders with a {s.confidence:.0%} CI" if mc else "")
                   + f"). perm: largest change of the mean over {s.permutations} seeded shuffles of "
                   "each user's rows.")
    for note in audit.notes:
        out.append(f"note: {note}")
    return "\n".join(out)
