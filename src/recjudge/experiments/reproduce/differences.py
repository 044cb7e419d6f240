"""Every setting of a reproduction that is not the paper's, and which cells it can move."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .historical import system_groups
from .judges import field_sets, training_positives
from .settings import K_VALUES, PROFILE_SIZES, STUDY, ReproduceSettings

LLM_CELLS = "every LLM-label cell (Tables 3, 4, 5, 8, 9; Figures 3-5; significance agreement)"
SYSTEM_CELLS = "every system-ranking cell (Tables 1, 4, 5, 9; Figures 2 and 5; significance agreement)"
Add = Callable[[str, Any, Any, str], None]  # (setting, the paper's, the one used, the cells it moves)


def _table3_fields(s: ReproduceSettings, collection) -> set[str]:
    """The fields Table 3's rows show (none when Table 3 is not computed)."""
    from ...judging.profile import parse_fields

    if "table3" not in s.only:
        return set()
    return {f for spec in field_sets(s, collection)[0].values() for f in parse_fields(spec)}


def differences(s: ReproduceSettings, base, not_applied: Mapping[str, Any], measure_note: str, runs,
                run_files, collection, extras) -> list[dict[str, str]]:
    """Every setting that is not the paper's, and which cells it can move."""
    from ...protocol import load_protocol

    protocol = load_protocol(STUDY)
    out: list[dict[str, str]] = []

    def add(setting: str, paper: Any, used: Any, moves: str) -> None:
        out.append({"setting": setting, "paper": str(paper), "used": str(used), "moves": moves})

    _judge(add, protocol, s, base, not_applied, collection)
    _samples(add, protocol, s, collection, extras)
    _systems(add, protocol, s, runs, run_files, extras, measure_note)
    return out


def _judge(add: Add, protocol, s: ReproduceSettings, base, not_applied: Mapping[str, Any], collection) -> None:
    """The judge: its settings, the prompts' wording, the rating scale and the derived fields."""
    from ...judging.prompts import load_template

    only = set(s.only)
    judge = protocol.settings("judge")
    used = {k: getattr(base, k) for k in judge if hasattr(base, k)}
    if "reasoning_effort" in judge:
        used["reasoning_effort"] = base.params.get("reasoning_effort")
    for key, d in protocol.differences("judge", used).items():
        if key != "prompt":
            add(f"judge {key}", d["protocol"], d["used"], LLM_CELLS)
    for key, value in not_applied.items():
        add(f"judge {key}", value, "not available in this recjudge's judge", LLM_CELLS)
    tpl = load_template(base.prompt)
    if base.prompt in ("baseline", "defined-scale"):
        add("prompt wording", "the paper's Figure 1 text (not in our copy)", f"recjudge's wording of its design "
            f"({tpl.name}); pass the text as a template file with --prompt", LLM_CELLS)
    if only & {"table8", "table9"} and s.defined_scale_prompt == "defined-scale":
        add("defined-scale prompt wording", "Appendix B's prompt with explicit scale definitions (not in our copy)",
            "recjudge's defined-scale template; pass the text with --defined-scale-prompt",
            "Table 8 and Table 9, row defined scale")
    add("rating scale in the prompt", "explicit ratings 'on a 1-5 scale' (Section 3)",
        f"the collection's scale ({collection.rating_scale.describe()})", LLM_CELLS)
    from ...judging.profile import DERIVED_FIELDS, parse_fields

    derived = (set(parse_fields(base.fields)) | _table3_fields(s, collection)) & set(DERIVED_FIELDS)
    if derived:
        sources = collection.info.get("interactions_from") or [collection.name]
        add("average rating and number of ratings", "not stated where they come from (Table 3's rows 'Title + "
            "Average rating' and 'Title + Number ratings')", f"computed from the collection's ratings "
            f"({', '.join(map(str, sources))}: {len(collection.interactions):,} ratings, ML-32M's users with the "
            "participants), leaving out the judged participant's own rating of the movie",
            "Table 3 (those rows and 'Title + All metadata'), every cell of the protocol's judge")


def _samples(add: Add, protocol, s: ReproduceSettings, collection, extras) -> None:
    """The samples and the targets' own choices: experiments, K, the pool, Table 3's rows, Figures 3 and 5, Table 5."""
    only = set(s.only)
    ablate = protocol.settings("ablate")
    for key, paper in (("experiments", ablate.get("experiments", 3)), ("per_user", ablate.get("per_user", 50))):
        if getattr(s, key) != paper:
            add(key, paper, getattr(s, key), "Tables 3, 4, 8, 9 and Figures 3-5 (their means and CIs)")
    if tuple(s.k_values) != K_VALUES:
        add("K values", ", ".join(map(str, K_VALUES)), ", ".join(map(str, s.k_values)), "Table 4")
    if s.depth != 100:
        add("pool depth", 100, s.depth, "Table 5, significance agreement")
    if only & {"table3"}:
        rows, skipped = field_sets(s, collection)
        if s.field_sets:
            add("Table 3 rows", "the paper's 11 field sets", ", ".join(rows), "Table 3")
        if skipped:
            add("Table 3 rows", ", ".join(skipped), "left out: the collection has no " + "; ".join(
                f"{', '.join(v)} field ({k})" for k, v in skipped.items()), "Table 3 (those rows are missing)")
    if "figure3" in only:
        add("Figure 3 profile sizes", "the figure's sizes (the image is not in our copy)",
            ", ".join(map(str, s.profile_sizes)) + (" (recjudge's default)" if tuple(s.profile_sizes) == PROFILE_SIZES
                                                   else ""), "Figure 3")
    if "figure5" in only:
        add("Figure 5 ranking", "not stated (the text ties it to τ 0.92 at K = 100)",
            "each system's nDCG@100 at K = 100 averaged over the experiments, then ranked", "Figure 5 and its ranks")
    if "table5" in only:
        add("Table 5 judging", "not stated whether the pool was judged in each of the three experiments",
            "the depth-100 pool judged once (the first experiment's seed)", "Table 5, significance agreement")
        if extras.get("calibration_refused"):
            add("Table 5 calibration", "the mean human label per LLM grade over the items both label",
                extras["calibration_refused"] + " (--allow-weak-calibration computes the column anyway, with "
                "the warning)", "Table 5, column and row LLM fills gaps (not computed)")
        cal = extras.get("calibration")
        if cal:
            mapping = {str(g["llm_grade"]): g["label"] for g in cal.get("grades", ()) if g.get("label") is not None}
            add("Table 5 calibration labels", "the mean human label per LLM grade (not stated how a mean becomes "
                "a label)", f"the mean rounded half up to a whole label (qrels hold integers): "
                f"{len(mapping)} LLM grades onto {len(set(mapping.values()))} labels "
                f"({', '.join(f'{k}→{v}' for k, v in mapping.items())})", "Table 5, column and row LLM fills gaps")


def _systems(add: Add, protocol, s: ReproduceSettings, runs, run_files, extras, measure_note: str) -> None:
    """The systems, their training and groups, the historical setting, the measures and the participants ranked."""
    only = set(s.only)
    train = protocol.settings("train")
    if s.runs is not None:
        add("systems", "the paper's 52 configurations (Appendix A; not in our copy)", f"runs given: {s.runs} "
            f"({len(runs)} systems)", SYSTEM_CELLS)
    else:
        grid = s.grid or train.get("grid")
        add("systems", "the paper's 52 configurations (Appendix A; not in our copy)",
            f"grid {grid}" + (f", systems {s.systems}" if s.systems else "") +
            (f", {s.epochs} epochs" if s.epochs else ""), SYSTEM_CELLS)
        for key in ("sample_users", "min_interactions"):
            if getattr(s, key) is not None and getattr(s, key) != train.get(key):
                add(f"train {key}", train.get(key), getattr(s, key), SYSTEM_CELLS)
        positives = training_positives(s)
        add("training positives", "not stated (Section 3: the sampled users' interactions)",
            f"the ratings >= {positives:g}, the rule of the release's implicit-ratings.csv (--min-rating 0 trains "
            "on every rating)" if positives > 0 else "every explicit rating, 0.5 stars included (--min-rating 0)",
            SYSTEM_CELLS + (" and the historical setting's held-out interactions" if s.historical_runs is None
                            else ""))
    if only & {"table1"} and runs:
        groups = system_groups(s, run_files, sorted(runs))
        if set(groups.values()) == {"all systems"}:
            add("system groups", "7 pooled and 45 non-pooled configurations (Table 1)",
                "none given (--groups, or group = \"pooled\" in the grid file): one row of all systems", "Table 1")
        else:
            for group in ("pooled", "non-pooled"):
                if group not in set(groups.values()):
                    add("system groups", "7 pooled and 45 non-pooled configurations (Table 1)",
                        f"no {group} system among the {len(groups)} given ({', '.join(sorted(set(groups.values())))}"
                        f"): Table 1's {group} row is absent, not zero" + (
                            "; the grid's systems follow Section 3's rule for the non-pooled ones, and the 7 pooled "
                            "configurations are not in our copy (give them in a grid file with group = \"pooled\")"
                            if group == "pooled" else ""), f"Table 1 (the {group} row)")
    if only & {"table1", "figure2"} and extras.get("historical_users") is not None:
        add("historical setting's users", "not stated (ML-32M users of the 80%-20% split)",
            f"{extras['historical_users']:,} users: those of the historical qrels (each user's held-out 20%), "
            f"not the {extras.get('participants', 51)} participants the Cranfield setting ranks",
            "Table 1 (historical column), Figure 2")
    if only & {"table1", "figure2"}:
        if s.historical_runs is None:
            add("historical split", "an 80%-20% train-test split (per user, by time; not otherwise stated)",
                f"{s.historical_split} at 0.8 (the participants' ratings share one timestamp, so their held-out "
                "20% is taken in item-id order)", "Table 1 (historical column), Figure 2, Section 5.2's median 8")
        add("historical relevance", "not stated (the held-out interactions of the split)",
            "every held-out interaction relevant, label 1 (nDCG gain 1)", "Figure 2, Section 4's rank shifts")
    if measure_note:
        add("measures", protocol.settings("compare").get("measures"), measure_note, SYSTEM_CELLS)
    unranked = extras.get("unranked_participants")
    if unranked:
        add("participants ranked", "every system ranks all 51 participants",
            "; ".join(f"{k} leaves out {len(v)}" for k, v in sorted(unranked.items())) +
            " (a participant left out scores 0 for that system)", SYSTEM_CELLS)
