"""``recjudge reproduce penha2025``: the published numbers as data, the plan, and the run end to end
on a generated ML-32M-ext release with the local fake OpenAI server."""

from __future__ import annotations

import pytest

from recjudge.errors import InputError
from recjudge.experiments.published import NOT_PUBLISHED, load_published


# ------------------------------------------------------------------------------ published values

def test_published_values_are_as_quoted():
    pub = load_published("penha2025")
    # issue 12's text, number by number
    assert pub.value("table1", "pooled", "Judged@100 historical") == 0.0774
    assert pub.value("table1", "pooled", "Judged@100 Cranfield") == 0.5981
    assert pub.value("table1", "non-pooled", "Judged@100 historical") == 0.0601
    assert pub.value("table1", "non-pooled", "Judged@100 Cranfield") == 0.5503
    assert pub.value("table8", "baseline", "agree") == 51.83
    assert pub.value("table8", "defined scale", "tie") == 34.88
    assert pub.value("table5", "Human-only", "Judged@100") == 0.559
    assert pub.value("table5", "calibration", "pairs") == 13336
    assert pub.value("figure2", "historical vs Cranfield", "Kendall tau") == 0.26
    assert pub.cell("figure2", "historical vs Cranfield", "p-value").shown() == "< 0.01"
    assert pub.value("figure2", "NCEPLRec", "rank Cranfield") == 43
    assert pub.value("cost", "full run", "calls") == 93708
    # a percent cell compares with a share × 100
    assert pub.cell("table8", "baseline", "agree").comparable(0.5) == 50.0


def test_unknown_cells_say_so():
    pub = load_published("penha2025")
    cell = pub.cell("table3", "Title + All metadata", "agree")
    assert cell is not None and cell.value is None and cell.shown() == NOT_PUBLISHED
    assert pub.value("table4", "K=10", "tau Compat") is None
    assert pub.value("table9", "no such row", "x") is None  # absent cells are not invented either
    # no cell of Tables 3, 4 or 9 carries a number: none was quoted
    assert all(c.value is None for t in ("table3", "table4", "table9") for c in pub.table(t))


@pytest.mark.parametrize("cell, problem", [
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\n', "exactly one of value"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\nvalue = 2.5\n', "outside [-1, 1]"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\nvalue = 1\nunit = "furlongs"\n', "unit"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\nvalue = 0.5\n', "'cite'"),
    ('table = "t"\nrow = "r"\ncolumn = "c"\ncite = "x"\nvalue = "0.5"\n', "not a number"),
])
def test_bad_published_file_names_file_and_line(tmp_path, cell, problem):
    path = tmp_path / "bad.toml"
    good = 'table = "t"\nrow = "ok"\ncolumn = "c"\ncite = "x"\nvalue = 0.5\n'
    path.write_text(f'name = "x"\ntitle = "x"\nquoted_from = "x"\n\n[[cell]]\n{good}\n[[cell]]\n{cell}')
    with pytest.raises(InputError) as exc:
        load_published(path)
    assert problem in str(exc.value) and "bad.toml" in str(exc.value)
    assert "bad.toml:12:" in str(exc.value)  # the line of the second [[cell]] header
