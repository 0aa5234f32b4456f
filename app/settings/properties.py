"""Reader for Kafka-style ``.properties`` files, exactly as ``java.util.Properties.load(Reader)``.

Operators copy lines from a broker's server.properties, so a line must mean here what it means
to the broker. This is a port of the JDK's reader (``Properties.LineReader`` and ``load0``)
rather than a look-alike built on Python's string methods, whose idea of a line end
(``str.splitlines`` breaks at form feeds, ``\\x85``, ``\\u2028`` ...) and of whitespace is not
Java's. The rules, all from the JDK:

- lines end at LF, CR or CR LF, nowhere else;
- leading spaces, tabs and form feeds are skipped, also on continuation lines;
- ``#`` or ``!`` as the first character of a logical line starts a comment, even on a
  continuation line when nothing came before it (a line holding only ``\\``);
- an odd number of backslashes at a line end continues the line; at the end of the text the
  last backslash is dropped, so a text ending in a lone ``\\`` holds the empty key;
- the key ends at the first unescaped ``=``, ``:``, space, tab or form feed; whitespace and
  one ``=`` or ``:`` after it are skipped;
- ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes, a backslash before any other
  character stands for that character; a ``\\u`` without four hexadecimal digits is refused
  (Java throws "Malformed \\uxxxx encoding."), and so is the whole file here.

Escaped surrogate pairs (``\\uD83D\\uDE00``) become the one character they encode, as a Java
string holds them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_WHITESPACE = " \t\f"
_LINE_ENDS = "\r\n"
_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_KEY_ESCAPES = {
    "\\": "\\\\",
    " ": "\\ ",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\f": "\\f",
    "=": "\\=",
    ":": "\\:",
    "#": "\\#",
    "!": "\\!",
}


@dataclass(frozen=True)
class MalformedEntry:
    """A logical line whose key or value holds a malformed ``\\uXXXX`` escape."""

    line: int  # where the logical line starts, counting from 1
    key: str | None  # None when the key itself is malformed
    raw: str  # the malformed key or value as written, escapes undecoded

    def __str__(self) -> str:
        where = "its key" if self.key is None else f"the value of {escape_key(self.key)}"
        return f"line {self.line}: a \\u escape without four hexadecimal digits in {where}"


class PropertiesSyntaxError(ValueError):
    """Text that java.util.Properties refuses. Holds every malformed line, and the entries of
    the others, so that a caller can report everything at once."""

    def __init__(self, malformed: list[MalformedEntry], entries: dict[str, str]) -> None:
        super().__init__("; ".join(str(m) for m in malformed))
        self.malformed = malformed
        self.entries = entries


class _MalformedEscape(Exception):
    pass


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(index of its first character, text) of each logical line: comments and blank lines
    dropped, continuations joined. Java's ``LineReader.readLine``, one character at a time."""
    i, end = 0, len(text)
    skip_lf = False
    while True:
        chars: list[str] = []
        start = i
        skip_whitespace, continued, backslash = True, False, False
        while True:
            if i >= end:
                if chars:
                    yield start, _at_text_end(chars, backslash)
                return
            char = text[i]
            i += 1
            if skip_lf:  # the LF of a CR LF that ended a continued line
                skip_lf = False
                if char == "\n":
                    continue
            if skip_whitespace:
                if char in _WHITESPACE or (not continued and char in _LINE_ENDS):
                    continue
                skip_whitespace = continued = False
            if not chars and char in "#!":
                i = _after_line(text, i)  # at the end of the text, the loop ends on the next turn
                skip_whitespace = True
                continue
            if char not in _LINE_ENDS:
                if not chars:
                    start = i - 1
                chars.append(char)
                backslash = char == "\\" and not backslash
                continue
            if not chars:  # the end of a blank continuation line
                skip_whitespace = True
                continue
            if i >= end:
                yield start, _at_text_end(chars, backslash)
                return
            if not backslash:
                yield start, "".join(chars)
                break
            chars.pop()  # the backslash that continues the line is not part of it
            skip_whitespace = continued = True
            backslash = False
            skip_lf = char == "\r"


def _after_line(text: str, i: int) -> int:
    """The index just after the line end that ends the line ``i`` is in (``len(text)`` when
    no line end follows)."""
    end = len(text)
    while i < end and text[i] not in _LINE_ENDS:
        i += 1
    return min(i + 1, end)


def _at_text_end(chars: list[str], backslash: bool) -> str:
    """A logical line the text ends in: a last backslash that would continue it is dropped."""
    return "".join(chars[:-1] if backslash else chars)


def _split(line: str) -> tuple[str, str]:
    """The key and value of a logical line, both still escaped (Java's ``load0``)."""
    key_end, value_start, separator, backslash = 0, len(line), False, False
    while key_end < len(line):
        char = line[key_end]
        if not backslash and char in "=:":
            value_start, separator = key_end + 1, True
            break
        if not backslash and char in _WHITESPACE:
            value_start = key_end + 1
            break
        backslash = char == "\\" and not backslash
        key_end += 1
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if separator or char not in "=:":
                break
            separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str) -> str:
    """Java's ``loadConvert``; raises _MalformedEscape where Java throws."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, end = 0, len(text)
    surrogates = False
    while i < end:
        char = text[i]
        i += 1
        if char != "\\" or i == end:  # a line never ends in an unescaped backslash
            out.append(char)
            continue
        char = text[i]
        i += 1
        if char != "u":
            out.append(_ESCAPES.get(char, char))
            continue
        digits = text[i : i + 4]
        if len(digits) < 4 or not _HEX_DIGITS.issuperset(digits):
            raise _MalformedEscape
        code = int(digits, 16)
        surrogates = surrogates or 0xD800 <= code <= 0xDFFF
        out.append(chr(code))
        i += 4
    result = "".join(out)
    if surrogates:  # a pair of escaped halves is one character in a Java string
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result


def _line_number(text: str, index: int) -> int:
    before = text[:index]
    return 1 + before.count("\n") + before.count("\r") - before.count("\r\n")


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text; later keys win, as in java.util.Properties. Raises
    PropertiesSyntaxError where java.util.Properties throws."""
    entries: dict[str, str] = {}
    malformed: list[MalformedEntry] = []
    for start, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        try:
            key = _unescape(raw_key)
        except _MalformedEscape:
            malformed.append(MalformedEntry(_line_number(text, start), None, raw_key))
            continue
        try:
            entries[key] = _unescape(raw_value)
        except _MalformedEscape:
            malformed.append(MalformedEntry(_line_number(text, start), key, raw_value))
    if malformed:
        raise PropertiesSyntaxError(malformed, entries)
    return entries


def escape_key(key: str) -> str:
    """``key`` as it would be written in a file (``Properties.store``'s escapes): one token on
    one line, whatever characters the key holds, for naming it in a message."""
    out = []
    for char in key:
        if char in _KEY_ESCAPES:
            out.append(_KEY_ESCAPES[char])
        elif not char.isprintable():  # as UTF-16 code units, as Java writes them
            units = char.encode("utf-16-be", "surrogatepass").hex().upper()
            out.extend("\\u" + units[i : i + 4] for i in range(0, len(units), 4))
        else:
            out.append(char)
    return "".join(out)


def read_properties(path: Path) -> dict[str, str]:
    """A file's properties, as ``Properties.load(Reader)`` reads the file decoded as UTF-8
    (no newline translation: CR and CR LF are Java's to judge). Raises UnicodeDecodeError
    for bytes that are not UTF-8, PropertiesSyntaxError for text Java refuses."""
    return parse_properties(path.read_bytes().decode("utf-8"))
