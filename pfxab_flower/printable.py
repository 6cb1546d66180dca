"""Text from a peer (a client's error reason, a site label, a foreign message's keys) made safe to print.

Every character a terminal would act on (escapes, NUL, newlines, U+202E) becomes its ``repr``
escape where the text enters, so a peer cannot forge log lines or move the cursor.
"""

from __future__ import annotations

#: The longest peer text kept (escapes included): a reason is for people, one line of a log.
MAX_CHARS = 500


def printable(text: object, limit: int = MAX_CHARS) -> str:
    """``str(text)`` with every non-printable character escaped, cut to ``limit`` characters."""
    text = str(text)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escape(c) for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(path: object) -> str:
    """A path (or any text a user gave) as a line echoes it: every character a terminal would act on escaped.

    ``--out $'\\e]0;x\\a'`` or a name with a newline must not move the cursor nor split a line.
    """
    return printable(path, limit=MAX_ECHOED)


#: The longest user text echoed whole (a path may have 4096 bytes).
MAX_ECHOED = 8192


def first_line(exc: BaseException, limit: int = 120) -> str:
    """The first line of an exception's text, printable, cut to ``limit``: why a file could not be read, in a line."""
    return printable((str(exc).splitlines() or [""])[0], limit)
