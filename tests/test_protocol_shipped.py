"""The shipped protocols: every setting is an option its command accepts, with the command's own types."""

from __future__ import annotations

from recjudge.cli import build_parser
from recjudge.protocol import load_protocol, protocol_names


def test_every_shipped_protocol_setting_is_an_option_its_command_accepts():
    """Each [command] table of each shipped protocol validates through that command's settings model."""
    import argparse

    from pydantic import ValidationError

    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert "penha2025" in protocol_names()
    for name in protocol_names():
        protocol = load_protocol(name)
        assert set(protocol.commands) <= set(subs.choices)
        for command in protocol.commands:
            model = subs.choices[command].get_default("settings_model")
            declared = protocol.settings(command)
            assert set(declared) <= set(model.model_fields), (name, command)
            try:
                model._validate(declared)
                bad = []
            except ValidationError as exc:  # required inputs (runs, collection) are the caller's, not the file's
                bad = [e for e in exc.errors() if e["loc"] and e["loc"][0] in declared]
            assert bad == [], (name, command, bad)


def test_the_penha2025_protocol_cites_only_what_the_paper_has():
    """Every section, table and appendix the file cites exists in Penha et al. 2025 (arXiv 2511.23312v2:
    Sections 1-7 with 5.1 and 5.2, Tables 1-6, 8 and 9, Appendices A and B), and its measures are the
    paper's: ir-measures' Compat with its default p = 0.95 (Section 3)."""
    import re

    from recjudge.protocol import PROTOCOL_DIR

    sections = {"1", "2", "3", "4", "5", "5.1", "5.2", "6", "7"}
    text = (PROTOCOL_DIR / "penha2025.toml").read_text()
    cited = [n for group in re.findall(r"Sections? (\d[\d.]*(?:(?:, | and )\d[\d.]*)*)", text)
             for n in re.split(r", | and ", group)]
    assert cited and set(cited) <= sections, cited
    assert set(re.findall(r"Table (\d+)", text)) <= {"1", "2", "3", "4", "5", "6", "8", "9"}
    assert set(re.findall(r"Appendix (\w)", text)) <= {"A", "B"}
    # the ~170k tokens are a full profile's (1,425 movies on average), not the protocol's 1,000-movie prompt
    flat = re.sub(r"\n#\s*", " ", text)
    assert "a full profile with every field, 1,425 movies on average, is ~170k tokens" in flat
    protocol = load_protocol("penha2025")
    for command in ("compare", "evaluate", "fill"):
        measures = protocol.settings(command)["measures"].split(",")
        assert "Compat(p=0.95)" in measures and not any(m.startswith("CompatHM") for m in measures)
