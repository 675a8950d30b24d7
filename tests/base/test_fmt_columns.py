"""The column formatters write exactly what the scalar ones write, value by value: the
reasons and lint texts of a million rows are built from them."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from roofwise.base import fmt

EDGES = [0.0, -0.0, 1.0, 0.9995, 0.0009995, 999.9995, 1e-9, 1e-15, 9.99e-16, 1e-300, 1e6,
         999_999.9999, 1e18, 1e18 - 128, 2.5e17, 0.05, 0.0005, 0.00049, 1e4, 9_999.99, -3.2,
         math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 123456.789, 0.00125]


def values() -> st.SearchStrategy[list[float]]:
    return st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                              st.floats(-1e7, 1e7), st.floats(0, 1e-3),
                              st.sampled_from(EDGES)), max_size=40)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(xs=values())
def test_each_column_formatter_matches_its_scalar(xs):
    column = np.array(xs, dtype=np.float64)
    assert fmt.seconds_each(column) == [fmt.seconds(x) for x in xs]
    assert fmt.nbytes_each(column) == [fmt.nbytes(x) for x in xs]
    assert fmt.exact_each(column) == [fmt.exact(x) for x in xs]
    assert fmt.percent_each(column) == [fmt.percent(x) for x in xs]
    assert fmt.percent_each(column, 0) == [fmt.percent(x, 0) for x in xs]
    assert fmt.fixed_each(column, ".1f", "GB/s") == [fmt.fixed(x, ".1f", "GB/s") for x in xs]
    for key in ("sfu.fp32", "tensor_core.bf16"):
        assert fmt.tera_rate_each(column, key) == [fmt.tera_rate(x, key) for x in xs]


def test_edges_by_hand():
    column = np.array([0.0012345, 2.0, 3e-10, math.nan, 1e7])
    assert fmt.seconds_each(column) == ["1.234 ms", "2.000 s", "0.300 ns", "—", "1e+07 s"]
    assert fmt.exact_each(np.array([402653184.0, 1e19])) == ["402,653,184", "1e+19"]
    assert fmt.percent_each(np.array([0.8423, 1e-5, 0.0])) == ["84.2%", "<0.1%", "0.0%"]
    assert fmt.tera_rate_each(np.array([4.18e12]), "sfu.fp32") == ["4.18 Top/s"]
    assert fmt.seconds_each(np.array([])) == []
    assert fmt.nbytes_each(np.array([10.6e6, 512.0, 5e24, math.inf])) == [
        "10.60 MB", "512.00 B", "5e+24 B", "—"]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(xs=values().filter(bool))
def test_long_columns_match_too(xs):
    """A column long enough that the engine writes the digits (a short one is formatted by
    Python, value by value) writes the same texts."""
    xs = xs * (fmt.ENGINE_FROM_VALUES // len(xs) + 1)
    column = np.array(xs, dtype=np.float64)
    assert fmt.seconds_each(column) == [fmt.seconds(x) for x in xs]
    assert fmt.percent_each(column) == [fmt.percent(x) for x in xs]
    assert fmt.percent_each(column, 0) == [fmt.percent(x, 0) for x in xs]
    assert fmt.fixed_each(column, ".1f", "GB/s") == [fmt.fixed(x, ".1f", "GB/s") for x in xs]
    assert fmt.exact_each(column) == [fmt.exact(x) for x in xs]
    assert fmt.nbytes_each(column) == [fmt.nbytes(x) for x in xs]
    for digits in (0, 1, 4):
        assert fmt.decimals_each(column, digits, ("%",)) == [f"{x:.{digits}f}%" for x in xs]


def test_long_integer_columns_group_their_digits_as_python_does():
    """Counts written by the engine in groups of three: every group size, ties rounded half to
    even, negatives and values that round to zero keep their sign, as `f"{v:,.0f}"` does."""
    ties = [0.5, 1.5, 2.5, -0.5, -0.4, 999.5, 1000.5, 999_999.5]
    sizes = [float(10 ** k + 7) for k in range(18)] + [float(10 ** k - 1) for k in range(1, 18)]
    xs = (ties + sizes + [-x for x in sizes] + EDGES) * 60
    assert len(xs) >= fmt.ENGINE_FROM_VALUES
    column = np.array(xs, dtype=np.float64)
    assert fmt.exact_each(column) == [fmt.exact(x) for x in xs]
    assert fmt.exact_column(column).to_list()[:3] == ["0", "2", "2"]
