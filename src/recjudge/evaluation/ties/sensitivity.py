"""The tie audit of a set of runs: prevalence, every measure under every treatment, permutation test,
and its plain-text tables."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ...report.terminal import prose, table
from ...data.trec import Qrels, Run
from ...errors import ConfigError, InputError
from .permutation import permute_and_score
from .prevalence import DEFAULT_CUTOFFS, TiePrevalence, check_cutoffs, prevalence_of
from .ranked import Ranked
from .specs import DEFAULT_TIE_MEASURES, measure_specs
from .treatments import Evaluator, expected_values, per_user_values, mc_interval

log = logging.getLogger(__name__)


class MeasureTies(NamedTuple):
    """One measure's mean over the qrels' users under each tie treatment."""

    measure: str
    input_order: float
    hash: float
    expected: float
    hash_seeds_mean: float
    hash_seeds_sd: float
    expected_method: str  # "exact" or "monte_carlo"
    expected_ci: tuple[float, float] | None  # Monte Carlo only
    permutation: float  # largest |change| of the mean, input-order tie-breaking
    permutation_hash: float  # the same with the hash policy (0 for an invariant evaluator)
    permutation_users: float  # share of users whose value moved under input order

    def as_dict(self) -> dict:
        return {
            "input_order": self.input_order,
            "hash": self.hash,
            "expected": self.expected,
            "hash_seeds_mean": self.hash_seeds_mean,
            "hash_seeds_sd": self.hash_seeds_sd,
            "expected_method": self.expected_method,
            "expected_ci": list(self.expected_ci) if self.expected_ci is not None else None,
            "input_minus_expected": self.input_order - self.expected,
        }


class RunTies(NamedTuple):
    name: str
    prevalence: TiePrevalence
    measures: tuple[MeasureTies, ...]
    seconds: float

    def as_dict(self) -> dict:
        return {
            "prevalence": self.prevalence.as_dict(),
            "measures": {m.measure: m.as_dict() for m in self.measures},
            "permutation": {m.measure: m.permutation for m in self.measures},
            "permutation_hash": {m.measure: m.permutation_hash for m in self.measures},
            "permutation_users_changed": {m.measure: m.permutation_users for m in self.measures},
        }


@dataclass(frozen=True)
class TieSettings:
    measures: tuple[str, ...]
    cutoffs: tuple[int, ...]
    seed: int = 0
    seeds: int = 100
    permutations: int = 20
    mc_samples: int = 100
    confidence: float = 0.95

    def __post_init__(self):
        if self.seeds < 2:
            raise ConfigError(f"--seeds must be at least 2 (a spread needs two seeds), got {self.seeds}")
        if self.permutations < 1:
            raise ConfigError(f"--permutations must be at least 1, got {self.permutations}")
        if self.mc_samples < 2:
            raise ConfigError(f"--mc-samples must be at least 2, got {self.mc_samples}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"confidence must lie in (0, 1), got {self.confidence}")


@dataclass(frozen=True, eq=False)
class TieAudit:
    """What ``recjudge ties`` returns: each run's tie prevalence and measures per treatment, as JSON, a frame
    or text. The verb adds the sampled-candidate protocol's record, when that was audited, and the protocol
    (``recjudge.protocol.ProtocolUse``) followed."""

    runs: tuple[RunTies, ...]
    settings: TieSettings
    qrels: str | None
    counted_users: int | None
    notes: tuple[str, ...] = field(default=())
    sampled_candidates: Mapping[str, Any] | None = None
    protocol: Any = None

    def as_dict(self) -> dict:
        s = self.settings
        return {
            "runs": {r.name: r.as_dict() for r in self.runs},
            "settings": {
                "qrels": self.qrels,
                "measures": list(s.measures),
                "k": list(s.cutoffs),
                "users": ("mean over the qrels' users; a user the run lacks scores 0"
                          if self.qrels is not None else None),
                "counted_users": self.counted_users,
                "prevalence_users": "shares of each run's own users; exact float64 ties",
                "relevant_users": ("shares of each run's users that the qrels judge (prevalence.judged_users)"
                                   if self.qrels is not None else None),
                "relevant": "label >= 1",
                "input_order": "stable sort by score: equal scores keep the run file's line order",
                "hash": f"recjudge.data.trec.hash_keys(user, item, seed={s.seed}), item id as fallback",
                "hash_seeds": {"first": s.seed, "count": s.seeds},
                "expected": "uniformly random order within tie blocks: exact closed form, or Monte "
                            f"Carlo over {s.mc_samples} seeded orders with a {s.confidence:.0%} CI",
                "permutations": s.permutations,
                "mc_samples": s.mc_samples,
                "seed": s.seed,
            },
            "notes": list(self.notes),
        }

    def to_json(self) -> dict:
        data = self.as_dict()
        if self.sampled_candidates is not None:
            data["sampled_candidates"] = dict(self.sampled_candidates)
        if self.protocol is not None:
            data["protocol"] = self.protocol.as_dict()
        return data

    def to_frame(self) -> pd.DataFrame:
        """One row per run: its prevalence and measure figures as flat columns."""
        return pd.json_normalize([{"run": name, **entry} for name, entry in self.to_json()["runs"].items()])

    def format(self) -> str:
        text = format_audit(self)
        if self.sampled_candidates is not None:
            text = self.sampled_candidates["description"] + "\n\n" + text
        return text

    def __str__(self) -> str:
        return self.format()


def audit_run(run: Run, qrels: Qrels | None = None, measures=DEFAULT_TIE_MEASURES,
              settings: TieSettings | None = None) -> RunTies:
    """Prevalence and, with qrels, every measure under every tie treatment, plus the permutation test."""
    t0 = time.perf_counter()
    specs = measure_specs(measures) if qrels is not None else ()
    if settings is None:
        settings = TieSettings(tuple(s.name for s in specs), DEFAULT_CUTOFFS)
    r = Ranked(run, qrels)
    prevalence = prevalence_of(r, check_cutoffs(settings.cutoffs))
    if not specs:
        return RunTies(run.name, prevalence, (), time.perf_counter() - t0)
    ev = Evaluator(r, specs)
    rows = r.tied_rows if ev.specs else r.sub_rows
    seed = settings.seed
    if ev.specs and len(r.tied_rows):
        log.debug("%s: %s have no closed form; up to %d evaluations of the run (Monte Carlo, hash seeds, "
                  "shuffles)", run.name, ", ".join(s.name for s in ev.specs),
                  2 + settings.seeds + settings.mc_samples + settings.permutations)
    inp, hsh = per_user_values(r, specs, ev, [r.treatment(rows, "input"), r.treatment(rows, "hash", seed=seed)])
    seed_means = np.stack([
        per_user_values(r, specs, ev, [r.treatment(rows, "hash", seed=seed + i)])[0].mean(axis=1)
        for i in range(settings.seeds)
    ])
    expected, draws = expected_values(r, specs, ev, settings.mc_samples, seed)
    perm = permute_and_score(r, specs, ev, rows, {"input": inp, "hash": hsh}, settings.permutations, seed)
    perm_in, perm_hash = perm["input"], perm["hash"]
    out, gi = [], 0
    for i, s in enumerate(specs):
        ci = None
        if s.family == "general":
            d = draws[:, gi]
            gi += 1
            ci = mc_interval(d, settings.confidence)
        out.append(MeasureTies(
            measure=s.name,
            input_order=float(inp[i].mean()),
            hash=float(hsh[i].mean()),
            expected=float(expected[i].mean()),
            hash_seeds_mean=float(seed_means[:, i].mean()),
            hash_seeds_sd=float((seed_means[:, i] - seed_means[0, i]).std(ddof=1)),
            expected_method="exact" if s.family != "general" else "monte_carlo",
            expected_ci=ci,
            permutation=perm_in.max_abs_change[s.name],
            permutation_hash=perm_hash.max_abs_change[s.name],
            permutation_users=perm_in.users_changed[s.name],
        ))
    return RunTies(run.name, prevalence, tuple(out), time.perf_counter() - t0)


def audit_ties(runs: Mapping[str, Run] | Iterable[Run], qrels: Qrels | None = None,
               measures=None, cutoffs: Iterable[int] = DEFAULT_CUTOFFS, seeds: int = 100,
               permutations: int = 20, seed: int = 0, mc_samples: int = 100,
               confidence: float = 0.95) -> TieAudit:
    """Audit every run. ``runs`` may be a lazy iterable so that only one run is in memory at a time.

    ``measures`` defaults to Hit@10, nDCG@10 and nDCG@100 when qrels are given; without qrels only
    prevalence is computed.
    """
    if measures is not None and qrels is None:
        raise ConfigError("measures need relevance labels: pass qrels (--qrels QRELS)")
    specs = measure_specs(measures if measures is not None else DEFAULT_TIE_MEASURES) if qrels is not None else ()
    settings = TieSettings(tuple(s.name for s in specs), check_cutoffs(cutoffs), seed, seeds,
                           permutations, mc_samples, confidence)
    general = [s.name for s in specs if s.family == "general"]
    if general:  # once per audit, not per run: the cost of every run with ties
        log.info("%s have no closed form: each run with ties is evaluated up to %d times (Monte Carlo, hash "
                 "seeds, shuffles)", ", ".join(general), 2 + seeds + mc_samples + permutations)
    if isinstance(runs, Mapping):  # the mapping's keys name the runs
        items: Iterable[Run] = (v if v.name == k else v.renamed(k)
                                for k, v in runs.items())
    else:
        items = runs
    out: list[RunTies] = []
    seen: set[str] = set()
    notes: list[str] = []
    for run in items:
        if run.name in seen:
            raise InputError(run.name, f"run name {run.name!r} appears twice", "give each run a unique name")
        seen.add(run.name)
        if qrels is not None and not set(run.frame.qid.unique()) & set(qrels.frame.qid.unique()):
            note = f"run {run.name!r} ranks none of the {qrels.name!r} qrels' users: every measure is 0"
            warnings.warn(note, stacklevel=2)
            notes.append(note)
        res = audit_run(run, qrels, specs, settings)
        log.debug("%s audited in %.1f s", run.name, res.seconds)
        out.append(res)
    if not out:
        raise ConfigError("no runs given; pass run files or a folder of runs")
    counted = int(qrels.frame.qid.nunique()) if qrels is not None else None
    return TieAudit(tuple(out), settings, qrels.name if qrels is not None else None, counted, tuple(notes))


# ------------------------------------------------------------------------------ as text

def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def format_audit(audit: TieAudit) -> str:
    """Readable tables: prevalence, then one table per measure with every treatment."""
    s = audit.settings
    out = ["Tie prevalence (share of each run's users with an exact tie; before any tie policy)"]
    header = ["run", "users", "tied"]
    for k in s.cutoffs:
        header += [f"tied@{k}", f"cross@{k}", f"inside@{k}"]
    with_rel = audit.qrels is not None
    if with_rel:
        header += ["judged", "rel tied"] + [f"rel tied@{k}" for k in s.cutoffs]
    header += ["tied rows", "largest block"]
    rows = []
    for r in audit.runs:
        p = r.prevalence
        row = [r.name, str(p.users), _pct(p.tied)]
        for i, _ in enumerate(s.cutoffs):
            row += [_pct(p.touching_top[i]), _pct(p.crossing_top[i]), _pct(p.inside_top[i])]
        if with_rel:
            row += [str(p.judged_users), _pct(p.relevant_tied)] + [_pct(x) for x in p.relevant_touching_top]
        row += [_pct(p.tied_rows), str(p.largest_block)]
        rows.append(row)
    out.append(table(rows, header))
    out.append(prose("  tied@k: a tie block reaches the top k; cross@k: it holds ranks k and k+1 (changes "
                     "membership); inside@k: it lies wholly in the top k (changes positions)"
                     + ("; rel: it holds an item labelled >= 1, as a share of the run's users the qrels judge "
                        "(column judged)." if with_rel else "."), indent="    "))
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
        out.append(table(rows, header))
    if audit.runs and audit.runs[0].measures:
        mc = any(m.expected_ci is not None for m in audit.runs[0].measures)
        out.append("")
        out.append(prose("expected: uniformly random order within tie blocks (exact closed form"
                         + (f"; MC = Monte Carlo over {s.mc_samples} orders with a {s.confidence:.0%} CI" if mc else "")
                         + f"). perm: largest change of the mean over {s.permutations} seeded shuffles of "
                         "each user's rows."))
    for note in audit.notes:
        out.append(prose(f"note: {note}"))
    return "\n".join(out)
