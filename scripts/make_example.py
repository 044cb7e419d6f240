"""Regenerate the small example under runs/example and qrels/example-*.qrels (seeded, synthetic).

Eight systems of graded quality rank 20 of 120 items for 40 users; "human" labels are sparse (30 per
user), "llm" labels cover every pooled item with a noisy, stretched 0–7 scale. Used by the
README's quick check and by tests; the real pipeline is `recjudge demo`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from recjudge.data.trec import Qrels, Run, write_qrels, write_run

ROOT = Path(__file__).resolve().parents[1]


def main(seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    users, items = [f"{u}" for u in range(1, 41)], [f"{i}" for i in range(1, 121)]
    interest = rng.integers(0, 5, size=(len(users), len(items)))  # latent 0–4 interest
    out_runs = ROOT / "runs" / "example"
    for s, quality in enumerate(np.linspace(0.1, 0.9, 8)):
        rows = []
        for u, user in enumerate(users):
            noisy = quality * interest[u] + (1 - quality) * 4 * rng.random(len(items))
            top = np.argsort(-noisy, kind="stable")[:20]
            rows += [(user, items[i], r + 1, round(float(noisy[i]), 2)) for r, i in enumerate(top)]
        name = f"sys{s + 1}"
        write_run(Run.from_frame(pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"]), name, tag=name),
                  out_runs / f"{name}.run")
    human, llm = [], []
    for u, user in enumerate(users):
        for i in rng.choice(len(items), 30, replace=False):
            human.append((user, items[i], int(interest[u, i])))
        for i in range(len(items)):
            llm.append((user, items[i], int(np.clip(round(interest[u, i] * 1.5 + rng.normal(0, 1.2)), 0, 7))))
    write_qrels(Qrels.from_frame(pd.DataFrame(human, columns=["qid", "docid", "label"])),
                ROOT / "qrels" / "example-human.qrels")
    write_qrels(Qrels.from_frame(pd.DataFrame(llm, columns=["qid", "docid", "label"])),
                ROOT / "qrels" / "example-llm.qrels")


if __name__ == "__main__":
    main()
