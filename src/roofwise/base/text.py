"""One sanitiser for user text on its way to a person: a message, rich, matplotlib, HTML.

Names, workloads, titles and paths come from files and arguments and may hold anything: rich
markup (`[/x]`), matplotlib mathtext (`$\\frac{$`), newlines, lone surrogates (what Python
decodes an undecodable file name to), or four thousand characters. Each renderer gets the text
made inert for it here, and nowhere else:

- `for_terminal`: control characters other than a newline (ESC of an ANSI colour or cursor
  sequence, OSC, BEL, CR, C1 codes) shown escaped, `\\x1b`, so that a name from a file never
  drives the terminal; what is printed to a terminal goes through it (rich tables, lines;
  `render.layout.for_rich` adds rich's markup escape);
- `for_mpl`: every `$` escaped, so a data string is never parsed as mathtext, and what is not
  printable escaped, so that every chart format can lay it out;
- `encodable`: characters UTF-8 cannot encode (lone surrogates) shown as `\\udc80`;
- `one_line`: control characters (newlines included) shown escaped, length capped by eliding
  the middle, so that an error is always one short line;
- `shown`: a value as a message quotes it (repr), elided in the middle.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

MESSAGE_LIMIT = 290  # characters of one error line: under the 300 the contract promises
_SHOWN = 24  # characters of an offending value quoted in a message
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# all controls but the newline, and the Unicode line and paragraph separators (a line splitter
# reading the output would break a row there)
_TERMINAL_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def elide(text: str, limit: int) -> str:
    """`text` cut to `limit` characters by replacing its middle with `...`."""
    if len(text) <= limit:
        return text
    head = (limit - 3 + 1) // 2
    tail = limit - 3 - head
    return f"{text[:head]}...{text[len(text) - tail:]}" if tail else f"{text[:head]}..."


def _outer_brackets(text: str, opening: str, closing: str) -> str:
    """`text` with every outermost `opening ... closing` span written `opening...closing`."""
    out, depth = [], 0
    for ch in text:
        if ch == opening:
            if depth == 0:
                out.append(opening + "...")
            depth += 1
        elif ch == closing and depth:
            depth -= 1
            if depth == 0:
                out.append(closing)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_kernel(name: str, limit: int) -> str:
    """A kernel name that fits `limit` characters, shortened by rule and never folded:
    the `void ` return type and the parameter list go first, then the template arguments
    (`kernel<...>`), then the middle of the namespace path (`at::...::kernel<...>`), so that
    the function's own name, at the end, stays whole as long as it fits."""
    if len(name) <= limit:
        return name
    text = name.removeprefix("void ")
    if text.endswith(")") and "(" in text:  # the parameter list of a demangled name
        text = _outer_brackets(text, "(", ")").removesuffix("(...)")
    if len(text) > limit:
        text = _outer_brackets(text, "<", ">")
    if len(text) > limit and "::" in text:
        head, _, last = text.rpartition("::")
        first = head.split("::")[0]
        text = f"{first}::...::{last}" if len(first) + len(last) + 7 <= limit else last
    return elide(text, limit)


def short_kernels(names: list[str], limit: int) -> dict[str, str]:
    """A label per distinct kernel name that fits `limit` and tells it from the others:
    `short_kernel`, and where two names would read alike (they differ only in template
    arguments) each of them numbered, `kernel<...> [1]`, for a caller that lists the numbered
    names in full."""
    short = {n: short_kernel(n, limit - 4) for n in dict.fromkeys(names)}
    count: dict[str, int] = {}
    for text in short.values():
        count[text] = count.get(text, 0) + 1
    numbered = [n for n, text in short.items() if count[text] > 1]
    return {n: f"{text} [{numbered.index(n) + 1}]" if n in numbered else short_kernel(n, limit)
            for n, text in short.items()}


def shown(value: Any, limit: int = _SHOWN) -> str:
    """`value` as a message quotes it: its repr, elided in the middle beyond `limit`."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 13000:
        # repr would hit CPython's 4,300-digit int-string limit
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    if isinstance(value, str) and len(value) > 4 * limit:
        value = value[: 2 * limit] + value[-2 * limit:]  # repr of a huge string costs time
    text = encodable(repr(value))
    if len(text) <= limit:
        return text
    digits = f" ({len(text):,} digits)" if isinstance(value, int) else ""
    return elide(text, limit) + digits


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """One printable line of at most `limit` characters: control characters escaped
    (`\\n`), unencodable ones too, the middle elided when too long."""
    if len(text) > 4 * limit:
        text = text[: 2 * limit] + text[-2 * limit:]
    flat = _CONTROL.sub(lambda m: repr(m.group())[1:-1], encodable(text))
    return elide(flat, limit)


def encodable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (lone surrogates) written as `\\udc80`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def for_terminal(text: Any) -> str:
    """Text a terminal prints as itself: control characters but the newline escaped
    (`\\x1b[31m` for an ANSI colour), encodable."""
    flat = encodable(str(text))
    if _TERMINAL_CONTROL.search(flat) is None:
        return flat
    return _TERMINAL_CONTROL.sub(lambda m: repr(m.group())[1:-1], flat)


def for_mpl(text: Any) -> str:
    """Plain text for a matplotlib label or title, safe in every chart format (PNG, SVG, PDF):
    never mathtext, and every character that is not printable (controls, CR, U+2028, zero
    width and bidi marks such as U+FEFF and U+202E, lone surrogates, unassigned and private
    code points, which the PDF backend cannot lay out) written as its escape (`\\ufeff`)."""
    return printable(str(text)).replace("$", r"\$")


def printable(text: str, keep: str = "") -> str:
    """`text` with every character that is not printable (a space is), other than those in
    `keep`, as its escape: what `for_mpl` gives matplotlib; idempotent, always encodable."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep or unicodedata.category(ch) == "Zs"
                   else repr(ch)[1:-1] for ch in text)
