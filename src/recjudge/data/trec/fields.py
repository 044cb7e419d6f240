"""What a TREC field may hold: the characters every reader refuses, and polars loaded on first use."""

from __future__ import annotations

import re


def load_polars():
    import polars  # imported on first read: `import recjudge` and the CLI's --help stay light

    return polars


# Characters a field may not hold: control characters (tab and CR included: the careful reader
# splits on tabs and drops a CR before the newline) and the Unicode spaces Python's split() breaks on.
_ODD = [(0x00, 0x1F), (0x7F, 0x7F), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
        (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
ODD_RE = re.compile("[" + "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in _ODD) + "]")
ODD_POLARS = "[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in _ODD) + "]"  # Rust regex syntax


def has_odd(strings) -> bool:
    """Whether a distinct value is empty or holds a character a field may not hold."""
    return bool(strings.str.contains(ODD_POLARS).any()) or bool((strings.str.len_bytes() == 0).any())
