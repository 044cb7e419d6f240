"""Regenerate the demo figures the documentation shows (docs/assets/demo/), from `recjudge demo --reduced`.

The docs build does not run the demo (it trains systems: the `train` extra and a minute of CPU);
the figures are committed, cut to a 64-colour palette so each stays small. Run from the repository
root with the README's environment:  .venv/bin/python scripts/docs_figures.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from PIL import Image

from recjudge.cli import main

FIGURES = ("fig-system-scores-ndcg-100.png", "fig-agreement-by-distance.png", "fig-agreement-vs-profile-size.png")
TARGET = Path(__file__).resolve().parents[1] / "docs" / "assets" / "demo"


def run() -> int:
    TARGET.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        code = main(["demo", "--reduced"])
        if code:
            return code
        for name in FIGURES:
            image = Image.open(Path(tmp) / "out" / "demo" / name).convert("RGB")
            image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(TARGET / name, optimize=True)
            print(f"{TARGET / name}: {(TARGET / name).stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(run())
