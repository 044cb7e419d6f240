"""The tie note of compare and evaluate: could the ties of the runs change a result, and by how much?

A ranked list's tie can change a measure only when its block of equal scores starts within the
depth the measures read (their deepest cutoff; the whole list when one has none) and holds items the
labels tell apart: two labels, or a judged and an unjudged item. Reordering items of one judgment
hands every measure the same sequence of labels, so such a block changes nothing (Compat's ideal
list follows the same order, Bpref the same judged / unjudged positions). A list with a block that
matters is *tie-sensitive*.

Per run, the share of the label set's users whose list is tie-sensitive bounds how far any tie
policy can move that run's mean of a measure in [0, 1]: a user's value changes by at most 1. The
note is printed when some run's share exceeds the threshold (``DEFAULT_TIE_NOTE``: 1%, so below it
no run's mean of such a measure can move by more than 0.01).

Then each measure is taken again under the other deterministic policy (hash when the evaluation
ordered ties by trec_eval's rule, trec_eval otherwise) and as its expectation under a uniformly
random order within each block (the closed forms of :mod:`.treatments`; Monte Carlo over
``MC_ORDERS`` orders for measures without one), on the tie-sensitive users alone: every other user
scores the same under every order. Only the systems' means are kept (no bootstrap), and τ follows
from them. The full audit is ``recjudge ties``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ...data.trec import FrameCodes, Run, RunTable
from .policy import ScoreOrder, tie_blocks
from .ranked import Ranked
from .specs import measure_specs
from .treatments import Evaluator, expected_values, per_user_values

__all__ = ["DEFAULT_TIE_NOTE", "MC_ORDERS", "TieObserver", "alternative_policy", "DEFINITION"]

DEFAULT_TIE_NOTE = 0.01
MC_ORDERS = 2  # random orders per run for measures without a closed form: a mean over users needs few
DEFINITION = ("a ranked list is tie-sensitive when a block of equal scores starting within the depth the "
              "measures read holds two differently judged items (two labels, or judged and unjudged); "
              "only such a block can change a measure, and a run's share of such lists bounds how far any "
              "tie order moves its mean of a measure in [0, 1]")
_UNJUDGED = np.iinfo(np.int64).min


def alternative_policy(policy: str) -> str:
    """The deterministic order the note compares with: hash, or trec_eval's rule under hash."""
    return "trec_eval" if policy == "hash" else "hash"


def _depth(specs) -> int | None:
    cutoffs = [s.cutoff for s in specs]
    return None if any(c is None for c in cutoffs) else max(cutoffs)


def sensitive_users(run: Run, so: ScoreOrder, jd, doc_codes: np.ndarray, depth: int | None) -> np.ndarray:
    """Indices (into ``so.qids``) of the lists holding a tie block that matters (module docstring):
    only the tied rows are joined to the judgments ``jd``."""
    blocks = tie_blocks(so)
    if blocks is None:
        return np.zeros(0, dtype=np.int64)
    at, block = blocks
    qrank = so.qrank[at]
    at_rows, j, _ = jd.join(jd.qlookup(so.qids), doc_codes, qrank, run.codes.dcode[so.order[at]])
    key = np.full(len(at), _UNJUDGED, dtype=np.int64)
    key[at_rows] = jd.label[j]
    first = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
    mixed = np.minimum.reduceat(key, first) != np.maximum.reduceat(key, first)
    if depth is not None:
        mixed &= so.pos[at[first]] < depth
    return np.unique(qrank[first[mixed]])


def _sub_run(run: Run, so: ScoreOrder, users: np.ndarray) -> Run:
    """The rows of ``users`` (indices into ``so.qids``, ascending) in score order (ties in file order)."""
    keep = np.zeros(len(so.qids), dtype=bool)
    keep[users] = True
    sel = np.flatnonzero(keep[so.qrank])
    code = np.full(len(so.qids), -1, dtype=np.int64)
    code[users] = np.arange(len(users))
    t = run.table
    rows = so.order[sel]
    codes = FrameCodes(code[so.qrank[sel]].astype(np.int32), so.qids[users], t.codes.dcode[rows], t.codes.docids)
    table = RunTable(codes, (so.pos[sel] + 1).astype(np.int64), so.score[sel],
                     np.zeros(len(sel), dtype=np.int32), np.array([run.name], dtype=object), t.ids)
    return Run(run.name, table=table)


class TieObserver:
    """Collects, run by run while :func:`recjudge.evaluation.measures.score_runs` holds each run, the
    tie-sensitive users of every label set and the change of each measure's sum over them under the
    alternative policy and the expectation. ``label_sets``: as score_runs takes them."""

    def __init__(self, label_sets: Mapping, measures: Sequence[str], policy: str, seed: int):
        self.label_sets = {k: (v if isinstance(v, tuple) else (v, None))[0] for k, v in label_sets.items()}
        # CompatHM's mean leaves users out, so a sum over some users does not shift it: not noted
        self.specs = tuple(s for s in measure_specs(list(measures)) if s.measure.NAME != "CompatHM")
        self.depth = _depth(self.specs)
        self.policy, self.alternative, self.seed = policy, alternative_policy(policy), seed
        self.general = [s.name for s in self.specs if s.family == "general"]
        # label set -> run -> sensitive users; label set -> treatment -> measure key -> run -> Σ change
        self.sensitive: dict = {k: {} for k in self.label_sets}
        self.delta: dict = {k: {t: {s.key: {} for s in self.specs} for t in (self.alternative, "expected")}
                            for k in self.label_sets}
        self.users: dict = {}  # label set -> its users (the means' denominators)
        self._scorers: dict = {}  # label set -> the engine's scorer of the general measures, for every run

    def __call__(self, name: str, col: int, run: Run, order: ScoreOrder, scorers: Mapping,
                 doc_codes: Sequence | None = None) -> None:
        """``run`` as read (before any tie policy) with its score order; ``scorers`` have scored it in
        column ``col`` under the evaluation's policy; ``doc_codes``: per scorer, its judgments' code of
        each of the run's distinct docids (or None)."""
        for i, (label, sc) in enumerate(scorers.items()):
            if label not in self.label_sets:
                continue  # a label set the note is not about (a trivial judge)
            self.users[label] = len(sc.index)
            jd = sc.jd
            codes = doc_codes[i] if doc_codes is not None else jd.dlookup(run.codes.docids).astype(np.int32)
            users = sensitive_users(run, order, jd, codes, self.depth)
            self.sensitive[label][name] = len(users)
            if not len(users):
                continue
            counted = jd.qlookup(order.qids[users])  # rows of the label set's matrices
            sub = Ranked(_sub_run(run, order, users), self.label_sets[label], context=sc.ctx, doc_codes=codes)
            if label not in self._scorers:
                self._scorers[label] = Evaluator.scorer_for(sub, self.specs)
            ev = Evaluator(sub, self.specs, self._scorers[label])
            alt = per_user_values(sub, self.specs, ev, [sub.treatment(sub.tied_rows, self.alternative,
                                                                     seed=self.seed)])[0]
            exp, _ = expected_values(sub, self.specs, ev, MC_ORDERS, self.seed)
            for i, s in enumerate(self.specs):
                base = sc.values[s.key][counted, col]
                self.delta[label][self.alternative][s.key][name] = float((alt[i, counted] - base).sum())
                self.delta[label]["expected"][s.key][name] = float((exp[i, counted] - base).sum())

    def shifted_means(self, label, treatment: str, key: str, means: Mapping[str, float]) -> dict[str, float]:
        """Each system's mean of measure ``key`` under ``treatment``, from its mean under the policy."""
        d = self.delta[label][treatment][key]
        n = self.users.get(label, 0)
        return {run: m + (d.get(run, 0.0) / n if n else 0.0) for run, m in means.items()}

    def shares(self, label) -> dict[str, float]:
        n = self.users.get(label, 0)
        return {run: (c / n if n else math.nan) for run, c in self.sensitive[label].items()}

    def method(self) -> dict[str, str]:
        return {s.name: ("exact" if s.family != "general" else f"Monte Carlo over {MC_ORDERS} random orders")
                for s in self.specs}



def _tau(a: Sequence[float], b: Sequence[float]) -> float:
    from ..metaeval.ranks import kendall_tau  # not scipy.stats: ~0.85 s and 40 MB to load

    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    return kendall_tau(a, b)


def _largest(values: Mapping[str, float]) -> tuple[str | None, float]:
    finite = {k: v for k, v in values.items() if v == v}
    if not finite:
        return None, math.nan
    k = max(finite, key=lambda m: finite[m])
    return k, finite[k]


def summarize(obs: TieObserver | None, means: Mapping, names: Mapping[str, str], main, threshold: float,
              pairs: Mapping[str, tuple] | None = None, decimals: int = 12, label_names: Mapping | None = None
              ) -> dict:
    """The note's record (``tie_sensitivity`` in JSON) and its line (``note``, None when not shown).

    ``means``: label set -> measure key -> {run: mean under the evaluation's policy}; ``names``: the
    measures as spelled -> key; ``main``: the label set whose users the shares count (the reference,
    or evaluate's qrels); ``pairs``: compare's candidate -> (reference label set, candidate label set),
    whose τ is recomputed; without them (evaluate) τ is that of the system order under the policy
    against the order under the other treatment.
    """
    label_names = label_names or {}
    runs = list(next(iter(means[main].values())))
    out: dict = {"definition": DEFINITION, "threshold": threshold, "label_set": label_names.get(main, str(main)),
                 "runs": len(runs), "lists": 0, "lists_share": 0.0, "largest_run_share": 0.0,
                 "largest_run": None, "shown": False, "note": None}
    if obs is None:
        out["computed"] = False  # --tie-note 1: the check is off
        return out
    users = obs.users.get(main, 0)
    shares = obs.shares(main)
    lists = int(sum(obs.sensitive[main].values()))
    out.update(lists=lists, lists_share=lists / (users * len(runs)) if users and runs else 0.0,
               run_shares={r: s for r, s in shares.items() if s > 0})
    if shares:
        top = max(shares, key=lambda r: shares[r])
        out.update(largest_run_share=shares[top], largest_run=top if shares[top] > 0 else None)
    if not lists:
        return out
    out.update(policy=obs.policy, seed=obs.seed, alternatives={})
    for t in (obs.alternative, "expected"):
        out["alternatives"][t] = _alternative(obs, t, means, names, main, runs, pairs, decimals, label_names)
    out["shown"] = out["largest_run_share"] > threshold
    if out["shown"]:
        out["note"] = _line(out, obs.policy, obs.alternative, pairs is not None)
    return out


def _alternative(obs: TieObserver, t: str, means: Mapping, names: Mapping[str, str], main, runs: list,
                 pairs: Mapping[str, tuple] | None, decimals: int, label_names: Mapping) -> dict:
    """How far the means and τ move under the other treatment ``t`` (the alternative policy, or the
    expected value over tie orders)."""
    rnd = lambda d: {r: round(v, decimals) for r, v in d.items()}  # noqa: E731  (as metaeval.system_means)
    moves, taus, shifted = {}, {}, {}
    for label in means:
        shifted[label] = {m: rnd(obs.shifted_means(label, t, k, means[label][k])) for m, k in names.items()
                          if k in obs.delta[label][t]}
    for m, k in names.items():
        if k not in obs.delta[main][t]:
            continue
        moves[m] = max(abs(shifted[lb][m][r] - round(means[lb][k][r], decimals))
                       for lb in means for r in runs)
        if pairs is None:
            base = rnd(means[main][k])
            taus[m] = _tau([base[r] for r in runs], [shifted[main][m][r] for r in runs])
        else:
            change = []
            for ref, cand in pairs.values():
                before = _tau([round(means[ref][k][r], decimals) for r in runs],
                              [round(means[cand][k][r], decimals) for r in runs])
                after = _tau([shifted[ref][m][r] for r in runs], [shifted[cand][m][r] for r in runs])
                change.append(abs(after - before) if before == before and after == after else math.nan)
            finite = [c for c in change if c == c]
            taus[m] = max(finite) if finite else math.nan
    entry = {"max_abs_mean_change": moves, ("tau_change" if pairs is not None else "tau"): taus,
             "means": {label_names.get(lb, str(lb)): v for lb, v in shifted.items()}}
    if t == "expected":
        entry["method"] = {m: v for m, v in obs.method().items() if m in moves}
    else:
        entry["seed"] = obs.seed
    return entry


def _line(rec: dict, policy: str, alternative: str, compare: bool) -> str:
    def part(t: str, what: str, sep: str) -> str:
        a = rec["alternatives"][t]
        m, move = _largest(a["max_abs_mean_change"])
        if compare:
            _, tau = _largest(a["tau_change"])
            tau_text = "" if tau != tau else (f" and τ by ≤{tau:.3f}" if not sep else f" / τ by ≤{tau:.3f}")
        else:
            taus = [v for v in a["tau"].values() if v == v]
            tau_text = "" if not taus else (f" and the system order to τ {min(taus):.3f}" if not sep
                                            else f" / τ {min(taus):.3f}")
        return f"{what} by ≤{move:.4f} ({m}){tau_text}"

    return (f"ties: {rec['lists_share']:.0%} of ranked lists are tie-sensitive (up to "
            f"{rec['largest_run_share']:.0%}: {rec['largest_run']}); against {policy}'s order, "
            f"{part(alternative, f'{alternative} moves a system mean', '')}, "
            f"{part('expected', 'the expected value under random order', '/')} — see `recjudge ties`")
