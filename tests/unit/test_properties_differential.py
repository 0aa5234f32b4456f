"""The properties reader against the JDK: thousands of generated texts, each parsed by
``app.settings.properties`` and by ``java.util.Properties.load(Reader)`` in one JVM, must give
the same keys and values, or both refuse the text.

The texts mix what makes the format tricky: separators and escaped separators, backslashes at
line ends (odd and even counts), unicode escapes valid, malformed, surrogate halves and pairs,
comment markers at line starts and on continuation lines, odd whitespace, and every character
that some line splitter treats as a line end (Java's are only LF, CR and CR LF)."""

from __future__ import annotations

import hashlib
import random
import shutil
import struct
from pathlib import Path

import pytest

from app.settings.properties import PropertiesSyntaxError, parse_properties
from devtools.commands import run_command

ORACLE_SOURCE = Path(__file__).parent / "java" / "PropertiesOracle.java"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "properties-oracle"
TEXTS = 4000
SEED = 20240614

FRAGMENTS = [
    # keys and values
    "a", "key", "k.e.y", "value", "x y", "\u00e9", "\U0001F600", "\u2603", "=a", "User:CN=x,O=y",
    # separators
    "=", ":", " ", "\t", "\f", " = ", " :", "==", "=:", ": ", "\t=\t", " \f",
    # escapes
    "\\t", "\\n", "\\r", "\\f", "\\=", "\\:", "\\ ", "\\\\", "\\#", "\\!", "\\a", "\\\u00e9", "\\\U0001F600",
    "\\u0041", "\\u00e9", "\\u00E9", "\\uD83D\\uDE00", "\\ud800", "\\uDE00", "\\u0000", "\\u000a", "\\u005c", "\\U0041",
    # line ends, continued or not
    "\n", "\n", "\r", "\r\n", "\\\n", "\\\r", "\\\r\n", "\\\\\n", "\\\\\\\n", "\\", "\\\\",
    # characters other splitters treat as line ends
    "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\n\r",
    # comments and whitespace
    "#", "!", "# comment", "! comment", "   ", "\t\t", "\f\f", "\n#", "\n!", "\n  # x\\\n", "\\\n#", "\\\n  !",
    # a BOM, a NUL and other controls
    "\ufeff", "\x00", "\x7f", "\x01",
]

# Malformed unicode escapes: Java refuses a text with one outside a comment.
MALFORMED = ["\\u", "\\u0", "\\u00", "\\u004", "\\u12G4", "\\u 123", "\\u-123", "\\u\u00e9\u00e9\u00e9\u00e9", "\\u00\n1"]

# Named cases: the corners of the format, most of them where a reader built on Python's str
# methods (splitlines, strip) and Java's disagree.
KNOWN_CASES = [
    "a=1\fb=2",  # form feed: whitespace to Java, a line break to str.splitlines()
    "a=1\x85b=2\u2028c=3\u2029d=4\x1cx\x1dy\x1ez\vw",
    "a=\\u00",  # malformed: Java refuses
    "a=\\u00zz",
    "\\",  # a lone backslash at the end: Java keeps the empty key
    "\\\n",
    "\\\n   ",
    "\\\n#not a key",  # a continuation starting a comment, because the line is still empty
    "a=b\\\n  # part of the value",
    "a\\\r\nb",
    "a\\\r\n\nb",
    "a\\\n\\\n\\\nb",
    "a=\\\\\nb",
    " \t\fkey \t\f=\t\f value \t\f",
    "key\\ with\\ spaces = v",
    "k\\\n  ey=v",
    "=empty key",
    ":",
    "a=\\uD83D\\uDE00",
    "\ufeffa=1",
]


@pytest.fixture(scope="module")
def oracle() -> list[str]:
    """The command that runs the compiled oracle; compiled once per change of its source."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.fail("the JDK (javac and java) is needed to compare the properties reader with java.util.Properties")
    source = ORACLE_SOURCE.read_bytes()
    classes = CACHE / hashlib.sha256(source).hexdigest()[:16]
    if not (classes / "PropertiesOracle.class").exists():
        classes.mkdir(parents=True, exist_ok=True)
        run_command(["javac", "-d", classes, ORACLE_SOURCE], 120, check=True)
    return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", str(classes), "PropertiesOracle"]


def java_parse(command: list[str], texts: list[str]) -> list[dict[str, str] | str]:
    """Each text's entries, or the message of its refusal, as java.util.Properties gives them."""
    framed = [struct.pack(">i", len(texts))]
    for text in texts:
        data = text.encode("utf-8")
        framed += [struct.pack(">i", len(data)), data]
    out = run_command(command, 120, input=b"".join(framed), binary=True, check=True).stdout
    position = 0

    def take(size: int) -> bytes:
        nonlocal position
        position += size
        return out[position - size : position]

    def string() -> str:
        (length,) = struct.unpack(">i", take(4))
        # UTF-16 as Java holds it: a pair becomes one character, a lone surrogate stays one
        return take(2 * length).decode("utf-16-be", "surrogatepass")

    results: list[dict[str, str] | str] = []
    for _ in texts:
        if take(1) == b"\x01":
            results.append(string())
            continue
        (count,) = struct.unpack(">i", take(4))
        results.append(dict((string(), string()) for _ in range(count)))
    assert position == len(out)
    return results


def python_parse(text: str) -> dict[str, str] | str:
    try:
        return parse_properties(text)
    except PropertiesSyntaxError as refused:
        return str(refused)


def generated_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = rng.choices(FRAGMENTS, k=rng.randint(0, 24))
        if rng.random() < 0.3:
            parts.append(rng.choice(MALFORMED))
        if rng.random() < 0.1:
            parts.append("".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(1, 6))))
        rng.shuffle(parts)
        texts.append("".join(parts))
    return texts


def test_the_reader_gives_what_java_util_properties_gives(oracle):
    texts = KNOWN_CASES + generated_texts(TEXTS, SEED)
    differences = []
    refusals = 0
    for text, expected in zip(texts, java_parse(oracle, texts)):
        actual = python_parse(text)
        if isinstance(expected, str):  # Java refused: so must the reader, whatever it says
            refusals += 1
            if not isinstance(actual, str):
                differences.append(f"{text!r}: Java refuses ({expected}), the reader gives {actual!r}")
        elif actual != expected:
            differences.append(f"{text!r}: Java gives {expected!r}, the reader {actual!r}")
    assert not differences, f"{len(differences)} of {len(texts)} texts differ, e.g.:\n" + "\n".join(differences[:15])
    # the generator must reach both outcomes often, or the comparison proves little
    assert TEXTS // 20 < refusals < TEXTS // 2, refusals
