"""Text a server sent, made safe for a terminal: the one rule every command's output goes through.

The model: anything a peer chose (an elicitation's message and fields, a
prompt, a log line, an error, a listing) may carry bytes a terminal obeys
rather than shows: ESC sequences (``ESC ]0;`` sets the window title, ``ESC
[2J`` clears the screen, OSC 52 writes the clipboard, ``ESC [8m`` hides text),
a carriage return (the next text overwrites the line), the 8-bit CSI U+009B,
and the bidirectional controls (U+202E turns ``moc.evil`` into ``live.com``
on screen).  A server could clear the screen and show one URL while the
person consents to another.  So before it reaches a terminal:

* every **unsafe character** is shown escaped, as Python writes it (``\\x1b``,
  ``\\x9b``, ``\\u202e``), so the person sees that something was there and the
  terminal obeys nothing: C0 controls, DEL, C1 controls, the bidi controls
  (:data:`BIDI_CONTROLS`), the line and paragraph separators, lone surrogates;
* :func:`shown` keeps the newlines of multi-line text (a ``\\r\\n`` is a newline,
  a tab a space); :func:`one_line` folds newlines, CRs and tabs into spaces and
  bounds the line.

JSON output (:mod:`~mrtr_transports.cli.json_text`) follows the same rule with
JSON's escapes (``\\u001b``, ``\\u202e``): :func:`json_unsafe` says which
characters.  Backslashes are left alone: text that merely *says* ``\\x1b`` is
inert, and escaping it too would make the output harder to read for nothing.
"""

from __future__ import annotations

__all__ = ["BIDI_CONTROLS", "MAX_LINE", "is_unsafe", "json_unsafe", "one_line", "shown"]

#: The longest line :func:`one_line` returns by default (the rest is cut, marked "…").
MAX_LINE = 1000
#: The bidirectional controls: embeddings, overrides, isolates and marks.
BIDI_CONTROLS = frozenset(
    chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
)
#: Line and paragraph separators: some terminals break the line on them.
_SEPARATORS = frozenset("\u2028\u2029")
_FOLDED = {"\t": " ", "\r": " ", "\n": " "}


def is_unsafe(char: str) -> bool:
    """Whether a terminal could obey ``char`` rather than show it."""
    code = ord(char)
    return (
        code < 0x20
        or 0x7F <= code < 0xA0
        or 0xD800 <= code < 0xE000  # (a lone surrogate: not text, cannot be written)
        or char in BIDI_CONTROLS
        or char in _SEPARATORS
    )


def json_unsafe(char: str) -> bool:
    """What JSON output must escape beyond what ``json.dumps`` does (C0 and ``"``, ``\\``):
    DEL, the C1 controls, the bidi controls, the separators, lone surrogates."""
    return ord(char) >= 0x20 and is_unsafe(char)


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` safe for a terminal, its newlines kept: ``\\r\\n`` a newline, a tab a
    space, every other unsafe character escaped."""
    text = text.replace("\r\n", "\n").replace("\t", " ")
    if not any(is_unsafe(char) and char != "\n" for char in text):
        return text
    return "".join(_escaped(char) if is_unsafe(char) and char != "\n" else char for char in text)


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """``text`` safe for one terminal line: newlines, CRs and tabs a space, every other
    unsafe character escaped, at most ``limit`` characters."""
    parts = []
    for char in text:
        if char in _FOLDED:
            parts.append(" ")
        elif is_unsafe(char):
            parts.append(_escaped(char))
        else:
            parts.append(char)
    line = "".join(parts).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"
