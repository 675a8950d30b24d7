"""Questions about paths, asked before any work: is a name a file, can (and may) an output be
written.

`Path.is_file` raises for a name longer than the file system allows (ENAMETOOLONG); a command
that only wants to know whether an argument names a ledger or an operator must get False.
"""

from __future__ import annotations

import os
from pathlib import Path

from roofwise.base.errors import InputError


def is_file(name: str | Path) -> bool:
    """True when `name` is an existing regular file; False for anything that cannot be one
    (too long, a bad character, an unreadable folder on the way)."""
    try:
        return Path(name).is_file()
    except (OSError, ValueError):
        return False


def check_output(path: str | Path, option: str = "") -> None:
    """Refuse, before any work, an output that could not be written, or should not be.

    Outputs are written to a temporary file beside the target and renamed over it
    (`recordio.atomic_writer`), so the target's folder must exist (a typo must not build a tree
    of folders) and be writable, and the target, if present, must be a regular file. A symbolic
    link is refused: the rename would replace the link with a file, not write where it points.
    A read-only file is refused: the rename would succeed where a plain write would not.
    """
    target = Path(path)
    where = f"{option} {path}" if option else str(path)
    try:
        if target.is_symlink():
            raise InputError(where, "is a symbolic link; roofwise does not write through links "
                                    "(give the path it points to, or remove the link)")
        if target.is_dir():
            raise InputError(where, "is a directory; expected a file path to write")
        if target.exists():
            if not target.is_file():
                raise InputError(where, "exists and is not a regular file")
            if not target.stat().st_mode & 0o222 or not os.access(target, os.W_OK):
                raise InputError(where, "is read-only; roofwise does not overwrite it (make it "
                                        "writable, or write elsewhere)")
        parent = target.parent
        if not parent.is_dir():
            blocker = next((p for p in [parent, *parent.parents] if p.exists()), None)
            problem = (f"{blocker} is a file, not a folder" if blocker is not None
                       and not blocker.is_dir() else f"no folder {parent} (it does not exist)")
            raise InputError(where, f"cannot write here: {problem}")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(where, f"cannot write here: folder {parent} is not writable")
    except OSError as exc:  # a name too long, a folder we may not look into
        raise InputError(where, f"cannot write here ({exc.strerror or exc})") from None
