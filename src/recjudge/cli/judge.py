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


# the JudgeConfig fields `recjudge judge` exposes, by option group; names, types, defaults, ranges and
# help come from JudgeConfig's declarations (recjudge.judging.config)
JUDGE_OPTIONS = ("judge", "model", "base_url", "api_key_env", "prompt", "fields", "profile_size", "sampling",
                 "history_order", "repeats", "aggregate", "items_per_call", "seed")
CALL_OPTIONS = ("endpoint_kind", "concurrency", "timeout", "context_tokens", "max_attempts", "structured")
BATCH_OPTIONS = ("transport", "batch", "batch_poll")
BUDGET_OPTIONS = ("dry_run", "max_calls", "max_cost", "prices")


def add_config_options(group, names, defaults: dict | None = None) -> None:
    """One option per JudgeConfig field in ``names``, built from the field's declared Setting;
    ``defaults`` overrides a command's defaults (e.g. the position audit's items per call)."""
    import math

    from ..errors import ConfigError
    from ..judging.config import JudgeConfig
    from ..judging.profile import FIELD_SETS

    settings = JudgeConfig.settings()
    for name in names:
        s, default = settings[name]
        if not s.cli:
            raise ConfigError(f"JudgeConfig.{name} is not a command-line option (declared cli=False)")
        default = (defaults or {}).get(name, default)
        flag = s.flag or "--" + name.replace("_", "-")
        helptext = s.help
        kw: dict = {"dest": name, "metavar": s.metavar}
        if name == "judge":
            from ..judging import get_judge, judge_names

            kw["choices"] = judge_names()
            helptext = "; ".join(f"{n}: {get_judge(n).description}" for n in judge_names())
        elif name == "fields":
            helptext = (f"item fields shown: {', '.join(FIELD_SETS)} (all: every text field the collection "
                        "holds, posters and external ids left out, plus average and number of ratings), or "
                        "fields joined by '+'")
        if s.kind == "bool":
            group.add_argument(flag, action="store_true", dest=name, help=helptext + " (default off)")
            continue
        if s.kind == "urls":
            group.add_argument(flag, action="append", help=helptext, **kw)
            continue
        if s.choices is not None:
            kw["choices"] = s.choices
            kw.pop("metavar")
        if s.kind == "int":
            kw["type"] = _args.int_range(int(s.lo), _args.MAX_COUNT if s.hi is None else int(s.hi), s.what)
        elif s.kind == "float":
            kw["type"] = _args.float_range(s.lo, math.inf if s.hi is None else s.hi, lo_open=s.lo_open,
                                           hi_open=s.hi is None, what=s.what)
        if default is not None:
            helptext += f" (default {default})"
        elif "default" not in helptext:
            helptext += " (default: none)"
        group.add_argument(flag, default=default, help=helptext, **kw)


def config_from_args(args: argparse.Namespace, names, **values):
    """The JudgeConfig of the options ``names`` (see :func:`add_config_options`) and ``values``."""
    from ..judging import JudgeConfig

    return JudgeConfig(**{n: getattr(args, n) for n in names}, **values)


def register(sub) -> None:
    p = sub.add_parser(
        "judge", help="judge runs' (user, item) pairs with an LLM or an offline baseline into qrels",
        description="Ask an LLM (any OpenAI-compatible endpoint) or an offline baseline judge how interested "
                    "each user would be in each selected item, and write TREC qrels, a judgments JSONL with "
                    "provenance and a summary. Answers are cached in SQLite: re-running the same command "
                    "resumes and asks nothing already answered. Pairs whose judgment failed are left out of "
                    f"the qrels (never labelled 0); the exit status is {INCOMPLETE_EXIT} when any pair is "
                    "missing.")
    src = p.add_argument_group("what to judge")
    src.add_argument("--runs", nargs="+", metavar="DIR_OR_FILE",
                     help="run files or folders of runs (default: none; then --reference with --per-user selects "
                          "the pairs)")
    src.add_argument("--collection", required=True, metavar="NAME_OR_PATH",
                     help="collection with item metadata and rated histories (e.g. ml-100k)")
    src.add_argument("--collection-config", metavar="TOML",
                     help="loader options, e.g. [movie_columns] for ML-32M-ext's database-movies.csv (default: "
                          "none, the loader's own)")
    src.add_argument("--split", default="global_time",
                     help="profiles come from the split's training (+validation) part; 'none' uses every "
                          "interaction (default global_time, as recjudge train)")
    src.add_argument("--topics", metavar="FILE",
                     help="queries as profiles: 'qid<TAB>text' lines or JSONL (use --prompt relevance; default: "
                          "none, users' rated histories are the profiles)")
    src.add_argument("--depth", type=_args.positive, metavar="D", help="union of every run's top-D (default: all ranked)")
    src.add_argument("--per-user", type=_args.positive, metavar="K",
                     help="K items per user, sampled with --seed (default: every selected item)")
    src.add_argument("--reference", metavar="QRELS",
                     help="with --per-user: sample from the items these qrels judge ('collection': its "
                          "human qrels); with --runs, only the users the runs rank (default: none)")
    src.add_argument("--only-unjudged", metavar="QRELS",
                     help="skip pairs these qrels already judge (default: none, every selected pair)")
    src.add_argument("--tie-policy", choices=TIE_POLICIES, default="hash",
                     help="orders tied scores before the depth cut (default hash)")

    j = p.add_argument_group("judge")
    add_config_options(j, JUDGE_OPTIONS)
    c = p.add_argument_group("calling the model")
    add_config_options(c, CALL_OPTIONS)
    c.add_argument("--temperature", type=_args.float_range(0, 2, what="a temperature"), metavar="T",
                   help="sampling temperature, 0-2 (default: not sent, so the server's own applies: 1 on OpenAI, "
                        "0.8 on llama-cpp-python; the summary says which)")
    c.add_argument("--reasoning-effort", choices=("minimal", "low", "medium", "high"),
                   help="a reasoning model's effort (default: not sent, the model's own); kinds that ignore it "
                        "are reported")
    c.add_argument("--max-tokens", type=_args.positive, metavar="N",
                   help="the answer's token cap, sent under the name the endpoint's kind honours: "
                        "max_completion_tokens to OpenAI, max_tokens to local servers (default: none)")
    c.add_argument("--param", type=_param, action="append", default=[], metavar="KEY=VALUE",
                   help="another generation parameter (JSON value), e.g. top_p=0.9; repeat it (default: none)")
    add_config_options(c, BATCH_OPTIONS)
    b = p.add_argument_group("budget")
    add_config_options(b, BUDGET_OPTIONS)

    o = p.add_argument_group("output")
    o.add_argument("--out", required=True, metavar="QRELS", help="qrels to write, e.g. qrels/NAME.qrels")
    o.add_argument("--judgments", metavar="JSONL", help="judgment log (default: NAME.judgments.jsonl beside --out)")
    o.add_argument("--cache", default=".recjudge-cache/judge.sqlite", metavar="SQLITE",
                   help="answer cache; re-runs resume from it (default .recjudge-cache/judge.sqlite)")
    p.set_defaults(func=run_judge)


def run_judge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._io import check_outputs
    from ..data.collections import load_collection, read_collection_config
    from ..data.trec import read_qrels, read_runs
    from ..errors import ConfigError
    from ..judging import judge_pairs, output_paths, read_topics, select_pairs
    from ..judging.client import quiet_http_loggers

    quiet_http_loggers()

    params = dict(args.param)
    if args.temperature is not None:
        params["temperature"] = args.temperature
    if args.reasoning_effort is not None:
        params["reasoning_effort"] = args.reasoning_effort
    if args.max_tokens is not None:
        params["max_completion_tokens"] = args.max_tokens
    config = config_from_args(args, JUDGE_OPTIONS + CALL_OPTIONS + BATCH_OPTIONS + BUDGET_OPTIONS, params=params)
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
    runs = read_runs(args.runs) if args.runs else {}
    only = read_qrels(args.only_unjudged) if args.only_unjudged else None
    users = None
    if reference is not None:
        judged_users = set(reference.frame.qid.unique())
        if runs:
            # the runs say whose rankings are evaluated: users of the reference no run ranks are not judged
            users = {q for run in runs.values() for q in run.frame.qid.unique()}
            kept = len(judged_users & users)
            print(f"--reference {args.reference}: {kept:,} of its {len(judged_users):,} users are ranked by the "
                  f"runs; only they are judged", file=sys.stderr)
        else:
            print(f"--reference {args.reference}: judging every one of its {len(judged_users):,} users (no --runs "
                  "restricts them to the users the runs rank)", file=sys.stderr)
    pairs = select_pairs(runs if reference is None else (), depth=args.depth, per_user=args.per_user,
                         reference=reference, only_unjudged=only, seed=args.seed, tie_policy=args.tie_policy,
                         users=users)
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
    prof = result.provenance.get("profiles", {})
    if prof.get("history_order") == "chronological" and prof.get("users_without_chronology"):
        print(f"note: {prof['users_without_chronology']:,} user(s) have no chronology (their ratings share one "
              "timestamp or have none): their history is shown in the seeded random order "
              "(--history-order random)", file=sys.stderr)
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
