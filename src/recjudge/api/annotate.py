"""``recjudge annotate``'s settings (``AnnotateSettings``) and its work function (``annotate_with``).

The selection options are the judge's (one declaration, reused from
:class:`~recjudge.api.judge_settings.JudgeCommandSettings`), and so are the profile options
(:class:`~recjudge.judging.config.JudgeSettings`): with the same values and ``seed`` an assessor
is shown the pairs, the sampled history and the item fields of the judge's prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import field_validator, model_validator
from pydantic.fields import FieldInfo

from ..judging.profile import HISTORY_ORDERS, SAMPLINGS
from ..settings import Cli, Conflict, Inputs, PathText, Positive, Settings, TiePolicy, checked, option
from .judge_settings import JudgeCommandSettings

if TYPE_CHECKING:
    from ..annotation.export import AnnotateReport

__all__ = ["AnnotateSettings", "annotate_with"]


def _judge(name: str) -> Any:
    """The judge command's field ``name``: one declaration, reused (a copy: pydantic owns each)."""
    return FieldInfo.merge_field_infos(JudgeCommandSettings.model_fields[name])


class AnnotateSettings(Settings):
    """``recjudge annotate``: humans label (user, item) pairs in a local web page; every label is logged at once."""

    command: ClassVar[str] = "annotate"
    runs: Inputs = option(None, "run files or folders whose pairs to label, selected as `recjudge judge` selects "
                                "them (default: none; then --pairs, or --reference with --per-user)",
                          doc="run files or folders, Runs or DataFrames whose pairs to label (None: pairs, or "
                              "reference with per_user)", cli=Cli(nargs="+", metavar="DIR_OR_FILE"))
    collection: Inputs = option(None, "collection with item metadata and rated histories, e.g. ml-100k (default: "
                                      "none; required but by --export and --report)", cli=Cli(metavar="NAME_OR_PATH"))
    out: PathText = option(help="folder of the label logs (labels/*.jsonl) and the exported qrels (qrels/*.qrels)",
                           cli=Cli(metavar="DIR"))
    pairs: Inputs = option(None, "label every pair of these qrels (their labels are never shown; default: none)",
                           cli=Cli(metavar="QRELS"))
    collection_config: PathText | None = _judge("collection_config")
    split: str = _judge("split")
    depth: Positive | None = _judge("depth")
    per_user: Positive | None = _judge("per_user")
    reference: Inputs = _judge("reference")
    only_unjudged: Inputs = _judge("only_unjudged")
    tie_policy: TiePolicy = _judge("tie_policy")
    prompt: str = _judge("prompt")
    fields: str = _judge("fields")
    profile_size: int = _judge("profile_size")
    sampling: Literal[SAMPLINGS] = _judge("sampling")
    history_order: Literal[HISTORY_ORDERS] = _judge("history_order")
    seed: int = _judge("seed")
    items_per_call: int = _judge("items_per_call")
    annotator: str | None = option(None, "the assessor's name (default: asked on the page; several assessors then "
                                         "share one server, each on a log of their own)", cli=Cli(metavar="NAME"))
    overlap: Positive = option(1, "assessors each task is given to (k > 1 for inter-assessor agreement)",
                               cli=Cli(metavar="K"))
    self_assessment: bool = option(False, "participants judge for themselves: the assessor's name is a user id, "
                                          "whose own history and candidates are shown ('would you be interested "
                                          "in ...')", cli=Cli(flag="--self"))
    llm: Inputs = option(None, "an LLM's qrels of the same pairs: once an assessor has labelled every task, the "
                               "adjudication view shows where they disagree (never before; default: none)",
                         cli=Cli(metavar="QRELS"))
    host: str = option("127.0.0.1", "address to listen on; any but loopback requires the random access token the "
                                    "printed URL carries", cli=Cli(metavar="HOST"))
    port: int = option(0, "port to listen on (0: a free one, printed)", ge=0, le=65535, cli=Cli(metavar="PORT"))
    export: bool = option(False, "write the qrels from the logs and exit, serving nothing")
    report: bool = option(False, "print labels per hour per assessor and the label distribution, and exit")

    @field_validator("prompt")
    @classmethod
    def _known_prompt(cls, value: str) -> str:
        from ..judging.prompts import check_template

        return checked(check_template, value)

    @field_validator("annotator")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from ..annotation.security import check_name

        checked(check_name, value)
        return check_name(value)

    @field_validator("split")
    @classmethod
    def _check_split(cls, value: str) -> str:
        from ..data.splits import check_split

        return value if value == "none" else checked(check_split, value)

    @model_validator(mode="after")
    def _what_to_label(self):
        if self.export or self.report:
            return self
        if self.collection is None:
            raise Conflict("give {collection}: the page shows the items' metadata and the users' histories",
                           "collection")
        if self.pairs is not None and self.reference is not None:
            raise Conflict("give {pairs} or {reference}, not both", "pairs", "reference")
        if self.runs in (None, ()) and self.pairs is None and self.reference is None:
            raise Conflict("give {runs} (run files), {pairs} QRELS, or {reference} QRELS with {per_user} K",
                           "runs", "pairs", "reference", "per_user")
        if self.depth is not None and self.runs in (None, ()):
            raise Conflict("{depth} cuts the runs' rankings: give {runs} too", "depth", "runs")
        if self.self_assessment and self.overlap > 1:
            raise Conflict("{self_assessment} gives each user's pairs to that user alone: drop {overlap}",
                           "self_assessment", "overlap")
        return self


def annotate_with(s: AnnotateSettings, ready=None, progress=None) -> AnnotateReport:
    """Serve a local page where people label the pairs the judge would (``recjudge annotate``): each label
    is logged at once; the qrels of every assessor are exported when the server stops. With ``export``,
    only the export; with ``report``, only the labelling report. ``ready`` hears the page's URL."""
    from pathlib import Path

    from ..annotation.command import annotate
    from ..annotation.export import export_qrels, labelling_report

    from .._io import check_output_dir
    from .inputs import path_inputs

    out = Path(s.out)
    check_output_dir(out, s.name_of("out"), path_inputs(s.runs, s.pairs, s.reference, s.llm, s.collection))
    if s.report:
        return labelling_report(out)
    if s.export:
        return labelling_report(out, export_qrels(out))
    say = progress or (lambda m: None)
    collection, history = _collection(s)
    pairs = _pairs(s, collection, say)
    profile = {k: getattr(s, k) for k in ("prompt", "fields", "profile_size", "sampling", "history_order", "seed",
                                          "items_per_call")}
    paths = annotate(pairs, collection, history, out, profile=profile, annotator=s.annotator, overlap=s.overlap,
                     self_mode=s.self_assessment, llm=_llm(s), host=s.host, port=s.port, ready=ready, say=say)
    return labelling_report(out, paths)


def _collection(s: AnnotateSettings):
    """The collection and the interactions its profiles come from (the split's history, as the judge's)."""
    from ..data.collections import Collection, load_collection, read_collection_config

    collection = s.collection
    if not isinstance(collection, Collection):
        options = read_collection_config(s.collection_config) if s.collection_config else {}
        collection = load_collection(collection, **options)
    if s.split == "none":
        return collection, None
    from ..data.splits import make_split

    return collection, make_split(collection, s.split).history()


def _pairs(s: AnnotateSettings, collection, say) -> tuple:
    """The pairs to label: every pair of ``pairs``, else what ``recjudge judge`` selects from the runs."""
    from ..errors import ConfigError
    from ..judging.select import judge_selection
    from .inputs import qrels_input, read_runs_input

    if s.pairs is not None:
        qrels = qrels_input(s.pairs, "pairs")
        return tuple(sorted(set(zip(qrels.frame.qid.tolist(), qrels.frame.docid.tolist()))))
    runs = read_runs_input(s.runs) if s.runs not in (None, ()) else {}
    reference = qrels_input(s.reference, "reference") if s.reference not in (None, "collection") else None
    if s.reference == "collection":  # as the judge reads it: the collection's own human qrels
        if collection.qrels is None:
            raise ConfigError(f"collection {collection.name!r} has no human qrels for {s.name_of('reference')} "
                              "'collection'")
        reference = collection.qrels
    only = qrels_input(s.only_unjudged, "only_unjudged") if s.only_unjudged is not None else None
    pairs = judge_selection(runs, reference, depth=s.depth, per_user=s.per_user, only_unjudged=only, seed=s.seed,
                            tie_policy=s.tie_policy, say=say)
    if not pairs:
        raise ConfigError(f"the inputs select no pair to label; check {s.name_of('depth')}/{s.name_of('per_user')} "
                          "and the inputs")
    return tuple((p.qid, p.docid) for p in pairs)


def _llm(s: AnnotateSettings) -> dict[str, int] | None:
    if s.llm is None:
        return None
    from ..annotation.tasks import task_id
    from .inputs import qrels_input

    f = qrels_input(s.llm, "llm").frame
    return {task_id(q, d): int(label) for q, d, label in zip(f.qid.tolist(), f.docid.tolist(), f.label.tolist())}
