"""The indexer's storage engines: SQLite (the source of truth), Tantivy and usearch."""
