"""Text from a peer (a client's error reason, a site label, a foreign message's keys) made safe to print.

Why: a reason a client sends reaches the server's log, a terminal and a run's result. Left as it
came, its escape sequences move the cursor, retitle the terminal or recolour the log; a NUL or a
newline forges log lines; U+202E reverses what follows. So every such text is made one printable
line where it enters (:class:`pfxab_flower.exchanges.Failure`, ...): each character a terminal
would act on becomes its escape (``\\x1b``, ``\\u202e``, ``\\n``), as ``repr`` writes it, and
everything readable stays as it was (``KeyError: 'data-dir'``).
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


def first_line(exc: BaseException, limit: int = 120) -> str:
    """The first line of an exception's text, printable, cut to ``limit``: why a file could not be read, in a line."""
    return printable((str(exc).splitlines() or [""])[0], limit)
