"""The indexer's storage engines: SQLite (the source of truth), the Tantivy keyword index (keyword/), the usearch vector
file, and what keeps them whole on disk. They import none of the indexer's search, evidence or ingestion."""
