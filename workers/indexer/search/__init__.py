"""The indexer's search: a query read into words and filters, run on the keyword and vector sides, fused into
ranked chunks with their snippets, within the folders a caller may see; and the query encoder."""
