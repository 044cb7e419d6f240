"""Coverage of the confidence intervals recjudge prints, by simulation where the truth is known.

    .venv/bin/python benchmarks/bench_tau_ci.py [--reps 500] [--resamples 1000] [--sections ABCDE] [--quick]

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
C. Shares of pairs pooled over users (``agreement``): a population of users with a heavy-tailed number
   of pairs (negative binomial, mean 40 or 400) and each their own agreement rate (Beta around a
   population share of 0.2–0.97), 5–200 users drawn: the Wilson interval that treats pairs as
   independent, percentile and BCa over a user bootstrap, Wilson at the effective number of pairs,
   a logit t-interval, and the Korn–Graubard interval (``share_interval``, shipped with the
   bootstrap SE) — coverage, containment, range. ``--share-constants`` prints the
   ``intervals.SHARE_COVERAGE`` table behind the coverage note ``agreement`` prints with few users.
D. Significance tests (``pairwise_tests``, ``significance_agreement``): per-user values of k systems
   with known latent effects on A's graded measure, all equal (5 and 10 systems) or three equal
   and three better by 0.1–0.5, 25–200 users; the family-wise error rate of the Holm-corrected
   sign-flip tests at α = 0.05, power by true difference, wrong-direction calls, and how a faithful
   candidate label set's decisions agree with the reference's.
E. Speed: the vectorised τ replicates against scipy.stats.bootstrap resampling user indices.

Prints the tables docs/statistics.md carries and, with ``--constants``, the coverage table by number of
users and bootstrap bias that ``recjudge.evaluation.intervals.TAU_COVERAGE`` holds.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
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
from recjudge.evaluation.metaeval import MEAN_DECIMALS, BootstrapWeights, kendall_tau_replicates
from recjudge.evaluation.metaeval.kendall import _tau_b_rows

NOMINAL = 0.95
POPULATION = 100_000
TARGETS = (0.6, 0.8, 0.9, 0.95)
USERS = (25, 50, 200, 1000)
LAYOUTS = ("separated", "close")
SETTINGS = ("shared", "own")
OWN_COMMON = 0.8  # share of each label set's users that the other also judges, under "own"
SHARE_DEFAULT = "Korn–Graubard, bootstrap SE (shipped)"  # share_interval as recjudge calls it


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
    """The default's coverage as docs/statistics.md carries it: a row per layout and population τ, a column
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

SHARE_USERS = (5, 10, 25, 50, 200)
PAIRS_PER_USER = (40, 400)  # mean pairs per user (negative binomial, r = 2: heavy-tailed)
SHARES = ((0.5, 5.0), (0.85, 5.0), (0.9, 20.0), (0.97, 10.0), (0.2, 2.0))  # (mean, concentration) of users' rates


def _wilson(p: float, n: float, c: float) -> tuple[float, float]:
    den = 1 + c * c / n
    centre = (p + c * c / (2 * n)) / den
    half = c * math.sqrt(p * (1 - p) / n + c * c / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))


def _naive_wilson(h: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """Wilson over every pair as if independent: what an interval that ignores users gives."""
    return _wilson(h.sum() / m.sum(), m.sum(), 1.959963984540054)


def _linearised_se(h: np.ndarray, m: np.ndarray) -> float:
    p, users = h.sum() / m.sum(), int(np.count_nonzero(m))
    return math.sqrt(users / (users - 1) * float(np.sum((h - p * m) ** 2))) / m.sum()


def _wilson_effective(h: np.ndarray, m: np.ndarray, se: float) -> tuple[float, float]:
    """Wilson at n_eff = p(1 − p)/SE² (capped at the pairs), t quantile on users − 1 df."""
    from scipy import stats

    p, users = h.sum() / m.sum(), int(np.count_nonzero(m))
    n_eff = min(m.sum(), p * (1 - p) / se ** 2) if se > 0 and 0 < p < 1 else m.sum()
    return _wilson(p, n_eff, float(stats.t.ppf(0.975, users - 1)))


def _logit_t(h: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """t-interval (users − 1 df) on the logit scale, delta-method linearised SE."""
    from scipy import stats

    p, users = h.sum() / m.sum(), int(np.count_nonzero(m))
    if not 0 < p < 1:
        return (p, p)
    half = float(stats.t.ppf(0.975, users - 1)) * _linearised_se(h, m) / (p * (1 - p))
    g = math.log(p / (1 - p))
    return (1 / (1 + math.exp(-(g - half))), 1 / (1 + math.exp(-(g + half))))


def share_population(mean: float, conc: float, pairs_mean: float, rng: np.random.Generator,
                     size: int = POPULATION) -> tuple[np.ndarray, np.ndarray]:
    """(hits, pairs) per user of a population: heavy-tailed pairs per user (negative binomial, r = 2),
    each user's own agreement rate drawn from a Beta of that mean and concentration (the within-user
    correlation that makes pairs of one user a cluster)."""
    pairs = rng.negative_binomial(2, 2 / (2 + pairs_mean), size)
    hits = rng.binomial(pairs, rng.beta(mean * conc, (1 - mean) * conc, size))
    return hits, pairs


def run_shares(reps: int, resamples: int, seed: int, users=SHARE_USERS, pairs_per_user=PAIRS_PER_USER,
               shares=SHARES):
    """Section C: per (pairs per user, population share, users), each interval's coverage of the
    population share and whether it contains the estimate and stays in [0, 1]."""
    rows = []
    for pi, pm in enumerate(pairs_per_user):
        for si, (mean, conc) in enumerate(shares):
            rng = np.random.default_rng([seed, 7, pi, si])
            hits, pairs = share_population(mean, conc, pm, rng)
            truth = hits.sum() / pairs.sum()
            for n in sorted(users):
                res = defaultdict(list)
                for _ in range(reps):
                    idx = rng.choice(POPULATION, n, replace=False)
                    h, m = hits[idx].astype(float), pairs[idx].astype(float)
                    if np.count_nonzero(m) < 2:
                        continue  # recjudge gives no interval from fewer than two users with pairs
                    est = h.sum() / m.sum()
                    # multinomial counts of n draws with replacement, drawn as indices (same law, faster)
                    draws = rng.integers(0, n, (resamples, n)) + n * np.arange(resamples)[:, None]
                    w = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n).astype(float)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        boot = (w @ h) / (w @ m)
                    boot = boot[~np.isnan(boot)]
                    keep = m > 0
                    jk = (h.sum() - h[keep]) / (m.sum() - m[keep])
                    for method, (lo, hi) in (
                            ("Wilson, pairs independent", _naive_wilson(h, m)),
                            ("percentile", percentile(boot)),
                            ("BCa", bias_corrected(boot, est, 0.95, jk[np.isfinite(jk)])),
                            ("Wilson at n_eff, bootstrap SE", _wilson_effective(h, m, _sd(boot))),
                            ("Wilson at n_eff, linearised SE", _wilson_effective(h, m, _linearised_se(h, m))),
                            ("logit t, linearised SE", _logit_t(h, m)),
                            ("Korn–Graubard, linearised SE", share_interval(h, m)),
                            (SHARE_DEFAULT, share_interval(h, m, replicates=boot))):
                        res[method].append((lo <= truth <= hi, lo - 1e-12 <= est <= hi + 1e-12,
                                            lo >= 0 and hi <= 1, hi - lo))
                for method, v in res.items():
                    a = np.array(v)
                    rows.append({"pairs": pm, "truth": truth, "n": n, "method": method, "coverage": a[:, 0].mean(),
                                 "contains": a[:, 1].mean(), "in_range": a[:, 2].mean(), "width": a[:, 3].mean(),
                                 "reps": len(a)})
    return rows


def _sd(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def share_coverage(rows, method: str = None) -> dict[int, tuple[float, float]]:
    """users → (coverage pooled over the simulated populations, lowest population's) of ``method``."""
    method = method or SHARE_DEFAULT
    out = {}
    for n in sorted({r["n"] for r in rows}):
        cov = [r["coverage"] for r in rows if r["n"] == n and r["method"] == method]
        out[n] = (float(np.mean(cov)), float(np.min(cov)))
    return out


def print_shares(rows, reps: int, resamples: int) -> None:
    print(f"\nC. Shares of pairs pooled over users (agreement): coverage of the population share, % of {reps} "
          f"replications ({resamples} user-bootstrap resamples each; nominal 95%). Population of "
          f"{POPULATION:,} users, pairs per user negative binomial (r = 2) with the mean shown, each user's "
          "agreement rate Beta-distributed around the population share (pairs of one user are a cluster)\n")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    print("| pairs per user (mean) | population share | users | " + " | ".join(methods) + " |")
    print("|---|---|---|" + "---|" * len(methods))
    table = {(r["pairs"], round(r["truth"], 6), r["n"], r["method"]): r for r in rows}
    for pm, t, n in dict.fromkeys((r["pairs"], round(r["truth"], 6), r["n"]) for r in rows):
        cells = []
        for m in methods:
            r = table[(pm, t, n, m)]
            cells.append(_pct(r["coverage"]) + ("" if r["contains"] == 1 else f" (contains {_pct(r['contains'])})"))
        print(f"| {pm} | {t:.3f} | {n} | " + " | ".join(cells) + " |")
    print("\nBy number of users, pooled over the populations (lowest population in brackets), % covering\n")
    users = sorted({r["n"] for r in rows})
    print("| interval | " + " | ".join(f"{n} users" for n in users)
          + " | mean abs. deviation from 95 | always in [0, 1] | always contains the share |")
    print("|---|" + "---|" * len(users) + "---|---|---|")
    for m in methods:
        cov = share_coverage(rows, m)
        mine = [r for r in rows if r["method"] == m]
        dev = np.mean([abs(r["coverage"] - NOMINAL) for r in mine]) * 100
        print(f"| {m} | " + " | ".join(f"{_pct(cov[n][0])} ({_pct(cov[n][1])})" for n in users)
              + f" | {dev:.1f} | {'yes' if min(r['in_range'] for r in mine) == 1 else 'no'} | "
              f"{'yes' if min(r['contains'] for r in mine) == 1 else 'no'} |")


def share_constants(rows) -> str:
    cov = share_coverage(rows)
    body = ", ".join(f"{n}: ({c:.3f}, {lo:.3f})" for n, (c, lo) in cov.items())
    return f"SHARE_COVERAGE: dict[int, tuple[float, float]] = {{{body}}}"


# ------------------------------------------------------------------------------ D: significance tests

SIG_USERS = (25, 50, 200)
ALPHA = 0.05
# latent system effects (in the units of the per-user noise SD of A's populations, 0.6 per system):
# all-null families of 5 and 10 systems, and a mixed family of 6: three equal, three better by 0.1–0.5
SIG_SCENARIOS = (("all null, 5 systems", (0.0,) * 5), ("all null, 10 systems", (0.0,) * 10),
                 ("mixed, 6 systems", (0.0, 0.0, 0.0, 0.1, 0.25, 0.5)))


class SigPopulation:
    """Per-user measure values of k systems under a reference and a candidate label set, drawn fresh
    each time (an infinite population): latent = system effect + user effect + user × system noise,
    the graded measure of section A (0.1 lattice, mass at 0: ties and zero differences). The
    candidate sees the same users and system effects, its noise correlated with the reference's
    (noise_corr) plus a per-user shift of its own: a faithful judge whose labels are noisy."""

    def __init__(self, effects, user_sd: float = 1.2, noise_sd: float = 0.6, noise_corr: float = 0.6,
                 shift_sd: float = 0.4):
        self.effects = np.asarray(effects, float)
        self.user_sd, self.noise_sd, self.noise_corr, self.shift_sd = user_sd, noise_sd, noise_corr, shift_sd

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        k = len(self.effects)
        user = self.user_sd * rng.standard_normal((n, 1))
        e_ref, e_own = rng.standard_normal((n, k)), rng.standard_normal((n, k))
        ref = _measure(self.effects + user + self.noise_sd * e_ref)
        cand = _measure(self.effects + user + self.shift_sd * rng.standard_normal((n, 1)) + self.noise_sd * (
            self.noise_corr * e_ref + math.sqrt(1 - self.noise_corr ** 2) * e_own))
        return ref.astype(np.float64), cand.astype(np.float64)

    def true_differences(self, rng: np.random.Generator, size: int = 400_000) -> tuple[np.ndarray, np.ndarray]:
        """(mean, standardised mean = mean / SD) of each system pair's per-user reference difference,
        over ``size`` users: exactly 0 for equal effects (the per-user difference is symmetric)."""
        ref, _ = self.sample(size, rng)
        i, j = np.array(list(itertools.combinations(range(len(self.effects)), 2))).T
        d = ref[:, i] - ref[:, j]
        return d.mean(0), d.mean(0) / d.std(0)


def run_significance(reps: int, permutations: int, seed: int, users=SIG_USERS, scenarios=SIG_SCENARIOS):
    """Section D: recjudge's pairwise sign-flip tests, Holm at ALPHA, over replications where the true
    system effects are known: family-wise error (any equal pair called significant), power per true
    difference, wrong-direction calls, and the candidate's decision agreement with the reference."""
    import pandas as pd

    from recjudge.evaluation.significance import pairwise_tests, significance_agreement

    rows = []
    for ci, (name, effects) in enumerate(scenarios):
        pop = SigPopulation(effects)
        pairs = list(itertools.combinations(range(len(effects)), 2))
        latent = np.array([effects[j] - effects[i] for i, j in pairs])  # b − a: pairs are (a, b), a < b
        _, std_diff = pop.true_differences(np.random.default_rng([seed, 11, ci]))
        names = [f"s{i:02d}" for i in range(len(effects))]
        for n in users:
            rng = np.random.default_rng([seed, 11, ci, n])
            any_false, wrong_dir, power = [], [], defaultdict(list)
            agree, fp, fn, perms = [], [], [], set()
            t0 = time.perf_counter()
            for r in range(reps):
                ref, cand = pop.sample(n, rng)
                tests = pairwise_tests(pd.DataFrame(ref, columns=names), "reference", "m", ALPHA, permutations,
                                       seed=int(rng.integers(2 ** 31)))
                perms.add(tests.permutations)
                dec = np.array([t.decision for t in tests.tests])  # +1: a better, −1: b better
                null = latent == 0
                any_false.append(bool((dec[null] != 0).any()))
                # a real difference called in the wrong direction (b is the better system: decision +1)
                wrong_dir.append(bool((dec[~null] == 1).any()))
                for d in sorted(set(latent[~null])):
                    power[d].extend((dec[latent == d] == -1).tolist())
                cand_tests = pairwise_tests(pd.DataFrame(cand, columns=names), "candidate", "m", ALPHA, permutations,
                                            seed=int(rng.integers(2 ** 31)))
                sa = significance_agreement(tests, cand_tests)
                agree.append(sa.agreement)
                fp.append(sa.false_positive_rate)
                fn.append(sa.false_negative_rate)
            rows.append({"scenario": name, "systems": len(effects), "pairs": len(pairs), "n": n, "reps": reps,
                         "permutations": sorted(perms), "fwer": float(np.mean(any_false)),
                         "wrong_direction": float(np.mean(wrong_dir)),
                         "power": {d: (float(np.mean(v)), float(np.mean(np.abs(std_diff[latent == d]))),
                                       int((latent == d).sum())) for d, v in power.items()},
                         "agreement": float(np.mean(agree)), "fp_rate": float(np.nanmean(fp)),
                         "fn_rate": float(np.nanmean(fn)) if not np.isnan(fn).all() else math.nan,
                         "seconds": time.perf_counter() - t0})
    return rows


def print_significance(rows, permutations: int) -> None:
    reps = rows[0]["reps"] if rows else 0
    used = sorted({p for r in rows for p in r["permutations"]})
    print(f"\nD. Significance tests (pairwise_tests: paired sign-flip test per system pair over users, Holm "
          f"over the pairs, α = {ALPHA:g}), {reps} replications per row. Per-user values of each system on "
          "section A's graded measure (0.1 lattice, zeros; user effect SD 1.2, user × system noise SD 0.6 "
          "on the latent scale), users drawn fresh each replication; true system effects known. "
          f"Sign flips per pair: {', '.join(f'{p:,}' for p in used)} ({permutations:,} requested; "
          "recjudge draws at least 10·pairs/α). Family-wise error: share of replications calling any pair "
          "of equal systems significant (Holm keeps it ≤ α). Power: share of pairs with that true latent "
          "difference called significant in the right direction (the standardised per-user effect, "
          "mean / SD of the difference, in brackets). Wrong direction: replications calling any unequal "
          "pair significant the wrong way round.\n")
    print("| systems (pairs) | users | family-wise error | wrong direction | power by latent difference |")
    print("|---|---|---|---|---|")
    for r in rows:
        power = "; ".join(f"{d:g} ({s:.2f}): {_pct(p)}" for d, (p, s, k) in sorted(r["power"].items())) or "–"
        print(f"| {r['scenario']} ({r['pairs']}) | {r['n']} | {_pct(r['fwer'])} | "
              f"{_pct(r['wrong_direction']) if r['power'] else '–'} | {power} |")
    print("\nDecision agreement of a faithful candidate (same users and system effects, noise correlated 0.6 "
          "with the reference's, its own per-user shift) with the reference (significance_agreement): share of "
          "pairs with the same decision, and its false positive / false negative rates against the reference\n")
    print("| systems (pairs) | users | agreement | false positive rate | false negative rate |")
    print("|---|---|---|---|---|")
    for r in rows:
        fn = _pct(r["fn_rate"]) if r["power"] else "– (every reference call is a false one)"
        print(f"| {r['scenario']} ({r['pairs']}) | {r['n']} | {_pct(r['agreement'])} | {_pct(r['fp_rate'])} | {fn} |")
    print("\nThe rates are against the reference's decisions, not the truth: with real differences the "
          "reference's own misses (power below 100%) count as the candidate's false positives.")


# ------------------------------------------------------------------------------ E: speed

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
    print(f"\nE. Speed, 200 users × {pop.n_systems} systems, {resamples} resamples + jackknife: recjudge "
          f"(kendall_tau_replicates) {ours:.2f} s; scipy.stats.bootstrap resampling user indices (BCa, "
          f"statistic called per resample) {theirs:.2f} s ({theirs / ours:.0f}×). Same kind of interval "
          f"from both: BCa {tuple(round(v, 3) for v in ours_bca)} "
          f"vs scipy {tuple(round(float(v), 3) for v in res.confidence_interval)}.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=500, help="replications per cell (default 500)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval (default 1000)")
    ap.add_argument("--permutations", type=int, default=10_000,
                    help="sign flips per system pair in section D, as recjudge's default (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the whole simulation (default 0)")
    ap.add_argument("--sections", default="ABCDE",
                    help="which sections to run, e.g. CD (default ABCDE; B needs A's sample τ)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 replications, 200 resamples, a small grid")
    ap.add_argument("--constants", action="store_true", help="also print TAU_COVERAGE for intervals.py")
    ap.add_argument("--share-constants", action="store_true", help="also print SHARE_COVERAGE for intervals.py")
    args = ap.parse_args()
    reps, resamples = (20, 200) if args.quick else (args.reps, args.resamples)
    sections = set(args.sections.upper())
    grid = dict(layouts=LAYOUTS, targets=(0.6, 0.9) if args.quick else TARGETS,
                users=(25, 200) if args.quick else USERS, settings=SETTINGS)
    t0 = time.perf_counter()
    print(f"Coverage simulation: {reps} replications per cell, {resamples} resamples, seed {args.seed}, "
          f"sections {''.join(sorted(sections))}")
    if sections & {"A", "B"}:
        cells, by_band, worst = run_tau(reps, resamples, args.seed, log=lambda s: print(s, flush=True), **grid)
        if "A" in sections:
            print_tau(cells, by_band, worst, reps, resamples)
            print_compact(cells)
        if "B" in sections:
            print_experiments(run_experiments(cells, reps, args.seed))
    if "C" in sections:
        rows = run_shares(reps, resamples, args.seed, users=(10, 200) if args.quick else SHARE_USERS)
        print_shares(rows, reps, resamples)
        if args.share_constants:
            print("\n" + share_constants(rows))
    if "D" in sections:
        print_significance(run_significance(reps, args.permutations, args.seed,
                                            users=(25,) if args.quick else SIG_USERS), args.permutations)
    if "E" in sections:
        speed(resamples, args.seed)
    if args.constants and sections & {"A", "B"}:
        print("\n" + constants(by_band, worst))
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
