"""The llm worker (frontdoor and indexer -> llm)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the llm worker"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


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
    ``prompt_too_long``, ``llm_timeout`` (the request's deadline passed while generating), ``worker_lost``
    (retryable: the worker was asked to stop, and ended the answer at its next token).
    """

    question: str
    """The user's question (the tool bounds it to 2000 characters)."""
    passages: list[ChatPassage] = field(default_factory=list)
    """Ranked passages, best first, each `{file_name, text}` (`ChatPassage`); numbered 1..n in the prompt."""
    history: list[ChatTurn] = field(default_factory=list)
    """Earlier turns of the session, oldest first, each `{question, answer}` (`ChatTurn`)."""
    persona: str = ""
    """Tone of the answer; it goes into the system message before the rules, which keep the last word."""
    max_tokens: int = 0
    """Answer budget in tokens; `0` means `[llm] max_answer_tokens`."""
    stream: bool = False
    """Send `llm.chat.partial` replies while generating."""


@message("llm.chat.partial")
@dataclass(slots=True)
class ChatPartial(Message):
    """A piece of an answer being generated (status ``partial``): ``delta`` is new text, raw (its ``[n]``
    markers are the prompt's numbers, not yet checked); ``completion_tokens`` counts tokens so far."""

    delta: str
    """New answer text, raw: its markers are the prompt's numbers, not yet checked."""
    completion_tokens: int
    """Tokens generated so far."""
    max_tokens: int
    """The answer budget."""


@message("llm.chat.reply")
@dataclass(slots=True)
class ChatReply(Message):
    """The checked answer: every ``[n]`` marker is 1-based into ``cited``, which lists the passages used
    (0-based indexes into the request's ``passages``) in first-use order; ``grounded`` is false when
    nothing is cited. ``passages_used`` says how many passages fit the prompt; ``finish`` is ``eos``,
    ``stop``, ``max_tokens`` or ``context``; ``timings`` holds ``prompt_s``, ``first_token_s``,
    ``generate_s``."""

    answer: str
    """The checked answer."""
    cited: list[int]
    """The passages cited, as 0-based indexes into the request's `passages`, in first-use order: marker `[k]` names
    `cited[k-1]`."""
    grounded: bool
    """`cited` is not empty."""
    prompt_tokens: int
    """Tokens of the prompt as the model saw it."""
    completion_tokens: int
    """Tokens generated."""
    passages_used: int
    """How many passages (from the front) fit the prompt."""
    finish: str
    """`eos`, `stop`, `max_tokens` or `context`."""
    model: str
    """The model's name (from its GGUF header)."""
    backend: str
    """`ctransformers` or `llama-cpp`."""
    attributed: int = 0
    """Sentences the model left uncited that were given the marker of the passage holding their words
    (``[llm] attribute_uncited``)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds: `prompt_build_s`, `first_token_s` (prompt evaluation plus the first token), `generate_s`."""


@message("llm.analyze.request")
@dataclass(slots=True)
class AnalyzeRequest(Message):
    """-> llm: a summary and the named entities of one document from its leading ``text`` (cut by the
    worker to ``[llm] analysis_input_tokens``). Sent by the indexer at low priority, one at a time, when
    its ingest queue is idle. Errors as ``llm.chat.request``."""

    file_name: str
    """The document's file name."""
    text: str
    """Its leading text; the worker cuts it to `[llm] analysis_input_tokens` tokens."""
    number: int = 0
    """Which of the documents to summarise this one is (1-based; 0: not told), for the worker's status note."""
    of: int = 0
    """How many documents there are to summarise, those done included."""


@message("llm.analyze.reply")
@dataclass(slots=True)
class AnalyzeReply(Message):
    """``summary`` (one or two sentences), ``entities`` (up to eight names), and the ``model`` that wrote
    them."""

    summary: str
    """The summary (at most 600 characters)."""
    entities: list[str]
    """Up to eight names from the `Entities:` line."""
    model: str
    """The model that wrote them."""
    prompt_tokens: int = 0
    """Tokens of the prompt."""
    completion_tokens: int = 0
    """Tokens generated."""


@message("llm.likely.request")
@dataclass(slots=True)
class LikelyRequest(Message):
    """-> llm: how much ``text`` (an extractive answer's quotes) makes ``question`` likely, as the model's answer
    to "write the question this text answers": the question's mean token log-probability after the text less
    after no text (query likelihood). Sent by the answers engine for a question its evidence floor nearly
    refuses. Errors as ``llm.chat.request``; ``llm_timeout`` when the deadline passes first."""

    question: str
    """The user's question (the tool bounds it to 2000 characters)."""
    text: str
    """The quotes the answer would give, without citation markers; the worker cuts it to the model's window."""


@message("llm.likely.reply")
@dataclass(slots=True)
class LikelyReply(Message):
    """``gain`` = ``with_text`` - ``without_text``, the mean log-probability per question token (nats)."""

    gain: float
    """How much the text raises the question's mean token log-probability (higher: the text predicts it)."""
    with_text: float
    """The question's mean token log-probability after the text."""
    without_text: float
    """The same after no text."""
    question_tokens: int
    """Tokens of the question."""
    seconds: float
    """The model's time for both passes."""
    model: str = ""
    """The model's name (from its GGUF header)."""
