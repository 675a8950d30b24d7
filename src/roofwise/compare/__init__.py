"""Two runs matched row by row."""
