"""``recjudge annotate``'s run: tasks built, the server started, the qrels exported when it stops."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .export import LABELS_DIR, export_qrels
from .log import read_events
from .queue import Board
from .server import Annotation, serve
from .tasks import TaskSet

__all__ = ["annotate", "provenance"]

log = logging.getLogger("recjudge.annotation")
# what changes the page shown: labels made under other values were made on another profile
SHOWN = ("seed", "template_sha256", "fields", "profile_size", "sampling", "history_order", "collection")


def provenance(tasks: TaskSet, profile: Mapping) -> dict:
    """What every log line records of what was shown: the profile's seed and settings, the template."""
    return {"seed": tasks.seed, "template": tasks.template.name, "template_sha256": tasks.template.sha256,
            "fields": tasks.profiles.field_spec, "profile_size": int(profile["profile_size"]),
            "sampling": profile["sampling"], "history_order": profile["history_order"],
            "collection": tasks.profiles.collection_name}


def annotate(pairs: Sequence[tuple[str, str]], collection, history, out: str | Path, *, profile: Mapping,
             annotator: str | None = None, overlap: int = 1, self_mode: bool = False,
             llm: Mapping[str, int] | None = None, host: str = "127.0.0.1", port: int = 0,
             ready: Callable[[str], None] | None = None, say: Callable[[str], None] = lambda m: None) -> dict:
    """Serve the labelling page for ``pairs`` until SIGINT/SIGTERM, then export every assessor's qrels.

    ``profile``: the judge's profile settings (prompt, fields, profile_size, sampling, history_order,
    seed, items_per_call). ``llm``: task id → the LLM's label, for the adjudication view."""
    tasks = TaskSet(pairs, collection, history, **profile)
    out = Path(out)
    shown = provenance(tasks, profile)
    board = Board(tasks.ids(), out / LABELS_DIR, shown, overlap=overlap, self_mode=self_mode)
    for name, changed in _changed(out / LABELS_DIR, shown).items():
        log.warning("%s's last label was made with other settings (%s): the tasks now show another profile; "
                    "each label's line records what it was shown", name, ", ".join(changed))
    done = sum(len(lg.state.labels) for lg in board.logs.values())
    say(f"{len(tasks):,} tasks of {len({q for q, _ in tasks.order}):,} users; {done:,} labels already in "
        f"{out / LABELS_DIR}" + (f" from {len(board.logs)} assessor(s)" if board.logs else ""))
    annotation = Annotation(tasks, board, annotator=annotator, self_mode=self_mode,
                            llm=None if llm is None else dict(llm))
    serve(annotation, host, port, ready or (lambda url: print(f"annotate: open {url}", file=sys.stdout, flush=True)))
    return export_qrels(out)


def _changed(folder: Path, shown: Mapping) -> dict[str, list[str]]:
    """Each assessor whose last label was shown under other settings, and which settings differ."""
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        last = next((e for e in reversed(read_events(path)) if e.get("event") == "label"), None)
        differ = [k for k in SHOWN if last is not None and k in last and last[k] != shown[k]]
        if differ:
            out[str(last.get("annotator"))] = differ
    return out
