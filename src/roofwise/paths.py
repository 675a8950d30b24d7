"""Questions about paths that must not raise: a guess whether a name is a file, and whether an
output can be written before any work is done.

`Path.is_file` raises for a name longer than the file system allows (ENAMETOOLONG); a command
that only wants to know whether an argument names a ledger or an operator must get False.
"""

from __future__ import annotations

from pathlib import Path


def is_file(name: str | Path) -> bool:
    """True when `name` is an existing regular file; False for anything that cannot be one
    (too long, a bad character, an unreadable folder on the way)."""
    try:
        return Path(name).is_file()
    except (OSError, ValueError):
        return False
