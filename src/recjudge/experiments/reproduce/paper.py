"""Where the paper's own numbers disagree, from the published cells (not matched silently)."""

from __future__ import annotations

def paper_contradictions(published) -> list[dict[str, str]]:
    """Where the paper's own numbers disagree, from the published cells (not matched silently)."""
    return _wording(published.value) + _numbers(published)


def _wording(v) -> list[dict[str, str]]:
    """What the text says against what the tables print (Tables 3, 8, 9; Sections 3 and 5.2)."""
    out = []

    def pct(row: str, table: str = "table3") -> str:
        scale = 1.0 if table == "table8" else 100.0
        return " / ".join(f"{v(table, row, c) * scale:.2f}%" for c in ("agree", "tie", "disagree"))

    if v("table8", "baseline", "agree") is not None and v("table3", "Title + All metadata", "agree") is not None:
        out.append({"where": "Table 8 vs Table 3",
                    "detail": (f"Table 8's baseline ({pct('baseline', 'table8')} agree / tie / disagree; 51 users, 50 "
                               f"items each) matches no row of Table 3 in that stated setting: 'Title + All metadata', "
                               f"the protocol's fields, is {pct('Title + All metadata')} and 'Title', Table 3's "
                               f"baseline, {pct('Title')}. recjudge computes both from the same labels, so its two "
                               "rows agree with each other and differ from one of the paper's.")})
    systems, configs = v("section5.2", "system rankings", "systems"), v("section3", "systems", "configurations")
    if systems is not None and configs is not None:
        out.append({"where": "Section 5.2",
                    "detail": (f"the τ of Table 4 is said to be over the ranking of {systems:.0f} recommender systems, "
                               f"while the same section and Appendix B give it across {configs:.0f} system "
                               f"configurations; recjudge ranks every system it is given")})
    bound = v("appendixB", "Table 9", "tau difference nDCG@100 and Compat")
    if bound is not None and v("table9", "baseline", "tau Compat") is not None:
        diffs = {m: abs(v("table9", "baseline", f"tau {m}") - v("table9", "defined scale", f"tau {m}"))
                 for m in ("Compat", "nDCG", "Bpref")}
        out.append({"where": "Appendix B (and Section 7) vs Table 9",
                    "detail": (f"the text says the two prompts' τ differ by less than {bound:g} for nDCG@100 and "
                               f"Compat; Table 9's values differ by {diffs['Compat']:.4f} on Compat (more than "
                               f"{bound:g}), {diffs['nDCG']:.4f} on nDCG@100 and {diffs['Bpref']:.4f} on Bpref")})
    lo, hi = v("section3", "LLM judge", "rating scale low"), v("section3", "LLM judge", "rating scale high")
    if lo is not None and hi is not None:
        out.append({"where": "Section 3",
                    "detail": (f"the judge is said to see each movie's explicit rating on a {lo:g}-{hi:g} scale; "
                               "MovieLens-32M's ratings are half stars from 0.5 to 5.0, and recjudge's prompt states "
                               "the collection's own scale")})
    out.append({"where": "Table 3",
                "detail": "the columns are headed 'Agreement (%)', 'Tie (%)', 'Disagreement (%)' but the values are "
                          "printed as shares (0.5398, not 53.98); recjudge compares them as shares"})
    return out


def _numbers(published) -> list[dict[str, str]]:
    """Numbers that cannot all hold: Table 1 against Table 5, Table 3's intervals against its sample."""
    v = published.value
    out = []
    pooled, non_pooled = v("table1", "pooled", "Judged@100 Cranfield"), v("table1", "non-pooled", "Judged@100 Cranfield")
    human_only = v("table5", "Avg. Judged@100", "Human-only")
    if pooled is not None and non_pooled is not None and human_only is not None:
        # Table 1's rows are 7 pooled and 45 non-pooled configurations; their weighted mean is the all-system mean
        implied = (7 * pooled + 45 * non_pooled) / 52
        if round(implied, 3) != round(human_only, 3):
            out.append({"where": "Table 1 vs Table 5",
                        "detail": (f"Table 1's Cranfield column (7 pooled configurations at {pooled:.4f}, 45 "
                                   f"non-pooled at {non_pooled:.4f}) implies an all-system mean Judged@100 of "
                                   f"{implied:.4f}; Table 5's Human-only column prints {human_only:.3f} for the "
                                   "same 52 configurations and the same human qrels"),
                        "cells": [["table1", "pooled", "Judged@100 Cranfield"],
                                  ["table1", "non-pooled", "Judged@100 Cranfield"],
                                  ["table5", "Avg. Judged@100", "Human-only"]]})
    cis = [c for c in published.table("table3") if c.ci is not None]
    if cis:
        lo, hi = min(c.ci for c in cis), max(c.ci for c in cis)
        out.append({"where": "Table 3's confidence intervals",
                    "detail": (f"Table 3 prints 95% intervals of ±{lo:.4f} to ±{hi:.4f} on shares of about 0.5, "
                               "described as across runs with different samples; three experiments of 51 "
                               "participants × 50 items cannot pin a share to ±0.003 (a t-interval over three "
                               "values is ±4.3 standard deviations), so the paper's interval is probably not "
                               "across resamples. recjudge's interval is across its experiments, and 'inside' "
                               "compares with the printed ± as it is"),
                    "cells": [[c.table, c.row, c.column] for c in cis]})
    return out
