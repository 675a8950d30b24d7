"""Bottom of the stack: errors, numbers, text, units, paths, YAML, threads."""
