"""The shipped protocols: every setting is an option its command accepts, with the command's own types."""

from __future__ import annotations

from recjudge.cli import build_parser
from recjudge.protocol import load_protocol, protocol_names


def test_every_shipped_protocol_setting_is_an_option_its_command_accepts():
    """Each [command] table of each shipped protocol parses through that command's own option types."""
    from recjudge.cli import _command_parsers
    from recjudge.protocol import apply_to_parser

    assert "penha2025" in protocol_names()
    for name in protocol_names():
        protocol = load_protocol(name)
        commands = _command_parsers(build_parser())
        assert set(protocol.commands) <= set(commands)
        for command in protocol.commands:
            applied = apply_to_parser(protocol, command, commands[command])
            assert set(applied) == set(protocol.settings(command))
