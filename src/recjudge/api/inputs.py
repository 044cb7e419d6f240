"""What the Python verbs accept as runs and labels, made into what the library reads.

Runs: a run file or folder of runs (a path: TREC, a table with a header, ranx JSON), a
:class:`~recjudge.data.trec.Run`, a pandas DataFrame (``qid, docid, score`` with optional ``rank`` and
``tag``; or the names a recommender or ranx frame uses: ``user``/``user_id``/``query_id``/``q_id``,
``item``/``item_id``/``doc_id``, ``score``/``prediction``/``rating``), a mapping of name → any of
these, or a list of any of these. Labels: a qrels path, a :class:`~recjudge.data.trec.Qrels`, or a
DataFrame (``qid, docid, label``, or ``user``/``query_id``, ``item``/``doc_id``, ``label``/``relevance``).
Anything else is refused naming the parameter and what it takes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = ["is_path", "path_list", "runs_input", "run_files", "qrels_input", "label_sets", "path_inputs",
           "read_runs_input", "system_groups", "systems_input", "group_table", "named_label_sets", "check_distinct",
           "lazy_runs", "some_ids", "runs_label"]



def is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _frame(value: Any) -> bool:
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        return False
    return isinstance(value, pd.DataFrame)


def path_list(value: Any) -> list:
    """A path, or a sequence of paths, as a list (the form the readers and output checks take)."""
    if value is None:
        return []
    return [value] if is_path(value) else list(value)


def _run_from_frame(frame, name: str, param: str):
    from ..data.trec import Run

    frame = _renamed(frame, "run", param)
    if "tag" in frame.columns and name == "run":
        tags = frame["tag"].astype(str).unique()
        name = tags[0] if len(tags) == 1 else name
    try:
        return Run.from_frame(frame, name)
    except Exception as exc:  # the reader's own error, with the parameter it came through
        raise ConfigError(f"{param}: a DataFrame holds no run ({exc})") from None


def _renamed(frame, what: str, param: str):
    """``frame`` with its user, item and score (or label) columns named qid, docid, score (label)."""
    from ..data.trec.reading import column_roles

    roles, problem, fix = column_roles(list(frame.columns), what)
    if problem:
        raise ConfigError(f"{param}: a DataFrame holds no {what} ({problem}; fix: {fix})")
    return frame.rename(columns={frame.columns[i]: role for role, i in roles.items() if frame.columns[i] != role})


def _kind(value: Any) -> str:
    return type(value).__name__


def runs_input(value: Any, param: str = "runs") -> tuple[dict | None, list]:
    """(runs in memory by name, run files/folders): exactly one of the two is filled.

    Files are read one at a time by the engine; objects are used as they are. Names of runs in memory
    come from the mapping's keys, else from each run's name (a DataFrame: its single ``tag``)."""
    from ..data.trec import Run

    if value is None:
        raise ConfigError(f"{param}: no runs given; pass run files or folders, Runs or DataFrames")
    if is_path(value):
        return None, [value]
    if isinstance(value, Run):
        return {value.name: value}, []
    if _frame(value):
        run = _run_from_frame(value, "run", param)
        return {run.name: run}, []
    if isinstance(value, Mapping):
        out = {}
        for name, item in value.items():
            if isinstance(item, Run):
                out[str(name)] = item.renamed(str(name)) if item.name != str(name) else item
            elif _frame(item):
                out[str(name)] = _run_from_frame(item, str(name), f"{param}[{name!r}]")
            elif is_path(item):
                from ..data.trec import read_run

                out[str(name)] = read_run(item, name=str(name))
            else:
                raise ConfigError(f"{param}[{name!r}] must be a Run, a DataFrame or a run file, not {_kind(item)}")
        return out, []
    if isinstance(value, Sequence) and not isinstance(value, (bytes, str)):
        items = list(value)
        if items and all(is_path(i) for i in items):
            return None, items
        out = {}
        for i, item in enumerate(items):
            if isinstance(item, Run):
                run = item
            elif _frame(item):
                run = _run_from_frame(item, "run", f"{param}[{i}]")
            elif is_path(item):
                from ..data.trec import read_runs

                read = read_runs([item])
                out.update(read)
                continue
            else:
                raise ConfigError(f"{param}[{i}] must be a run file or folder, a Run or a DataFrame, "
                                  f"not {_kind(item)}")
            if run.name in out:
                raise ConfigError(f"{param}: two runs are named {run.name!r}; pass a {{name: run}} mapping "
                                  "to name them")
            out[run.name] = run
        if not out:
            raise ConfigError(f"{param}: no runs given; pass run files or folders, Runs or DataFrames")
        return out, []
    raise ConfigError(f"{param} must be run files or folders, Runs, DataFrames, a list or a {{name: run}} "
                      f"mapping of them, not {_kind(value)}")


def run_files(value: Any) -> list | None:
    """The run files behind ``value`` (folders expanded once, their skipped entries said once), or
    None for runs given in memory."""
    memory, files = runs_input(value)
    if memory is not None:
        return None
    from ..data.trec import iter_run_files

    return iter_run_files(files)


def qrels_input(value: Any, param: str = "qrels", name: str | None = None):
    """A Qrels from a path, a Qrels or a DataFrame."""
    from ..data.trec import Qrels, read_qrels

    if isinstance(value, Qrels):
        return value
    if is_path(value):
        return read_qrels(value)
    if _frame(value):
        frame = _renamed(value, "qrels", param)
        try:
            return Qrels.from_frame(frame, name or param.rstrip("="))
        except Exception as exc:
            raise ConfigError(f"{param}: a DataFrame holds no qrels ({exc})") from None
    raise ConfigError(f"{param} must be a qrels path, a Qrels or a DataFrame (qid, docid, label), "
                      f"not {_kind(value)}")


def label_sets(value: Any, param: str = "candidates") -> list:
    """Candidate label sets: one path, Qrels or DataFrame, a list of them, or a {name: labels} mapping
    (each then named by its key)."""
    from ..data.trec import Qrels

    if value is None:
        raise ConfigError(f"{param}: no candidate labels given")
    if is_path(value) or isinstance(value, Qrels) or _frame(value):
        return [value]
    if isinstance(value, Mapping):
        out = []
        for name, item in value.items():
            q = qrels_input(item, f"{param}[{name!r}]", name=str(name))
            out.append(q.renamed(str(name)) if q.name != str(name) else q)
        return out
    if isinstance(value, Sequence) and not isinstance(value, (bytes, str)):
        if not value:
            raise ConfigError(f"{param}: no candidate labels given")
        return list(value)
    raise ConfigError(f"{param} must be qrels paths, Qrels or DataFrames (or a list or mapping of them), "
                      f"not {_kind(value)}")


def path_inputs(*values: Any) -> list:
    """The file inputs among the values, for the checks that no output overwrites an input."""
    out = []
    for v in values:
        if isinstance(v, Mapping) or v is None:
            continue
        out += [p for p in ([v] if is_path(v) else v if isinstance(v, (list, tuple)) else []) if is_path(p)]
    return out


def read_runs_input(value, param: str = "runs"):
    """Runs in memory by name, whatever form they were given in (files are read here)."""
    memory, files = runs_input(value, param)
    if memory is not None:
        return memory
    from ..data.trec import read_runs

    return read_runs(files)


def system_groups(value, files: list | None) -> dict[str, str] | None:
    """System → group from a file or mapping, else from the sidecars `recjudge train` wrote."""
    from ..data.groups import groups_from_sidecars, read_groups

    if isinstance(value, Mapping):
        return dict(value)
    if value is not None:
        return read_groups(value)
    if files is None:
        return None
    return groups_from_sidecars(files) or None


def systems_input(runs, groups):
    """The runs, their groups and the tie records written beside run files. Runs given as paths come
    back as run name → file (a folder expanded once, names checked unique), to be read one at a time
    while scoring; runs given in memory are used as they are."""
    from ..data.trec import run_paths
    from ..evaluation.metaeval import export_tie_info

    memory, _ = runs_input(runs)
    files = None if memory is not None else run_files(runs)
    by_system = system_groups(groups, files)
    if files is None:
        return memory, by_system, {}
    return run_paths(files), by_system, export_tie_info(files)


def group_table(scores, groups, source):
    from ..data.groups import group_means

    if not groups:
        return None
    return group_means(scores, groups, os.fspath(source) if is_path(source) else "groups recorded by train")


def named_label_sets(reference, candidates) -> tuple[Any, list, dict[str, str]]:
    """Read reference and candidates; name each by the one naming rule of outputs (paths when given)."""

    from .._io import read_concurrently
    from ..evaluation.metaeval import label_set_names

    items = [reference, *candidates]
    params = ["reference", *(f"candidates[{i}]" for i in range(len(candidates)))]
    qrels = read_concurrently(lambda pair: qrels_input(pair[0], pair[1]), list(zip(items, params)))
    paths = [os.fspath(v) if is_path(v) else q.name for v, q in zip(items, qrels)]
    names = label_set_names([q.name for q in qrels], paths)
    named = [q.renamed(n) for q, n in zip(qrels, names)]
    return named[0], named[1:], dict(zip(names, paths))


def check_distinct(candidates: list, option: str = "candidates") -> None:
    keys = [os.fspath(c) if is_path(c) else id(c) for c in candidates]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"the same {option} path is given twice; give each label set once")


def lazy_runs(files: list):
    """Runs read one at a time, so a folder of large runs is audited in bounded memory."""
    import logging

    from ..data.trec import read_run, run_paths

    by_name = run_paths(files)  # names checked unique before the first run is read
    log = logging.getLogger("recjudge.evaluation.ties")

    def lazily():
        for i, (name, f) in enumerate(by_name.items(), start=1):
            log.debug("auditing %s (%d/%d)", f, i, len(by_name))  # -v: one line per run is noise at 63 runs
            yield read_run(f, name=name)

    return lazily()


def some_ids(ids, n: int = 3) -> str:
    """A few ids, sorted, for an error message."""
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (", ..." if len(ids) > n else "")


def runs_label(runs) -> str:
    """How a setting's runs are named in the output: their paths, or how many were given in memory."""
    memory, files = runs_input(runs)
    return f"{len(memory)} runs in memory" if memory is not None else ", ".join(map(str, files))
