"""Reading the history: its declared fields, the lines checked and parsed, skipped lines counted by reason."""
