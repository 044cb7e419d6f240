"""What the judge sees under the paper's protocol (issue 11.6): history order, every text field, gpt-5's
prices and context window, per-user context overflow, long timeouts and user template files."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from judge_data import movies, pairs_for

from recjudge.cli import main
from recjudge.data.collections import Collection
from recjudge.errors import ConfigError, InputError
from recjudge.judging import JudgeSettings, judge_pairs, load_template
from recjudge.judging.budget import cost, load_models, load_prices
from recjudge.judging.cache import Usage
from recjudge.judging.profile import HistoryProfiles
from recjudge.judging.prompts import OPTIONAL, REQUIRED, prompts_dir
from recjudge.judging.results import Overflow
from recjudge.judging.results import read_judgments

FAST = dict(backoff_initial=0.01, backoff_max=0.05, concurrency=2, timeout=5.0, model="fake-model")


def dated(times) -> Collection:
    """One user 'u' who rated items a..h (titles 'Movie 0'..'Movie 7') at ``times``."""
    names = list("abcdefgh")
    items = pd.DataFrame({"title": [f"Movie {k}" for k in range(8)]}, index=names)
    inter = pd.DataFrame({"user": "u", "item": names, "rating": [1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 2.0, 3.0],
                          "timestamp": times})
    return Collection("dated", inter, items)


# ------------------------------------------------------------------------------------ history order

def test_chronological_is_oldest_first_and_random_ignores_the_times():
    times = [70, 10, 60, 20, 50, 30, 80, 40]  # a..h: oldest first is b d f h e c a g
    chrono = HistoryProfiles(dated(times), "title", size=8, seed=3, order="chronological")
    assert [i for i, _ in chrono.sample("u")] == list("bdfhecag")
    rand = HistoryProfiles(dated(times), "title", size=8, seed=3, order="random")
    shown = [i for i, _ in rand.sample("u")]
    assert sorted(shown) == list("abcdefgh")
    # the random order is a function of user, items and seed only: other times give the same order
    other = HistoryProfiles(dated([1, 2, 3, 4, 5, 6, 7, 8]), "title", size=8, seed=3, order="random")
    assert [i for i, _ in other.sample("u")] == shown
    # ... and other seeds give other orders (8! orders: 20 seeds agreeing would be a broken seed)
    orders = {tuple(i for i, _ in HistoryProfiles(dated(times), "title", size=8, seed=s,
                                                  order="random").sample("u")) for s in range(20)}
    assert len(orders) > 1 and tuple("bdfhecag") != tuple(shown)
    # each line keeps its own rating: b was rated 2, g 2, e 5
    assert dict(rand.sample("u")) == {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0, "f": 1.0, "g": 2.0,
                                      "h": 3.0}
    assert rand.provenance()["history_order"] == "random"
    assert chrono.provenance()["users_without_chronology"] == 0


@pytest.mark.parametrize("times", [[5] * 8, None])
def test_a_history_without_chronology_is_shown_in_the_seeded_random_order(times):
    coll = dated(times if times is not None else [0] * 8)
    if times is None:  # no timestamp column at all
        coll = Collection("dated", coll.interactions.drop(columns="timestamp"), coll.items)
    chrono = HistoryProfiles(coll, "title", size=8, seed=3, order="chronological")
    rand = HistoryProfiles(coll, "title", size=8, seed=3, order="random")
    # one shared time (or none) is no order: chronological is exactly the random order, so the two
    # settings send the same prompts (and share cache entries)
    assert chrono.profile_text("u") == rand.profile_text("u")
    assert chrono.provenance()["users_without_chronology"] == 1
    # and that order is the one the same seed gives a dated history under --history-order random
    assert [i for i, _ in rand.sample("u")] == [i for i, _ in HistoryProfiles(
        dated([70, 10, 60, 20, 50, 30, 80, 40]), "title", size=8, seed=3, order="random").sample("u")]


def test_random_order_with_a_sample_and_a_left_out_candidate():
    coll = dated([70, 10, 60, 20, 50, 30, 80, 40])
    full = [i for i, _ in HistoryProfiles(coll, "title", size=8, seed=1, order="random").sample("u")]
    four = HistoryProfiles(coll, "title", size=4, seed=1, order="random")
    picked = [i for i, _ in four.sample("u")]
    # four items, in the order the full history shows them
    assert len(picked) == 4 and picked == [i for i in full if i in picked]
    without = [i for i, _ in four.sample("u", exclude=[picked[0]])]
    assert picked[0] not in without and len(without) == 4


def test_history_order_is_a_checked_setting_and_an_option():
    assert JudgeSettings().history_order == "chronological"  # today's default: outputs unchanged
    assert JudgeSettings(history_order="random").history_order == "random"
    with pytest.raises(ConfigError, match="history_order= must be 'chronological' or 'random', not 'shuffled'"):
        JudgeSettings(history_order="shuffled")
    with pytest.raises(ConfigError, match="unknown history order"):
        HistoryProfiles(dated([1] * 8), "title", order="shuffled")


def test_the_random_order_reaches_the_prompt(fake_openai):
    coll = dated([70, 10, 60, 20, 50, 30, 80, 40])
    coll = Collection("dated", coll.interactions, pd.concat(
        [coll.items, pd.DataFrame({"title": ["Movie 9"]}, index=["z"])]))
    res = judge_pairs([("u", "z")], coll, JudgeSettings(base_url=fake_openai.url, history_order="random", seed=3,
                                                      fields="title", **FAST))
    expected = HistoryProfiles(coll, "title", size=50, seed=3, order="random")
    user = fake_openai.chat_log()[0].json["messages"][1]["content"]
    lines = [ln for ln in user.splitlines() if ln.startswith("- ")]
    titles = [re.search(r"Movie \d", ln).group(0) for ln in lines]
    assert titles == [f"Movie {'abcdefgh'.index(i)}" for i, _ in expected.sample("u")]
    assert res.provenance["profiles"]["history_order"] == "random"


# --------------------------------------------------------------------------------------- all fields

def test_all_is_every_text_field_the_collection_holds_in_a_stable_order():
    # columns in a scrambled order, with a poster, an external id and a field no family declares
    items = pd.DataFrame({"poster": ["/p/a.jpg", "/p/b.jpg"], "overview": ["A heist.", "A storm."],
                          "tagline": ["Run.", "Hide."], "title": ["Alpha", "Beta"], "imdb_id": ["tt1", "tt2"],
                          "genres": [("Crime",), ("Drama",)], "year": [1990, 2001]}, index=["a", "b"])
    inter = pd.DataFrame({"user": ["u", "u", "v"], "item": ["a", "b", "a"], "rating": [4.0, 2.0, 3.0],
                          "timestamp": [1, 2, 3]})
    p = HistoryProfiles(Collection("c", inter, items), "all", size=5)
    # canonical film fields in their order, then the collection's own, then the derived ones
    assert p.fields == ("title", "year", "genres", "overview", "tagline", "avg_rating", "num_ratings")
    # a: rated 4 by u and 3 by v -> mean 3.50, two ratings; no poster, no id
    assert p.render_item("a") == ("Title: Alpha | Year: 1990 | Genres: Crime | Overview: A heist. | "
                                  "Tagline: Run. | Average rating: 3.50/5 | Number of ratings: 2")
    assert p.provenance()["field_set"] == "all"


def test_all_on_the_shipped_shape_of_ml32m_ext_movies():
    cols = ("title", "year", "genres", "directors", "cast", "overview", "runtime", "languages", "poster")
    items = pd.DataFrame({c: [None] for c in cols}, index=["m"])
    inter = pd.DataFrame({"user": ["u"], "item": ["m"], "rating": [4.5], "timestamp": [1]})
    fields = HistoryProfiles(Collection("x", inter, items), "all").fields
    assert fields == ("title", "year", "genres", "directors", "cast", "overview", "runtime", "languages",
                      "avg_rating", "num_ratings")


# ------------------------------------------------------------------------------------ gpt-5 prices

def test_gpt5_is_priced_dated_and_has_its_context_window():
    table = load_models()
    gpt5 = table["gpt-5-2025-08-07"]
    assert (gpt5.input, gpt5.cached_input, gpt5.output) == (1.25, 0.125, 10.00)
    assert "2025-08-07" in gpt5.as_of and "launch price list" in gpt5.as_of
    assert (gpt5.context_tokens, gpt5.max_input_tokens, gpt5.input_window) == (400_000, 272_000, 272_000)
    assert table["gpt-5"] == gpt5  # the alias shares the dated entry
    prices = load_prices()
    assert prices["gpt-5"] == prices["gpt-5-2025-08-07"] == {"input": 1.25, "output": 10.0, "cached_input": 0.125}
    # 1M prompt tokens of which 200k cached, 100k completion: 0.8 * 1.25 + 0.2 * 0.125 + 0.1 * 10
    assert cost(Usage(1_000_000, 200_000, 100_000, 0), prices["gpt-5"]) == pytest.approx(2.025)
    assert "as_of" not in prices["gpt-5"] and "_comment" not in prices


def test_a_user_price_file_overrides_aliases_and_limits(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"_note": "mine", "gpt-5-2025-08-07": {"input": 2, "output": 20, "as_of": "2026-01-01"},'
                    ' "local": {"input": 0, "output": 0, "context_tokens": 32768}, "loc": {"alias_of": "local"}}')
    table = load_models(path)
    assert table["gpt-5"].input == 2 and table["gpt-5"].as_of == "2026-01-01"  # the alias follows the override
    assert table["loc"].input_window == 32768 and table["gpt-4o-mini"].input == 0.15


def test_max_cost_knows_gpt5(fake_openai):
    # no "needs a price" refusal: the built-in table prices the model the fake serves under that name
    res = judge_pairs(pairs_for([10, 11], ["u0"]), movies(),
                      JudgeSettings(base_url=fake_openai.url, **{**FAST, "model": "gpt-5-2025-08-07"}, max_cost=1.0))
    assert res.summary.judged == 2 and res.summary.cost is not None and res.summary.cost > 0
    assert res.provenance["prices_as_of"].startswith("2025-08-07")


# ---------------------------------------------------------------------------------- the command line

@pytest.fixture
def workspace(tmp_path):
    """A RecBole atomic collection: u0 rated 3 items, u1 40 (long titles); a run ranks items 50..52."""
    coll = tmp_path / "tiny"
    coll.mkdir()
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u0\t{k}\t{1 + k % 5}\t{100 + k}" for k in range(3)]
    inter += [f"u1\t{k}\t{1 + k % 5}\t{200 + k}" for k in range(40)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\tMovie {k} {'and a very long subtitle ' * 4}\tDrama" for k in range(60)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n")
    run = [f"u{u} Q0 {50 + r} {r + 1} {3 - r} sys" for u in range(2) for r in range(3)]
    (tmp_path / "sys.run").write_text("\n".join(run) + "\n")
    return tmp_path


def cli_args(ws, *extra):
    return ["judge", "--runs", str(ws / "sys.run"), "--collection", str(ws / "tiny"), "--split", "none",
            "--out", str(ws / "q" / "j.qrels"), "--cache", str(ws / "cache.sqlite"), *extra]


def test_dry_run_with_gpt5_prints_a_cost(workspace, capsys):
    assert main(cli_args(workspace, "--model", "gpt-5-2025-08-07", "--dry-run")) == 0
    out = capsys.readouterr().out
    tokens = int(re.search(r"est\. input tokens\s+([\d,]+)", out).group(1).replace(",", ""))
    calls = int(re.search(r"calls to make\s+([\d,]+)", out).group(1))
    assert calls == 6
    # input at $1.25/M, each call's expected answer at $10/M: 10 tokens a call + 8 for its one label
    expected = tokens * 1.25 / 1e6 + calls * (10 + 8) * 10.00 / 1e6
    assert re.search(r"est\. cost\s+\$([\d.,]+)", out).group(1) == f"{expected:,.4f}"
    assert "unknown" not in out


def test_the_cost_line_counts_prompts_with_the_margin_not_four_characters(workspace, capsys, fake_openai):
    """The 4-character rule undercounted OpenAI's tokenizer by ~21% on these prompts: the dry run's
    input tokens for the OpenAI API are ⌈characters / 3⌉ + 9 (three message frames and the reply's)."""
    run = workspace / "one.run"
    run.write_text("u0 Q0 50 1 3 sys\n")
    args = cli_args(workspace, "--model", "gpt-5-2025-08-07")
    args[args.index("--runs") + 1] = str(run)
    assert main(args + ["--dry-run"]) == 0
    tokens = int(re.search(r"est\. input tokens\s+([\d,]+)", capsys.readouterr().out).group(1).replace(",", ""))
    # the same prompt, sent: its characters counted here
    assert main(args + ["--base-url", fake_openai.url]) == 0
    (sent,) = fake_openai.chat_log()
    chars = sum(len(m["content"]) for m in sent.json["messages"])
    assert tokens == -(-chars // 3) + 9
    assert tokens > (chars + 3) // 4 + 9  # more than the old rule's count


def one_prompt_tokens(ws, capsys, user: str) -> int:
    """The estimated tokens of ``user``'s first prompt: a dry run over that user's first pair."""
    run = ws / f"{user}.run"
    run.write_text(f"{user} Q0 50 1 3 sys\n")
    args = cli_args(ws, "--dry-run", "--model", "fake-model")
    args[args.index("--runs") + 1] = str(run)
    assert main(args) == 0
    return int(re.search(r"est\. input tokens\s+([\d,]+)", capsys.readouterr().out).group(1).replace(",", ""))


def test_a_profile_above_the_context_window_is_reported_per_user_and_never_sent(workspace, capsys,
                                                                                fake_openai):
    small, large = one_prompt_tokens(workspace, capsys, "u0"), one_prompt_tokens(workspace, capsys, "u1")
    assert large > 5 * small  # u1's 40 long history lines against u0's 3
    # without a tokenizer the window check of a local server of unknown kind counts 2.5 characters per
    # token, 6/5 of the dry run's count for the OpenAI API (3 characters per token, the margin its cost
    # line uses too): u0's prompts (the same size: only the candidate's number differs) fit, u1's do not
    window = small * 6 // 5 + 20
    args = cli_args(workspace, "--base-url", fake_openai.url, "--model", "fake-model",
                    "--context-tokens", str(window), "--profile-size", "1000")
    # a dry run names the user before anything is paid for
    assert main(args + ["--dry-run"]) == 0
    dry = capsys.readouterr()
    counted = int(re.search(r"user u1: prompt of ~([\d,]+) tokens exceeds the context window of "
                            rf"{window:,} tokens", dry.err).group(1).replace(",", ""))
    assert large * 6 / 5 - 10 <= counted <= large * 6 / 5 + 10
    assert "context overflow" in dry.out and fake_openai.log == []
    assert main(args) == 4  # incomplete: u1's pairs have no label
    err = capsys.readouterr().err
    assert err.count("context overflow: user u1") == 1 and "u0:" not in err
    sent = fake_openai.chat_log()
    # only u0's three prompts went out, and nothing was cut: each holds u0's whole history (3 lines)
    assert len(sent) == 3
    assert all(sum(ln.startswith("- ") for ln in r.json["messages"][1]["content"].splitlines()) == 3
               for r in sent)
    summary = json.loads((workspace / "q" / "j.summary.json").read_text())
    s = summary["summary"]
    # u1's three prompts differ only in the candidate's number (50, 51, 52): each is `large` tokens
    assert s["context_overflow"] == [{"user": "u1", "estimated_tokens": counted, "window": window, "pairs": 3}]
    assert s["failures"] == {"context_overflow": 3} and s["judged"] == 3 and s["context_tokens"] == window
    assert summary["provenance"]["context_tokens_from"] == "context_tokens"
    reasons = {(j["qid"], j["docid"]): j["reason"] for j in read_judgments(workspace / "q" / "j.judgments.jsonl")[1]}
    assert reasons == {**{("u0", str(d)): None for d in (50, 51, 52)},
                       **{("u1", str(d)): "context_overflow" for d in (50, 51, 52)}}


def test_the_window_comes_from_the_price_table_unless_given(fake_openai):
    pairs = pairs_for([10], ["u0"])
    res = judge_pairs(pairs, movies(), JudgeSettings(base_url=fake_openai.url, **{**FAST, "model": "gpt-5"}))
    assert res.summary.context_tokens == 272_000 and res.summary.context_overflow == ()
    assert res.provenance["context_tokens_from"] == "price table"
    res = judge_pairs(pairs, movies(), JudgeSettings(base_url=fake_openai.url, context_tokens=40, **FAST))
    assert res.summary.judged == 0 and res.summary.failures == {"context_overflow": 1}
    (over,) = res.summary.context_overflow
    assert isinstance(over, Overflow) and (over.user, over.window, over.pairs) == ("u0", 40, 1)
    assert len(fake_openai.chat_log()) == 1  # the gpt-5 call only
    res = judge_pairs(pairs, movies(), JudgeSettings(base_url=fake_openai.url, **FAST))  # unknown model: no check
    assert res.summary.context_tokens is None and res.provenance["context_tokens_from"] is None


def test_history_order_and_context_tokens_are_command_options(workspace, capsys):
    assert main(cli_args(workspace, "--history-order", "random", "--context-tokens", "272000", "--timeout", "600",
                         "--dry-run")) == 0
    with pytest.raises(SystemExit):
        main(cli_args(workspace, "--history-order", "shuffled", "--dry-run"))
    capsys.readouterr()
    # a range the settings check: refused, exit 2, the flag named
    assert main(cli_args(workspace, "--context-tokens", "0", "--dry-run")) == 2
    assert "--context-tokens must be at least 1, not 0" in capsys.readouterr().err


def test_a_collection_without_chronology_is_noted_on_stderr(workspace, capsys):
    inter = workspace / "tiny" / "tiny.inter"
    rows = inter.read_text().splitlines()
    inter.write_text("\n".join([rows[0]] + ["\t".join(r.split("\t")[:3] + ["1697216400"]) for r in rows[1:]]) + "\n")
    assert main(cli_args(workspace, "--dry-run")) == 0
    assert "note: 2 user(s) have no chronology" in capsys.readouterr().err
    assert main(cli_args(workspace, "--dry-run", "--history-order", "random")) == 0
    assert "no chronology" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- timeouts

def test_a_long_timeout_reaches_every_http_client():
    from recjudge.judging.backend import openai_client

    config = JudgeSettings(base_url="http://127.0.0.1:9/v1", timeout=600, model="m")
    job = SimpleNamespace(config=config, template=load_template("baseline"),
                          budget=SimpleNamespace(allows_retry=lambda *a: True), narrow=None)
    client = openai_client(job)
    try:
        ep = client._endpoints[0]
        assert client.settings.timeout == 600.0  # the deadline of each attempt
        assert ep.sdk.timeout == 600.0  # files and batches: the openai client over the same HTTP client
        t = ep.http.timeout  # the HTTP client of chat calls, probes and the openai client: no phase capped below it
        assert (t.connect, t.read, t.write, t.pool) == (600.0, 600.0, 600.0, 600.0)
        assert ep.sdk._client is ep.http
    finally:
        asyncio.run(client.close())


def test_an_answer_slower_than_a_short_cap_arrives_within_the_timeout(fake_openai):
    fake_openai.latency = 1.2
    res = judge_pairs(pairs_for([10], ["u0"]), movies(),
                      JudgeSettings(base_url=fake_openai.url, **{**FAST, "timeout": 30.0}, max_attempts=1))
    assert res.summary.judged == 1 and res.summary.attempts == 1
    assert res.provenance["timeout"] == 30.0


def test_the_paper_protocol_values_are_judge_config_values():
    c = JudgeSettings(profile_size=1000, sampling="random", history_order="random", fields="all",
                    model="gpt-5-2025-08-07", params={"reasoning_effort": "medium"}, timeout=1800)
    assert c.key_params() == {"structured": "auto", "reasoning_effort": "medium"} and c.timeout == 1800.0


# -------------------------------------------------------------------------------- template files

FIGURE = """# a user's own template with every documented placeholder
name = "my-figure"
scale = [0, 7]

system = '''
You judge movies.
'''

user = '''
Ratings from {rating_min} to {rating_max}:
{profile}

{candidates}

Score from {scale_min} to {scale_max}. A JSON example: {{"label": 3}}.
{answer_format}
'''
"""


def test_a_template_file_with_the_documented_placeholders_works(tmp_path, fake_openai):
    path = tmp_path / "figure1.toml"
    path.write_text(FIGURE)
    res = judge_pairs(pairs_for([10], ["u0"]), movies(), JudgeSettings(base_url=fake_openai.url, prompt=str(path),
                                                                     **FAST))
    assert res.labels == {("u0", "10"): 2}
    user = fake_openai.chat_log()[0].json["messages"][1]["content"]
    assert user.startswith("Ratings from 1 to 5:\n- Title: Movie 0 | Genres: Comedy | Rating: 1\n")
    assert "Candidate item:\nTitle: Movie 10 | Genres: Comedy" in user
    assert 'Score from 0 to 7. A JSON example: {"label": 3}.\nAnswer with JSON only' in user
    assert res.provenance["template"]["name"] == "my-figure"
    assert res.provenance["template"]["source"] == "figure1.toml"


def test_an_unknown_placeholder_names_the_file_and_line(tmp_path):
    path = tmp_path / "figure1.toml"
    path.write_text(FIGURE.replace("{profile}", "{user_history}\n{profile}"))
    with pytest.raises(InputError) as err:
        load_template(str(path))
    text = str(err.value)
    assert str(path) in text and "unknown placeholder {user_history}" in text and err.value.line == 11


def test_the_readme_documents_exactly_the_placeholders_the_loader_accepts():
    readme = (Path(prompts_dir()) / "README.md")
    if not readme.exists():  # an installed wheel ships the templates without the README
        readme = Path(__file__).resolve().parent.parent / "prompts" / "README.md"
    section = readme.read_text().split("## Placeholders")[1].split("\n## ")[0]
    table = [ln for ln in section.splitlines() if ln.startswith("| `{")]
    documented = set(re.findall(r"^\| `\{(\w+)\}`(?:, `\{(\w+)\}`)?", "\n".join(table), re.M))
    names = {n for pair in documented for n in pair if n}
    assert names == set(REQUIRED) | set(OPTIONAL)


def test_the_baseline_says_it_is_recjudges_wording():
    head = (prompts_dir() / "baseline.toml").read_text().split("name =")[0]
    assert "recjudge's own wording" in head and "not the\n# paper's Figure 1 text" in head
    assert load_template("baseline").name == "baseline"
