"""The embedding model: where its files are and how it loads, its checked ONNX export (made in a child process,
the only place torch is imported) and the int8 copy; used by the embedder worker and the indexer's query encoder."""
