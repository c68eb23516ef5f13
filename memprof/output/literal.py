"""Strings from a Result, shown literally: the one place untrusted text is made safe to print.

A saved result is untrusted, and a terminal obeys control characters (ESC sets the window
title, CR overwrites the line, U+202E reverses what follows): literal() writes each as the
escape Python would (\\n, \\x1b, \\u202e), shown as spelt, obeyed by nothing.
"""

from __future__ import annotations

import unicodedata

# Unicode categories written as escapes: controls (C0, DEL, C1), format characters (bidi
# overrides, zero-width), lone surrogates (no encoding can write them), unassigned code
# points, and the line and paragraph separators. Spaces (Zs) and private-use characters
# (Co) print as themselves.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"})
SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}  # as Python's repr writes them


def literal(text: str) -> str:
    """`text` with every character a terminal would obey, or not show, as a visible escape."""
    if text.isprintable():  # the usual case, at C speed: nothing to escape
        return text
    return "".join(_escape(character) for character in text)


def _escape(character: str) -> str:
    if unicodedata.category(character) not in HIDDEN_CATEGORIES:
        return character  # a space other than " " (isprintable() says False for those)
    if character in SHORT_ESCAPES:
        return SHORT_ESCAPES[character]
    code = ord(character)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
