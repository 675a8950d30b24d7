"""The one number parser: exact integers of any size, finite floats, a named error otherwise."""

from __future__ import annotations

import json
import math

import pytest

from roofwise.base import numbers
from roofwise.base.errors import InputError
from roofwise.base.text import elide, one_line, shown


def test_exact_int_reads_past_cpythons_4300_digit_limit():
    text = "7" * 5000 + "3"
    with pytest.raises(ValueError):
        int(text)  # what every reader used to call
    value = numbers.exact_int(text)
    assert value % 10 == 3 and value // 10**4999 == 77  # leading and trailing digits exact
    assert value == (10**5001 - 1) // 9 * 7 - 4  # 77...73, recounted in closed form
    assert numbers.exact_int("-0012") == -12


def test_exact_int_refuses_text_that_is_not_a_decimal_integer():
    for text in ("1.5", "0x10", "1e3", "", "١٢"):  # the last: Arabic-Indic digits
        with pytest.raises(ValueError):
            numbers.exact_int(text)
    with pytest.raises(ValueError, match="digits"):
        numbers.exact_int("1" * (numbers.MAX_INT_DIGITS + 1))


def test_parse_json_keeps_huge_integers_exact():
    with pytest.raises(ValueError):
        json.loads('{"flops": ' + "9" * 5000 + "}")
    record = numbers.parse_json('{"flops": ' + "9" * 5000 + "}")
    assert record["flops"] == 10**5000 - 1


@pytest.mark.parametrize("value, problem", [
    (10**400, "beyond float range"),
    ("1" * 400, "beyond float range"),
    ("1e999", "beyond float range"),
    ("abc", "got 'abc'"),
    ("nan", "got 'nan'"),
    ("inf", "got 'inf'"),
    (True, "got True"),
    (None, "got nothing"),
    ([1], "got list"),
])
def test_to_float_names_what_is_wrong(value, problem):
    with pytest.raises(InputError, match=problem) as caught:
        numbers.to_float(value, "f.json:3: flops")
    assert str(caught.value).startswith("f.json:3: flops: expected a finite number")
    assert len(str(caught.value)) <= 120


def test_to_float_accepts_what_is_in_range():
    assert numbers.to_float(10**308, "x") == 1e308
    assert numbers.to_float(" 4800e9 ", "x") == 4.8e12
    assert numbers.non_negative(0, "x") == 0.0
    with pytest.raises(InputError, match="non-negative"):
        numbers.non_negative(-1e-9, "x")
    with pytest.raises(InputError, match="positive"):
        numbers.positive(0.0, "x")


def test_counts_are_exact_below_the_ceiling_and_refused_above():
    assert numbers.count("4294967297", "n") == 4294967297
    assert numbers.count(numbers.COUNT_CEILING, "n") == 10**30
    with pytest.raises(InputError, match="above the largest count"):
        numbers.count(10**30 + 1, "n")
    with pytest.raises(InputError, match="expected an integer >= 1"):
        numbers.count(1.5, "n", 1)
    with pytest.raises(InputError, match="integers of up to"):
        numbers.count("1" * 2_000_000, "n")


def test_absent_is_null_or_blank_text():
    assert numbers.is_absent(None) and numbers.is_absent("") and numbers.is_absent("  ")
    assert not numbers.is_absent(0) and not numbers.is_absent("0")


def test_messages_elide_values_in_the_middle():
    assert elide("abcdefghij", 7) == "ab...ij"
    assert shown("x" * 10_000) == "'xxxxxxxxxx...xxxxxxxxx'"  # 24 characters
    assert shown(10**300).endswith("(301 digits)")
    assert "5,001 digits" in shown(10**5000)
    line = one_line("key\nwith a newline \udc80" + "y" * 1000)
    assert "\n" not in line and len(line) == 290 and line.startswith("key\\nwith")
    assert "\\udc80" in line
    line.encode("utf-8")  # encodable: no lone surrogate left
    assert math.isclose(len(one_line("z" * 10**6)), 290)
