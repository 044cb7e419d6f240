"""``recjudge judge``: judge the pairs of runs (or a pool of them) into qrels."""

from __future__ import annotations

import argparse
import json
import sys

from ..data.trec import TIE_POLICIES
from . import _args

INCOMPLETE_EXIT = 4  # outputs written, but some selected pairs have no label (failures or budget)


def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _sample(ids, n: int = 3) -> str:
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (", ..." if len(ids) > n else "")


def register(sub) -> None:
    from ..judge.profile import FIELD_SETS, SAMPLINGS

    p = sub.add_parser(
        "judge", help="judge runs' (user, item) pairs with an LLM or an offline baseline into qrels",
        description="Ask an LLM (any OpenAI-compatible endpoint) or an offline baseline judge how interested "
                    "each user would be in each selected item, and write TREC qrels, a judgments JSONL with "
                    "provenance and a summary. Answers are cached in SQLite: re-running the same command "
                    "resumes and asks nothing already answered. Pairs whose judgment failed are left out of "
                    f"the qrels (never labelled 0); the exit status is {INCOMPLETE_EXIT} when any pair is "
                    "missing.")
    src = p.add_argument_group("what to judge")
    src.add_argument("--runs", nargs="+", metavar="DIR_OR_FILE", help="run files or folders of runs")
    src.add_argument("--collection", required=True, metavar="NAME_OR_PATH",
                     help="collection with item metadata and rated histories (e.g. ml-100k)")
    src.add_argument("--collection-config", metavar="TOML",
                     help="loader options, e.g. [movie_columns] for ML-32M-ext's database-movies.csv")
    src.add_argument("--split", default="global_time",
                     help="profiles come from the split's training (+validation) part; 'none' uses every "
                          "interaction (default global_time, as recjudge train)")
    src.add_argument("--topics", metavar="FILE",
                     help="queries as profiles: 'qid<TAB>text' lines or JSONL (use --prompt relevance)")
    src.add_argument("--depth", type=_args.positive, metavar="D", help="union of every run's top-D (default: all ranked)")
    src.add_argument("--per-user", type=_args.positive, metavar="K", help="K items per user, sampled with --seed")
    src.add_argument("--reference", metavar="QRELS",
                     help="with --per-user: sample from the items these qrels judge ('collection': its "
                          "human qrels)")
    src.add_argument("--only-unjudged", metavar="QRELS", help="skip pairs these qrels already judge")
    src.add_argument("--tie-policy", choices=TIE_POLICIES, default="hash",
                     help="orders tied scores before the depth cut (default hash)")

    j = p.add_argument_group("judge")
    from ..judge.runner import judge_names
    j.add_argument("--judge", default="openai", choices=judge_names(),
                   help="openai (LLM) or a non-LLM baseline: overlap, popularity")
    j.add_argument("--model", default="gpt-4o-mini")
    j.add_argument("--base-url", metavar="URL", action="append",
                   help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, ...); repeat it for several servers "
                        "of the same model: requests go to the healthy one with the fewest in flight, a failing "
                        "one rests and is retried, answers share one cache. No user:password@ in the URL: the "
                        "key comes from --api-key-env")
    j.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (default OPENAI_API_KEY)")
    j.add_argument("--prompt", default="baseline", metavar="NAME_OR_PATH",
                   help="baseline, defined-scale, criteria, relevance, or a template file")
    j.add_argument("--fields", default="title+genres", metavar="SET",
                   help=f"item fields shown: {', '.join(FIELD_SETS)}, or fields joined by '+'")
    j.add_argument("--profile-size", type=_args.positive, default=50, metavar="N", help="rated items per profile (50)")
    j.add_argument("--sampling", choices=SAMPLINGS, default="random",
                   help="which history items: seeded random sample or most recent (random)")
    j.add_argument("--repeats", type=_args.int_range(1, 1000, "a number of repeats"), default=1, metavar="R", help="ask each pair R times (paper: 3)")
    j.add_argument("--aggregate", choices=("mean", "mode"), default="mean",
                   help="combine repeats: mean rounded half up, or mode (default mean)")
    j.add_argument("--items-per-call", type=_args.int_range(1, 1000, "a number of items"), default=1, metavar="M", help="candidates per request (1)")
    j.add_argument("--seed", type=_args.seed, default=0)

    c = p.add_argument_group("calling the model")
    c.add_argument("--concurrency", type=_args.int_range(1, 4096, "a number of requests"), default=8, metavar="C", help="requests in flight (8)")
    c.add_argument("--timeout", type=_args.float_range(0, 86400, lo_open=True, what="seconds"), default=60.0, metavar="S", help="per-request timeout in s (60)")
    c.add_argument("--retries", type=_args.int_range(1, 100, "a number of attempts"), default=6, metavar="N", help="attempts per request (6)")
    c.add_argument("--structured", choices=("auto", "on", "off"), default="auto",
                   help="JSON-schema structured output: auto falls back to parsing text when refused")
    c.add_argument("--temperature", type=_args.float_range(0, 2, what="a temperature"))
    c.add_argument("--reasoning-effort", choices=("minimal", "low", "medium", "high"))
    c.add_argument("--max-tokens", type=_args.positive, metavar="N", help="sent as max_completion_tokens")
    c.add_argument("--param", type=_param, action="append", default=[], metavar="KEY=VALUE",
                   help="another generation parameter (JSON value), e.g. top_p=0.9")
    c.add_argument("--transport", choices=("sdk", "lean", "auto"), default="sdk",
                   help="HTTP client of chat requests: sdk (the openai package's client, default), lean "
                        "(built-in keep-alive HTTP/1.1 with the least CPU per request, for concurrency of "
                        "~100 and more against your own servers), auto: lean unless a proxy is set")
    c.add_argument("--batch", action="store_true", help="use the Batch API (upload, create, poll, download)")
    c.add_argument("--batch-poll", type=_args.float_range(0, 86400, lo_open=True, what="seconds"), default=30.0, metavar="S", help="seconds between polls (30)")

    b = p.add_argument_group("budget")
    b.add_argument("--dry-run", action="store_true",
                   help="count calls and estimate input tokens and cost; no network, nothing written")
    b.add_argument("--max-calls", type=_args.count, metavar="N", help="start at most N new calls")
    b.add_argument("--max-cost", type=_args.float_range(0, 1e9, what="USD"), metavar="USD", help="stop before the estimated cost exceeds USD")
    b.add_argument("--prices", metavar="JSON", help="price table: {MODEL: {input, cached_input, output}} USD/Mtok")

    o = p.add_argument_group("output")
    o.add_argument("--out", required=True, metavar="QRELS", help="qrels to write, e.g. qrels/NAME.qrels")
    o.add_argument("--judgments", metavar="JSONL", help="judgment log (default: beside --out)")
    o.add_argument("--cache", default=".recjudge-cache/judge.sqlite", metavar="SQLITE",
                   help="answer cache; re-runs resume from it (default .recjudge-cache/judge.sqlite)")
    p.set_defaults(func=run_judge)


def run_judge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._io import check_outputs
    from ..data.collections import load_collection, read_collection_config
    from ..data.trec import read_qrels, read_runs
    from ..errors import ConfigError
    from ..judge import JudgeConfig, judge_pairs, read_topics, select_pairs
    from ..judge.client import quiet_http_loggers
    from ..judge.runner import output_paths

    quiet_http_loggers()

    params = dict(args.param)
    if args.temperature is not None:
        params["temperature"] = args.temperature
    if args.reasoning_effort is not None:
        params["reasoning_effort"] = args.reasoning_effort
    if args.max_tokens is not None:
        params["max_completion_tokens"] = args.max_tokens
    config = JudgeConfig(
        judge=args.judge, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
        prompt=args.prompt, fields=args.fields, profile_size=args.profile_size, sampling=args.sampling,
        seed=args.seed, repeats=args.repeats, aggregate=args.aggregate, items_per_call=args.items_per_call,
        concurrency=args.concurrency, timeout=args.timeout, max_attempts=args.retries,
        structured=args.structured, params=params, max_calls=args.max_calls, max_cost=args.max_cost,
        prices=args.prices, batch=args.batch, batch_poll=args.batch_poll, dry_run=args.dry_run,
        transport=args.transport)
    if args.depth is not None and args.reference is not None:
        raise ConfigError("--depth selects from runs and --reference from qrels: give one of them")
    if not args.runs and args.reference is None:
        raise ConfigError("give --runs, or --reference QRELS with --per-user K")

    out = Path(args.out)
    if not config.dry_run:  # a dry run writes nothing
        # every output is checked before any work: no LLM call is paid for and then lost to an
        # unwritable path, and no input (a run, the template, the prices) is overwritten
        judgments, summary = output_paths(out)
        inputs = [*(args.runs or []), args.collection_config, args.topics, args.prices, args.only_unjudged,
                  None if args.reference in (None, "collection") else args.reference]
        inputs += [p for p in (args.collection, args.prompt) if Path(p).exists()]
        check_outputs({"--out": out, "--judgments": args.judgments or judgments, "summary": summary,
                       "--cache": args.cache if config.judge == "openai" else None}, inputs=inputs)

    options = read_collection_config(args.collection_config) if args.collection_config else {}
    collection = load_collection(args.collection, **options)
    history = None
    if args.topics is None and args.split != "none":
        from ..data.splits import make_split
        history = make_split(collection, args.split).history()
    reference = None
    if args.reference == "collection":
        if collection.qrels is None:
            raise ConfigError(f"collection {collection.name!r} has no human qrels for --reference collection")
        reference = collection.qrels
    elif args.reference is not None:
        reference = read_qrels(args.reference)
    runs = read_runs(args.runs) if args.runs and reference is None else {}
    only = read_qrels(args.only_unjudged) if args.only_unjudged else None
    pairs = select_pairs(runs, depth=args.depth, per_user=args.per_user, reference=reference,
                         only_unjudged=only, seed=args.seed, tie_policy=args.tie_policy)
    topics = read_topics(args.topics) if args.topics else None
    source = ("the runs " + ", ".join(args.runs)) if reference is None else f"the qrels {args.reference}"
    if not pairs:
        raise ConfigError(f"{source} select no (query, item) pair to judge"
                          + (f" once the pairs judged in {args.only_unjudged} are left out" if only else "")
                          + "; check --depth/--per-user and the files")
    if topics is not None and not {p.qid for p in pairs} & set(topics):
        raise ConfigError(f"no query of the topics file {args.topics} is a query of {source} "
                          f"(topics {_sample(topics)}; run queries {_sample({p.qid for p in pairs})}); "
                          "give the topics of these runs")
    name = out.name.removesuffix(".qrels")
    print(f"judging {len(pairs):,} pairs of {len({p.qid for p in pairs}):,} "
          f"{'queries' if topics else 'users'} with the {config.judge} judge", file=sys.stderr)
    result = judge_pairs(pairs, collection, config, cache_path=None if config.judge != "openai" else args.cache,
                         history=history, topics=topics, topics_source=args.topics or "<topics>", name=name,
                         progress=lambda m: print(m, file=sys.stderr))
    print(result.summary.format())
    if config.dry_run:
        return 0
    paths = result.write(out, args.judgments)
    removed = paths.pop("removed_qrels", None)
    if "qrels" not in paths:
        print("no pair was judged: no qrels written"
              + (f"; removed the earlier {removed}, whose labels are not this run's" if removed else ""),
              file=sys.stderr)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0 if result.summary.judged == result.summary.pairs else INCOMPLETE_EXIT
