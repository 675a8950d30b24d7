"""The one exception type that the command line turns into a single line and exit code 2."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a malformed profile, ledger, record or argument.

    The message names where (file, line or key) and what was expected, so that
    the command line can print it as one line without a traceback.
    """

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}" if where else problem)
