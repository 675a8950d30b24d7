"""Verdicts: the rules that turn a price and a time into a verdict."""
