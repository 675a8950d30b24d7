"""Speed-of-light prices: memory and compute time per row and per pipe."""
