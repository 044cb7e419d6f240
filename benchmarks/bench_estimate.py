"""Coverage and width of ``recjudge estimate``'s intervals, on a simulation with a known truth and on
TREC DL 2021 (NIST labels as the truth, UMBRELA-GPT-4 as the LLM labels).

Simulation. A pool of 200,000 users, each with 30 candidate items graded 0-3 by humans (a user's
share of relevant items varies: labels are clustered by user). Eight systems rank each user's items
by grade × their quality plus noise. The LLM's grade is the human grade plus one (lenient, capped
at 3) with probability ``agree``, else a grade drawn from the LLM's own marginal; it adds one more
grade to the items the two favoured systems put in their top 10. Per-user nDCG@10 and P@10 (grade
≥ 2) are computed from the labels, so nonlinearity and ties in the ideal ranking are real. Each
replication draws N users from the pool (the LLM judged them) and n of them (judged by hand):

- population ``judged``: the truth is the mean over the N users under human labels;
- population ``sampled``: the truth is the pool's mean (the N a sample of the population).

Printed per cell: coverage of the per-system intervals (all systems, and the worst system), of all
pairwise intervals together (simultaneous), of all rank sets together, the human-only coverage,
and the mean PPI width relative to the human-only width; coverage in 93-97% is marked ok.

Partly judged pools (``--partial K``): each human user is judged by hand on K of its 30 items,
drawn at random; P@10 is estimated from the per-user Horvitz-Thompson values (the LLM value plus
30/K times the judged items' residuals) with the two-stage variance of
:mod:`recjudge.estimation.pools`; nDCG@10 is not linear in the labels and is not estimated (recjudge
refuses it). The truth is still the mean under the human labels of every item.

Real data (``--real``): the 27 queries of trec-dl-2021-half are the finite population; n of them
are drawn without replacement as the human sample, the truth being each system's mean over the 27
under the NIST labels (population ``judged``, with its finite-population correction).

    python benchmarks/bench_estimate.py --quick      # 200 replications, a few cells
    python benchmarks/bench_estimate.py              # 500 replications, every cell
    python benchmarks/bench_estimate.py --real       # TREC DL 2021, n = 10, 15, 20
    python benchmarks/bench_estimate.py --plan       # the planner against simulation
    python benchmarks/bench_estimate.py --partial 5  # 5 of a user's 30 items judged by hand
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from recjudge.estimation.engine import estimate_measure  # noqa: E402
from recjudge.estimation.planner import users_for_width  # noqa: E402
from recjudge.estimation.planning import pilots  # noqa: E402
from recjudge.estimation.pools import PairTerms  # noqa: E402
from recjudge.estimation.sample import Sample  # noqa: E402

ITEMS, DEPTH, SYSTEMS = 30, 10, 8
NS = (10, 25, 50, 200)
QUALITY = np.array([1.6, 1.5, 1.45, 1.2, 1.0, 0.9, 0.6, 0.3])
FAVOURED = (3, 5)


def _labels(rng, users: int, agree: float):
    share = rng.beta(0.8, 1.6, size=(users, 1))  # a user's propensity for relevant items
    human = rng.binomial(3, share, size=(users, ITEMS))
    noise = rng.choice(4, size=(users, ITEMS), p=[0.1, 0.2, 0.35, 0.35])
    lenient = (rng.random((users, ITEMS)) < 0.5).astype(int)
    llm = np.where(rng.random((users, ITEMS)) < agree, np.minimum(human + lenient, 3), noise)
    return human, llm


def _ndcg_p(order: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = np.take_along_axis(labels, order[:, :DEPTH], 1)
    disc = 1 / np.log2(np.arange(2, DEPTH + 2))
    ideal = (-np.sort(-labels, 1)[:, :DEPTH] * disc).sum(1)
    dcg = (top * disc).sum(1)
    return np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0.0), (top >= 2).mean(1)


def population(seed: int, users: int = 200_000, agree: float = 0.7, pairs: dict | None = None):
    """Per-user metrics under human (Y) and LLM labels (F), users × systems, per measure; and κ. With
    ``pairs`` (a dict), P@10's per-item terms go in it: t = [in the top 10]/10 (users × systems ×
    items), h(H) and h(L) = grade ≥ 2 (h(L) per system: the judge favours some)."""
    rng = np.random.default_rng(seed)
    human, llm = _labels(rng, users, agree)
    y = {"nDCG@10": np.empty((users, SYSTEMS)), "P@10": np.empty((users, SYSTEMS))}
    f = {k: np.empty_like(v) for k, v in y.items()}
    if pairs is not None:
        pairs["top"] = np.zeros((users, SYSTEMS, ITEMS), dtype=bool)
        pairs["hl"] = np.zeros((users, SYSTEMS, ITEMS), dtype=bool)
        pairs["hh"] = human >= 2
    for k in range(SYSTEMS):
        order = np.argsort(-(human * QUALITY[k] + rng.normal(0, 1.2, size=human.shape)), 1, kind="stable")
        judged = llm.copy()
        if k in FAVOURED:
            np.put_along_axis(judged, order[:, :DEPTH],
                              np.minimum(np.take_along_axis(judged, order[:, :DEPTH], 1) + 1, 3), 1)
        y["nDCG@10"][:, k], y["P@10"][:, k] = _ndcg_p(order, human)
        f["nDCG@10"][:, k], f["P@10"][:, k] = _ndcg_p(order, judged)
        if pairs is not None:
            np.put_along_axis(pairs["top"][:, k], order[:, :DEPTH], True, 1)
            pairs["hl"][:, k] = judged >= 2
    return y, f, (_kappa(human[:2000].ravel(), llm[:2000].ravel()), float((llm - human).mean()))


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    po = (a == b).mean()
    pe = sum((a == g).mean() * (b == g).mean() for g in range(4))
    return (po - pe) / (1 - pe)


def _ranks(means: np.ndarray) -> np.ndarray:
    return (-means).argsort(kind="stable").argsort() + 1


def _partial_terms(rng, pairs: dict, who: np.ndarray, f: np.ndarray, k: int) -> PairTerms:
    """P@10's HT values for users ``who`` (pool rows), each judged by hand on k random items of 30."""
    n = len(who)
    pick = np.argsort(rng.random((n, ITEMS)), 1)[:, :k]  # k items per user, without replacement
    t = np.take_along_axis(pairs["top"][who], pick[:, None, :], 2) / DEPTH  # n × systems × k
    hh = np.take_along_axis(pairs["hh"][who], pick, 1)[:, None, :]
    hl = np.take_along_axis(pairs["hl"][who], pick[:, None, :], 2)
    e, gh = (t * (hh.astype(float) - hl)).transpose(0, 2, 1), (t * hh).transpose(0, 2, 1)
    judged, size = np.full(n, k), np.full(n, ITEMS)
    return PairTerms(f + ITEMS / k * e.sum(1), ITEMS / k * gh.sum(1), e, gh, judged, size)


def _replicate(rng, y, f, n, big_n, pop, level, pairs=None, k=None):
    """One draw: N users of the pool, n of them by hand (on k of their items when given); the
    coverage flags of every interval."""
    pool = len(next(iter(y.values())))
    chosen = rng.choice(pool, big_n, replace=False)
    rows = np.sort(rng.choice(big_n, n, replace=False))
    users = [str(i) for i in range(big_n)]
    out = {}
    for name in y:
        if k is not None and name != "P@10":
            continue  # not linear in the labels: recjudge refuses it for partly judged users
        ya, fa = y[name][chosen], f[name][chosen]
        truth = ya.mean(0) if pop == "judged" else y[name].mean(0)
        terms = None if k is None else {name: _partial_terms(rng, pairs, chosen[rows], fa[rows], k)}
        sample = Sample([str(s) for s in range(SYSTEMS)], [users[r] for r in rows], users,
                        {name: ya[rows] if k is None else terms[name].y}, {name: fa[rows]}, {name: fa},
                        partial=terms)
        m = estimate_measure(name, sample, 1 - level, pop, 1000, int(rng.integers(1 << 30)))
        out[name] = _flags(m, truth)
    return out


def _flags(m, truth: np.ndarray) -> dict:
    lo, hi = m.ci()
    hlo, hhi = m.human_ci()
    plo, phi = m.pair_ci()
    diff = np.array([truth[a] - truth[b] for a, b in m.pairs])
    rank = _ranks(truth)
    return {"system": (lo <= truth) & (truth <= hi), "human": (hlo <= truth) & (truth <= hhi),
            "pairs": bool(((plo <= diff) & (diff <= phi)).all()),
            "ranks": bool(((m.ranks.lo <= rank) & (rank <= m.ranks.hi)).all()),
            "width": (hi - lo).mean() / max((hhi - hlo).mean(), 1e-12), "worth": np.nanmedian(m.effective)}


def _ok(c: float) -> str:
    return "ok" if 0.93 <= c <= 0.97 else "LOW" if c < 0.93 else "high"


def simulate(reps: int, cells, pops, level: float, seed: int, k: int | None = None) -> None:
    pairs = None if k is None else {}
    y, f, (kappa, bias) = population(seed, pairs=pairs)
    print(f"simulation: pool of {len(y['P@10']):,} users, {SYSTEMS} systems, item-level kappa(human, LLM) = "
          f"{kappa:.2f}, LLM grade - human grade = {bias:+.2f} on average (systems {FAVOURED} favoured: +1 more "
          f"in their top {DEPTH}); {reps} replications per cell, level {level:g}")
    if k is not None:
        print(f"partly judged: each human user judged by hand on {k} of its {ITEMS} items, drawn at random "
              "(P@10 by Horvitz-Thompson within users, two-stage variance; nDCG@10 refused)")
    print(f"{'measure':8} {'pop':8} {'N':>6} {'n':>4} {'system':>7} {'worst':>6} {'pairs':>6} {'ranks':>6} "
          f"{'human':>6} {'width':>6} {'worth':>6}")
    rng = np.random.default_rng(seed + 1)
    for pop in pops:
        for big_n, n in cells:
            flags = [_replicate(rng, y, f, n, big_n, pop, level, pairs, k) for _ in range(reps)]
            for name in flags[0]:
                _row(name, pop, big_n, n, [r[name] for r in flags])


def _row(name, pop, big_n, n, flags) -> None:
    system = np.array([r["system"] for r in flags])
    per_system = system.mean(0)
    cov, worst = system.mean(), per_system.min()
    pairs = np.mean([r["pairs"] for r in flags])
    ranks = np.mean([r["ranks"] for r in flags])
    human = np.mean([r["human"] for r in flags])
    width = np.mean([r["width"] for r in flags])
    worth = np.mean([r["worth"] for r in flags])
    print(f"{name:8} {pop:8} {big_n:>6} {n:>4} {cov:7.3f} {worst:6.3f} {pairs:6.3f} {ranks:6.3f} {human:6.3f} "
          f"{width:6.2f} {worth:6.0f}  {_ok(cov)}/{_ok(worst)}/{_ok(pairs)}")


def plan_check(reps: int, level: float, seed: int) -> None:
    """From a pilot of 25 users, the n for a half-width of 0.6 × the pilot's; then that n simulated."""
    y, f, _ = population(seed)
    rng = np.random.default_rng(seed + 2)
    big_n = 10_000
    print("planner: pilot n = 25 of N = 10,000; target half-width 0.6 x the pilot's widest")
    print(f"{'measure':8} {'target':>7} {'n':>5} {'achieved':>9} {'ratio':>6}")
    for name in y:
        chosen = rng.choice(len(y[name]), big_n, replace=False)
        ya, fa = y[name][chosen], f[name][chosen]
        rows = np.sort(rng.choice(big_n, 25, replace=False))
        users = [str(i) for i in range(big_n)]
        sample = Sample([str(k) for k in range(SYSTEMS)], [users[r] for r in rows], users,
                        {name: ya[rows]}, {name: fa[rows]}, {name: fa})
        m = estimate_measure(name, sample, 1 - level, "judged", 200, 0)
        target = 0.6 * float(((m.ci()[1] - m.ci()[0]) / 2).max())
        ns = [users_for_width(p, target, m.alpha) for p in pilots(sample, name, m.ppi.lam, "judged")]
        n = max(ns)
        widest = []
        for _ in range(reps):
            rows = np.sort(rng.choice(big_n, n, replace=False))
            s2 = Sample(sample.systems, [users[r] for r in rows], users, {name: ya[rows]}, {name: fa[rows]},
                        {name: fa})
            m2 = estimate_measure(name, s2, 1 - level, "judged", 200, 0)
            widest.append(float(((m2.ci()[1] - m2.ci()[0]) / 2).max()))
        achieved = float(np.mean(widest))
        print(f"{name:8} {target:7.4f} {n:5d} {achieved:9.4f} {achieved / target:6.2f}  "
              f"{'ok' if abs(achieved / target - 1) <= 0.15 else 'OFF'}")


def real(reps: int, level: float, seed: int, sizes=(10, 15, 20)) -> None:
    from recjudge.data.trec import read_qrels, run_paths
    from recjudge.evaluation.measures import score_runs

    data = Path(__file__).resolve().parents[3] / "shared" / "data" / "trec-dl-2021-half"
    if not data.is_dir():
        data = Path("/work/shared/data/trec-dl-2021-half")
    nist, umb = read_qrels(data / "qrels.nist.txt"), read_qrels(data / "qrels.umbrela-gpt4.txt")
    runs = run_paths([data / "runs"])
    measures = ["nDCG@10", "nDCG@100", "Bpref"]
    scored = score_runs(runs, {"nist": nist, "llm": umb}, measures, "trec_eval", 0, k=100)
    systems = list(runs)
    print(f"TREC DL 2021 (half): {len(systems)} runs, 27 queries as the finite population, NIST = truth, "
          f"UMBRELA-GPT-4 = LLM; tie policy trec_eval; {reps} draws of n queries without replacement")
    print(f"{'measure':9} {'n':>3} {'system':>7} {'worst':>6} {'pairs':>6} {'ranks':>6} {'human':>6} "
          f"{'width':>6} {'worth':>6}")
    rng = np.random.default_rng(seed)
    for name in measures:
        ya = scored.matrices["nist"][name].loc[nist.qids, systems].to_numpy(float)
        fa = scored.matrices["llm"][name].loc[nist.qids, systems].to_numpy(float)
        truth, users = ya.mean(0), nist.qids
        for n in sizes:
            flags = []
            for _ in range(reps):
                rows = np.sort(rng.choice(len(users), n, replace=False))
                sample = Sample(systems, [users[r] for r in rows], users, {name: ya[rows]}, {name: fa[rows]},
                                {name: fa})
                flags.append(_flags(estimate_measure(name, sample, 1 - level, "judged", 500,
                                                     int(rng.integers(1 << 30))), truth))
            _real_row(name, n, flags)


def _real_row(name, n, flags) -> None:
    system = np.array([r["system"] for r in flags])
    print(f"{name:9} {n:>3} {system.mean():7.3f} {system.mean(0).min():6.3f} "
          f"{np.mean([r['pairs'] for r in flags]):6.3f} {np.mean([r['ranks'] for r in flags]):6.3f} "
          f"{np.mean([r['human'] for r in flags]):6.3f} {np.mean([r['width'] for r in flags]):6.2f} "
          f"{np.nanmean([r['worth'] for r in flags]):6.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="200 replications, N = 1,000 only")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--real", action="store_true", help="the TREC DL 2021 check instead of the simulation")
    p.add_argument("--plan", action="store_true", help="the planner check instead of the simulation")
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--population", choices=("judged", "sampled", "both"), default="both")
    p.add_argument("--n", type=int, nargs="+", help=f"human users per cell (default {NS})")
    p.add_argument("--big-n", type=int, nargs="+", help="LLM-judged users per cell (default 1000 10000)")
    p.add_argument("--partial", type=int, metavar="K", help=f"each human user judged on K of its {ITEMS} items")
    a = p.parse_args(argv)
    reps = a.reps or (200 if a.quick else 500)
    if a.real:
        real(reps, a.level, a.seed)
    elif a.plan:
        plan_check(min(reps, 200), a.level, a.seed)
    else:
        ns = [n for n in NS if a.n is None or n in a.n]
        big = [1000] if a.quick else [1000, 10_000] if a.big_n is None else a.big_n
        cells = [(big_n, n) for big_n in big for n in ns]
        pops = ("judged", "sampled") if a.population == "both" else (a.population,)
        if a.partial is not None and not 2 <= a.partial <= ITEMS:
            p.error(f"--partial: K must be between 2 and {ITEMS}, not {a.partial}")
        simulate(reps, cells, pops, a.level, a.seed, a.partial)
    return 0


if __name__ == "__main__":
    sys.exit(main())
