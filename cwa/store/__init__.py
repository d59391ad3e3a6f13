"""The canonical store: one SQLite file holding documents, chunks, messages and ledgers."""
