"""Tables that fit the terminal: designed for 80 columns, wider when there is room.

Rules, in order: a number, a unit or a name is never cut (its column does not wrap); prose
(reasons, sources, labels) wraps at word boundaries; when even that does not fit, the least
useful column is dropped (each column says how useful it is) and the table says which were left
out. No cell is ever shortened with "…".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from roofwise.base.text import for_terminal

GAP = 3  # characters between columns: padding 1 on each side and the blank rule between
PROSE_MIN_WIDTH = 16  # a wrapping column narrower than this reads as a word list
PROSE_FLOOR = 8  # narrower than this a wrapping column is not worth showing


@dataclass(frozen=True)
class Column:
    """One column of a fitted table.

    `drop`: 0 is never dropped; among the others the highest drops first. `wrap`: prose that
    may wrap (never numbers, units or names)."""

    header: str
    justify: str = "left"
    wrap: bool = False
    drop: int = 0
    min_width: int = PROSE_MIN_WIDTH


@dataclass(frozen=True)
class Fitted:
    table: Table
    dropped: tuple[str, ...]  # headers left out at this width

    def note(self) -> str | None:
        """One line naming the columns left out, or None."""
        if not self.dropped:
            return None
        return (f"(left out at this width: {', '.join(self.dropped)}; a wider terminal or "
                "--json shows them)")


def cell_width(cell: str | Text) -> int:
    """Widest line of a cell as printed (markup already parsed for Text)."""
    plain = cell.plain if isinstance(cell, Text) else cell
    return max((len(line) for line in plain.split("\n")), default=0)


def fit_widths(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int
               ) -> tuple[list[int], dict[int, int]]:
    """The columns kept (indices) and each one's width, so the row fits `width` when it can."""
    natural = [max([cell_width(c.header)] + [cell_width(r[k]) for r in rows])
               for k, c in enumerate(columns)]
    keep = list(range(len(columns)))

    def needed(ks: list[int]) -> int:
        return sum(min(natural[k], columns[k].min_width) if columns[k].wrap else natural[k]
                   for k in ks) + GAP * (len(ks) - 1)

    while needed(keep) > width:
        droppable = [k for k in keep if columns[k].drop]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda k: (columns[k].drop, k)))
    fixed = sum(natural[k] for k in keep if not columns[k].wrap) + GAP * (len(keep) - 1)
    prose = [k for k in keep if columns[k].wrap]
    room = max(0, width - fixed)
    sizes = {k: natural[k] for k in keep if not columns[k].wrap}
    # prose columns share what is left, the narrowest first taking only what it needs
    for n, k in enumerate(sorted(prose, key=lambda k: natural[k])):
        share = room // (len(prose) - n)
        sizes[k] = max(min(natural[k], share), min(natural[k], columns[k].min_width))
        room -= sizes[k]
    # nothing left to drop and still too wide: prose gives way (never below a short word),
    # so that rich never has to crop a cell
    while room < 0 and any(sizes[k] > PROSE_FLOOR for k in prose):
        widest = max(prose, key=lambda k: sizes[k])
        sizes[widest] -= 1
        room += 1
    return keep, sizes


def _plain(cell: str | Text) -> Text:
    return Text(cell) if isinstance(cell, str) else cell


def fit_table(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int,
              title: str | None = None) -> Fitted:
    """A rich Table of `rows` under `columns`, no wider than `width` when that is possible."""
    rows = [[for_terminal(c) if isinstance(c, str) else c for c in row] for row in rows]
    keep, sizes = fit_widths(columns, rows, width)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, 1), collapse_padding=False)
    for k in keep:
        col = columns[k]
        table.add_column(col.header, justify=col.justify,  # type: ignore[arg-type]
                         no_wrap=not col.wrap, overflow="fold",
                         min_width=sizes[k], max_width=sizes[k])
    for row in rows:  # a str cell is plain text (a name from a file may hold `[/x]`)
        table.add_row(*(_plain(row[k]) for k in keep))
    return Fitted(table, tuple(columns[k].header for k in range(len(columns)) if k not in keep))


def for_rich(text: object) -> str:
    """Plain text for a rich table or print: markup escaped, encodable."""
    return escape(for_terminal(text))
