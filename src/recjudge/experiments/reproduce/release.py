"""The release against Section 3's and 5.1's statistics, and whether every system ranks every participant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...data.trec import Qrels
from .cells import Cells
from .settings import ReproduceSettings

def _profile_tokens(collection, base, human: Qrels, users: Sequence[str]) -> float | None:
    """Estimated input tokens of one prompt showing each of ``users``' whole profile with every field
    (no call: the judge's dry run over one judged item each); their mean."""
    from ...judging import Pair, judge_pairs

    first = human.frame.drop_duplicates("qid").set_index("qid").docid
    pairs = [Pair(u, str(first[u])) for u in users if u in first.index]
    if not pairs:
        return None
    counts = collection.interactions.user.value_counts()
    config = base.replace(fields="all", profile_size=int(max(1, counts.reindex(users).max())), dry_run=True,
                          context_tokens=2**62)
    summary = judge_pairs(pairs, collection, config, name="profile-tokens").summary
    return summary.estimated_input_tokens / max(1, summary.planned_calls)


def dataset_cells(s: ReproduceSettings, cells: Cells, extras, collection, human: Qrels, runs: Mapping,
                  base) -> None:
    """The release against Section 3's and 5.1's statistics, and whether every system ranks every
    participant (a participant a run leaves out scores 0 for that run in every measure)."""
    judged = human.frame.groupby("qid").size()
    participants = set(judged.index)
    extras["participants"] = len(participants)
    inter = collection.interactions
    profile = inter[inter.user.isin(participants)].user.value_counts()
    cells.add("dataset", "ML-32M-ext", "participants", len(participants), "users the human qrels judge",
              published_as=("section3", "ML-32M-ext", "participants"))
    cells.add("dataset", "ML-32M-ext", "judgments", len(human.frame), "rows of the human qrels",
              published_as=("section3", "ML-32M-ext", "judgments"))
    cells.add("dataset", "ML-32M-ext", "fewest judged movies of a participant", float(judged.min()),
              published_as=("section3", "ML-32M-ext", "judged movies per participant"))
    cells.add("dataset", "profiles", "mean movies per participant", float(profile.mean()) if len(profile) else None,
              published_as=("section5.1", "profiles", "mean movies per participant"))
    cells.add("dataset", "profiles", "max movies per participant", float(profile.max()) if len(profile) else None,
              published_as=("section5.1", "profiles", "max movies per participant"))
    if len(profile):
        mean_tokens = _profile_tokens(collection, base, human, list(profile.index))
        most = _profile_tokens(collection, base, human, [profile.idxmax()])
        note = "recjudge's prompt with every field, ≈3 characters per token (the margin of OpenAI models), no call"
        cells.add("dataset", "profiles", "mean tokens, full profile, all fields", mean_tokens, note,
                  published_as=("section5.1", "profiles", "mean tokens, full profile, all fields"))
        cells.add("dataset", "profiles", "tokens of the largest profile, all fields", most,
                  f"participant {profile.idxmax()}; {note}",
                  published_as=("section5.1", "profiles", "max tokens, full profile, all fields"))
    ml = inter[~inter.user.isin(participants)]
    note = "" if len(ml) else "no ML-32M ratings in the folder (the release before its make.sh)"
    for column, value in (("ratings", len(ml)), ("users", ml.user.nunique()), ("movies", ml.item.nunique())):
        cells.add("dataset", "ML-32M", column, float(value) if len(ml) else None, note,
                  published_as=("section3", "ML-32M", column))
    if runs:
        missing = {name: sorted(participants - set(run.qids)) for name, run in runs.items()}
        missing = {k: v for k, v in missing.items() if v}
        extras["unranked_participants"] = missing
        cells.add("dataset", "systems", "participants some system does not rank",
                  float(len(set().union(*missing.values()))) if missing else 0.0,
                  "; ".join(f"{k}: {len(v)}" for k, v in sorted(missing.items())) or
                  f"every one of {len(runs)} systems ranks every participant")
