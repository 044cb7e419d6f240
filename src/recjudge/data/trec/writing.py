"""Writing runs and qrels as TREC text, atomically (a .gz path is compressed)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..._io import atomic_write
from .records import Qrels, Run


def _format_scores(scores: np.ndarray) -> list[str]:
    # Integral scores (all tie-free runs) print as integers; others with repr's round-trip digits.
    return [str(int(s)) if s.is_integer() and abs(s) < 2**53 else repr(s) for s in scores.tolist()]


def write_run(run: Run, dest: str | os.PathLike, tag: str | None = None) -> Path:
    """Write ``run`` atomically as ``qid Q0 docid rank score tag`` (a .gz path is compressed)."""
    f = run.frame
    tags = [tag] * len(f) if tag is not None else f.tag.tolist()
    scores = _format_scores(f.score.to_numpy())
    with atomic_write(dest) as fh:
        fh.writelines(
            f"{q} Q0 {d} {r} {s} {t}\n"
            for q, d, r, s, t in zip(f.qid.tolist(), f.docid.tolist(), f["rank"].tolist(), scores, tags)
        )
    return Path(dest)


def write_qrels(qrels: Qrels, dest: str | os.PathLike) -> Path:
    """Write qrels atomically as ``qid iter docid label``."""
    f = qrels.frame
    with atomic_write(dest) as fh:
        fh.writelines(
            f"{q} {i} {d} {int(lab)}\n"
            for q, i, d, lab in zip(f.qid.tolist(), f.iteration.tolist(), f.docid.tolist(), f.label.tolist())
        )
    return Path(dest)
