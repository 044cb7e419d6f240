"""Judge building blocks without a server: templates, profiles, parsing, selection, baselines, aggregation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recjudge.data.collections import Collection
from recjudge.data.trec import Qrels, Run
from recjudge.errors import ConfigError, InputError
from recjudge.judging import (
    JudgeSettings,
    Pair,
    aggregate_labels,
    judge_pairs,
    load_template,
    parse_fields,
    read_topics,
    repeat_agreement,
    select_pairs,
)
from recjudge.judging.baselines import overlap_score, popularity_labels
from recjudge.judging.parse import SINGLE, parse_answer
from recjudge.judging.profile import HistoryProfiles, QueryProfiles
from recjudge.judging.prompts import parse_template
from recjudge.judging import JudgeSpec, estimate_tokens, get_judge, register_judge


def tiny_collection() -> Collection:
    items = pd.DataFrame({
        "title": ["Alpha", "Beta", "Gamma", "Delta", "Eps"],
        "year": [1990, 1995, None, 2001, 2005],
        "genres": [("Comedy",), ("Comedy", "Drama"), ("Drama",), ("Horror",), None],
    }, index=["i1", "i2", "i3", "i4", "i5"])
    inter = pd.DataFrame({
        "user": ["u1", "u1", "u1", "u2", "u2"],
        "item": ["i1", "i2", "i3", "i1", "i4"],
        "rating": [5.0, 3.0, 1.0, 4.0, 2.0],
        "timestamp": [30, 10, 20, 5, 6],
    })
    return Collection("tiny", inter, items)


# ------------------------------------------------------------------------------------- templates

GOOD = """name = "t"
scale = [0, 3]
system = "Judge."
user = '''
{profile}
{candidates}
{answer_format}
'''
"""


@pytest.mark.parametrize("name", ["baseline", "defined-scale", "criteria", "relevance"])
def test_shipped_templates_load(name):
    t = load_template(name)
    assert t.name == name
    msg = t.render("PROFILE", "CANDIDATES", None)
    # profile first, so that a provider's prefix cache covers every candidate of a user
    assert msg.user.index("PROFILE") < msg.user.index("CANDIDATES")
    assert "{" + "profile}" not in msg.user and len(t.sha256) == 64


def test_criteria_template_declares_criteria():
    t = load_template("criteria")
    assert t.criteria == ("topic", "creators", "style_format", "tone_genre")
    schema = t.json_schema(["c1"])["schema"]
    assert schema["properties"]["labels"]["properties"]["c1"]["required"] == [*t.criteria, "label"]


@pytest.mark.parametrize("text, problem, line", [
    (GOOD.replace("{candidates}\n", ""), "{candidates} 0 times", 4),
    (GOOD.replace("{profile}", "{profil}"), "unknown placeholder {profil}", 5),
    (GOOD.replace("{profile}", "{profile:>9}"), "unknown placeholder {profile:>9}", 5),
    (GOOD.replace("Judge.", "Judge {profile}."), "unknown placeholder {profile} in the system text", 3),
    (GOOD.replace("Judge.", "Judge } now."), "brace that opens or closes no placeholder", 3),
    (GOOD.replace("{answer_format}", '{answer_format} e.g. {"label": 3}'), "unknown placeholder", 7),
    (GOOD.replace("[0, 3]", "[3, 0]"), "not a range [LO, HI]", 2),
    (GOOD.replace("[0, 3]", '"0-3"'), "not a range [LO, HI]", 2),
    (GOOD.replace('name = "t"', 'nmae = "t"'), "unknown key 'nmae'", 1),
    (GOOD.replace('name = "t"', "name = t"), "not valid TOML", 1),
    (GOOD.replace('system = "Judge."', 'system = "Judge."\nanswer = "stars"'), "answer 'stars'", 4),
    (GOOD.replace('system = "Judge."', 'system = "Judge."\ncriteria = ["a"]'), "needs answer", 4),
    (GOOD.replace("{profile}\n{candidates}", "{candidates}\n{profile}"), "comes before {profile}", 5),
])
def test_template_errors_name_file_and_line(text, problem, line):
    with pytest.raises(InputError) as err:
        parse_template(text, "my.toml")
    assert problem in str(err.value) and err.value.source == "my.toml" and err.value.line == line
    assert "(fix: " in str(err.value)


def test_a_template_in_the_former_format_is_refused_with_the_new_form():
    former = "name: t\nscale: 0-3\n=== system\nJudge.\n=== user\n{profile}\n{candidates}\n{answer_format}\n"
    with pytest.raises(InputError, match=r"mine\.txt:1: a template in the former format .*fix: write it as "
                                         r"TOML: name = \"\.\.\.\", scale = \[0, 7\]"):
        parse_template(former, "mine.txt")


def test_a_literal_brace_is_written_twice_and_reaches_the_model_once():
    t = parse_template(GOOD.replace("{answer_format}", '{answer_format}\nLike {{"label": 3}}.').replace(
        "Judge.", "Judge {{x}}."))
    msg = t.render("P", "C", None)
    assert msg.user.endswith('\nLike {"label": 3}.') and msg.system == "Judge {x}."


def test_the_template_hash_is_its_content_not_its_file():
    """A comment, the key order or the quoting style does not change the cache's key; the text does."""
    t = parse_template(GOOD)
    same = parse_template('# a comment\nuser = """\n{profile}\n{candidates}\n{answer_format}"""\n'
                          'system = \'Judge.\'\nscale = [ 0 , 3 ]\nname = "t"\n')
    assert same.sha256 == t.sha256 and len(t.sha256) == 64
    assert parse_template(GOOD.replace("Judge.", "Judge!")).sha256 != t.sha256
    assert parse_template(GOOD.replace('"t"', '"u"')).sha256 != t.sha256


def test_user_template_file_and_unknown_name(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    assert load_template(str(path)).scale == (0, 3)
    with pytest.raises(ConfigError, match="unknown prompt template 'nope'.*baseline"):
        load_template("nope")


def test_placeholder_text_inside_a_profile_is_not_expanded():
    t = parse_template(GOOD)
    assert t.render("a {candidates} b", "C", None).user.startswith("a {candidates} b\nC")


# -------------------------------------------------------------------------------------- profiles

def test_field_sets_and_missing_fields():
    assert parse_fields("title+genres") == ("title", "genres")
    assert parse_fields("title+year+avg_rating") == ("title", "year", "avg_rating")
    with pytest.raises(ConfigError, match="unknown field"):
        parse_fields("title+colour")
    with pytest.raises(ConfigError, match="no directors"):
        HistoryProfiles(tiny_collection(), "title+directors")
    # 'all' is the fields this collection holds (see test_judge_protocol for posters and ids)
    assert HistoryProfiles(tiny_collection(), "all").fields == ("title", "year", "genres", "avg_rating",
                                                                "num_ratings")


def test_rendering_and_derived_stats_come_from_history():
    c = tiny_collection()
    train = c.interactions[c.interactions.timestamp < 25]  # drops u1's i1 rating (t=30)
    p = HistoryProfiles(c, "title+year+genres+avg_rating+num_ratings", size=10, history=train)
    # i1 in train: only u2's 4.0 -> mean 4.00, one rating
    assert p.render_item("i1") == "Title: Alpha | Year: 1990 | Genres: Comedy | Average rating: 4.00/5 | " \
                                  "Number of ratings: 1"
    # i3: year missing; rated once (u1, 1.0); i5: never rated, genres missing
    assert p.render_item("i3") == "Title: Gamma | Year: unknown | Genres: Drama | Average rating: 1.00/5 | " \
                                  "Number of ratings: 1"
    assert p.render_item("i5").endswith("Genres: unknown | Average rating: unknown | Number of ratings: 0")


def test_candidate_stats_leave_out_the_users_own_rating():
    items = pd.DataFrame({"title": [f"Movie {k}" for k in range(6)]}, index=[str(k) for k in range(6)])
    inter = pd.DataFrame([("u0", "1", 2.0, 1), ("u0", "2", 4.0, 2), ("u0", "5", 5.0, 3), ("u1", "1", 3.0, 1),
                          ("u1", "5", 2.0, 2), ("u2", "5", 4.0, 1)], columns=["user", "item", "rating", "timestamp"])
    p = HistoryProfiles(Collection("c", inter, items), fields="title+avg_rating+num_ratings", size=10)
    # item 5 over everyone: (5 + 2 + 4) / 3 = 3.67; as u0's candidate: (2 + 4) / 2 = 3.00, 2 ratings
    assert p.render_item("5") == "Title: Movie 5 | Average rating: 3.67/5 | Number of ratings: 3"
    assert p.render_item("5", "u0") == "Title: Movie 5 | Average rating: 3.00/5 | Number of ratings: 2"
    # as u2's: (5 + 2) / 2 = 3.50
    assert p.render_item("5", "u2") == "Title: Movie 5 | Average rating: 3.50/5 | Number of ratings: 2"
    # item 2: only u0 rated it, so u0 sees no rating at all; u1 did not rate it and sees u0's 4.00
    assert p.render_item("2", "u0") == "Title: Movie 2 | Average rating: unknown | Number of ratings: 0"
    assert p.render_item("2", "u1") == "Title: Movie 2 | Average rating: 4.00/5 | Number of ratings: 1"


def test_profile_sampling_is_seeded_excludes_candidates_and_is_chronological():
    c = tiny_collection()
    full = HistoryProfiles(c, "title", size=3, seed=1)
    # size 3 covers all of u1's items, shown oldest first: i2 (t=10), i3 (t=20), i1 (t=30)
    assert full.sample("u1") == [("i2", 3.0), ("i3", 1.0), ("i1", 5.0)]
    assert [i for i, _ in full.sample("u1", exclude=["i3"])] == ["i2", "i1"]
    assert full.profile_text("u2") == "- Title: Alpha | Rating: 4\n- Title: Delta | Rating: 2"
    only_u2 = HistoryProfiles(c, "title", size=3, seed=1, users=["u2"])  # indexing fewer users changes nothing
    assert only_u2.profile_text("u2") == full.profile_text("u2") and not only_u2.has("u1")
    # size 1: the seeded choice is stable across builders and differs by seed somewhere
    picks = {HistoryProfiles(c, "title", size=1, seed=s).sample("u1")[0][0] for s in range(20)}
    assert HistoryProfiles(c, "title", size=1, seed=3).sample("u1") == HistoryProfiles(c, "title", size=1,
                                                                                       seed=3).sample("u1")
    assert len(picks) > 1
    recent = HistoryProfiles(c, "title", size=1, sampling="recent")
    assert recent.sample("u1") == [("i1", 5.0)]  # t=30 is the newest
    assert recent.sample("u1", exclude=["i1"]) == [("i3", 1.0)]  # then t=20


def test_topics_file(tmp_path):
    assert read_topics("q1\tred running shoes\nq2\t  wool   socks \n") == {"q1": "red running shoes",
                                                                           "q2": "wool socks"}
    assert read_topics('{"qid": "7", "text": "a b"}\n') == {"7": "a b"}
    with pytest.raises(InputError) as err:
        read_topics("q1\tx\nq1\ty\n")
    assert err.value.line == 2
    qp = QueryProfiles({"q": "comedy from 1990"}, tiny_collection(), "title+year")
    assert qp.profile_text("q") == "comedy from 1990" and qp.render_item("i1") == "Title: Alpha | Year: 1990"


# --------------------------------------------------------------------------------------- parsing

@pytest.mark.parametrize("text, label", [
    ('{"label": 5}', 5),
    ('```json\n{"label": 2}\n```', 2),
    ('Sure! {"score": 4} is my answer', 4),
    ("Score: 6", 6),
    ("Interest: 3\nbecause ...", 3),
    ("7", 7),
    ('{"label": "4"}', 4),
    ('{"label": 3.0}', 3),
])
def test_parse_single(text, label):
    r = parse_answer(text, (0, 7))
    assert r.ok and r.labels == {SINGLE: label}


@pytest.mark.parametrize("text, reason", [
    ('{"label": 9}', "out_of_range"),
    ('{"label": -1}', "out_of_range"),
    ('{"label": 3.5}', "unparseable"),
    ('{"label": true}', "unparseable"),
    ("I cannot decide.", "unparseable"),
    ('{"label": ', "unparseable"),
    ("", "empty"),
])
def test_parse_single_failures_are_never_zero(text, reason):
    r = parse_answer(text, (0, 7))
    assert not r.ok and r.labels == {} and r.errors == {SINGLE: reason}


def test_parse_truncated_and_multi():
    assert parse_answer('{"lab', (0, 7), finish_reason="length").errors == {SINGLE: "truncated"}
    keys = ["c1", "c2", "c3"]
    r = parse_answer('{"labels": {"c1": 1, "c2": 8}}', (0, 7), keys)
    assert r.labels == {"c1": 1} and r.errors == {"c2": "out_of_range", "c3": "missing_item"}
    r = parse_answer("[c1] 2\nc2: 0\nc3 = 7", (0, 7), keys)
    assert r.ok and r.labels == {"c1": 2, "c2": 0, "c3": 7}
    r = parse_answer('[{"key": "c1", "label": 1}, {"key": "c2", "label": 2}, {"key": "c3", "label": 3}]',
                     (0, 7), keys)
    assert r.labels == {"c1": 1, "c2": 2, "c3": 3}


@pytest.mark.parametrize("text, labels, errors", [
    # a dash touching the digits is a sign: negative labels are out of range, never their absolute value
    ("c1: -1\nc2: 3", {"c2": 3}, {"c1": "out_of_range"}),
    ("[c1] - 2\n[c2]: -7", {"c1": 2}, {"c2": "out_of_range"}),
    # one key answered twice with different numbers cannot be read
    ("c1: 3\nc1: 5\nc2: 1", {"c2": 1}, {"c1": "conflicting"}),
    ("c1: 3\nc1: 3\nc2: 1", {"c1": 3, "c2": 1}, {}),
])
def test_parse_keyed_text_signs_and_conflicts(text, labels, errors):
    r = parse_answer(text, (0, 7), ["c1", "c2"])
    assert (r.labels, r.errors) == (labels, errors)


@pytest.mark.parametrize("text, finish, expected", [
    # a quoted profile rating loses to the score key
    ("The user gave Toy Story a rating: 5, so I'd say score: 1", None, 1),
    ("score: 2 (I read rating: 4 in the history)", None, 2),
    # two different scores: no way to tell the answer
    ("Score: 3. On reflection, score: 5", None, "conflicting"),
    ("Score: 3 ... final score: 3", None, 3),
    # a number that starts a range describes the scale
    ("Interest: 0-7 scale; my answer is 6", None, "unparseable"),
    ("Interest: 0 to 7 scale; interest: 6", None, 6),
    # numbers inside broken or cut-off JSON are not labels
    ('{"reasoning": "liked X (rating: 2) a lot", "label": 6', None, "unparseable"),
    ('{"reasoning": "liked X (rating: 2) a lot", "label": 6', "length", "truncated"),
    ('Here: {"reasoning": "rating: 2", "lab', "length", "truncated"),
    ('{"label": 6, "reasoning": "x"} extra {', None, 6),
])
def test_parse_single_text_priority_ranges_and_truncation(text, finish, expected):
    r = parse_answer(text, (0, 7), finish_reason=finish)
    if isinstance(expected, int):
        assert r.ok and r.labels == {SINGLE: expected}
    else:
        assert r.labels == {} and r.errors == {SINGLE: expected}


def test_parse_criteria():
    crit = ("topic", "tone")
    r = parse_answer('{"topic": 3, "tone": 5, "label": 4}', (0, 7), None, crit)
    assert r.labels == {SINGLE: 4} and r.criteria == {SINGLE: {"topic": 3, "tone": 5}}
    assert parse_answer('{"topic": 3, "label": 4}', (0, 7), None, crit).errors == {SINGLE: "missing_criterion"}
    assert parse_answer('{"topic": 3, "tone": 9, "label": 4}', (0, 7), None, crit).errors == \
        {SINGLE: "out_of_range"}
    # criteria that are not a mapping are missing, not skipped
    for bad in ('{"criteria": [3, 5], "label": 4}', '{"criteria": "n/a", "label": 4}'):
        assert parse_answer(bad, (0, 7), None, crit).errors == {SINGLE: "missing_criterion"}


# ------------------------------------------------------------------------------------- selection

def _run(name, rows):
    return Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "score"]), name)


def test_select_depth_union_and_only_unjudged():
    a = _run("a", [("u1", "i1", 3), ("u1", "i2", 2), ("u1", "i3", 1), ("u2", "i4", 1)])
    b = _run("b", [("u1", "i3", 9), ("u1", "i1", 8), ("u1", "i5", 7)])
    # top-2: a -> u1 {i1, i2}, u2 {i4}; b -> u1 {i3, i1}; union deduplicated
    assert select_pairs({"a": a, "b": b}, depth=2) == (
        Pair("u1", "i1"), Pair("u1", "i2"), Pair("u1", "i3"), Pair("u2", "i4"))
    assert len(select_pairs([a, b])) == 4 + 3 - 2  # no depth: every ranked pair; i1 and i3 in both
    judged = Qrels.from_frame(pd.DataFrame({"qid": ["u1"], "docid": ["i2"], "label": [1]}))
    assert Pair("u1", "i2") not in select_pairs([a, b], depth=2, only_unjudged=judged)


def test_select_depth_cut_breaks_ties_by_policy():
    a = _run("a", [("u1", "i1", 1), ("u1", "i2", 1), ("u1", "i3", 1)])
    # trec_eval order: docid descending among ties -> i3 first
    assert select_pairs([a], depth=1, tie_policy="trec_eval") == (Pair("u1", "i3"),)
    assert select_pairs([a], depth=1, tie_policy="docid") == (Pair("u1", "i1"),)


def test_select_per_user_sampling():
    rows = [("u1", f"i{k}", 20 - k) for k in range(20)] + [("u2", "i0", 1), ("u2", "i1", 0)]
    run = _run("a", rows)
    sel = select_pairs([run], per_user=5, seed=7)
    assert sum(p.qid == "u1" for p in sel) == 5 and sum(p.qid == "u2" for p in sel) == 2
    assert sel == select_pairs([run], per_user=5, seed=7)
    assert {select_pairs([run], per_user=5, seed=s) for s in range(5)}.__len__() > 1
    ref = Qrels.from_frame(pd.DataFrame({"qid": ["u1"] * 4, "docid": ["x1", "x2", "x3", "x4"], "label": 1}))
    from_ref = select_pairs(per_user=3, reference=ref, seed=1)
    assert len(from_ref) == 3 and {p.docid for p in from_ref} <= {"x1", "x2", "x3", "x4"}
    with pytest.raises(ConfigError, match="--per-user"):
        select_pairs(reference=ref)


# ------------------------------------------------------------------------------------- baselines

def test_overlap_score_by_hand():
    g = lambda *xs: frozenset(("genres", x) for x in xs)  # noqa: E731
    cand = g("Comedy", "Drama")
    history = [(g("Comedy"), 5.0), (g("Drama", "Comedy"), 3.0), (g("Horror"), 2.0)]
    # per item: 1/2, 2/2, 0/2, weighted by ratings: (5*0.5 + 3*1 + 2*0) / (5+3+2) = 5.5 / 10
    assert overlap_score(cand, history) == pytest.approx(5.5 / 10)
    assert overlap_score(frozenset(), history) == 0.0


def test_overlap_judge_end_to_end():
    c = tiny_collection()
    res = judge_pairs([("u1", "i4"), ("u2", "i2"), ("u2", "i5"), ("u9", "i1"), ("u1", "zz")], c,
                      JudgeSettings(judge="overlap", fields="title+genres"))
    got = {(j.qid, j.docid): (j.label, j.reason) for j in res.judgments}
    # u2 history: i1 (Comedy, 4.0), i4 (Horror, 2.0); i2 = {Comedy, Drama}:
    # s = (4 * 1/2 + 2 * 0/2) / 6 = 1/3 -> floor(8/3) = 2
    assert got[("u2", "i2")] == (math.floor(8 * (4 * 0.5) / 6), None) == (2, None)
    # u1 history i1 (Comedy 5), i2 (Comedy+Drama 3), i3 (Drama 1); i4 = {Horror}: no overlap -> 0
    assert got[("u1", "i4")] == (0, None)
    assert got[("u2", "i5")] == (0, None)  # no attributes: 0 by definition (a baseline, not a failure)
    assert got[("u9", "i1")] == (None, "no_profile") and got[("u1", "zz")] == (None, "unknown_item")
    assert res.provenance["kind"] == "baseline" and res.provenance["llm"] is False
    assert {(q.qid, q.docid) for q in res.qrels()} == {("u1", "i4"), ("u2", "i2"), ("u2", "i5")}
    with pytest.raises(ConfigError, match="categorical"):
        judge_pairs([("u1", "i4")], c, JudgeSettings(judge="overlap", fields="title"))


def test_popularity_labels_by_hand():
    counts = pd.Series({"a": 10, "b": 3, "c": 3, "d": 1})
    universe = pd.Index(["a", "b", "c", "d", "e", "f", "g", "h"])  # e..h never rated (count 0)
    labels = popularity_labels(counts, universe)
    # items with strictly fewer ratings: a 7, b 5, c 5, d 4, zeros 0 -> floor(8 * n / 8) = n
    assert labels.to_dict() == {"a": 7, "b": 5, "c": 5, "d": 4, "e": 0, "f": 0, "g": 0, "h": 0}


def test_popularity_judge_counts_history_only():
    c = tiny_collection()
    train = c.interactions[c.interactions.user == "u1"]  # i1, i2, i3 once each; i4, i5 never
    res = judge_pairs([("u2", "i1"), ("u2", "i4")], c, JudgeSettings(judge="popularity"), history=train)
    # 5 items; i1 has 1 rating, 2 items have fewer (i4, i5) -> floor(8 * 2/5) = 3; i4 -> 0
    assert res.labels == {("u2", "i1"): 3, ("u2", "i4"): 0}


# ------------------------------------------------------------------------- aggregation and registry

@pytest.mark.parametrize("labels, how, expected", [
    ([2, 3], "mean", 3),        # 2.5 rounds half up
    ([1, 2, 2], "mean", 2),     # 1.67
    ([0, 0, 7], "mean", 2),     # 2.33
    ([0, 0, 7], "mode", 0),
    ([1, 3, 3, 1, 2], "mode", 1),  # modes 1 and 3 tie, both 1 from the mean 2.0: the lower wins
    ([1, 3, 3, 1, 5], "mode", 3),  # modes 1 and 3 tie, mean 2.6 is closer to 3
])
def test_aggregate(labels, how, expected):
    assert aggregate_labels(labels, how) == expected


def test_repeat_agreement_matches_krippendorff():
    import krippendorff  # the dev extra's reference implementation
    rows = [[1, 1, 2], [3, 3, 3], [0, 1, None], [5, 7, 6], [2, 2, 2]]
    a = repeat_agreement(rows)
    # all equal: rows 2 and 5 of 5 -> 0.4; pairwise exact: (1/3 + 1 + 0 + 0 + 1) / 5
    assert a.all_equal == pytest.approx(0.4) and a.pairwise_exact == pytest.approx((1 / 3 + 1 + 0 + 0 + 1) / 5)
    data = np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float).T
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert a.alpha_interval == pytest.approx(ref, abs=1e-12)


def test_config_and_registry_refuse_mistakes():
    with pytest.raises(ConfigError, match="unexpected parameter modle=; known: judge, model"):
        JudgeSettings.from_dict({"modle": "x"})
    with pytest.raises(ConfigError, match="unknown generation parameter"):
        JudgeSettings(params={"temprature": 0})
    with pytest.raises(ConfigError, match="repeats"):
        JudgeSettings(repeats=0)
    for bad in (3, "top_k=20", [1], {1: 2}):
        with pytest.raises(ConfigError, match="extra_body must be a JSON object"):
            JudgeSettings(params={"extra_body": bad})
    assert JudgeSettings(params={"extra_body": {"top_k": 20}}).params == {"extra_body": {"top_k": 20}}
    with pytest.raises(ConfigError, match="already registered"):
        register_judge(JudgeSpec("overlap", "baseline", "dup", lambda ctx: None))
    with pytest.raises(ConfigError, match="judge=: must be one of openai, overlap, popularity, not 'gpt'"):
        JudgeSettings(judge="gpt")
    with pytest.raises(ConfigError, match="unknown judge 'gpt'"):
        get_judge("gpt")


@pytest.mark.parametrize("content, problem", [
    ('{"m": {"input": "cheap", "output": 1}}', "model 'm': input is \"cheap\", not a price"),
    ('{"m": {"input": null, "output": 1}}', "model 'm': input is null, not a price"),
    ('{"m": {"input": 1, "output": -2}}', "model 'm': output is -2, not a price"),
    ('{"m": {"input": 1, "output": true}}', "model 'm': output is true, not a price"),
    ("[1, 2]", "expected a JSON object of models, got a list"),
    # aliases, as_of and the context limits
    ('{"m": {"alias_of": "nowhere"}}', "model 'm': alias_of names 'nowhere', which has no prices"),
    ('{"m": {"alias_of": "gpt-5", "input": 1}}', "an alias holds only"),
    ('{"m": {"input": 1, "output": 1, "as_of": 2025}}', "as_of is 2025, not a text"),
    ('{"m": {"input": 1, "output": 1, "context_tokens": 0}}', "context_tokens is 0, not a number of tokens"),
    ('{"m": {"input": 1, "output": 1, "max_input_tokens": 1.5}}', "max_input_tokens is 1.5"),
    ('{"m": {"input": 1, "output": 1, "window": 8}}', "expected keys input, output"),
])
def test_bad_price_tables_name_file_model_and_fix(tmp_path, content, problem):
    from recjudge.judging import load_prices

    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        load_prices(path)
    text = str(err.value)
    assert str(path) in text and problem in text and "fix:" in text


def test_token_heuristic():
    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2


@pytest.mark.parametrize("url, public", [
    ("https://user:pw@host.example:8443/v1?api_key=abc", "https://host.example:8443/v1"),
    ("http://only-user@127.0.0.1/v1", "http://127.0.0.1/v1"),
    # a non-secret parameter decides what the endpoint answers and stays; the key goes
    ("https://az.example/openai?api-version=2024-06-01&api-key=SECRET#frag",
     "https://az.example/openai?api-version=2024-06-01"),
    ("http://[::1]:8000/v1?token=SECRET&sig=SECRET", "http://[::1]:8000/v1"),
    (None, None),
])
def test_public_url_drops_credentials(url, public):
    from recjudge.urls import public_url

    assert public_url(url) == public


def test_per_user_sample_is_not_the_hash_tie_winners():
    """Sampling K items per user must not use the key the hash tie policy orders ties by, or the
    judged sample would be exactly the items that win every tie in tie-heavy runs (Pop)."""
    import pandas as pd

    from recjudge.data.trec import Run
    from recjudge.evaluation.ties.policy import resolve_ties
    from recjudge.judging import select_pairs

    frame = pd.DataFrame({"qid": [f"u{u}" for u in range(20) for _ in range(40)],
                          "docid": [f"d{d}" for _ in range(20) for d in range(40)], "score": 1.0})
    run = Run.from_frame(frame, "pop")  # every item tied for every user
    winners = resolve_ties(run, "hash", seed=0, depth=5).frame
    sampled = select_pairs([run], per_user=5, seed=0)
    same = sum(
        set(winners[winners.qid == u].docid) == {p.docid for p in sampled if p.qid == u} for u in set(frame.qid))
    assert same == 0
