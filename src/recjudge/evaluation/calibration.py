"""Calibrated gap filling (Penha et al. 2025, Table 5): LLM labels mapped to the human scale fill
the items that human qrels leave unjudged in the systems' top-k.

Calibration: for each LLM grade g, the mean human label over the (user, item) pairs both judged.
Labels must be integers (ir-measures and trec_eval reject fractions), so the mean is rounded half
up (``floor(mean + 0.5)``: 1.5 → 2, 2.49 → 2). A grade with fewer than ``min_overlap`` shared pairs
is flagged; a grade with none borrows the mapping of the nearest grade that has data (the lower
one on a tie) and is flagged too.

A calibration that cannot calibrate is refused by :func:`fill_gaps` (:meth:`Calibration.problems`):
filled labels resting on grades with too few shared pairs, a mapping that sends a higher grade to a
lower label, calibrated labels that collapse onto fewer than :data:`MIN_FILLED_LEVELS` values, or
grades that carry no detectable information about the reference labels (Kendall τ-b over the shared
pairs not positive at p < 0.05). The filled ranking would then be an artefact of the fill, not a
result; ``allow_weak=True`` writes it anyway, with the problems in every output and each such
filled label's source marked ``-weak``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .._io import atomic_write
from ..data.trec import Qrels, Run, write_qrels
from .ties.policy import ensure_tie_free, top_k
from ..errors import ConfigError

__all__ = [
    "CalibrationError",
    "MIN_FILLED_LEVELS",
    "round_half_up",
    "GradeCalibration",
    "Calibration",
    "FillResult",
    "FillReport",
    "calibrate",
    "fill_gaps",
    "hide_labels",
    "scenario_measures",
    "scenarios",
    "sources_path",
    "validate_fill",
    "write_filled",
]

# Fewer distinct calibrated labels than this (or than the reference uses, if fewer) cannot order items
MIN_FILLED_LEVELS = 3
ASSOCIATION_ALPHA = 0.05


class CalibrationError(ConfigError):
    """A calibration too weak to fill with, refused unless the caller allows it explicitly."""


class GradeCalibration(NamedTuple):
    llm_grade: int
    n_overlap: int
    mean_reference: float  # mean reference label over the shared pairs; NaN where no pair overlaps
    label: int
    flagged: bool
    note: str


@dataclass(frozen=True, eq=False)
class Calibration:
    grades: tuple[GradeCalibration, ...]
    min_overlap: int
    rounding: str = "half up: floor(mean + 0.5)"
    reference: str = "human"        # what the reference labels are (human, historical, …)
    candidate: str = "llm"          # the judge whose grades are mapped
    n_shared: int = 0               # pairs both label sets judge
    reference_levels: int = 0       # distinct reference labels over those pairs
    association: float = math.nan   # Kendall τ-b of judge grade vs reference label over the shared pairs
    association_p: float = math.nan

    @property
    def mapping(self) -> dict[int, int]:
        return {g.llm_grade: g.label for g in self.grades}

    def problems(self, used: Mapping[int, int] | None = None) -> tuple[str, ...]:
        """Why filling with this calibration would produce an artefact, one reason per line (empty:
        none). ``used``: grade → number of labels it would fill (default: every grade counts)."""
        used = dict(used) if used is not None else {g.llm_grade: 1 for g in self.grades}
        total = sum(used.values())
        ref, cand = self.reference, self.candidate
        out = []
        weak = [g for g in self.grades if g.flagged and used.get(g.llm_grade)]
        if weak:
            n = sum(used[g.llm_grade] for g in weak)
            grades = ", ".join(f"{g.llm_grade} ({g.n_overlap})" for g in weak)
            share = f"{n:,} of the {total:,} labels to fill" if used is not None and total else "their labels"
            out.append(f"too few shared pairs: {cand} grade(s) {grades} rest on fewer than {self.min_overlap} pairs "
                       f"with {ref} labels, and supply {share}")
        known = [g for g in self.grades if g.n_overlap > 0]
        for lo_g, hi_g in zip(known, known[1:]):
            if hi_g.label < lo_g.label:
                out.append(f"not monotone: {cand} grade {hi_g.llm_grade} maps to {ref} label {hi_g.label} but the "
                           f"lower grade {lo_g.llm_grade} to {lo_g.label}, so the fill would reverse the judge's order")
                break
        # a property of the mapping, not of the grades one fill happens to need
        levels = sorted({g.label for g in known})
        need = min(MIN_FILLED_LEVELS, max(self.reference_levels, 1))
        if len(levels) < need:
            out.append(f"flat: every calibrated label is {' or '.join(map(str, levels))} — {len(levels)} distinct "
                       f"value(s), fewer than {need}, so filled items cannot be ordered among themselves")
        if not (self.association > 0 and self.association_p < ASSOCIATION_ALPHA):
            out.append(f"no signal: over the {self.n_shared:,} shared pairs the {cand} grade and the {ref} label are "
                       f"not positively associated (Kendall τ-b {self.association:.3f}, p {self.association_p:.3g}; "
                       f"needed τ-b > 0 at p < {ASSOCIATION_ALPHA})")
        return tuple(out)

    def requirements(self) -> str:
        """What :meth:`problems` asks of a calibration before it fills, in words."""
        return (f"each {self.candidate} grade that fills must rest on at least {self.min_overlap} pairs shared with "
                f"{self.reference} labels; the calibrated labels must never fall as the grade rises and must take at least "
                f"{MIN_FILLED_LEVELS} values; and grade and label must be positively associated (Kendall τ-b > 0 "
                f"at p < {ASSOCIATION_ALPHA})")

    def apply(self, labels: np.ndarray) -> np.ndarray:
        m = self.mapping
        try:
            return np.array([m[int(x)] for x in labels], dtype=np.int64)
        except KeyError as exc:
            raise ConfigError(f"LLM grade {exc.args[0]} has no calibration; calibrate on qrels that use it") from None

    def to_frame(self) -> pd.DataFrame:
        """One row per judge grade; the mean column is named for the reference (``mean_historical``)."""
        frame = pd.DataFrame(self.grades, columns=list(GradeCalibration._fields)).set_index("llm_grade")
        return frame.rename(columns={"mean_reference": f"mean_{self.reference}"}).rename_axis(f"{self.candidate}_grade")

    def to_json(self) -> dict:
        return {"min_overlap": self.min_overlap, "rounding": self.rounding, "reference": self.reference,
                "candidate": self.candidate, "n_shared": self.n_shared,
                "association": {"kendall_tau_b": self.association, "p": self.association_p},
                "problems": list(self.problems()),
                "grades": [dict(g._asdict()) for g in self.grades]}


def round_half_up(x):
    """Half up, the documented rule for every label made from a mean (1.5 -> 2, 2.49 -> 2):
    an int for a number, an int64 array for an array."""
    if np.ndim(x) == 0:
        return int(math.floor(x + 0.5))
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5).astype(np.int64)


def calibrate(human: Qrels, llm: Qrels, min_overlap: int = 30, reference: str = "human",
              candidate: str = "llm") -> Calibration:
    """Map each LLM grade to the rounded mean human label over the pairs both label sets judge.

    ``reference`` and ``candidate`` say what the two label sets are (``"historical"``, a judge's
    name), for the tables and the sources of filled labels.
    """
    from scipy.stats import kendalltau

    both = human.frame[["qid", "docid", "label"]].merge(
        llm.frame[["qid", "docid", "label"]], on=["qid", "docid"], suffixes=("_human", "_llm"))
    if both.empty:
        raise ConfigError(f"human qrels {human.name!r} and LLM qrels {llm.name!r} share no (user, item) "
                          "pair, so the LLM grades cannot be calibrated; judge some human-labelled items "
                          "with the LLM (e.g. recjudge judge --per-user K from the human qrels)")
    stats = both.groupby("label_llm").label_human.agg(["size", "mean"])
    grades = sorted(set(int(g) for g in llm.frame.label.unique()) | set(int(g) for g in stats.index))
    have = [int(g) for g in stats.index]
    out = []
    for g in grades:
        if g in stats.index:
            n, mean = int(stats.loc[g, "size"]), float(stats.loc[g, "mean"])
            flagged = n < min_overlap
            note = f"only {n} overlapping pairs (< {min_overlap})" if flagged else ""
            out.append(GradeCalibration(g, n, mean, round_half_up(mean), flagged, note))
        else:
            nearest = min(have, key=lambda h: (abs(h - g), h))
            label = round_half_up(float(stats.loc[nearest, "mean"]))
            out.append(GradeCalibration(g, 0, math.nan, label, True, f"no overlap; borrows grade {nearest}"))
    llm_labels, ref_labels = both.label_llm.to_numpy(), both.label_human.to_numpy()
    constant = np.all(llm_labels == llm_labels[0]) or np.all(ref_labels == ref_labels[0])
    assoc = (math.nan, math.nan) if constant else kendalltau(llm_labels, ref_labels, variant="b")
    return Calibration(tuple(out), min_overlap, reference=reference, candidate=candidate, n_shared=len(both),
                       reference_levels=int(len(np.unique(ref_labels))), association=float(assoc[0]),
                       association_p=float(assoc[1]))


class FillResult(NamedTuple):
    qrels: Qrels
    sources: pd.DataFrame  # qid, docid, label, source, llm_grade
    n_human: int
    n_filled: int
    n_unfilled: int  # top-k items neither label set judges
    problems: tuple[str, ...] = ()  # the calibration's problems, when filled anyway (allow_weak)


def _topk_pairs(runs: Mapping[str, Run], k: int, tie_policy: str, seed: int, human: Qrels) -> pd.DataFrame:
    """The (user, item) pairs of every run's top-k, for the users the human qrels judge."""
    if not runs:
        raise ConfigError("no runs given: the pool to fill is the runs' top-k")
    frames = []
    for run in runs.values():
        frames.append(top_k(ensure_tie_free(run, tie_policy, seed), k)[["qid", "docid"]])
    pairs = pd.concat(frames, ignore_index=True).drop_duplicates()
    pairs = pairs[pairs.qid.isin(set(human.frame.qid))]
    if pairs.empty:
        names = ", ".join(list(runs)[:3]) + (", ..." if len(runs) > 3 else "")
        raise ConfigError(f"the runs ({names}) share no user with the human qrels {human.name!r}: there is "
                          "nothing to fill and no ranking to compare; give runs and qrels of the same users "
                          "(query id = user id)")
    return pairs


def fill_gaps(human: Qrels, llm: Qrels, runs: Mapping[str, Run], calibration: Calibration | None = None,
              k: int = 100, tie_policy: str = "trec_eval", seed: int = 0, name: str | None = None,
              allow_weak: bool = False) -> FillResult:
    """Human labels where present; calibrated LLM labels for unjudged items in the runs' top-k.

    Only users the human qrels judge are filled (the mixed qrels extend human assessments). A
    calibration with problems (:meth:`Calibration.problems`, over the grades this fill uses) raises
    :class:`CalibrationError` unless ``allow_weak``; then the result carries them and each filled
    label's source reads ``<judge>-calibrated-weak``.
    """
    if k <= 0:
        raise ConfigError(f"--k must be positive, not {k}")
    calibration = calibration or calibrate(human, llm)
    h = human.frame[["qid", "docid", "label"]].copy()
    h["source"], h["llm_grade"] = calibration.reference, pd.NA
    pool = _topk_pairs(runs, k, tie_policy, seed, human)
    gaps = pool.merge(h[["qid", "docid"]], on=["qid", "docid"], how="left", indicator=True)
    gaps = gaps[gaps["_merge"] == "left_only"].drop(columns="_merge")
    filled = gaps.merge(llm.frame[["qid", "docid", "label"]], on=["qid", "docid"], how="inner")
    n_unfilled = len(gaps) - len(filled)
    filled = filled.rename(columns={"label": "llm_grade"})
    used = filled.llm_grade.value_counts()
    problems = calibration.problems({int(g): int(n) for g, n in used.items()}) if len(filled) else ()
    if problems and not allow_weak:
        raise CalibrationError(
            f"the calibration of {calibration.candidate!r} to {calibration.reference!r} labels cannot calibrate, so "
            f"the {len(filled):,} filled labels would be an artefact:\n  - " + "\n  - ".join(problems) +
            f"\nJudge more items that both label sets share (e.g. recjudge judge --per-user K --reference "
            f"QRELS), or pass --allow-weak-calibration to write the filled qrels anyway with this warning in "
            f"every output")
    filled["label"] = calibration.apply(filled.llm_grade.to_numpy())
    filled["source"] = f"{calibration.candidate}-calibrated" + ("-weak" if problems else "")
    mixed = pd.concat([h, filled[["qid", "docid", "label", "source", "llm_grade"]]], ignore_index=True)
    mixed = mixed.sort_values(["qid", "docid"], kind="stable").reset_index(drop=True)
    qrels = Qrels.from_frame(mixed[["qid", "docid", "label"]], name or f"{human.name}+{llm.name}")
    return FillResult(qrels, mixed, len(h), len(filled), n_unfilled, problems)


def hide_labels(human: Qrels, fraction: float, seed: int = 0) -> tuple[Qrels, pd.DataFrame]:
    """Hide a seeded fraction of the human labels: (the visible qrels, the hidden rows)."""
    if not 0 < fraction < 1:
        raise ConfigError(f"--validate takes a fraction strictly between 0 and 1, not {fraction}")
    rng = np.random.default_rng(seed)
    f = human.frame
    hidden = rng.random(len(f)) < fraction
    if hidden.all() or not hidden.any():
        raise ConfigError(f"hiding {fraction:.0%} of {len(f)} labels leaves nothing to compare; change F")
    return Qrels.from_frame(f[~hidden], f"{human.name}-visible"), f[hidden].reset_index(drop=True)


def sources_path(path: str | Path) -> Path:
    """The sidecar of a filled qrels file: ``<path>.sources.tsv``."""
    path = Path(path)
    return path.with_name(path.name + ".sources.tsv")


def write_filled(result: FillResult, path: str | Path) -> tuple[Path, Path]:
    """Write the mixed qrels and a sidecar ``<path>.sources.tsv`` saying where each label came from."""
    path = Path(path)
    write_qrels(result.qrels, path)
    side = sources_path(path)
    with atomic_write(side) as fh:
        result.sources.assign(llm_grade=result.sources.llm_grade.astype("string").fillna("")).to_csv(
            fh, sep="\t", index=False, columns=["qid", "docid", "label", "source", "llm_grade"])
    return path, side


# ------------------------------------------------------------------------------ scenario report

DEFAULT_SCENARIO_MEASURES = ("Compat(p=0.95)", "nDCG@{k}")  # {k}: the fill depth


def scenario_measures(measures: str | Sequence[str] | None = None, k: int = 100) -> tuple[str, ...]:
    """The measures fill compares its scenarios on, as the user spelled them.

    ``measures`` is parsed as compare's ``--measures`` (:func:`recjudge.evaluation.measures.parse_measures`:
    an unknown or repeated measure is a ConfigError); ``None`` gives Compat(p=0.95) and nDCG@k at the
    fill depth ``k``.
    """
    from .measures import measure_names, split_top_level

    if measures is None:
        return tuple(m.format(k=k) for m in DEFAULT_SCENARIO_MEASURES)
    items = split_top_level(measures) if isinstance(measures, str) else [str(m) for m in measures]
    return measure_names([m.strip().replace(" ", "") for m in items])  # trec_eval names in ir-measures spelling


class ScenarioReport(NamedTuple):
    judged: pd.Series                    # scenario → mean Judged@k over systems
    judged_systems: pd.DataFrame         # systems × scenarios Judged@k
    tau: Mapping[str, pd.DataFrame]      # measure → scenario × scenario Kendall τ-b
    scores: Mapping[str, pd.DataFrame]   # measure → systems × scenarios mean scores
    warnings: tuple[str, ...]
    measures: tuple[str, ...] = ()       # the measures compared, in the order given
    tie_sensitivity: Mapping | None = None  # the tie note under the first scenario (recjudge.evaluation.ties.note)

    def to_json(self) -> dict:
        out = {
            "measures": list(self.measures or self.tau),
            "judged": {k: float(v) for k, v in self.judged.items()},
            "kendall_tau": {m: t.to_dict() for m, t in self.tau.items()},
            "scores": {m: s.to_dict() for m, s in self.scores.items()},
            "warnings": list(self.warnings),
        }
        if self.tie_sensitivity is not None:
            out["tie_sensitivity"] = dict(self.tie_sensitivity)
        return out


def scenarios(runs: Mapping[str, Run], labels: Mapping[str, Qrels], k: int = 100,
              tie_policy: str = "trec_eval", seed: int = 0,
              measures: str | Sequence[str] | None = None, tie_note: float = 1.0) -> ScenarioReport:
    """Average Judged@k, and per measure the systems' scores and the Kendall τ matrix across label
    scenarios (``measures``: see :func:`scenario_measures`; default Compat(p=0.95) and nDCG@k).
    ``tie_note`` < 1: the tie note (:func:`recjudge.evaluation.metaeval.evaluate`) under the first scenario."""
    from .metaeval import evaluate, kendall_tau, tied_ranking

    judged_m = f"Judged@{k}"
    compared = scenario_measures(measures, k)
    # Judged@k is the coverage headline whatever is compared; listed once if it is compared too
    evaluated = list(dict.fromkeys([judged_m, *compared]))
    results = {name: evaluate(runs, q, evaluated, tie_policy, seed, tie_note=tie_note if i == 0 else 1.0)
               for i, (name, q) in enumerate(labels.items())}
    tables = {name: r.table for name, r in results.items()}
    first = next(iter(results.values()), None)
    ties = first.tie_sensitivity if first is not None and tie_note < 1 else None
    judged_systems = pd.DataFrame({name: t.means(judged_m) for name, t in tables.items()})
    judged = judged_systems.mean().astype(float)
    taus, scores = {}, {}
    names = list(tables)
    for m in compared:
        sc = pd.DataFrame({name: t.means(m) for name, t in tables.items()})
        scores[m] = sc
        taus[m] = pd.DataFrame([[kendall_tau(sc[a], sc[b]) for b in names] for a in names], index=names, columns=names)
    ndcg = [m for m in compared if m.startswith("nDCG")]
    warn: tuple[str, ...] = ()
    if ndcg:
        verb = "mixes" if len(ndcg) == 1 else "mix"
        warn = ((f"{', '.join(ndcg)} {verb} gains from two label sources in one ideal ranking and proved "
                 "unstable on filled qrels (Penha et al. 2025); read Compat first"),)
    # a scenario that ties every system has no ranking: its τ are undefined (NaN), said here
    warn += tuple(why for m in compared for name in names if (why := tied_ranking(scores[m][name], name, m)))
    return ScenarioReport(judged, judged_systems, taus, scores, warn, compared, ties)


class ValidationReport(NamedTuple):
    fraction: float
    n_hidden: int
    n_hidden_filled: int
    agreement: dict          # filled labels vs the hidden human labels (recjudge.evaluation.agreement JSON)
    tau_without_fill: dict   # measure → τ(full human, visible human)
    tau_with_fill: dict      # measure → τ(full human, visible human + filled)

    def to_json(self) -> dict:
        return dict(self._asdict())


def validate_fill(human: Qrels, llm: Qrels, runs: Mapping[str, Run], fraction: float, k: int = 100,
                  min_overlap: int = 30, tie_policy: str = "trec_eval", seed: int = 0,
                  measures: str | Sequence[str] | None = None, allow_weak: bool = False) -> ValidationReport:
    """Hide a seeded fraction of human labels, fill them from the LLM, and check the filled labels
    (τ on each of ``measures``, as :func:`scenarios`)."""
    from .agreement import agreement
    from .metaeval import evaluate, kendall_tau

    visible, hidden = hide_labels(human, fraction, seed)
    cal = calibrate(visible, llm, min_overlap)
    # fill every hidden pair the LLM labelled (not only top-k), so agreement covers the hidden set
    hidden_llm = hidden[["qid", "docid"]].merge(llm.frame[["qid", "docid", "label"]], on=["qid", "docid"])
    agree = None
    if len(hidden_llm):
        filled_hidden = Qrels.from_frame(hidden_llm.assign(label=cal.apply(hidden_llm.label.to_numpy())), "filled")
        agree = agreement(Qrels.from_frame(hidden, "hidden"), filled_hidden, missing="drop", bootstrap=200,
                          seed=seed).to_json()
    filled = fill_gaps(visible, llm, runs, cal, k, tie_policy, seed, allow_weak=allow_weak).qrels
    measures = list(scenario_measures(measures, k))
    full = evaluate(runs, human, measures, tie_policy, seed).table
    vis = evaluate(runs, visible, measures, tie_policy, seed).table
    fil = evaluate(runs, filled, measures, tie_policy, seed).table
    without = {m: kendall_tau(full.means(m), vis.means(m)) for m in measures}
    with_fill = {m: kendall_tau(full.means(m), fil.means(m)) for m in measures}
    return ValidationReport(fraction, len(hidden), len(hidden_llm), agree or {}, without, with_fill)


def fewer_human_users(human: Qrels, llm: Qrels, human_as=None, llm_as=None) -> tuple[str, int, str, int] | None:
    """:attr:`FillReport.users` when the LLM qrels judge every user of the human qrels and more, else None;
    each named by the path it was given as (``human_as`` / ``llm_as``), else by its name."""
    import os

    def name(given, q: Qrels) -> str:
        return os.fspath(given) if isinstance(given, (str, os.PathLike)) else q.name

    hu, lu = set(human.qids), set(llm.qids)
    return (name(human_as, human), len(hu), name(llm_as, llm), len(lu)) if hu and hu < lu else None


@dataclass(frozen=True, eq=False)
class FillReport:
    """What ``recjudge fill`` returns: the calibration, the filled qrels, the scenario rankings and the
    validation, as JSON, a frame or text. ``paths``: the qrels and sources once written; ``validate``: the
    share of human labels hidden for the validation; ``protocol``: the ProtocolUse followed."""

    calibration: Calibration
    filled: FillResult
    scenarios: ScenarioReport
    validation: ValidationReport | None
    options: Mapping[str, Any]
    paths: Mapping[str, Path] = field(default_factory=dict)
    validate: float | None = None
    protocol: Any = None
    # (human qrels, its users, LLM qrels, its users) when the LLM's users include the human's and more
    users: tuple[str, int, str, int] | None = None

    @property
    def qrels(self) -> Qrels:
        return self.filled.qrels

    def to_json(self) -> dict:
        f = self.filled
        written = {k: None if self.paths.get(k) is None else str(self.paths[k]) for k in ("qrels", "sources")}
        out = {"calibration": self.calibration.to_json(),
               "filled": {"path": written["qrels"], "sources": written["sources"],
                          "n_human": f.n_human, "n_filled": f.n_filled, "n_unfilled": f.n_unfilled,
                          "weak_calibration": list(f.problems)},
               "scenarios": self.scenarios.to_json(), "settings": dict(self.options)}
        if self.validation is not None:
            out["validation"] = self.validation.to_json()
        if self.protocol is not None:
            out["protocol"] = self.protocol.as_dict()
        return out

    def to_frame(self) -> pd.DataFrame:
        """The mixed qrels with each label's source (human or llm-calibrated) and LLM grade."""
        return self.filled.sources

    def format(self) -> str:
        """What ``recjudge fill`` prints: the calibration, the counts, Judged@k and τ per scenario, the validation."""
        from .metaeval.text import wrapped

        k, f, rep = self.options["k"], self.filled, self.scenarios
        written = f" → {self.paths['qrels']} (sources: {self.paths['sources']})" if self.paths else ""
        weak = ([f"WARNING: filled with a calibration that cannot calibrate (--allow-weak-calibration); the "
                 f"'LLM fills gaps' ranking is an artefact of the fill, not a result:"] +
                [f"  - {p}" for p in f.problems] + [""]) if f.problems else []
        lines = [*weak, "calibration (LLM grade → human scale):", self.calibration.to_frame().to_string(),
                 "\n" + wrapped(f"{f.n_human} human labels + {f.n_filled} calibrated LLM labels "
                                 f"({f.n_unfilled} top-{k} items left unjudged by both){written}"),
                 f"\naverage Judged@{k} over systems:", rep.judged.round(4).to_string()]
        for m, tau in rep.tau.items():
            lines += [f"\nKendall τ-b between scenario rankings on {m}:", tau.round(3).to_string()]
        lines += ["\n" + wrapped(f"warning: {w}") for w in rep.warnings]
        note = (rep.tie_sensitivity or {}).get("note")
        if note:
            lines.append("\n" + wrapped(f"{note} (under the human labels)"))
        if self.users is not None:
            from .metaeval.text import estimate_hint

            lines.append("\n" + estimate_hint(*self.users))
        return "\n".join(lines + self._validation_lines())

    def _validation_lines(self) -> list[str]:
        val = self.validation
        if val is None:
            return []
        lines = [f"\nvalidation: hid {val.n_hidden} human labels ({self.validate:.0%}), "
                 f"LLM covered {val.n_hidden_filled}"]
        if val.agreement:
            a = val.agreement
            lines.append(f"  filled vs hidden human: κ {a['cohen_kappa']:.3f}, "
                         f"α ordinal {a['krippendorff_alpha_ordinal']:.3f}, "
                         f"pairwise agree {a['pairwise']['agree']:.3f}")
        return lines + [f"  τ vs all human labels on {m}: without fill {val.tau_without_fill[m]:.3f}, "
                        f"with fill {val.tau_with_fill[m]:.3f}" for m in val.tau_with_fill]

    def __str__(self) -> str:
        return self.format()
