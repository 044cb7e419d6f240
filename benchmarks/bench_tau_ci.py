"""Coverage of the confidence intervals recjudge prints, by simulation where the truth is known.

    .venv/bin/python benchmarks/bench_tau_ci.py [--reps 500] [--resamples 1000] [--quick]

A. τ over users (``compare``). A finite population of 100,000 users, each with a measure value per
   system under a reference and a candidate label set: latent score = system effect + user effect
   (shared by every system: users differ in how easy they are) + user × system noise, mapped to a
   graded measure on a 0.1 lattice with a mass at 0 (users for whom nothing relevant is found), so
   per-user values tie. The candidate's system effects are the reference's plus a deviation scaled
   to hit a population τ of 0.6, 0.8, 0.9 or 0.95; its user × system noise is correlated with the
   reference's (the same users' items judged twice) and it adds a per-user shift of its own. The
   population τ is τ-b between the two label sets' system means over the whole population. Two
   layouts of systems: ``separated`` (20 systems evenly spread) and ``close`` (60 systems in 15
   groups of 4 near-identical variants, like a TREC track's runs: many pairs closer than the users
   resolve, so resampled τ sits far below the sample τ — the strongly biased bootstrap seen on
   TREC DL-2021 with GPT-4 labels). Users counted ``shared`` (both label sets judge the same n
   users) or ``own`` (each judges n users, 80% of them in common). Each replication draws users
   without replacement, builds every interval of ``recjudge.evaluation.intervals.TAU_METHODS``
   from the same resamples (recjudge's own code path, ``kendall_tau_replicates``) and records
   whether it covers the population τ and contains the sample τ.
B. The interval across N experiments (``ablate``): N values drawn from a known distribution (the
   sample τ of a cell of A; Beta-shaped shares and τ), the mean of that distribution covered or
   not by the plain t-interval, by the t-interval on the Fisher-z scale of the range
   (``bounded_t``, shipped) and by t on the mean of atanh values.
C. Shares of pairs pooled over users (``agreement``): users with a heavy-tailed number of pairs and
   their own agreement rate; percentile and BCa over a user bootstrap against the Wilson interval
   at the effective number of pairs (``share_interval``) with a linearised or a bootstrap SE.
D. Speed: the vectorised τ replicates against scipy.stats.bootstrap resampling user indices.

Prints the tables the README carries and, with ``--constants``, the coverage table by number of
users and bootstrap bias that ``recjudge.evaluation.intervals.TAU_COVERAGE`` holds.
"""

from __future__ import annotations

import argparse
import inspect
import math
import time
from collections import defaultdict

import numpy as np

from recjudge.evaluation.intervals import (
    BIAS_BANDS,
    DEFAULT_TAU_METHOD,
    TAU_METHODS,
    USER_BANDS,
    bias_corrected,
    bounded_t,
    percentile,
    share_interval,
    tau_interval,
)
from recjudge.evaluation.metaeval import MEAN_DECIMALS, BootstrapWeights, _tau_b_rows, kendall_tau_replicates

NOMINAL = 0.95
POPULATION = 100_000
TARGETS = (0.6, 0.8, 0.9, 0.95)
USERS = (25, 50, 200, 1000)
LAYOUTS = ("separated", "close")
SETTINGS = ("shared", "own")
OWN_COMMON = 0.8  # share of each label set's users that the other also judges, under "own"


def _measure(latent: np.ndarray) -> np.ndarray:
    """A graded per-user value: logistic of the latent score on a 0.1 lattice, 0 below a threshold."""
    v = np.round(10.0 / (1.0 + np.exp(-latent))) / 10.0
    v[latent < -0.5] = 0.0
    return v.astype(np.float32)


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    return float(_tau_b_rows(np.round(x, MEAN_DECIMALS)[None], np.round(y, MEAN_DECIMALS)[None])[0])


class Population:
    """Users × systems values under both label sets, and the population τ between their means."""

    def __init__(self, layout: str, target: float, rng: np.random.Generator, size: int = POPULATION,
                 user_sd: float = 1.2, noise_sd: float = 0.6, noise_corr: float = 0.6, shift_sd: float = 0.4):
        if layout == "separated":
            effects = np.linspace(0.0, 1.5, 20)
        else:  # 15 groups of 4 near-identical variants
            effects = np.repeat(np.linspace(0.0, 1.0, 15), 4)
            effects = effects + rng.uniform(-0.03, 0.03, effects.size)
        deviation = rng.standard_normal(effects.size)
        user = user_sd * rng.standard_normal((size, 1))
        e_ref = rng.standard_normal((size, effects.size)).astype(np.float32)
        e_own = rng.standard_normal((size, effects.size)).astype(np.float32)
        self.ref = _measure(effects + user + noise_sd * e_ref)
        cand_latent = (user + shift_sd * rng.standard_normal((size, 1))
                       + noise_sd * (noise_corr * e_ref + math.sqrt(1 - noise_corr ** 2) * e_own))
        ref_means = self.ref.mean(axis=0, dtype=np.float64)
        lo, hi = 0.0, 3.0  # bisection on the deviation's scale for the target τ (on a fifth of the users)
        for _ in range(30):
            mid = (lo + hi) / 2
            cand_means = _measure(effects + mid * deviation + cand_latent[: size // 5]).mean(0, dtype=np.float64)
            t = _tau(ref_means, cand_means)
            lo, hi = (mid, hi) if t > target else (lo, mid)
        self.cand = _measure(effects + (lo + hi) / 2 * deviation + cand_latent)
        self.tau = _tau(ref_means, self.cand.mean(axis=0, dtype=np.float64))
        self.n_systems = effects.size

    def sample(self, n: int, setting: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(reference, candidate) user × system arrays over the union of users (NaN: not judged)."""
        if setting == "shared":
            idx = rng.choice(len(self.ref), n, replace=False)
            return self.ref[idx].astype(np.float64), self.cand[idx].astype(np.float64)
        only = n - int(round(OWN_COMMON * n))  # users one label set judges and the other not
        idx = rng.choice(len(self.ref), n + only, replace=False)
        ref, cand = self.ref[idx].astype(np.float64), self.cand[idx].astype(np.float64)
        ref[n:] = np.nan            # the last `only` users: candidate only
        cand[n - only:n] = np.nan   # the `only` before them: reference only
        return ref, cand


def run_tau(reps: int, resamples: int, seed: int, layouts, targets, users, settings, log):
    """Section A: per cell, coverage and containment of every method; per replicate, its bands."""
    cells, by_band = [], defaultdict(lambda: defaultdict(list))
    by_cell_band = defaultdict(lambda: defaultdict(list))  # (cell, user band, bias band) → method → covered
    for li, layout in enumerate(layouts):
        for ti, target in enumerate(targets):
            pop = Population(layout, target, np.random.default_rng([seed, li, ti]))
            for si, setting in enumerate(settings):
                for n in users:
                    t0 = time.perf_counter()
                    rng = np.random.default_rng([seed, li, ti, si, n])
                    covered, contains, width = defaultdict(list), defaultdict(list), defaultdict(list)
                    est, bias = [], []
                    for r in range(reps):
                        ref, cand = pop.sample(n, setting, rng)
                        weights = BootstrapWeights(int(rng.integers(2 ** 32)), len(ref), resamples)
                        rep = kendall_tau_replicates(ref, cand, weights, jackknife=True)
                        est.append(rep.estimate)
                        b = rep.bootstrap_bias_sd
                        bias.append(b)
                        band = (_band(n, USER_BANDS), _band(0.0 if math.isnan(b) else abs(b), BIAS_BANDS))
                        for name in TAU_METHODS:
                            lo, hi = tau_interval(name, rep)
                            ok = lo <= pop.tau <= hi
                            covered[name].append(ok)
                            contains[name].append(lo - 1e-12 <= rep.estimate <= hi + 1e-12)
                            width[name].append(hi - lo)
                            by_band[band][name].append(ok)
                            by_cell_band[(len(cells),) + band][name].append(ok)
                    cell = {"layout": layout, "target": target, "tau": pop.tau, "setting": setting, "n": n,
                            "systems": pop.n_systems, "estimate": float(np.mean(est)), "sd": float(np.std(est)),
                            "bias_sd": float(np.nanmean(bias)), "estimates": np.array(est),
                            "coverage": {k: float(np.mean(v)) for k, v in covered.items()},
                            "contains": {k: float(np.mean(v)) for k, v in contains.items()},
                            "width": {k: float(np.nanmean(v)) for k, v in width.items()}}
                    cells.append(cell)
                    log(f"  {layout:9s} τ {pop.tau:.3f} {setting:6s} n={n:<5d} sample τ {cell['estimate']:.3f} "
                        f"(sd {cell['sd']:.3f}), bootstrap bias {cell['bias_sd']:.2f} SD: "
                        f"{DEFAULT_TAU_METHOD} {cell['coverage'][DEFAULT_TAU_METHOD]:.1%}, "
                        f"BCa {cell['coverage']['BCa']:.1%} [{time.perf_counter() - t0:.0f} s]")
    worst = defaultdict(dict)  # (user band, bias band) → method → lowest coverage of a cell with ≥ 50 there
    for (_, u, b), by_method in by_cell_band.items():
        for name, v in by_method.items():
            if len(v) >= 50:
                worst[(u, b)][name] = min(worst[(u, b)].get(name, 1.0), float(np.mean(v)))
    return cells, by_band, worst


def _band(value: float, edges) -> int:
    """Index of the band ``value`` falls in: edges are the lower bounds of bands 1, 2, ..."""
    return int(np.searchsorted(np.asarray(edges, float), value, side="right"))


def _pct(x: float) -> str:
    return "–" if x != x else f"{100 * x:.1f}"


def print_tau(cells, by_band, worst, reps: int, resamples: int) -> None:
    methods = list(TAU_METHODS)
    print(f"\nA. τ over users: coverage of the population τ, % of {reps} replications "
          f"({resamples} bootstrap resamples each; nominal 95%)\n")
    print("| layout | population τ | users | n | sample τ (mean ± sd) | bootstrap bias (SD) | "
          + " | ".join(methods) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(methods))
    for c in cells:
        print(f"| {c['layout']} ({c['systems']} systems) | {c['tau']:.3f} | {c['setting']} | {c['n']} | "
              f"{c['estimate']:.3f} ± {c['sd']:.3f} | {c['bias_sd']:.2f} | "
              + " | ".join(_pct(c["coverage"][m]) for m in methods) + " |")
    print("\nSummary over the grid: mean |coverage − 95| (points), cells within 93–97%, lowest cell, "
          "share of intervals containing the sample τ, mean width\n")
    print("| method | mean abs. deviation | within 93–97 | lowest | n ≥ 200: mean abs. deviation "
          "| n ≥ 200: lowest "
          "| contains the estimate | mean width |")
    print("|---|---|---|---|---|---|---|---|")
    for m in methods:
        cov = np.array([c["coverage"][m] for c in cells])
        big = np.array([c["coverage"][m] for c in cells if c["n"] >= 200])
        cont = min(c["contains"][m] for c in cells)
        print(f"| {m}{' (default)' if m == DEFAULT_TAU_METHOD else ''} | {np.mean(np.abs(cov - NOMINAL)) * 100:.1f} | "
              f"{np.mean((cov >= 0.93) & (cov <= 0.97)):.0%} | {_pct(cov.min())} | "
              f"{np.mean(np.abs(big - NOMINAL)) * 100:.1f} | {_pct(big.min())} | "
              f"{'always' if cont == 1.0 else f'{cont:.1%} (worst cell)'} | "
              f"{np.mean([c['width'][m] for c in cells]):.3f} |")
    print(f"\nCoverage of the default ({DEFAULT_TAU_METHOD}) by users per label set and bootstrap bias: "
          "replications pooled over the grid (how many), and the lowest of the simulated populations with "
          "at least 50 replications in that band\n")
    heads = _band_names(BIAS_BANDS, " SD")
    print("| users | " + " | ".join(f"bias {h}" for h in heads) + " |")
    print("|---|" + "---|" * len(heads))
    for u, uname in enumerate(_band_names(USER_BANDS, "")):
        if u == 0:
            continue
        row = []
        for b in range(len(heads)):
            v = by_band.get((u, b), {}).get(DEFAULT_TAU_METHOD, [])
            low = worst.get((u, b), {}).get(DEFAULT_TAU_METHOD, math.nan)
            row.append(f"{_pct(np.mean(v))} ({len(v)}; lowest {_pct(low)})" if v else "–")
        print(f"| {uname} | " + " | ".join(row) + " |")


def print_compact(cells) -> None:
    """The default's coverage as the README carries it: a row per layout and population τ, a column
    per number of users, ``shared / own`` in each cell."""
    print(f"\nCoverage of the default ({DEFAULT_TAU_METHOD}), % (shared / own users)\n")
    users = sorted({c["n"] for c in cells})
    print("| systems | population τ | " + " | ".join(f"{n:,} users" for n in users) + " |")
    print("|---|---|" + "---|" * len(users))
    by = {(c["layout"], c["target"], c["setting"], c["n"]): c for c in cells}
    for layout, target in dict.fromkeys((c["layout"], c["target"]) for c in cells):
        first = by.get((layout, target, "shared", users[0])) or by[(layout, target, "own", users[0])]
        row = []
        for n in users:
            row.append(" / ".join(_pct(by[(layout, target, st, n)]["coverage"][DEFAULT_TAU_METHOD])
                                  if (layout, target, st, n) in by else "–" for st in SETTINGS))
        print(f"| {layout}, {first['systems']} systems | {first['tau']:.2f} | " + " | ".join(row) + " |")


def _band_names(edges, unit: str) -> list[str]:
    names = [f"< {edges[0]:g}{unit}"]
    for lo, hi in zip(edges, edges[1:]):
        names.append(f"{lo:g}–{hi:g}{unit}" if unit else f"{lo:g}–{hi - 1:g}")
    names.append(f"≥ {edges[-1]:g}{unit}")
    return names


def constants(by_band, worst) -> str:
    """TAU_COVERAGE as Python: method → {(user band, bias band): (pooled coverage, lowest population's)},
    one line per method and user band."""
    lines = ["TAU_COVERAGE: dict[str, dict[tuple[int, int], tuple[float, float]]] = {"]
    for m in TAU_METHODS:
        lines.append(f'    "{m}": {{')
        for u in sorted({u for u, _ in by_band}):
            cells = [f"({u}, {b}): ({np.mean(v[m]):.3f}, {worst.get((u, b), {}).get(m, float(np.mean(v[m]))):.3f})"
                     for (uu, b), v in sorted(by_band.items()) if uu == u and len(v[m]) >= 50]
            if cells:
                lines.append("        " + ", ".join(cells) + ",")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ B: across experiments

def _plain_t(x: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return (x.mean() - half, x.mean() + half)


def _mean_z_t(x: np.ndarray, bounds) -> tuple[float, float]:
    lo, hi = bounds
    u = np.clip((2 * x - lo - hi) / (hi - lo), -1 + 1e-12, 1 - 1e-12)
    a, b = _plain_t(np.arctanh(u))
    back = lambda z: (lo + hi) / 2 + (hi - lo) / 2 * math.tanh(z)  # noqa: E731
    return (back(a), back(b))


def run_experiments(cells, reps: int, seed: int):
    """Section B: coverage of the mean of a distribution by intervals from N draws of it."""
    rng = np.random.default_rng([seed, 99])
    sources = []
    for c in cells:  # sample τ of each τ cell: the spread a τ has across repeated experiments
        sources.append((f"sample τ ({c['layout']}, pop. {c['target']:g}, {c['setting']}, n={c['n']})",
                        c["estimates"], (-1.0, 1.0)))
    for mean, sd in ((0.84, 0.11), (0.9, 0.08), (0.5, 0.2)):  # Beta-shaped τ in [−1, 1], the ablate example first
        values = _beta(rng, (mean + 1) / 2, sd / 2, 20_000) * 2 - 1
        sources.append((f"Beta τ mean {mean} sd {sd}", values, (-1.0, 1.0)))
    for mean, sd in ((0.5, 0.1), (0.9, 0.05), (0.97, 0.02), (0.05, 0.03)):
        sources.append((f"Beta share mean {mean} sd {sd}", _beta(rng, mean, sd, 20_000), (0.0, 1.0)))
    rows = []
    for n in (3, 5, 10):
        agg = defaultdict(lambda: defaultdict(list))
        for name, values, bounds in sources:
            truth = float(values.mean())
            group = "τ near 1 (mean ≥ 0.85)" if bounds[0] < 0 and truth >= 0.85 else (
                "τ, mean < 0.85" if bounds[0] < 0 else "shares")
            for _ in range(reps):
                x = rng.choice(values, n, replace=True)
                for method, (lo, hi) in (("plain t", _plain_t(x)), ("t on Fisher z (bounded_t)", bounded_t(x, bounds)),
                                         ("t on mean atanh", _mean_z_t(x, bounds))):
                    agg[group][method].append((lo <= truth <= hi, lo < bounds[0] or hi > bounds[1],
                                               lo - 1e-12 <= x.mean() <= hi + 1e-12))
        for group, by_method in agg.items():
            for method, v in by_method.items():
                a = np.array(v)
                rows.append((n, group, method, a[:, 0].mean(), a[:, 1].mean(), a[:, 2].mean(), len(a)))
    return rows


def _beta(rng, mean: float, sd: float, size: int) -> np.ndarray:
    k = mean * (1 - mean) / sd ** 2 - 1
    return rng.beta(mean * k, (1 - mean) * k, size)


def print_experiments(rows) -> None:
    print("\nB. Across N experiments (ablate): coverage of the mean, % outside the measure's range, "
          "% containing the mean of the N values\n")
    print("| N | values | interval | coverage | outside the range | contains the mean | draws |")
    print("|---|---|---|---|---|---|---|")
    for n, group, method, cov, out, cont, k in sorted(rows, key=lambda r: (r[1], r[0], r[2])):
        print(f"| {n} | {group} | {method} | {_pct(cov)} | {_pct(out)} | {_pct(cont)} | {k} |")


# ------------------------------------------------------------------------------ C: shares of pairs

def run_shares(reps: int, resamples: int, seed: int, users=USERS + (10,)):
    rng = np.random.default_rng([seed, 7])
    rows = []
    for mean, conc in ((0.5, 5.0), (0.85, 5.0), (0.97, 10.0), (0.2, 2.0)):
        pairs = rng.negative_binomial(2, 2 / (2 + 40), POPULATION)  # pairs per user: mean 40, heavy tail
        hits = rng.binomial(pairs, rng.beta(mean * conc, (1 - mean) * conc, POPULATION))
        truth = hits.sum() / pairs.sum()
        for n in sorted(users):
            res = defaultdict(list)
            for _ in range(reps):
                idx = rng.choice(POPULATION, n, replace=False)
                h, m = hits[idx].astype(float), pairs[idx].astype(float)
                if m.sum() == 0:
                    continue
                est = h.sum() / m.sum()
                # multinomial counts of n draws with replacement, drawn as indices (same law, faster)
                draws = rng.integers(0, n, (resamples, n)) + n * np.arange(resamples)[:, None]
                w = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)
                with np.errstate(invalid="ignore", divide="ignore"):
                    boot = (w @ h) / (w @ m)
                boot = boot[~np.isnan(boot)]
                keep = m > 0
                jk = (h.sum() - h[keep]) / (m.sum() - m[keep])
                for method, (lo, hi) in (("percentile", percentile(boot)),
                                         ("BCa", bias_corrected(boot, est, 0.95, jk[np.isfinite(jk)])),
                                         ("Wilson, linearised SE", share_interval(h, m)),
                                         ("Wilson, bootstrap SE", share_interval(h, m, replicates=boot))):
                    res[method].append((lo <= truth <= hi, lo - 1e-12 <= est <= hi + 1e-12))
            for method, v in res.items():
                a = np.array(v)
                rows.append((truth, n, method, a[:, 0].mean(), a[:, 1].mean()))
    return rows


def print_shares(rows) -> None:
    print("\nC. Shares of pairs pooled over users (agreement): coverage of the population share, "
          "% containing the estimate\n")
    methods = list(dict.fromkeys(r[2] for r in rows))
    print("| population share | users | " + " | ".join(methods) + " |")
    print("|---|---|" + "---|" * len(methods))
    table = {(round(t, 6), n, m): (c, k) for t, n, m, c, k in rows}
    for t, n in dict.fromkeys((round(r[0], 6), r[1]) for r in rows):
        print(f"| {t:.3f} | {n} | " + " | ".join(
            _pct(table[(t, n, m)][0])
            + ("" if table[(t, n, m)][1] == 1 else f" (contains {_pct(table[(t, n, m)][1])})")
            for m in methods) + " |")
    for m in methods:
        cov = np.array([r[3] for r in rows if r[2] == m])
        print(f"- {m}: mean |coverage − 95| {np.mean(np.abs(cov - NOMINAL)) * 100:.1f} points, "
              f"lowest {_pct(cov.min())}")


# ------------------------------------------------------------------------------ D: speed

def speed(resamples: int, seed: int) -> None:
    from scipy import stats

    rng = np.random.default_rng(seed)
    pop = Population("close", 0.9, rng, size=5_000)
    ref, cand = pop.sample(200, "shared", rng)

    def tau(idx):
        idx = np.asarray(idx, int)
        return stats.kendalltau(np.round(ref[idx].mean(0), 12), np.round(cand[idx].mean(0), 12)).statistic

    t0 = time.perf_counter()
    reps = kendall_tau_replicates(ref, cand, BootstrapWeights(seed, len(ref), resamples), jackknife=True)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    seed_kw = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"  # scipy < 1.15
    res = stats.bootstrap((np.arange(len(ref)),), tau, vectorized=False, n_resamples=resamples, method="BCa",
                          **{seed_kw: np.random.default_rng(seed)})
    theirs = time.perf_counter() - t0
    ours_bca = bias_corrected(reps.bootstrap, reps.estimate, 0.95, reps.jackknife)
    print(f"\nD. Speed, 200 users × {pop.n_systems} systems, {resamples} resamples + jackknife: recjudge "
          f"(kendall_tau_replicates) {ours:.2f} s; scipy.stats.bootstrap resampling user indices (BCa, "
          f"statistic called per resample) {theirs:.2f} s ({theirs / ours:.0f}×). Same kind of interval "
          f"from both: BCa {tuple(round(v, 3) for v in ours_bca)} "
          f"vs scipy {tuple(round(float(v), 3) for v in res.confidence_interval)}.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=500, help="replications per cell (default 500)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the whole simulation (default 0)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 replications, 200 resamples, a small grid")
    ap.add_argument("--constants", action="store_true", help="also print TAU_COVERAGE for intervals.py")
    args = ap.parse_args()
    reps, resamples = (20, 200) if args.quick else (args.reps, args.resamples)
    grid = dict(layouts=LAYOUTS, targets=(0.6, 0.9) if args.quick else TARGETS,
                users=(25, 200) if args.quick else USERS, settings=SETTINGS)
    t0 = time.perf_counter()
    print(f"τ coverage simulation: {reps} replications per cell, {resamples} resamples, seed {args.seed}")
    cells, by_band, worst = run_tau(reps, resamples, args.seed, log=lambda s: print(s, flush=True), **grid)
    print_tau(cells, by_band, worst, reps, resamples)
    print_compact(cells)
    print_experiments(run_experiments(cells, reps, args.seed))
    print_shares(run_shares(reps, resamples, args.seed, users=(10, 200) if args.quick else USERS + (10,)))
    speed(resamples, args.seed)
    if args.constants:
        print("\n" + constants(by_band, worst))
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
