"""Embedding (indexer -> embedder)."""

from __future__ import annotations

from dataclasses import dataclass

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the embedder"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


@message("embed.request")
@dataclass(slots=True)
class EmbedRequest(Message):
    """Embed ``texts`` (at most a few hundred). Errors: ``model_unavailable`` (retryable; the
    message says why the model cannot load)."""

    texts: list[str]
    """The texts to embed, at most 4096."""


@message("embed.reply")
@dataclass(slots=True)
class EmbedReply(Message):
    """One buffer frame follows: ``count`` x ``dim`` normalised vectors, ``dtype`` (float32), C
    order. ``model`` names the model that made them."""

    count: int
    """The number of vectors (the number of texts)."""
    dim: int
    """The length of each vector (384 for all-MiniLM-L6-v2)."""
    model: str
    """`all-MiniLM-L6-v2` for the bundled model, else the name of the model's directory."""
    dtype: str = "float32"
    """The element type of the buffer."""
    precision: str = "fp32"
    """The model variant that made the vectors: `fp32` (the model's own weights, whichever backend) or
    `int8-x<export format>q<quantisation format>` (the int8 copy of the ONNX export). An index holds vectors
    of one model and one precision only."""
