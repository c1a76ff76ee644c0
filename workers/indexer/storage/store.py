"""SQLite, the indexer's source of truth: the database (its schema, connections and transactions,
:mod:`foldermind.workers.indexer.storage.database`) and the statements over each part of it, one object per part.

``store.folders`` the Smart Folders; ``store.documents`` the documents' lifecycle and the chunk writes;
``store.chunks`` the reads of stored chunks; ``store.embeddings`` the chunks' vectors; ``store.analyses``
the documents' analyses; ``store.journal`` the keyword index's replay; ``store.census`` the index's counts.
A write that spans parts takes the caller's transaction (``with store.tx() as db``) as its ``db``.
"""

from __future__ import annotations

from pathlib import Path

from foldermind.workers.indexer.storage.analyses import Analyses
from foldermind.workers.indexer.storage.census import Census
from foldermind.workers.indexer.storage.chunks import Chunks
from foldermind.workers.indexer.storage.database import Database
from foldermind.workers.indexer.storage.embeddings import Embeddings
from foldermind.workers.indexer.storage.folders import Folders
from foldermind.workers.indexer.storage.journal import Journal
from foldermind.workers.indexer.storage.lifecycle import Documents


class Store(Database):
    """The database, with the statements over each of its parts."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.folders = Folders(self)
        self.documents = Documents(self)
        self.chunks = Chunks(self)
        self.embeddings = Embeddings(self)
        self.analyses = Analyses(self)
        self.journal = Journal(self)
        self.census = Census(self)
