"""The history of observations: rows per round, the files, the writer thread, the optional topic."""
