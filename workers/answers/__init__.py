"""The answer engine, one for every caller: the front door's ``chat_with_documents`` and the console's Ask page.

- :mod:`.engine`: sessions, the evidence asked of the indexer, the llm call and its check (``Chat``);
- :mod:`.quotes`: quoted sentences, a generated answer's claims and what the check keeps of them;
- :mod:`.schemas`: the answer as the tool returns it.

It reaches the other workers only through the bus it is given (:class:`foldermind.workers.framework.asyncbus.Bus`), so
each caller asks with its own; it imports neither the front door nor the console (an import-linter contract).
"""
