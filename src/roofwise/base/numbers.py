"""One parser for every number a user hands roofwise: records, profiles, ledgers, `--shape`.

Every reader goes through here so that every reader fails the same way. The rules:

- integers are exact at any size: a 5,000-digit integer is read without Python's 4,300-digit
  int-string limit (`exact_int`), up to `MAX_INT_DIGITS` digits, and `parse_json` reads JSON
  with it;
- a float is finite and in range: a value above about 1.8e308 (a 400-digit integer, `1e999`)
  is a named error, never an OverflowError or a silent infinity;
- counts (shape sizes, element counts, operation counts) are Python integers below
  `COUNT_CEILING`, so that no product ever wraps (as an int64 would) and every one converts to
  a finite float for pricing;
- `True`/`False` are not numbers, and `None`/`""` mean "absent" only where a caller asks
  (`is_absent`): what pandas writes for a missing value.

Each failure is an `InputError` naming `where` and what was expected, with the offending text
elided in the middle (`text.shown`) so that the message stays one short line.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from roofwise.base.errors import InputError
from roofwise.base.text import shown

MAX_INT_DIGITS = 1_000_000  # exact integers up to here (about 0.5 s to convert); refused above
# A count above this is no call any machine makes (10^30 operations at 10^18 per second is
# 30,000 years); below it, every product of counts converts to a finite float.
COUNT_CEILING = 10**30
FLOAT_MAX_TEXT = "about 1.8e308"

_CHUNK_DIGITS = 4000  # below CPython's int-string limit (4,300 digits)
_DECIMAL_INT = re.compile(r"\s*([+-]?)0*(\d+)\s*", re.ASCII)


def exact_int(text: str) -> int:
    """A decimal integer of any length (up to MAX_INT_DIGITS digits), exactly.

    CPython refuses to convert more than 4,300 digits in one go; converting halves and joining
    them is exact and fast (a million digits in about half a second). Raises ValueError for
    text that is not a decimal integer, like `int`, so that it can serve as json's parse_int.
    """
    match = _DECIMAL_INT.fullmatch(text)
    if match is None:
        raise ValueError(f"not a decimal integer: {shown(text)}")
    sign, digits = match.groups()
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits):,} digits; roofwise reads integers of "
                         f"up to {MAX_INT_DIGITS:,} digits")
    value = _digits_to_int(digits)
    return -value if sign == "-" else value


def _digits_to_int(digits: str) -> int:
    if len(digits) <= _CHUNK_DIGITS:
        return int(digits)
    low = len(digits) // 2
    return _digits_to_int(digits[:-low]) * 10**low + _digits_to_int(digits[-low:])


class DuplicateKey(ValueError):
    """A JSON object names `key` twice: which value is meant is ambiguous."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {shown(key)}")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return record


def int_text(value: int) -> str:
    """The decimal digits of an integer of any size (`str` refuses past 4,300 digits)."""
    if value < 0:
        return "-" + int_text(-value)
    if value.bit_length() <= 13000:  # about 3,900 digits: within CPython's limit
        return str(value)
    half = (int(value.bit_length() * math.log10(2)) + 1) // 2
    high, low = divmod(value, 10**half)
    return int_text(high) + int_text(low).rjust(half, "0")


def parse_json(text: str | bytes, unique_keys: bool = False) -> Any:
    """`json.loads` with exact integers of any size; errors as json raises them
    (JSONDecodeError, or ValueError for an integer beyond MAX_INT_DIGITS). With
    `unique_keys`, an object that names a key twice (at any depth) raises DuplicateKey."""
    if unique_keys:
        return json.loads(text, parse_int=exact_int, object_pairs_hook=_unique_keys)
    return json.loads(text, parse_int=exact_int)


def is_absent(value: Any) -> bool:
    """None or blank text: what pandas writes for a missing value (null in JSON, "" in CSV)."""
    return value is None or (isinstance(value, str) and not value.strip())


def to_float(value: Any, where: str, expected: str = "a finite number") -> float:
    """A finite float from an int (any size), a float or numeric text; InputError otherwise."""
    if isinstance(value, bool):
        raise InputError(where, f"expected {expected}, got {value!r}")
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise InputError(where, f"expected {expected}, got {shown(value)}: beyond float "
                                    f"range ({FLOAT_MAX_TEXT})") from None
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise InputError(where, f"expected {expected}, got {shown(value)}") from None
        if math.isinf(number) and _looks_finite(value):
            raise InputError(where, f"expected {expected}, got {shown(value)}: beyond float "
                                    f"range ({FLOAT_MAX_TEXT})")
    else:
        raise InputError(where, f"expected {expected}, got {kind(value)}")
    if not math.isfinite(number):
        raise InputError(where, f"expected {expected}, got {shown(value)}")
    return number


def _looks_finite(text: str) -> bool:
    """Numeric text that is not spelled as infinity: its infinity is an overflow."""
    return "inf" not in text.lower()


def non_negative(value: Any, where: str) -> float:
    number = to_float(value, where, "a non-negative finite number")
    if number < 0:
        raise InputError(where, f"expected a non-negative finite number, got {shown(value)}")
    return number


def positive(value: Any, where: str) -> float:
    number = to_float(value, where, "a positive finite number")
    if not number > 0:
        raise InputError(where, f"expected a positive finite number, got {shown(value)}")
    return number


def to_int(value: Any, where: str, expected: str = "an integer") -> int:
    """An exact integer from an int, a whole float or decimal text (1.5 is not truncated)."""
    if isinstance(value, bool):
        raise InputError(where, f"expected {expected}, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(where, f"expected {expected}, got {shown(value)}")
        return int(value)
    if isinstance(value, str):
        try:
            return exact_int(value)
        except ValueError as exc:
            problem = str(exc) if "digits" in str(exc) else f"got {shown(value)}"
            raise InputError(where, f"expected {expected}, {problem}") from None
    raise InputError(where, f"expected {expected}, got {kind(value)}")


def count(value: Any, where: str, minimum: int = 0) -> int:
    """A count (a size, an element or operation count): an exact integer >= `minimum` and at
    most COUNT_CEILING, so that products of counts stay exact and convert to finite floats."""
    number = to_int(value, where, f"an integer >= {minimum}")
    if number < minimum:
        raise InputError(where, f"expected an integer >= {minimum}, got {shown(number)}")
    check_count(number, where)
    return number


def check_count(number: int | float, where: str) -> None:
    """InputError when a count (or a product of counts) passes COUNT_CEILING."""
    if number > COUNT_CEILING:
        raise InputError(where, f"{shown(number)} is above the largest count roofwise prices "
                                "(10^30); expected a size a machine could process")


def kind(value: Any) -> str:
    """What a value is, for a message: `nothing`, `the string '...'`, `list`."""
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"the string {shown(value)}"
    return type(value).__name__
