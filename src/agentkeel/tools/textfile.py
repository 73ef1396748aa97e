"""A text file's encoding and line endings, so that Edit and Write give back every byte they did not change.

A file is decoded once, losslessly, and written back in the same form:

* UTF-8 (with or without a byte-order mark, which is kept);
* UTF-16 with a byte-order mark (little or big endian, kept);
* otherwise, a file that is not UTF-8 at all is taken as Windows-1252 (a superset of Latin-1);
  the five bytes Windows-1252 leaves undefined stand for themselves (U+0081...), so every
  byte decodes to one character and encodes back to the same byte;
* a file that is UTF-8 in places and not in others cannot be told: refused, with one line.

Line endings: a file whose every newline is CRLF is ``crlf``; text put into it gets CRLF too.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

from agentkeel.core.tools import ToolError

BINARY_SNIFF = 8192
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# a well-formed multi-byte UTF-8 sequence: its presence in a file that is not UTF-8 means mixed encodings
UTF8_SEQ = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
_UNDEFINED_1252 = frozenset(b"\x81\x8d\x8f\x90\x9d")
ERRORS = "keel-cp1252"


def _cp1252_errors(err: UnicodeError) -> tuple[str | bytes, int]:
    """The five bytes cp1252 leaves undefined decode to (and encode from) the character of the same number."""
    if isinstance(err, UnicodeDecodeError):
        byte = err.object[err.start]
        if byte in _UNDEFINED_1252:
            return chr(byte), err.start + 1
    elif isinstance(err, UnicodeEncodeError):
        char = err.object[err.start]
        if len(char) == 1 and ord(char) in _UNDEFINED_1252:
            return bytes([ord(char)]), err.start + 1
    raise err


codecs.register_error(ERRORS, _cp1252_errors)


@dataclass(frozen=True)
class TextFormat:
    encoding: str = "utf-8"  # a Python codec name: utf-8, utf-16-le, utf-16-be or cp1252
    bom: bytes = b""
    crlf: bool = False  # every newline of the file is CRLF

    @property
    def label(self) -> str:
        name = {"cp1252": "Windows-1252 (Latin-1)"}.get(self.encoding, self.encoding.upper())
        return name + (" with a byte-order mark" if self.bom else "")


UTF8 = TextFormat()


def sniff_bom(head: bytes) -> tuple[bytes, str] | None:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return bom, encoding
    return None


def decode_file(path: Path, data: bytes) -> tuple[str, TextFormat]:
    """The text of a file's bytes and how to write it back; a ToolError when that cannot be done exactly."""
    found = sniff_bom(data)
    if found is not None:
        bom, encoding = found
        if encoding == "utf-32":
            raise ToolError(f"{path} is UTF-32 text, which keel's file tools do not handle; use Bash on it")
        try:
            text = data[len(bom) :].decode(encoding)
        except UnicodeDecodeError as e:
            raise ToolError(
                f"{path} starts with a {encoding.upper()} byte-order mark but is not valid {encoding.upper()} "
                f"(at byte {e.start + len(bom)}): keel will not change a file it cannot write back exactly; "
                "fix its encoding, or edit it with Bash"
            ) from None
        return text, TextFormat(encoding, bom, _all_crlf(text))
    if b"\x00" in data[:BINARY_SNIFF]:
        raise ToolError(f"{path} is a binary file; it cannot be read as text")
    try:
        text = data.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError as e:
        if UTF8_SEQ.search(data):
            raise ToolError(
                f"{path} mixes UTF-8 with bytes that are not UTF-8 (the first at byte {e.start}): keel cannot tell "
                "its encoding, so it will not change it (that could alter text you did not ask to change); "
                "fix its encoding, or edit it with Bash"
            ) from None
        text = data.decode("cp1252", ERRORS)
        encoding = "cp1252"
    return text, TextFormat(encoding, b"", _all_crlf(text))


def _all_crlf(text: str) -> bool:
    crlf = text.count("\r\n")
    return crlf > 0 and crlf == text.count("\n")


def to_crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def encode_text(path: Path, text: str, fmt: TextFormat) -> bytes:
    """``text`` in the file's own encoding (with its byte-order mark); a ToolError naming a character it cannot hold."""
    try:
        if fmt.encoding == "cp1252":
            return text.encode("cp1252", ERRORS)
        return fmt.bom + text.encode(fmt.encoding)
    except UnicodeEncodeError as e:
        bad = text[e.start : e.end]
        shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in dict.fromkeys(bad[:5]))
        raise ToolError(
            f"{path} is {fmt.label} text, which cannot hold {shown}: nothing was written. Use characters the file's "
            "encoding has (keel keeps a file's encoding, so bytes you did not change stay as they were)"
        ) from None


def decode_line(raw: bytes, cut: bool = False) -> str:
    """One line of a file for Read's view: UTF-8, or Windows-1252 when it is not (as Edit decodes such a file).
    ``cut``: the line was cut short, maybe inside a character."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if cut and e.reason == "unexpected end of data" and e.start >= len(raw) - 3:
            return decode_line(raw[: e.start])
        if UTF8_SEQ.search(raw):
            return raw.decode("utf-8", "replace")  # mixed: shown as it is
        return raw.decode("cp1252", ERRORS)
