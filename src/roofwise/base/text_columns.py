"""Text columns for the engine: numpy object arrays (and nested lists) of text as polars
series, with what UTF-8 cannot encode (a lone surrogate) written as \\udc80."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from roofwise.base.text import encodable


def strings(name: str, values: np.ndarray | Sequence[Any]) -> pl.Series:
    """A text column; a lone surrogate (a JSON escape polars cannot hold) written as \\udc80.
    A column that is one value broadcast (`pricing.uniform`) is built from that value."""
    if isinstance(values, np.ndarray):
        if values.ndim == 1 and len(values) > 1 and values.strides[0] == 0:
            return strings(name, values[:1]).new_from_index(0, len(values))
        texts = values.tolist()
    else:
        texts = list(values)
    try:
        return pl.Series(name, texts, dtype=pl.String)
    except (UnicodeEncodeError, TypeError):  # a surrogate, or a value that is not text
        return pl.Series(name, [encodable(str(t)) for t in texts], dtype=pl.String)


def null_texts(n: int) -> pl.Series:
    """A text column of `n` nulls (built eagerly: `pl.repeat` runs a query for it)."""
    return pl.Series([None], dtype=pl.String).new_from_index(0, n) if n else pl.Series(
        [], dtype=pl.String)


def coded(name: str, codes: np.ndarray, names: Sequence[str | None]) -> pl.Series:
    """A text column given as codes into a few distinct `names` (a categorical column): the
    names made text once, then gathered, instead of a Python string per row."""
    return strings(name, list(names)).gather(np.asarray(codes, dtype=np.int64))


def nested(name: str, values: list[Any], dtype: pl.DataType) -> pl.Series:
    """A list (or struct) column of text; lone surrogates written as \\udc80."""
    try:
        return pl.Series(name, values, dtype=dtype)
    except UnicodeEncodeError:
        return pl.Series(name, _encodable_all(values), dtype=dtype)


def _encodable_all(value: Any) -> Any:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, list):
        return [_encodable_all(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encodable_all(v) for k, v in value.items()}
    return value
