"""``recjudge train``: train a grid of recommender systems and write tie-free TREC runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# beyond these a typo, not a plan: torch would spawn the threads, training would never end
MAX_THREADS = 1024
MAX_EPOCHS = 100_000


def register(subparsers) -> None:
    from ..data.collections import COLLECTIONS
    from ..data.splits import SPLITS
    from ..data.trec import TIE_POLICIES
    from ..systems import GRIDS, SYSTEMS
    from ._args import MAX_SEED, float_range, int_range, positive, seed

    p = subparsers.add_parser(
        "train",
        help="train recommender systems (RecBole) and write top-k runs",
        description="Train a grid of systems on a collection's training split and write "
                    "<out>/<system>.run (tie-free, history masked). Trained systems are cached by a hash "
                    "of (collection, split, configuration); re-running skips them. Needs the 'train' extra "
                    "except for Pop and Random.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="collections: " + ", ".join(n for n, l in COLLECTIONS.items() if not l.needs_path)
               + " or a path (" + ", ".join(n for n, l in COLLECTIONS.items() if l.needs_path) + " layouts)\n"
               + "grids: " + "; ".join(f"{g} ({len(s)} systems)" for g, s in GRIDS.items())
               + "\nsystems: " + ", ".join(SYSTEMS),
    )
    p.add_argument("--collection", default="ml-100k", help="registered name or path (default: ml-100k)")
    p.add_argument("--collection-config", metavar="TOML",
                   help="loader options, e.g. [movie_columns] for ML-32M-ext's database-movies.csv")
    p.add_argument("--grid", default="quick", choices=sorted(GRIDS), help="system grid (default: quick)")
    p.add_argument("--systems", help="comma-separated system names (overrides --grid)")
    p.add_argument("--out", help="output folder for runs (default: runs/<collection>)")
    p.add_argument("--k", type=positive, default=100, help="list length per user (default: 100)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--split", default="global_time", choices=sorted(SPLITS), help="split method (default: global_time)")
    p.add_argument("--quantile", type=float_range(0, 1, True, True, "a quantile"),
                   help="global_time: cut at this quantile of timestamps, in (0, 1) (default 0.8)")
    p.add_argument("--cut", type=int_range(-MAX_SEED - 1, MAX_SEED, "a timestamp"),
                   help="global_time: cut at this exact timestamp")
    p.add_argument("--ratio", type=float_range(0, 1, True, True, "a ratio"),
                   help="user_ratio: share of each user's history for training, in (0, 1) (default 0.8)")
    p.add_argument("--tie-policy", default="hash", choices=TIE_POLICIES, help="order of equal scores (default: hash)")
    p.add_argument("--tie-seed", type=seed, default=0, help="seed of the hash tie policy (default: 0)")
    p.add_argument("--epochs", type=int_range(1, MAX_EPOCHS, "a number of epochs"),
                   help="override every neural system's epochs (quick checks)")
    p.add_argument("--threads", type=int_range(1, MAX_THREADS, "a thread count"), default=1,
                   help="torch threads while training (default: 1; more rarely helps on small data)")
    p.add_argument("--force", action="store_true", help="retrain systems found in the cache")
    p.add_argument("--evaluate", action="store_true", help="also record RecBole's own test NDCG@10/Recall@10")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep RecBole's data and checkpoints in <out>/.work")
    p.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    p.set_defaults(func=run)


def _split_options(args) -> dict:
    from ..errors import ConfigError

    opts = {}
    given = {"quantile": args.quantile, "timestamp": args.cut, "ratio": args.ratio}
    allowed = {"global_time": {"quantile", "timestamp"}, "user_ratio": {"ratio"}}.get(args.split, set())
    for key, value in given.items():
        if value is None:
            continue
        if key not in allowed:
            flag = {"timestamp": "--cut"}.get(key, f"--{key}")
            raise ConfigError(f"{flag} does not apply to --split {args.split}")
        opts[key] = value
    return opts


def run(args) -> int:
    from .._io import check_output_dir
    from ..data.collections import COLLECTIONS, load_collection, read_collection_config
    from ..systems import resolve_systems, results_table, train_systems

    options = read_collection_config(args.collection_config) if args.collection_config else {}
    split_options = _split_options(args)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None
    if args.systems is not None and not systems:
        from ..errors import ConfigError

        raise ConfigError("--systems names no system; give comma-separated names or leave it out for --grid")
    resolve_systems(args.grid, systems)  # unknown names fail before any data is read
    registered = args.collection in COLLECTIONS and not COLLECTIONS[args.collection].needs_path
    inputs = [p for p in (None if registered else args.collection, args.collection_config) if p is not None]
    # the output folder is checked before loading and training: neither is cheap
    if args.out is not None:
        check_output_dir(args.out, "--out", inputs)
    collection = load_collection(args.collection, **options)
    out = args.out if args.out is not None else os.fspath(Path("runs") / collection.name)
    if args.out is None:
        check_output_dir(out, "--out (default runs/<collection>)", inputs)
    results = train_systems(
        collection, grid=args.grid, out_dir=out, k=args.k, device=args.device, systems=systems,
        split=args.split, split_options=split_options, tie_policy=args.tie_policy, tie_seed=args.tie_seed,
        epochs=args.epochs, threads=args.threads, force=args.force, evaluate=args.evaluate, keep_checkpoints=args.keep_checkpoints,
        verbose=getattr(args, "verbose", False),
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps([{**r.__dict__, "run_path": str(r.run_path) if r.run_path else None} for r in results],
                         indent=2))
    else:
        print(results_table(results))
    failed = [r.system for r in results if not r.ok]
    if failed:
        print(f"recjudge train: {len(failed)} system(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
