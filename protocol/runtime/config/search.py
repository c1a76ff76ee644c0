"""[search]: how the indexer answers keyword, semantic and hybrid searches (the measurements behind the defaults:
docs/tuning.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from foldermind.protocol.runtime.config.strict import Strict


class SearchPolicy(Strict):
    """Keyword, semantic and hybrid search in the indexer."""

    fusion: Literal["blend", "weighted", "rrf", "evidence"] = Field(
        "evidence",
        description='How hybrid mode merges the keyword and semantic rankings: "evidence" (evidence_*), "blend"'
        ' (blend_*, strong_keyword_*), "weighted" (keyword_weight) or "rrf" (rrf_k).',
    )
    rrf_k: int = Field(60, ge=1, description="The rank offset of rrf fusion.")
    evidence_bias: float = Field(
        -0.5,
        description='"evidence": keyword weight = sigmoid(evidence_bias + evidence_margin * margin), margin = 1 -'
        " BM25's second / first.",
    )
    evidence_margin: float = Field(5.0, description='"evidence" fusion: the weight of margin (see evidence_bias).')
    evidence_coverage: float = Field(
        0.85,
        ge=0,
        le=1,
        description='"evidence": the first 20 passages move towards their share of the query\'s IDF mass, by this'
        " times the best share.",
    )
    evidence_repeat_penalty: float = Field(
        0.25,
        ge=0,
        le=1,
        description='"evidence": a hit after the first loses this per passage of its file above it, so one file'
        " does not fill the page.",
    )
    keyword_proximity: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Adjacent query words also score as a phrase, at this share of its BM25, so in-order passages"
        " rank higher; 0 = off.",
    )
    keyword_weight: float = Field(
        0.5, ge=0, le=1, description='The keyword side\'s weight in "weighted" fusion ("blend": blend_keyword_weight).'
    )
    doc_evidence: float = Field(
        0.0,
        ge=0,
        le=1,
        description='"blend": this share of the scores of a file\'s next best chunks is added to each of its'
        " chunks; 0 = off.",
    )
    doc_evidence_chunks: int = Field(
        2,
        ge=1,
        description="How many of a file's next-best chunks count as its evidence (doc_evidence).",
    )
    blend_keyword_weight: float = Field(
        0.45,
        ge=0,
        le=1,
        description='"blend": the keyword side\'s share w of w * bm25 + (1 - w) * cosine, each min-max normalised'
        " within its list.",
    )
    blend_lookup_keyword_weight: float = Field(
        0.8,
        ge=0,
        le=1,
        description='"blend": the keyword share for a word-list query (not a question, no English stop word: words'
        " recalled of a page).",
    )
    blend_top_bonus: float = Field(
        0.1,
        ge=0,
        description='"blend": added to BM25\'s first hit.',
    )
    strong_keyword_ratio: float = Field(
        1.2,
        ge=1,
        description='"blend", not a question: a BM25 first hit scoring this many times the second stays first'
        " whatever the blend says.",
    )
    strong_keyword_tail_rank: int = Field(
        5,
        ge=2,
        description='"blend": a BM25 first hit scoring strong_keyword_tail_ratio times the hit at this rank also'
        " stays first.",
    )
    strong_keyword_tail_ratio: float = Field(
        1.6,
        ge=1,
        description='"blend": see strong_keyword_tail_rank.',
    )
    blend_repeat_penalty: float = Field(
        0.25,
        ge=0,
        le=1,
        description='"blend": each hit loses this for every passage of its file ranked above it, so one file does'
        " not fill the page.",
    )
    depth_min: int = Field(
        40, ge=1, le=1000, description="Each side retrieves max(4 * top_k, depth_min) candidates before fusion."
    )
    expansion_search: int = Field(
        256,
        ge=16,
        le=4096,
        description="usearch's search beam width, above exact_search_vectors only: wider finds more true nearest"
        " chunks and costs more (at 55k vectors 1024 costs about what an exact scan does).",
    )
    exact_search_vectors: int = Field(
        30_000,
        ge=0,
        le=10_000_000,
        description="Up to this many vectors a search is exact and the HNSW graph a cheap draft; above, the graph"
        " answers (0: always).",
    )
    query_encoder: Literal["local", "embedder"] = Field(
        "local",
        description='"local" loads the embedding model inside the indexer (~12 ms a query, never queued behind'
        ' indexing, ~300 MiB more); "embedder" asks the embedder worker (no extra memory, waits behind indexing).',
    )
    query_embed_timeout_s: float = Field(
        3.0,
        gt=0,
        description="Past this wait for a query vector, hybrid answers from keyword search and says so in `note`.",
    )
    query_backend: Literal["onnx", "torch"] = Field(
        "onnx",
        description='"onnx" encodes queries with ONNX Runtime from the embedder\'s export (torch if it fails);'
        ' "torch" skips ONNX.',
    )
    query_threads: int = Field(
        1,
        ge=1,
        le=64,
        description="Threads for one query's encode (ONNX Runtime intra-op, or torch): more hurt under load here.",
    )
    query_cache_size: int = Field(
        256,
        ge=0,
        le=100_000,
        description="Recent query vectors kept, keyed by model and exact query text: a repeated query skips the"
        " encode. 0 = off.",
    )
    search_threads: int = Field(
        0,
        ge=0,
        le=16,
        description="Searches the indexer answers at once, on threads beside its job thread; 0 = one at a time, in"
        " line with other jobs.",
    )
