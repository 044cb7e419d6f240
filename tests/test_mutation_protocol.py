"""What stays of the protocol module, tested where a slip would show: same_value at unequal list
lengths, number spellings, paths and truncation; differences, settings of a command the protocol
does not set, ProtocolUse's record and line; the file's header keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from recjudge.errors import InputError
from recjudge.protocol import Protocol, ProtocolUse, load_protocol, same_value


@pytest.mark.parametrize("used, want, same", [
    ([10, 50], [10, 50, 100], False),          # the protocol's list is longer
    ([10, 50, 100, 200], (10, 50, 100), False),  # the used one is
    ([], [10], False),
    ([10, 50], (10.0, 50), True),              # a list and a tuple, numbers spelled otherwise
    (["runs/a", 600], (Path("runs/a"), 600.0), True),  # items compared as values, not with ==
    (600.0, 600, True),
    (600, 600.5, False),
    (0.5, 0, False),                           # not truncated to whole numbers
    (Path("protocols/x.toml"), "protocols/x.toml", True),
    ("all", "title", False),
    (True, True, True),
    (False, True, False),
])
def test_same_value(used, want, same):
    assert same_value(used, want) is same
    assert same_value(want, used) is same


def _protocol(commands) -> Protocol:
    return Protocol(name="p", title="t", source="s", path="p.toml", commands=commands)


def test_differences_list_only_the_settings_used_otherwise():
    p = _protocol({"ablate": {"experiments": 3, "k_values": [10, 50, 100, 200], "per_user": 50}})
    used = {"experiments": 3.0, "k_values": [10, 50, 100]}  # per_user not reported by the command
    assert p.differences("ablate", used) == {"k_values": {"protocol": [10, 50, 100, 200], "used": [10, 50, 100]}}
    assert p.differences("ablate", {"experiments": 3}) == {}
    assert p.settings("train") == {} and p.differences("train", {"k": 5}) == {}
    got = p.settings("ablate")
    got["experiments"] = 5  # a copy: the protocol is not changed through it
    assert p.settings("ablate")["experiments"] == 3


def test_protocol_use_says_whether_it_follows_and_what_differs():
    p = _protocol({"compare": {"measures": "P@5", "bootstrap": 50}})
    follows = ProtocolUse(p, "compare")
    assert follows.as_dict() == {"name": "p", "title": "t", "source": "s", "command": "compare",
                                 "follows_protocol": True, "differs": {}}
    assert follows.describe() == "protocol p: every setting as the protocol declares"
    differs = ProtocolUse(p, "compare", p.differences("compare", {"measures": "P@10", "bootstrap": 50}))
    assert differs.as_dict()["follows_protocol"] is False
    assert differs.as_dict()["differs"] == {"measures": {"protocol": "P@5", "used": "P@10"}}
    assert differs.describe() == "protocol p, except: measures = 'P@10' (protocol: 'P@5')"


def test_a_protocol_file_with_notes_and_source(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\ntitle = "a title"\nsource = "a paper"\nnotes = "read me"\n\n'
                    '[ablate]\nexperiments = 3\nk_values = [10, 50]\n')
    p = load_protocol(path)
    assert (p.name, p.title, p.source, p.notes, p.path) == ("p", "a title", "a paper", "read me", str(path))
    assert dict(p.commands) == {"ablate": {"experiments": 3, "k_values": [10, 50]}}


@pytest.mark.parametrize("body, words", [
    ('name = "p"\n[ablate]\nexperiments = 3\n', "missing or empty top-level key 'title'"),
    ('name = "p"\ntitle = ""\n', "missing or empty top-level key 'title'"),
    ('title = "t"\n', "missing or empty top-level key 'name'"),
    ('name = "p"\ntitle = "t"\n[ablate.inner]\nx = 1\n', "[ablate] inner: a table is not an option value"),
    ('name = "p"\ntitle = "t"\nablate = 3\n', "top-level key 'ablate' is not a command table"),
])
def test_a_bad_protocol_file_names_the_file(tmp_path, body, words):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(InputError) as exc:
        load_protocol(path)
    assert words in str(exc.value) and "bad.toml" in str(exc.value)
