"""The llm worker (frontdoor and indexer -> llm)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message


class ChatPassage(TypedDict):
    file_name: str
    text: str


class ChatTurn(TypedDict):
    question: str
    answer: str


@message("llm.chat.request")
@dataclass(slots=True)
class ChatRequest(Message):
    """-> llm: answer ``question`` from ``passages`` (ranked, best first; numbered 1..n in the prompt).

    The worker fits the prompt into the model's context window by counting tokens: the system rules
    (with ``persona``, tone only), as many passages as fit (the last one may be cut) and then as many of
    the most recent ``history`` turns as fit, leaving ``max_tokens`` (0 = ``[llm] max_answer_tokens``)
    for the answer. With ``stream`` set it sends ``llm.chat.partial`` replies (status ``partial``) while
    generating. Errors: ``model_not_ready`` (loading, retryable; or failed, with the reason),
    ``prompt_too_long``, ``llm_timeout`` (the request's deadline passed while generating).
    """

    question: str
    passages: list[ChatPassage] = field(default_factory=list)
    history: list[ChatTurn] = field(default_factory=list)
    persona: str = ""
    max_tokens: int = 0
    stream: bool = False


@message("llm.chat.partial")
@dataclass(slots=True)
class ChatPartial(Message):
    """A piece of an answer being generated (status ``partial``): ``delta`` is new text, raw (its ``[n]``
    markers are the prompt's numbers, not yet checked); ``completion_tokens`` counts tokens so far."""

    delta: str
    completion_tokens: int
    max_tokens: int


@message("llm.chat.reply")
@dataclass(slots=True)
class ChatReply(Message):
    """The checked answer: every ``[n]`` marker is 1-based into ``cited``, which lists the passages used
    (0-based indexes into the request's ``passages``) in first-use order; ``grounded`` is false when
    nothing is cited. ``passages_used`` says how many passages fit the prompt; ``finish`` is ``eos``,
    ``stop``, ``max_tokens`` or ``context``; ``timings`` holds ``prompt_s``, ``first_token_s``,
    ``generate_s``."""

    answer: str
    cited: list[int]
    grounded: bool
    prompt_tokens: int
    completion_tokens: int
    passages_used: int
    finish: str
    model: str
    backend: str
    attributed: int = 0
    """Sentences the model left uncited that were given the marker of the passage holding their words
    (``[llm] attribute_uncited``)."""
    timings: dict[str, float] = field(default_factory=dict)


@message("llm.analyze.request")
@dataclass(slots=True)
class AnalyzeRequest(Message):
    """-> llm: a summary and the named entities of one document from its leading ``text`` (cut by the
    worker to ``[llm] analysis_input_tokens``). Sent by the indexer at low priority, one at a time, when
    its ingest queue is idle. Errors as ``llm.chat.request``."""

    file_name: str
    text: str


@message("llm.analyze.reply")
@dataclass(slots=True)
class AnalyzeReply(Message):
    """``summary`` (one or two sentences), ``entities`` (up to eight names), and the ``model`` that wrote
    them."""

    summary: str
    entities: list[str]
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
