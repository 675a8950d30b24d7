"""`python -m roofwise`: the same command as the `roofwise` console script."""

from roofwise.cli import run

if __name__ == "__main__":
    run()
