"""Ingestion: the indexer's thread that turns pending files into chunks, keyword entries and vectors."""
