"""Query and question sets of many shapes over four real corpora, and the bench that runs them (issue 38)."""
