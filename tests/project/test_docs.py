"""The docs under docs/ stand alone and cannot drift: the CLI reference is regenerated and
compared, and each format document names every key the code accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roofwise.cli.reference import cli_reference
from roofwise.ledgers import files as ledgerio
from roofwise.lint.findings import CODES
from roofwise.profiles import load as profiles
from roofwise.records import read as records
from roofwise.verdicts.rules import VERDICTS

DOCS = Path(__file__).resolve().parents[2] / "docs"
README = (DOCS.parent / "README.md").read_text()


def test_cli_reference_is_generated_from_the_commands():
    current = (DOCS / "cli.md").read_text()
    assert current == cli_reference(), (
        "docs/cli.md is out of date: run `python -m roofwise.cli.reference docs/cli.md`")


def test_cli_reference_has_every_command():
    import click

    from roofwise.cli import cli

    text = (DOCS / "cli.md").read_text()
    names = cli.list_commands(click.Context(cli))
    assert len(names) >= 15
    for name in names:
        assert f"## roofwise {name}\n" in text


@pytest.mark.parametrize("field", [*records.REQUIRED_FIELDS, *records.OPTIONAL_FIELDS])
def test_record_contract_documents_every_field(field):
    assert f"`{field}`" in (DOCS / "records.md").read_text()


def test_record_contract_marks_the_required_fields():
    text = (DOCS / "records.md").read_text()
    for field in records.REQUIRED_FIELDS:
        assert f"| `{field}` | yes |" in text


@pytest.mark.parametrize("key", [*ledgerio._LEDGER_KEYS, *ledgerio._TENSOR_KEYS,
                                 *ledgerio._WORK_KEYS])
def test_ledger_format_documents_every_key(key):
    assert key in (DOCS / "ledger-format.md").read_text()


@pytest.mark.parametrize("key", [*profiles._TOP_KEYS, *profiles._MEMORY_KEYS,
                                 *profiles._UNIT_KEYS, *profiles._FLOOR_KEYS])
def test_profile_format_documents_every_key(key):
    assert f"{key}:" in (DOCS / "profile-format.md").read_text()


@pytest.mark.parametrize("verdict", VERDICTS)
def test_verdicts_doc_has_every_verdict(verdict):
    assert f"| `{verdict}` |" in (DOCS / "verdicts.md").read_text()


@pytest.mark.parametrize("code", sorted(CODES))
def test_lint_doc_has_every_code(code):
    assert f"| {code} |" in (DOCS / "lint-codes.md").read_text()


# What a clone lacks, named by pattern (so that this file does not name it as text): the
# folder of shared material beside the repository, and the design document.
OUTSIDE = re.compile(r"\.\.[/]shared|\bshared[/](REFERENCES|DESIGN|seed|traces)|DESIGN[.]md")


def test_readme_points_into_the_project_not_outside_it():
    assert not OUTSIDE.search(README)
    for doc in ("records.md", "ledger-format.md", "profile-format.md", "verdicts.md",
                "lint-codes.md", "cli.md"):
        assert f"](docs/{doc})" in README
    for word in ("sessions", "the seed"):
        assert word not in README.lower()


def test_nothing_in_the_project_points_outside_it():
    """A clone has nothing from outside the repository: no tracked text file may point
    there (OUTSIDE)."""
    import subprocess

    root = DOCS.parent
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.split()
    found = []
    for name in tracked:
        path = root / name
        if path.suffix not in (".py", ".md", ".yaml", ".toml", ".txt", ".sh", ".html", ".cfg"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{name}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert found == []
