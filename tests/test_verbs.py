"""The Python verbs are plain functions written from the settings models: their source lists every
field with its default, it is not stale, static completion sees the parameters, and a call builds
the same settings the command line does."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

import recjudge as rj
from recjudge.api import verbs
from recjudge.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
VERBS_PACKAGE = REPO / "src" / "recjudge" / "api" / "verbs"


def _script():
    spec = importlib.util.spec_from_file_location("make_verbs", REPO / "scripts" / "make_verbs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
# verb name → (its settings model, its main inputs): read from the generator, checked against the source below
SPECS = {v.name: (getattr(importlib.import_module(v.home), v.model), v.positional, [e.name for e in v.extras])
         for v in SCRIPT.VERBS}


def _functions() -> dict[str, ast.FunctionDef]:
    out = {}
    for path in VERBS_PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out.update({node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)})
    return out


def test_the_checked_in_verbs_are_what_the_generator_writes_now():
    modules = SCRIPT.render()
    assert sorted(modules) == sorted(VERBS_PACKAGE.glob("*.py"))
    for path, text in modules.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run python scripts/make_verbs.py"
    assert SCRIPT.main(["--check"]) == 0


def test_each_verb_only_builds_its_settings_and_calls_the_work():
    """A verb's length is its signature and docstring: one line per setting; the body is three statements."""
    for name, fn in _functions().items():
        body = fn.body[1:]  # after the docstring
        assert len(body) == 3, name
        assert ast.unparse(body[0]).startswith(f"settings = {SPECS[name][0].__name__}.from_call(locals(), protocol)")
        assert ast.unparse(body[2]).startswith(f"return {name}_with(settings")
    for path in VERBS_PACKAGE.glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 500, path.name


def test_every_command_with_a_settings_model_has_a_verb():
    assert set(SPECS) == {"train", "judge", "evaluate", "compare", "agreement", "fill", "ties", "compare_settings",
                          "ablate", "audit_popularity", "audit_consistency", "audit_injection_scan", "audit_position",
                          "audit_injection", "demo", "estimate", "annotate"}
    # the Python name is the command's: `recjudge compare-settings` is compare_settings, `recjudge audit
    # injection-scan` audit_injection_scan
    for name, (model, _, _) in SPECS.items():
        assert model.command.replace("-", "_").replace(" ", "_") == name
        assert name in rj.__all__


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_source_lists_every_field_with_its_default(name):
    """Read statically (ast), as an IDE or a type checker reads the module, not through inspect."""
    model, positional, extras = SPECS[name]
    fn = _functions()[name]
    args = fn.args
    assert [a.arg for a in args.args] == list(positional)
    keywords = [a.arg for a in args.kwonlyargs]
    assert keywords == [f for f in model.model_fields if f not in positional] + extras + ["protocol"]
    defaults = dict(zip(keywords, args.kw_defaults))
    positional_defaults = dict(zip([a.arg for a in args.args][len(args.args) - len(args.defaults):], args.defaults))
    for field, info in model.model_fields.items():
        node = positional_defaults.get(field) if field in positional else defaults[field]
        annotation = next(a for a in [*args.args, *args.kwonlyargs] if a.arg == field).annotation
        assert annotation is not None, f"{name}({field}) has no annotation"
        if info.is_required():
            assert node is None, f"{name}({field}) is required, yet has a default"
        elif info.default_factory is not None:
            assert ast.literal_eval(node) is None  # a table: None leaves the model's own
        elif field in positional and node is None:
            # an input before a required one is given by position too
            later = positional[positional.index(field) + 1:]
            assert any(model.model_fields[n].is_required() for n in later), f"{name}({field}) lost its default"
        else:
            assert ast.literal_eval(node) == info.default, f"{name}({field})"
            assert type(ast.literal_eval(node)) is type(info.default), f"{name}({field})"
    assert fn.returns is not None
    doc = ast.get_docstring(fn)
    for field in [*model.model_fields, *extras, "protocol"]:
        assert f"\n    {field}: " in "\n" + doc.split("Args:\n", 1)[1], f"{name}'s docstring lacks {field}"


def test_a_stale_module_is_told_apart(monkeypatch):
    """The staleness check fails when a field's default changes and the module is not rewritten."""
    from recjudge.api.settings import CompareSettings

    path = VERBS_PACKAGE / "evaluation.py"
    before = SCRIPT.render()[path]
    info = CompareSettings.model_fields["bootstrap"]
    monkeypatch.setattr(info, "default", 999)
    after = SCRIPT.render()[path]
    assert after != before and "bootstrap: int = 999," in after
    assert SCRIPT.main(["--check"]) == 1


def test_the_python_doc_speaks_python_and_the_help_speaks_the_command_line():
    from recjudge.api.settings import CompareSettings
    from recjudge.cli import build_parser

    doc = inspect.getdoc(rj.compare)
    assert "runs: run files or folders, Runs, DataFrames" in doc
    assert "(default: ``seed``)" in doc and "--seed" not in doc  # the parameter's name, not the flag's
    compare = _subparser(build_parser(), "compare")
    helps = {a.dest: a.help for a in compare._actions}
    assert "Runs" not in helps["runs"] and "DataFrame" not in helps["runs"]
    assert "--seed" in helps["bootstrap_seed"]
    assert "benchmarks/" not in helps["ci_method"]  # the wheel ships no benchmarks folder
    assert CompareSettings.model_fields["runs"].description.startswith("run files or folders, Runs")


def _subparser(parser, name):
    import argparse

    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subs.choices[name]


def test_a_call_builds_the_settings_the_command_line_does():
    from recjudge.cli import build_parser

    cli = rj.CompareSettings.from_args(build_parser().parse_args(
        ["compare", "--runs", "r", "--reference", "h", "--candidate", "c", "--bootstrap", "7"]))
    assert rj.CompareSettings.from_call({"runs": ("r",), "reference": "h", "candidates": ("c",), "bootstrap": 7,
                                         "seed": 0}) == cli
    with pytest.raises(ConfigError, match=r"^bootstrap= must be at least 0, not -1$"):
        rj.compare("runs/example", "h", "c", bootstrap=-1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bootstraps'"):
        rj.compare("runs/example", "h", "c", bootstraps=10)  # Python itself refuses an unknown keyword


def test_under_a_protocol_a_parameter_left_at_its_default_follows_the_protocol(tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text('name = "p"\ntitle = "t"\n[compare]\nbootstrap = 50\nmeasures = "P@5"\n')
    given = rj.CompareSettings.from_call({"runs": ("r",), "reference": "h", "candidates": ("c",), "bootstrap": 1000,
                                          "measures": "P@10", "seed": 0}, protocol=str(proto))
    assert given.bootstrap == 50 and given.measures == "P@10"
    assert given.protocol.differs == {"measures": {"protocol": "P@5", "used": "P@10"}}


def _jedi_signature(code: str):
    """The signature an editor shows at the end of ``code`` (jedi reads the source, never runs it)."""
    jedi = pytest.importorskip("jedi")
    # this worktree's source first: the installed recjudge may be another checkout's
    project = jedi.Project(REPO, sys_path=[str(REPO / "src"), *(p for p in sys.path if "site-packages" in p)],
                           smart_sys_path=False)
    lines = code.splitlines()
    sigs = jedi.Script(code, path=str(REPO / "probe.py"), project=project).get_signatures(len(lines), len(lines[-1]))
    return {p.name: p.description for p in sigs[0].params} if sigs else {}


@pytest.mark.parametrize("code", ["import recjudge as rj\nrj.compare(", "from recjudge.api import compare\ncompare("])
def test_an_editor_completes_the_verbs_parameters(code):
    params = _jedi_signature(code)
    assert list(params)[:3] == ["runs", "reference", "candidates"], params
    assert params["bootstrap"] == "param bootstrap: int=1000"
    assert params["tie_policy"] == 'param tie_policy: Literal["hash", "trec_eval", "docid", "input"]="trec_eval"'
    assert "protocol" in params


def test_an_editor_completes_every_verb_at_the_top_level():
    for name, (model, positional, extras) in SPECS.items():
        params = _jedi_signature(f"import recjudge\nrecjudge.{name}(")
        assert list(params) == [*positional, *(f for f in model.model_fields if f not in positional), *extras,
                                "protocol"], name


def test_the_verbs_module_is_the_public_one():
    for name in SPECS:
        assert getattr(rj, name) is getattr(verbs, name) is getattr(rj.api, name)
        assert getattr(rj.api, f"{name}_with").__module__ in ("recjudge.api", "recjudge.api.audit", "recjudge.api.annotate")
        assert name in rj.api.__all__ and f"{name}_with" in rj.api.__all__
    assert not hasattr(rj.api, "audit_ties") and "audit_ties" not in rj.__all__


def test_a_type_checker_checks_a_verbs_call(tmp_path):
    """mypy reads the verbs' source: an unknown keyword, a value outside a Literal and a wrong type are
    refused before the call runs, and a right call passes."""
    pytest.importorskip("mypy")
    import os
    import subprocess

    probe = tmp_path / "probe.py"
    probe.write_text('import recjudge as rj\n'
                     'rj.compare("runs", "h.qrels", "c.qrels", bootstraps=10)\n'
                     'rj.compare("runs", "h.qrels", "c.qrels", tie_policy="random")\n'
                     'rj.ties("runs", seeds="5")\n'
                     'result = rj.evaluate("runs", "h.qrels", measures="nDCG@10", seed=3)\n')
    env = {**os.environ, "MYPYPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                           "--no-incremental", "--cache-dir", os.devnull, str(probe)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert [e.split(":")[1] for e in errors] == ["2", "3", "4"], proc.stdout
    assert 'Unexpected keyword argument "bootstraps" for "compare"' in errors[0]
    assert "Literal['hash', 'trec_eval', 'docid', 'input']" in errors[1]
    assert 'Argument "seeds" to "ties" has incompatible type "str"; expected "int"' in errors[2]
