"""Why a row got its verdict: every reason sentence, written once."""
