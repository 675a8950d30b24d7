"""Checks shared by every loader: a failure names the file and key, and what was expected."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from roofwise.base import numbers, yamlio
from roofwise.base.errors import InputError
from roofwise.base.text import shown


def load_yaml(path: str | Path, packaged: bool = False) -> Any:
    """One YAML document, read within `yamlio`'s limits; any fault is one line naming the
    file (and the line, when the parser knows it). `packaged`: a file roofwise ships."""
    path = Path(path)
    try:
        if path.is_dir():
            raise InputError(str(path), "is a directory; expected a YAML file")
        with path.open("rb") as handle:
            data = handle.read(yamlio.MAX_DOCUMENT_CHARS + 4)
        text = data.decode("utf-8-sig")
    except OSError as exc:
        raise InputError(str(path), f"cannot read file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start}); expected a UTF-8 "
                                    "YAML file") from None
    try:
        return yamlio.load(text, packaged)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        if isinstance(exc, yamlio.LimitError):
            raise InputError(where, f"refused: {exc.problem}") from None
        if isinstance(exc, ConstructorError):
            raise InputError(where, f"malformed YAML value: {exc.problem}") from None
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise InputError(where, f"malformed YAML ({problem}); expected a YAML mapping") from None


def at(where: str, key: str) -> str:
    """`file: a.b[0].c`: the file once, then the path of keys inside it."""
    if ": " not in where:
        return f"{where}: {key}"
    return f"{where}{key}" if key.startswith("[") else f"{where}.{key}"


def expect_mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(where, f"expected a mapping, got {numbers.kind(value)}")
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(where, f"expected a list, got {numbers.kind(value)}")
    return value


def reject_unknown_keys(
    mapping: Mapping[str, Any], allowed: Iterable[str], where: str
) -> None:
    allowed_set = set(allowed)
    for key in mapping:
        if key not in allowed_set:
            known = ", ".join(sorted(allowed_set))
            raise InputError(at(where, str(key)), f"unknown key; expected one of {known}")


def require(mapping: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in mapping:
        raise InputError(at(where, key), "missing required key")
    return mapping[key]


def expect_positive(value: Any, where: str) -> float:
    """A finite number above zero; numeric strings such as '4800e9' are accepted."""
    number = numbers.to_float(value, where, "a positive number")
    if not number > 0:
        raise InputError(where, f"expected a positive number, got {shown(value)}")
    return number


def expect_positive_int(value: Any, where: str) -> int:
    """A size: a whole number above zero (1.5 is not silently truncated)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return numbers.count(value, where, 1)  # exact: a float would round 10**30
    number = expect_positive(value, where)
    if number != int(number):
        raise InputError(where, f"expected a whole number, got {shown(value)}")
    return numbers.count(int(number), where, 1)


def expect_non_negative(value: Any, where: str) -> float:
    number = numbers.to_float(value, where, "a non-negative number")
    if number < 0:
        raise InputError(where, f"expected a non-negative number, got {shown(value)}")
    return number


def expect_fraction(value: Any, where: str) -> float:
    """A measured fraction of a theoretical rate: in (0, 1]. Above 1 is not a calibration."""
    number = expect_positive(value, where)
    if number > 1.0:
        raise InputError(where, f"expected a fraction in (0, 1], got {shown(value)}: "
                                "a calibration above 1.0 means the theoretical rate is wrong")
    return number


def expect_str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(where, f"expected a non-empty string, got {numbers.kind(value)}")
    return value


def free_text(value: Any, where: str) -> str:
    """A free-text field (a label, a note, a source) as text: a string as it is, and what YAML
    reads as a number or a bool (`label: 123`, `notes: [yes]`) as it wrote it, an integer of
    any length exactly; an absent value is ""; a mapping or a list is refused."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return numbers.int_text(value)
    if isinstance(value, float):
        return repr(value)
    raise InputError(where, f"expected text, got {numbers.kind(value)}")
