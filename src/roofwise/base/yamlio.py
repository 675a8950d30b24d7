"""YAML with limits: profiles and ledgers are small files, and a file must not cost more.

`yaml.safe_load` already refuses code, but not work: an alias bomb (a few lines whose anchors
expand to billions of nodes) is built as shared references in an instant and then explodes in
whatever turns it into text; 5,000 nested brackets overflow the composer's recursion; `!!float
abc` and a 5,000-digit integer raise ValueError from the constructor. Here a document is
composed with a depth limit, its expanded size is counted over the node graph (each shared node
counted once per reference, without expanding anything) before a single value is built, and
values are built with exact integers (`numbers.exact_int`) and errors that name the line.
Every refusal is a `LimitError` or `yaml.YAMLError` carrying the line, which the caller turns
into one line of input error.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from roofwise.base.numbers import exact_int
from roofwise.base.text import shown

MAX_DOCUMENT_CHARS = 4 * 1024 * 1024  # a profile is a few kilobytes, a big ledger a few hundred
MAX_DEPTH = 64  # nesting, aliases followed
MAX_EXPANDED = 4 * 1024 * 1024  # nodes plus scalar characters, aliases expanded


class LimitError(yaml.YAMLError):
    """A document over one of the limits; `problem_mark` says where, when known."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Constructing:
    """Constructors that name the bad value and read integers of any length exactly."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except (ValueError, TypeError, AttributeError, OverflowError, KeyError):
            # `!!float abc`, `!!timestamp x`: the stock constructors raise plain errors
            value = shown(node.value) if isinstance(node, ScalarNode) else "a collection"
            raise ConstructorError(None, None, f"expected a YAML {node.tag.rsplit(':', 1)[-1]}, "
                                               f"got {value}",
                                   node.start_mark) from None

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node)).replace("_", "")  # type: ignore[attr-defined]
        digits = text.lstrip("+-")
        if digits.isdigit() and digits.isascii() and not (digits.startswith("0")
                                                          and len(digits) > 1):
            return exact_int(text)  # any length; CPython's int() stops at 4,300 digits
        return super().construct_yaml_int(node)  # type: ignore[misc]


class _Loader(_Constructing, yaml.SafeLoader):
    """SafeLoader whose composer counts depth and whose constructors name the bad value."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels",
                                 self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)  # type: ignore[type-var]
_CLoader: Any = None
if hasattr(yaml, "CSafeLoader"):  # libyaml, which PyYAML's wheels carry
    class _CLoader(_Constructing, yaml.CSafeLoader):  # type: ignore[no-redef]
        """libyaml's parser with `_Loader`'s constructors: ten times faster, for the profiles
        that ship with roofwise (their nesting is ours, so the depth count is not needed)."""

    _CLoader.add_constructor("tag:yaml.org,2002:int", _CLoader.construct_yaml_int)


def load(text: str, packaged: bool = False) -> Any:
    """One YAML document, within the limits; raises yaml.YAMLError (LimitError included).
    `packaged`: a file that ships with roofwise, parsed by libyaml where PyYAML has it."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise LimitError(f"{len(text):,} characters; a profile or ledger has at most "
                         f"{MAX_DOCUMENT_CHARS:,}")
    loader = _CLoader(text) if packaged and _CLoader is not None else _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expansion(root: Node) -> None:
    """The size of the document with every alias expanded, counted without expanding it:
    each node's size is memoised, so a shared node costs one visit however often it is used."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if depth > MAX_DEPTH or key in open_nodes:
            raise LimitError("an alias that refers to itself" if key in open_nodes else
                             f"nested deeper than {MAX_DEPTH} levels once aliases are followed",
                             node.start_mark)
        open_nodes.add(key)
        total = 1
        if isinstance(node, ScalarNode):
            total += len(node.value)
        elif isinstance(node, SequenceNode):
            total += sum(size(item, depth + 1) for item in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        open_nodes.discard(key)
        if total > MAX_EXPANDED:
            raise LimitError(f"aliases expand the document beyond {MAX_EXPANDED:,} nodes and "
                             "characters (an alias bomb?)", node.start_mark)
        sizes[key] = total
        return total

    size(root, 0)
