"""The keyword index: Tantivy's fields and searches (bm25), how text becomes terms, and each document's language
and stemmer. SQLite stays the source of truth: this index is built again from it whenever it is lost or damaged."""
