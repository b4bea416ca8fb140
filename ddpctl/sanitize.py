"""Rank output made visible, not obeyed: control characters are shown the way `less` and `git` show them.

A rank's log is whatever its program printed, and it reaches the user's terminal through `ddpctl logs`. Raw, it
could set the window title, write the clipboard (OSC 52), clear the screen, move the cursor, or with a bare
carriage return overwrite ddpctl's own `[a0 node1 r0]` prefix and pass one rank's line off as another's.
So every C0 control character but TAB, DEL, and every C1 control is shown in caret notation (ESC as `^[`, CR as
`^M`, DEL as `^?`; C1 as `<U+009B>`), and so are the Unicode bidi overrides/isolates that reorder what is
shown (U+202A-202E, U+2066-2069). `ddpctl logs --raw` passes the bytes through unchanged, for a user who wants
their colours and trusts every rank. JSON output needs nothing: JSON escapes control characters itself.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


_TABLE = {
    code: _shown(chr(code))
    for code in [
        *range(0x00, 0x09),
        *range(0x0A, 0x20),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
}


def visible(text: str) -> str:
    """`text` with every unsafe character replaced by its visible notation (a no-op for ordinary text)."""
    return text.translate(_TABLE) if _UNSAFE.search(text) else text


def visible_lines(lines: list[str]) -> list[str]:
    """`visible` for a batch: one search over the batch decides whether any line needs rewriting."""
    if not lines or not _UNSAFE.search("\x09".join(lines)):
        return lines
    return [visible(line) for line in lines]
