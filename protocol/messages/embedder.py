"""Embedding (indexer -> embedder)."""

from __future__ import annotations

from dataclasses import dataclass

from foldermind.protocol.messages.envelope import Message, message


@message("embed.request")
@dataclass(slots=True)
class EmbedRequest(Message):
    """Embed ``texts`` (at most a few hundred). Errors: ``model_unavailable`` (retryable; the
    message says why the model cannot load)."""

    texts: list[str]


@message("embed.reply")
@dataclass(slots=True)
class EmbedReply(Message):
    """One buffer frame follows: ``count`` x ``dim`` normalised vectors, ``dtype`` (float32), C
    order. ``model`` names the model that made them."""

    count: int
    dim: int
    model: str
    dtype: str = "float32"
