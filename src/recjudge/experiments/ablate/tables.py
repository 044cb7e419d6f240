"""The ablation's tables: ablation.csv / .json / .md, the terminal table, and the notes on what the numbers are."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..._io import atomic_write, write_json
from ...evaluation.baselines import DEFAULT_DRAWS
from ...evaluation.intervals import CI_FLAG
from .experiment import Experiment
from .jobs import derive_seed
from .outcomes import Estimate, VariantRow, across_experiments


_METRICS = ("agree", "tie", "disagree", "kappa", "alpha_ordinal")


def _estimates(row: VariantRow) -> dict[str, Estimate]:
    """Every metric of a row by its column name (``agree``, ``tau nDCG@100``, ``wtau Bpref``, ...)."""
    out = {m: getattr(row, m) for m in _METRICS}
    out.update({f"tau {m}": e for m, e in row.tau.items()})
    out.update({f"wtau {m}": e for m, e in row.weighted_tau.items()})
    return out


def rows_frame(rows: Sequence[VariantRow]) -> pd.DataFrame:
    """One row per variant: counts (totals over N), each metric's mean over the N experiments with
    ``_ci_lo`` / ``_ci_hi`` (95% t-interval across experiments; NaN for N = 1) and, for N = 1, the
    pairwise shares' user-bootstrap CI as ``_boot_lo`` / ``_boot_hi``."""
    records = []
    for r in rows:
        rec = {k: getattr(r, k) for k in ("variant", "axis", "per_user", "experiments", "pairs", "judged", "failed",
                                          "calls", "cache_hits", "est_input_tokens")}
        for name, e in _estimates(r).items():
            rec[name], rec[f"{name}_ci_lo"], rec[f"{name}_ci_hi"] = e.mean, e.ci[0], e.ci[1]
        for name in ("agree", "tie", "disagree"):
            boot = getattr(r.outcomes[0], f"{name}_ci") if r.experiments == 1 else (math.nan, math.nan)
            rec[f"{name}_boot_lo"], rec[f"{name}_boot_hi"] = boot
        rec["boot_ci_note"] = r.outcomes[0].ci_note if r.experiments == 1 else ""
        rec["boot_ci_missing"] = r.outcomes[0].ci_missing if r.experiments == 1 else ""
        records.append(rec)
    return pd.DataFrame(records)


TAU_REFERENCE = "complete"  # what ablation.json says τ is measured against


def notes(exp: Experiment) -> list[str]:
    """What the numbers are: the reference, K and its nesting, and which interval the brackets hold."""
    where = {"file": "set in the file", "default": "the default"}
    k_origin = where.get(exp.origin.get("per_user", ""), f"from {exp.origin.get('per_user', '')}")
    lines = [(f"Reference: `{exp.reference}`. K = {exp.per_user} items per user ({k_origin}; a K axis in [grid] "
              "overrides it per variant), sampled from the items the reference labels; the samples are nested "
              "across K (one seeded order per user, cut at K)."),
             ("τ and weighted τ: system rankings under each variant's labels against rankings under the COMPLETE "
              "reference qrels (all their labels, not only the sampled pairs); agreement, κ and α on the sampled "
              "pairs.")]
    seeds = [derive_seed(exp.seed, e, "pairs") for e in range(exp.experiments)]
    if exp.experiments == 1 and exp.bootstrap == 0:
        lines.append(f"One experiment (seed {exp.seed}): pairwise shares with no interval (0 resamples: bootstrap "
                     "= 0); no interval across experiments (set experiments = N, or --experiments N, for N "
                     "independent experiments).")
    elif exp.experiments == 1:
        lines.append(f"One experiment (seed {exp.seed}): pairwise shares with 95% CIs within it (Korn–Graubard: "
                     "Clopper–Pearson at the effective number of pairs, SE from a user bootstrap; with fewer than 25 "
                     "users they covered below 95% in simulation, see `recjudge agreement`); no interval "
                     "across experiments (set experiments = N, or --experiments N, for N independent experiments).")
    else:
        lines.append(f"Mean of {exp.experiments} independent experiments, each its own sample of judged items "
                     f"(seeds {', '.join(map(str, seeds))}) and of history items (the judge's seed, derived the "
                     f"same way; all in ablation.json); brackets: 95% t-interval across the {exp.experiments} "
                     f"experiments (Student t, {exp.experiments - 1} degrees of freedom, on the Fisher-z scale of "
                     "each metric's range, so shares stay in [0, 1] and κ, α, τ in [−1, 1]), not a user bootstrap. "
                     "Counts are totals over the experiments. The judge's `repeats` is another thing: the same "
                     "prompt asked R times within one experiment.")
    return lines


def write_results(exp: Experiment, rows: Sequence[VariantRow], protocol=None) -> dict[str, Path]:
    from ...report.evaluation import markdown_table

    frame = rows_frame(rows)
    paths = {"csv": exp.out / "ablation.csv", "json": exp.out / "ablation.json", "md": exp.out / "ablation.md"}
    with atomic_write(paths["csv"]) as fh:
        frame.to_csv(fh, index=False)
    records = frame.to_dict(orient="records")
    for rec, r in zip(records, rows):
        rec["per_experiment"] = [o.to_json() for o in r.outcomes]
    header = {"name": exp.name, "source": exp.source, "reference": exp.reference, "collection": exp.collection,
              "per_user": exp.per_user, "per_user_from": exp.origin.get("per_user"), "nested_samples": True,
              "experiments": exp.experiments, "experiments_from": exp.origin.get("experiments"),
              "seed": exp.seed, "pairs_seeds": [derive_seed(exp.seed, e, "pairs") for e in range(exp.experiments)],
              "interval": ("95% Student t-interval across experiments, on the Fisher-z scale of each metric's "
                           "range (shares [0, 1]; κ, α, τ [−1, 1])" if exp.experiments > 1
                           else "none across experiments (N = 1); pairwise shares: Korn-Graubard (Clopper-Pearson "
                                "at the effective number of pairs, SE from a user bootstrap)"),
              "tau_reference": TAU_REFERENCE, "mode": exp.mode, "judge": dict(exp.judge),
              "grid": {k: list(v) for k, v in exp.grid.items()}}
    write_json(paths["json"], {"experiment": header, "rows": records, "warnings": ablation_warnings(rows),
                               **({"protocol": protocol.as_dict()} if protocol is not None else {})})
    shown = format_rows(rows)
    with atomic_write(paths["md"]) as fh:
        fh.write(f"# Ablation: {exp.name}\n\n" + "\n\n".join(notes(exp)) + "\n\n")
        fh.write(markdown_table(shown, index=False) + "\n")
        fh.write("".join(f"\n{line}\n" for line in coverage_notes(rows)))
        trivial = trivial_frame(rows)
        if trivial is not None:
            fh.write(f"\n{_trivial_header(exp.baselines)}:\n\n"
                     + markdown_table(trivial, index=False) + "\n")
        fh.write("".join(f"\n**Warning:** {w}.\n" for w in ablation_warnings(rows)))
    return paths


def format_rows(rows: Sequence[VariantRow]) -> pd.DataFrame:
    """The table shown: N = 1 gives pairwise shares with their user-bootstrap CI; N > 1 every metric's
    mean with its 95% t-interval across experiments."""
    out = []
    for r in rows:
        rec = {"variant": r.variant, "K": r.per_user, "N": r.experiments, "judged": f"{r.judged}/{r.pairs}",
               "calls": r.calls, "est. tokens": r.est_input_tokens}
        labels = {"kappa": "κ", "alpha_ordinal": "α"}
        for name, e in _estimates(r).items():
            shown = labels.get(name, name.replace("wtau ", "τ_w ").replace("tau ", "τ "))
            if r.experiments > 1:
                rec[shown] = _ci(e.mean, e.ci)
            elif name in ("agree", "tie", "disagree"):
                # flagged where the measured coverage of such an interval is below 95% (few users)
                rec[shown] = _ci(e.mean, getattr(r.outcomes[0], f"{name}_ci")) + (
                    CI_FLAG if r.outcomes[0].ci_note and not math.isnan(e.mean) else "")
            else:
                rec[shown] = _num(e.mean)
        out.append(rec)
    return pd.DataFrame(out)


TERMINAL_WIDTH = 100  # the widest line the terminal table prints; ablation.csv / .json hold every column
NAME_WIDTH = 30       # longer variant names are numbered, the names listed above the table


def terminal_table(rows: Sequence[VariantRow], dry_run: bool = False, width: int = TERMINAL_WIDTH) -> str:
    """:func:`format_rows` as the terminal shows it, no line wider than ``width``: the counts and
    item-level agreement in one block, the system-ranking τ in another, each wrapped by pandas into
    further blocks (the variant repeated) when it is still too wide; a dry run shows what it plans.
    The estimated tokens of a real run, and every interval column, are in ablation.csv / .json."""
    import textwrap

    shown = format_rows(rows)
    if shown.empty:
        return "(no variants)"
    names = list(shown["variant"])
    head = []
    if any(len(n) > NAME_WIDTH for n in names):
        labels = [f"#{i}" for i in range(1, len(names) + 1)]
        head = ["variants:"] + [textwrap.fill(f"{label} {name}", width, initial_indent="  ",
                                              subsequent_indent=" " * (len(label) + 3))
                                for label, name in zip(labels, names)] + [""]
        names = labels
    shown = shown.assign(variant=names).set_index("variant")
    shown.index.name = None
    if dry_run:
        blocks = [("", shown[["K", "judged", "calls", "est. tokens"]].rename(columns={"judged": "pairs"}))]
    else:
        tau = [c for c in shown.columns if c.startswith("τ")]
        counts = [c for c in shown.columns if c not in tau and c != "est. tokens"]
        brackets = "95% interval across experiments" if any(r.experiments > 1 for r in rows) else "95% CI"
        blocks = [(f"agreement with the reference on the sampled pairs (shares: {brackets})", shown[counts])]
        if tau:
            blocks.append(("system rankings against the complete reference: Kendall τ and weighted τ_w",
                           shown[tau]))
    text = []
    for title, block in blocks:
        body = "\n".join(line.rstrip() for line in block.to_string(line_width=width).splitlines())
        text.append((title + "\n" if title else "") + body)
    return "\n".join(head) + "\n\n".join(text)


def coverage_notes(rows: Sequence[VariantRow]) -> list[str]:
    """What a flagged interval of :func:`format_rows` means, in one short line per distinct note (the full
    note is in ablation.json)."""
    seen = dict.fromkeys(r.outcomes[0].ci_summary or r.outcomes[0].ci_note for r in rows
                         if r.experiments == 1 and r.outcomes[0].ci_note)
    return [f"({CI_FLAG}) agree / tie / disagree intervals: {note}" for note in seen]


def trivial_frame(rows: Sequence[VariantRow]) -> pd.DataFrame | None:
    """Per variant and trivial judge: κ, agree and τ per measure on the variant's own pairs, each the mean
    over the N experiments (random: of its draws too); None when no experiment measured them."""
    records = []
    for r in rows:
        judges = list(dict.fromkeys(j for o in r.outcomes for j in o.baselines))
        for judge in judges:
            metrics = list(dict.fromkeys(k for o in r.outcomes for k in o.baselines.get(judge, {})))
            rec = {"variant": r.variant, "trivial judge": judge}
            for k in metrics:
                values = [o.baselines[judge][k] for o in r.outcomes if k in o.baselines.get(judge, {})]
                mean = across_experiments(values).mean
                rec[{"kappa": "κ"}.get(k, k.replace("tau ", "τ "))] = _num(mean)
            records.append(rec)
    return pd.DataFrame(records) if records else None


def trivial_lines(rows: Sequence[VariantRow], exp: Experiment | None = None) -> list[str]:
    """The block under the ablation table: what trivial judges get on each variant's pairs, and the warnings."""
    import textwrap

    lines = []
    frame = trivial_frame(rows)
    if frame is not None:
        draws = exp.baselines if exp is not None else DEFAULT_DRAWS
        lines += ["", *textwrap.wrap(_trivial_header(draws) + ":", 100), frame.to_string(index=False)]
    lines += [f"warning: {w}" for w in ablation_warnings(rows)]
    return lines


def _trivial_header(draws: int) -> str:
    from ...evaluation.baselines import TRIVIAL_KINDS

    return ("Trivial judges on each variant's own pairs, mean over the experiments ("
            + TRIVIAL_KINDS.format(draws=draws).replace("its ", "the variant's ", 1).replace("mean ± sd", "mean") + ")")


def ablation_warnings(rows: Sequence[VariantRow]) -> list[str]:
    return list(dict.fromkeys(w for r in rows for o in r.outcomes for w in o.warnings))


def _num(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"


def _ci(x: float, ci: tuple[float, float]) -> str:
    if x != x:
        return "–"
    if math.isnan(ci[0]):
        return f"{x:.3f}"
    return f"{x:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
