"""Ingestion: the indexer's thread that turns pending files into chunks, keyword entries and vectors, with the
changes that feed it (file events, pages, units to embed) and the model turns that enrich what it stored."""
