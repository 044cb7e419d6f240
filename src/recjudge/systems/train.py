"""Train a grid of systems on a split and export tie-free top-k runs, with a cache.

For each configuration: train (RecBole, or our Pop/Random), score every catalogue item for every
test user, mask the user's own history (train + validation), keep the top-k *and every item tied
with the k-th*, measure tie prevalence, order by the tie policy, cut to k and write
``<out_dir>/<system>.run`` with rank-derived scores. A sidecar ``<system>.json`` records the
cache key — a hash of (collection, split contents, configuration, k, tie policy) —, the SHA-256
of the run file as written, and provenance; a later call with the same key skips the system only
while the run file still has that hash (an edited, truncated or replaced run is retrained). A
failing system is reported and the rest continue.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from .._io import write_json
from ..outputs import output_set
from ..data.collections import Collection
from ..data.splits import Split
from ..data.trec import TIE_POLICIES, Run, write_run
from ..evaluation.ties.policy import resolve_ties, tied_user_share
from ..errors import ConfigError, MissingExtraError
from ..progress import meter
from .registry import SystemConfig, resolve_systems

__all__ = ["TrainResult", "train_systems", "export_run", "split_fingerprint", "cache_key"]

log = logging.getLogger("recjudge.systems")
SCORE_BATCH_USERS = 256


@dataclass(frozen=True)
class TrainResult:
    """What happened to one system. ``status``: trained, cached or failed (then ``error`` says why)."""

    system: str
    model: str
    status: str
    run_path: Path | None
    key: str
    seconds: float = 0.0
    train_seconds: float = 0.0
    users: int = 0
    tied_user_share: float | None = None
    recbole_test: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def _frame_digest(frame: pd.DataFrame | None) -> str:
    if frame is None:
        return "none"
    cols = frame[["user", "item", "rating", "timestamp"]].reset_index(drop=True)
    return hashlib.sha256(pd.util.hash_pandas_object(cols, index=False).to_numpy().tobytes()).hexdigest()


def split_fingerprint(split: Split) -> str:
    """A digest of the split's contents (not just its parameters): same data, same fingerprint."""
    parts = {"collection": split.collection.name, "train": _frame_digest(split.train),
             "valid": _frame_digest(split.valid), "test": _frame_digest(split.test)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _library_versions(config: SystemConfig) -> dict | None:
    if config.family.kind == "native":
        return None
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("recbole", "torch"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def cache_key(fingerprint: str, config: SystemConfig, k: int, tie_policy: str, tie_seed: int,
              epochs_override: int | None, threads: int | None = 1, device: str = "cpu") -> str:
    # thread count and device change floating-point reduction order, hence possibly the model;
    # library versions and our export format change the output too
    neural = config.family.kind != "native"
    blob = json.dumps({"split": fingerprint, "system": json.loads(config.key()), "k": k, "tie_policy": tie_policy,
                       "tie_seed": tie_seed, "epochs_override": epochs_override,
                       "threads": threads if neural else None, "device": device if neural else None,
                       "libraries": _library_versions(config), "format": 2},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def export_run(model, users: list[str], history: pd.DataFrame, k: int, name: str, tie_policy: str = "hash",
               tie_seed: int = 0, batch_users: int = SCORE_BATCH_USERS) -> tuple[Run, float]:
    """Top-``k`` run of ``model`` (``.items``, ``.score(users)``) for ``users``, history masked.

    Returns the tie-free run and the share of users whose top-k held tied scores before the tie
    policy ordered them (ties that straddle position k count: they decide who enters the list).
    """
    run, share, _ = _export(model, users, history, k, name, tie_policy, tie_seed, batch_users)
    return run, share


def _export(model, users, history, k, name, tie_policy, tie_seed, batch_users=SCORE_BATCH_USERS):
    """export_run's work, also returning the ranking before the tie policy (the model's own scores,
    every item tied with the k-th kept, equal scores in item-id order)."""
    items = np.asarray(model.items, dtype=object)
    col_of = pd.Series(np.arange(len(items)), index=pd.Index(items.astype(str)))
    hist = history[history.user.isin(set(users))]
    hist_cols = col_of.reindex(hist.item.to_numpy()).to_numpy()
    known = ~np.isnan(hist_cols)
    hist_users = hist.user.to_numpy()[known]
    hist_cols = hist_cols[known].astype(np.int64)
    by_user = pd.Series(hist_cols).groupby(hist_users).agg(list).to_dict() if len(hist_cols) else {}
    qids, docs, scores = [], [], []
    for start in range(0, len(users), batch_users):
        batch = users[start:start + batch_users]
        s = np.array(model.score(batch), dtype=np.float64)  # float32 scores convert exactly
        if s.shape != (len(batch), len(items)):
            raise RuntimeError(f"{name}: scorer returned shape {s.shape}, expected {(len(batch), len(items))}")
        for row, user in enumerate(batch):
            cols = by_user.get(user)
            if cols:
                s[row, cols] = -np.inf
        if np.isnan(s).any():
            raise RuntimeError(f"{name}: the model produced NaN scores for "
                               f"{int(np.isnan(s).any(axis=1).sum())} users (diverged training?)")
        kk = min(k, s.shape[1])
        kth = -np.partition(-s, kk - 1, axis=1)[:, kk - 1]
        keep = (s >= kth[:, None]) & np.isfinite(s)
        r, c = np.nonzero(keep)
        qids.append(np.asarray(batch, dtype=object)[r])
        docs.append(items[c])
        scores.append(s[r, c])
    if not qids or sum(len(q) for q in qids) == 0:
        raise RuntimeError(f"{name}: no user has an unseen item to recommend")
    raw = Run.from_frame(pd.DataFrame({"qid": np.concatenate(qids), "docid": np.concatenate(docs),
                                       "score": np.concatenate(scores)}), name=name, tag=name)
    share = tied_user_share(raw, k)
    return resolve_ties(raw, tie_policy, tie_seed, depth=k), share, raw


def _in_score_order(run: Run) -> Run:
    """Each user's rows by descending score, equal scores in the order they came (item id), ranked 1…n."""
    f = run.frame.copy()
    f["neg"] = -f.score
    f = f.sort_values(["qid", "neg"], kind="stable").drop(columns=["neg", "rank"])
    return Run.from_frame(f, name=run.name, tag=run.name)


def _as_split(collection_or_split: Collection | Split, split: str, split_options: dict | None) -> Split:
    if isinstance(collection_or_split, Split):
        if split_options:
            raise ConfigError("split options given together with a ready Split")
        return collection_or_split
    from ..data.splits import make_split

    return make_split(collection_or_split, split, **(split_options or {}))


def _read_sidecar(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def file_sha256(path: Path) -> str | None:
    """SHA-256 of a file's bytes, or None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _cached(meta: dict | None, key: str, run_path: Path) -> str | None:
    """Why the cache cannot be used (None: it can). The run must be the very file we wrote."""
    if not meta or meta.get("key") != key:
        return "not trained with these settings"
    if not run_path.is_file():
        return "run file missing"
    want = meta.get("run_sha256")
    if not isinstance(want, str):
        return "the sidecar has no hash of the run file"
    if file_sha256(run_path) != want:
        return "the run file changed since it was written"
    return None


def _say_judged(sp: Split, say: Callable[[str], None]) -> None:
    """Judged users the training data leaves thin or out are named before any training, never silently:
    a user a run does not rank scores 0 in every measure."""
    kept = (sp.collection.info.get("min_interactions") or {}).get("judged_kept_below_n") or []
    if kept:
        n = sp.collection.info["min_interactions"]["n"]
        say(f"kept {len(kept)} judged user(s) with fewer than {n} ratings after the --min-interactions filter "
            f"(judged users are never filtered out): {', '.join(kept[:10])}{' …' if len(kept) > 10 else ''}")
    unranked = sp.info.get("unranked_judged") or []
    if unranked:
        total = sp.info.get("unranked_judged_users", len(unranked))
        say(f"{total} judged user(s) have no rating in the collection, so no system ranks them (they score 0 "
            f"in every measure): {', '.join(unranked[:10])}{' …' if total > 10 else ''}")


def train_systems(collection_or_split: Collection | Split, grid: str = "quick", out_dir: str | Path | None = None,
                  k: int = 100, device: str = "cpu", systems: Iterable[str | SystemConfig] | None = None, *,
                  split: str = "global_time", split_options: dict | None = None, tie_policy: str = "hash",
                  tie_seed: int = 0, epochs: int | None = None, force: bool = False,
                  evaluate: bool = False, keep_checkpoints: bool = False, verbose: bool = False,
                  threads: int | None = 1, progress: Callable[[str], None] | None = None,
                  protocol=None, raw_dir: str | Path | None = None) -> list[TrainResult]:
    """Train systems and write ``<out_dir>/<system>.run`` (default ``runs/<collection>``).

    ``raw_dir``: also write each system's ranking before the tie policy to ``<raw_dir>/<system>.run``
    (its own scores, ties kept: what a tie audit of the systems reads); a cached system whose raw
    ranking is missing there or changed is trained again.

    ``protocol``: the protocol the training follows (a ProtocolUse), named in every run's sidecar.

    - ``grid``: ``quick``, ``all18``, ``paper52`` (ignored when ``systems`` names systems or
      passes :class:`SystemConfig` objects).
    - ``split``/``split_options``: how to split a Collection (default global time split, 0.8).
    - ``epochs``: override every neural configuration's epochs (RaCT: each stage) — the reduced
      setting for quick checks; it is part of the cache key.
    - ``evaluate``: also record RecBole's own test NDCG@10/Recall@10 (``recbole_test``).
    - ``force``: retrain even when the cache holds the system.
    - ``threads``: torch intra-op threads (default 1; small models lose nothing and avoid the
      slowdown of oversubscribed cores; part of the cache key). None leaves torch's default.
    """
    _check_options(tie_policy, k, epochs, threads)
    sp = _as_split(collection_or_split, split, split_options)
    configs = resolve_systems(grid, systems)
    if device != "cpu" and any(c.family.kind != "native" for c in configs):
        from . import _recbole

        _recbole._device_options(device)  # an unusable device is one clear error up front, not N failures
    out = Path(out_dir) if out_dir is not None else Path("runs") / sp.collection.name
    out.mkdir(parents=True, exist_ok=True)
    say = progress or log.info
    job = _Training(sp, out, k, device, tie_policy, tie_seed, epochs, force, evaluate, keep_checkpoints, verbose,
                    threads, protocol, Path(raw_dir) if raw_dir is not None else None, say)
    _say_judged(sp, say)
    results: list[TrainResult] = []
    # a bar on a terminal only: the lines below already say how far the grid is
    with meter(progress, "train", len(configs), "systems", every=None) as bar:
        for n, cfg in enumerate(configs, start=1):
            results.append(job.one(f"[{n}/{len(configs)}] {cfg.name}", cfg))
            bar.update(n, Counter(r.status for r in results))
    work_root = out / ".work"
    if work_root.exists() and not any(work_root.iterdir()):
        work_root.rmdir()
    return results


def _check_options(tie_policy: str, k: int, epochs: int | None, threads: int | None) -> None:
    if tie_policy not in TIE_POLICIES:
        raise ConfigError(f"unknown tie policy {tie_policy!r}; choose one of {', '.join(TIE_POLICIES)}")
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    if epochs is not None and epochs < 1:
        raise ConfigError(f"epochs must be at least 1, got {epochs}")
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be at least 1, got {threads}")


@dataclass
class _Training:
    """One grid's training: what every system shares, and :meth:`one` for each system."""

    sp: Split
    out: Path
    k: int
    device: str
    tie_policy: str
    tie_seed: int
    epochs: int | None
    force: bool
    evaluate: bool
    keep_checkpoints: bool
    verbose: bool
    threads: int | None
    protocol: object
    raw_dir: Path | None
    say: Callable[[str], None]
    recbole_ready: bool = False

    def __post_init__(self):
        self.fingerprint = split_fingerprint(self.sp)
        self.users = self.sp.test_users
        self.history = self.sp.history()

    def one(self, head: str, cfg: SystemConfig) -> TrainResult:
        """``cfg`` from the cache when it holds it, else trained and written (a failure is a result)."""
        key = cache_key(self.fingerprint, cfg, self.k, self.tie_policy, self.tie_seed, self.epochs, self.threads,
                        self.device)
        run_path, meta_path = self.out / f"{cfg.name}.run", self.out / f"{cfg.name}.json"
        meta = _read_sidecar(meta_path) if not self.force else None
        # native systems have no RecBole evaluation to wait for
        evaluated = not self.evaluate or cfg.family.kind == "native" or meta and meta.get("recbole_test")
        why_not = _cached(meta, key, run_path)
        raw_path = self.raw_dir / f"{cfg.name}.run" if self.raw_dir is not None else None
        if why_not is None and raw_path is not None and (
                not meta.get("raw_sha256") or file_sha256(raw_path) != meta.get("raw_sha256")):
            why_not = "no ranking before the tie policy in " + str(self.raw_dir)
        if why_not is None and evaluated:
            self.say(f"{head}: cached ({run_path})")
            return TrainResult(cfg.name, cfg.model, "cached", run_path, key, 0.0,
                               float(meta.get("train_seconds", 0.0)), int(meta.get("users", 0)),
                               meta.get("tied_user_share"), meta.get("recbole_test"))
        if cfg.family.kind != "native" and not self.recbole_ready:
            from ._compat import import_recbole

            import_recbole()  # once, outside the timer: a system's time should not include importing torch
            self.recbole_ready = True
        # a run from another key must not survive a failed retrain and be read as this one's
        for stale in (run_path, meta_path):
            stale.unlink(missing_ok=True)
        reason = "" if meta is None else f" ({why_not or 'RecBole evaluation asked for'}; retraining)"
        self.say(f"{head}: training {cfg.model}{reason}")
        return self._train(head, cfg, key, run_path, meta_path, raw_path)

    def _train(self, head: str, cfg: SystemConfig, key: str, run_path: Path, meta_path: Path,
               raw_path: Path | None) -> TrainResult:
        t0 = time.perf_counter()
        workdir = self.out / ".work" / f"{cfg.name}-{key[:12]}"
        try:
            if cfg.family.kind == "native":
                from . import baselines

                model = baselines.train(cfg, self.sp)
            else:
                from . import _recbole

                if workdir.exists():
                    shutil.rmtree(workdir)
                model = _recbole.train(cfg, self.sp, workdir, device=self.device, epochs_override=self.epochs,
                                       evaluate=self.evaluate, verbose=self.verbose, threads=self.threads)
            t_train = time.perf_counter() - t0
            record, seconds = self._write(cfg, model, key, run_path, meta_path, raw_path, t0, t_train)
            share = record["tied_user_share"]
            self.say(f"{head}: done in {seconds:.1f} s, {record['users']} users, "
                     f"ties before policy in {share:.0%} of top-{self.k} lists")
            return TrainResult(cfg.name, cfg.model, "trained", run_path, key, seconds, t_train, record["users"], share,
                               model.recbole_test)
        except (MissingExtraError, KeyboardInterrupt):
            raise
        except Exception as exc:  # one failing system must not stop the rest
            seconds = time.perf_counter() - t0
            message = f"{type(exc).__name__}: {exc}"
            self.say(f"{head}: FAILED after {seconds:.1f} s — {message}")
            log.debug("%s", traceback.format_exc())
            return TrainResult(cfg.name, cfg.model, "failed", None, key, seconds, error=message)
        finally:
            if not self.keep_checkpoints and workdir.exists():
                shutil.rmtree(workdir, ignore_errors=True)

    def _write(self, cfg: SystemConfig, model, key: str, run_path: Path, meta_path: Path, raw_path: Path | None,
               t0: float, t_train: float) -> tuple[dict, float]:
        """Export ``model``'s run and write it, its raw ranking and its sidecar as one set: the sidecar, and
        the seconds since ``t0``."""
        sp, k = self.sp, self.k
        run, share, raw = _export(model, self.users, self.history, k, cfg.name, self.tie_policy, self.tie_seed)
        # the run, its raw ranking and its sidecar replace the old ones together: a sidecar never
        # vouches for another run, and a killed training keeps the systems done before it
        with output_set() as staged:
            write_run(run, run_path)
            run_hash = file_sha256(staged.content(run_path))
            if raw_path is not None:
                raw_path.parent.mkdir(parents=True, exist_ok=True)
                write_run(_in_score_order(raw), raw_path)
            seconds = time.perf_counter() - t0
            record = {
                "key": key, "system": cfg.name, "model": cfg.model, "params": cfg.param_dict, "seed": cfg.seed,
                "group": cfg.group,
                "k": k, "tie_policy": self.tie_policy, "tie_seed": self.tie_seed, "epochs_override": self.epochs,
                "threads": self.threads,
                "device": self.device, "collection": sp.collection.name, "split": dict(sp.info),
                "collection_filters": {k: sp.collection.info[k] for k in ("sample_users", "min_interactions")
                                       if k in sp.collection.info},
                "split_fingerprint": self.fingerprint, "run_sha256": run_hash, "users": int(run.frame.qid.nunique()),
                **({"raw_sha256": file_sha256(staged.content(raw_path))} if raw_path is not None else {}),
                "catalogue_items": int(len(model.items)), "tied_user_share": share,
                "train_seconds": round(t_train, 3), "seconds": round(seconds, 3),
                "recbole_test": model.recbole_test,
            }
            if self.protocol is not None:
                record["protocol"] = self.protocol.as_dict()
            write_json(meta_path, record)
        return record, seconds


def results_table(results: list[TrainResult]) -> str:
    """A plain-text table of results for the CLI."""
    from tabulate import tabulate

    # the header goes in as a row: tabulate would pad a header by two more spaces
    rows = [("system", "model", "status", "seconds", "users", "tied@k", "note")]
    for r in results:
        rows.append((r.system, r.model, r.status, f"{r.seconds:.1f}", str(r.users or ""),
                     "" if r.tied_user_share is None else f"{r.tied_user_share:.0%}",
                     r.error or (str(r.run_path) if r.run_path else "")))
    text = tabulate(rows, tablefmt="plain", stralign="left", disable_numparse=True, preserve_whitespace=True)
    return "\n".join(line.rstrip() for line in text.splitlines())  # the last column unpadded


__all__ += ["results_table"]
