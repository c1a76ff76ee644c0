"""Generation backends behind one small interface: load, tokenize, count, generate (streaming, stop
sequences, seed, max tokens, context length).

Two implementations: ``ctransformers`` (the default; its 2023 llama.cpp runs llama and falcon GGUF files)
and ``llama-cpp`` (llama-cpp-python, optional, for newer architectures). What both share -- the
generation loop with its UTF-8 reassembly, stop sequences, token budget and context limit -- lives in
:class:`Backend`; a backend only supplies a token stream, a token's bytes and its end-of-turn test.
"""

from __future__ import annotations

import codecs
import ctypes
import json
import platform
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from foldermind.workers.llm.model_file import (
    ModelFileError,
    ModelInfo,
    Prepared,
    inspect,
    prepare_for_ctransformers,
)

EVAL_BATCHES_PER_CHECK = 4
"""Prompt batches evaluated between two looks at a cancel (256 tokens: about 1-2.5 s on 2 cores)."""


class ContextOverflow(Exception):
    """The prompt leaves no room to generate within the model's context window."""


@dataclass(slots=True)
class GenParams:
    max_tokens: int
    stop: Sequence[str] = ()
    temperature: float = 0.0
    """0 = greedy (deterministic)."""
    repetition_penalty: float = 1.1
    seed: int = 0
    top_k: int = 40
    top_p: float = 0.95
    threads: int = 0
    """Threads for this generation; 0 = the backend's own (fixed at load for llama-cpp, which ignores it)."""
    step_aside: Callable[[], bool] | None = None
    """A background generation's turn (:meth:`foldermind.workers.llm.lanes.Lanes.step_aside`), asked between two
    model steps: True when another job used the context meanwhile, so the stream evaluates its tokens again
    (ctransformers; llama-cpp keeps the context to the end)."""
    fault_hang: bool = False
    """Set by the worker from a test switch only (:func:`foldermind.workers.framework.faults.llm_hang`): block forever
    after the first token."""
    fault_delay_s: float = 0.0
    """Set by the worker from a test switch only (:func:`foldermind.workers.framework.faults.llm_slow`): extra seconds
    per generated token."""


@dataclass(slots=True)
class Generation:
    """Filled in while a generation streams."""

    completion_tokens: int = 0
    finish: str = ""
    """``eos`` (end of turn), ``stop`` (a stop sequence), ``max_tokens``, ``context`` (window full) or
    ``cancelled`` (the caller's ``cancelled()`` said so)."""
    seconds: float = 0.0
    first_token_s: float = 0.0


@dataclass(slots=True)
class Backend(ABC):
    """A loaded model. Not thread-safe: one generation at a time (the worker serves one job at once)."""

    NAME: ClassVar[str] = ""
    model: ModelInfo
    context_length: int
    control_ids: frozenset[int] = field(init=False, default=frozenset())
    """The model's control tokens: generating any of them ends the turn."""

    def __post_init__(self) -> None:
        self.control_ids = frozenset(self.model.control_tokens.values())

    @abstractmethod
    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """``special``: control-token text (``<|im_start|>``) becomes control tokens. Never for untrusted
        text (documents, questions): there it stays literal characters."""

    def count(self, text: str) -> int:
        return len(self.tokenize(text))

    def prefix(self) -> list[int]:
        """Tokens every prompt starts with (BOS for models that want one)."""
        bos = self.model.bos_token_id
        return [bos] if self.model.add_bos_token and bos is not None else []

    @abstractmethod
    def _token_stream(
        self, tokens: list[int], params: GenParams, cancelled: Callable[[], bool] = lambda: False
    ) -> Iterator[int]:
        """Evaluate ``tokens`` and yield sampled tokens forever (the caller stops it). It may end early,
        having yielded nothing, when ``cancelled()`` turns true during the prompt's evaluation."""

    @abstractmethod
    def _piece(self, token: int) -> bytes:
        """The bytes a generated token stands for (never asked of a control token: it ends the turn)."""

    def _ends_turn(self, token: int) -> bool:
        return token == self.model.eos_token_id or token in self.control_ids

    def close(self) -> None:  # noqa: B027 - most backends free their model with the process
        """Free the model (the process usually just exits)."""

    def stream(
        self,
        tokens: list[int],
        params: GenParams,
        out: Generation,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Iterator[str]:
        """Generate from ``tokens``, yielding text as it becomes final (never half a character, never
        text that may still turn out to be the start of a stop sequence)."""
        room = self.context_length - len(tokens)
        if room <= 0:
            raise ContextOverflow(
                f"the prompt has {len(tokens)} tokens; the context window holds {self.context_length}"
            )
        budget = min(params.max_tokens, room)
        stops = [s for s in params.stop if s]
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        held = ""
        started = time.monotonic()
        hang = params.fault_hang
        out.finish = "max_tokens" if budget == params.max_tokens else "context"
        for token in self._token_stream(tokens, params, cancelled):
            if out.completion_tokens == 0:
                out.first_token_s = time.monotonic() - started
            if self._ends_turn(token):
                out.finish = "eos"
                break
            out.completion_tokens += 1
            if hang:
                while True:
                    time.sleep(3600)
            if params.fault_delay_s:
                time.sleep(params.fault_delay_s)
            held += decoder.decode(self._piece(token))
            ready, held, hit = _split_stop(held, stops)
            if ready:
                yield ready
            if hit:
                out.finish = "stop"
                held = ""
                break
            if out.completion_tokens >= budget:
                break
            if cancelled():
                out.finish = "cancelled"
                break
        else:  # the token stream is endless: it ended, so the prompt's evaluation was cancelled
            out.finish = "cancelled"
        held += decoder.decode(b"", final=True)
        ready, _, _ = _split_stop(held, stops, final=True)
        if ready:
            yield ready
        out.seconds = time.monotonic() - started


def _split_stop(text: str, stops: list[str], final: bool = False) -> tuple[str, str, bool]:
    """(text safe to emit, text held back, a stop sequence was hit)."""
    if not stops:
        return text, "", False
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    if cut >= 0:
        return text[:cut], "", True
    if final:
        return text, "", False
    keep = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:n]):
                keep = max(keep, n)
                break
    return text[: len(text) - keep], text[len(text) - keep :], False


# ------------------------------------------------------------------------------------------------
# ctransformers


def _sized_tokenize(self: Any, text: str, add_bos_token: bool | None = None) -> list[int]:
    """ctransformers' ``LLM.tokenize`` with a buffer sized from the UTF-8 byte length.

    The original allocates ``len(text) + 1`` tokens, but a character outside the vocabulary becomes one
    byte token per UTF-8 byte (up to 4), so non-ASCII text overflowed the buffer and corrupted the heap
    (a segfault some calls later). llama.cpp emits at most one token per byte of the text it tokenizes,
    plus a BOS; that text is ours with a space put in front and every space made ``▁`` (3 bytes: 3 byte
    tokens in a vocabulary without ``▁``). NUL would end the C string early, so it is sent as a space.
    """
    if add_bos_token is None:
        add_bos_token = self.model_type == "llama"
    data = text.replace("\x00", " ").encode("utf-8")
    tokens = (ctypes.c_int * (len(data) + 2 * data.count(b" ") + 4))()
    n = self.ctransformers_llm_tokenize(data, bool(add_bos_token), tokens)
    return list(tokens[:n])


def patch_ctransformers() -> Any:
    """Import ctransformers with its tokenize replaced; returns the ``LLM`` class."""
    from ctransformers import llm as ct

    if getattr(ct.LLM.tokenize, "__name__", "") != _sized_tokenize.__name__:
        ct.LLM.tokenize = _sized_tokenize
    return ct.LLM


def ctransformers_build() -> str | None:
    """Which of ctransformers' bundled library builds this CPU runs (``avx2``, ``avx``, ``basic``), read
    from ``/proc/cpuinfo``; None elsewhere (ctransformers then decides itself).

    The same rule ctransformers applies, without its way of finding the flags: py-cpuinfo starts a
    child Python to probe the CPU, ~1 s of a model load (docs/tuning.md#llm-load)."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            line = next((row for row in fh if row.startswith("flags")), "")
    except OSError:
        return None
    flags = set(line.partition(":")[2].split())
    if not flags:
        return None
    return "avx2" if "avx2" in flags else "avx" if {"avx", "f16c"} <= flags else "basic"


@dataclass(slots=True)
class CTransformersBackend(Backend):
    NAME: ClassVar[str] = "ctransformers"
    llm: Any = None
    bpe: Any = None
    """Exact byte-level BPE tokenizer of a converted model (special tokens parsed), or None."""
    bpe_plain: Any = None
    """The same without special tokens: for untrusted text."""
    batch_size: int = 64
    threads: int = 2

    @classmethod
    def load(
        cls, info: ModelInfo, cache_dir: Path, context_length: int, threads: int, batch: int
    ) -> CTransformersBackend:
        prepared: Prepared = prepare_for_ctransformers(info, cache_dir)
        llm_class = patch_ctransformers()
        from ctransformers.llm import Config

        config = Config(context_length=context_length, threads=threads, batch_size=batch, gpu_layers=0)
        try:
            llm = llm_class(str(prepared.path), info.architecture, config=config, lib=ctransformers_build())
        except RuntimeError as exc:  # "Failed to create LLM ..." and nothing more
            raise ModelFileError(
                f"ctransformers could not load {info.path.name} ({exc}); the file passed every check foldermind "
                f'knows, so it may be damaged or of a kind only llama.cpp reads: try [llm] backend = "llama-cpp"'
            ) from None
        backend = cls(
            model=info,
            context_length=int(llm.context_length) or context_length,
            llm=llm,
            batch_size=batch,
            threads=threads,
        )
        if prepared.tokenizer_json is not None:
            from tokenizers import Tokenizer

            raw = prepared.tokenizer_json.read_text(encoding="utf-8")
            backend.bpe = Tokenizer.from_str(raw)
            plain = json.loads(raw)
            plain["added_tokens"] = []
            backend.bpe_plain = Tokenizer.from_str(json.dumps(plain))
        return backend

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        if self.bpe is not None:
            tok = self.bpe if special else self.bpe_plain
            return list(tok.encode(text, add_special_tokens=False).ids)
        specials = self.model.control_tokens
        if not special or not specials:
            return self._spm(text)
        # llama.cpp of 2023 never parses control-token text: split it out and insert the ids.
        pattern = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
        out: list[int] = []
        pos = 0
        for m in re.finditer(pattern, text):
            if m.start() > pos:
                out += self._spm(text[pos : m.start()])
            out.append(specials[m.group(0)])
            pos = m.end()
        if pos < len(text):
            out += self._spm(text[pos:])
        return out

    def _spm(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text, add_bos_token=False))

    def _token_stream(
        self, tokens: list[int], params: GenParams, cancelled: Callable[[], bool] = lambda: False
    ) -> Iterator[int]:
        llm = self.llm
        greedy = params.temperature <= 0
        threads = params.threads or self.threads
        aside = params.step_aside
        if not self._evaluate(tokens, [], threads, cancelled, aside):
            return
        made: list[int] = []
        while True:
            token = int(
                llm.sample(
                    top_k=1 if greedy else params.top_k,
                    top_p=1.0 if greedy else params.top_p,
                    temperature=1.0 if greedy else params.temperature,
                    repetition_penalty=params.repetition_penalty,
                    last_n_tokens=64,
                    seed=params.seed,
                )
            )
            yield token
            made.append(token)
            if aside is not None and aside():  # another job reset the one context: evaluate it all again
                if not self._evaluate(tokens, made, threads, cancelled, aside):
                    return
            else:
                llm.eval([token], batch_size=self.batch_size, threads=threads)

    def _evaluate(
        self,
        tokens: list[int],
        made: list[int],
        threads: int,
        cancelled: Callable[[], bool],
        aside: Callable[[], bool] | None,
    ) -> bool:
        """Evaluate a prompt, then the tokens made from it so far, from a reset context; False when ``cancelled()``
        stopped it.

        Every prompt is evaluated from scratch. Reusing a shared prefix saves its evaluation, but the prefix's
        cached state was computed in other batches, and the rounding that changes flips close greedy choices: the
        same question over the same sources would not give the same answer. So the prompt goes in whole batches
        and the tokens made one at a time, as they were made: a summary that stepped aside goes on from the same
        state. A long prompt takes seconds: it is evaluated a few batches at a time so a cancel is heard (a
        background one a batch at a time, stepping aside between them)."""
        llm = self.llm
        step = self.batch_size * (1 if aside is not None else EVAL_BATCHES_PER_CHECK)
        pieces = [tokens[start : start + step] for start in range(0, len(tokens), step)] + [[t] for t in made]
        llm._context.clear()
        llm.ctransformers_llm_reset()
        done = 0
        while done < len(pieces):
            if done and cancelled():
                return False
            if done and aside is not None and aside():
                llm._context.clear()
                llm.ctransformers_llm_reset()
                done = 0
            llm.eval(pieces[done], batch_size=self.batch_size, threads=threads)
            done += 1
        return True

    def _piece(self, token: int) -> bytes:
        return bytes(self.llm.detokenize([token], decode=False))


# ------------------------------------------------------------------------------------------------
# llama-cpp-python


@dataclass(slots=True)
class LlamaCppBackend(Backend):
    NAME: ClassVar[str] = "llama-cpp"
    llm: Any = None

    @classmethod
    def load(cls, info: ModelInfo, context_length: int, threads: int, batch: int, seed: int) -> LlamaCppBackend:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ModelFileError(
                'the llama-cpp backend needs llama-cpp-python: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install '
                "llama-cpp-python (a native build may use CPU instructions that crash on other machines)"
            ) from None
        try:
            llm = Llama(
                model_path=str(info.path),
                n_ctx=context_length,
                n_threads=threads,
                n_batch=batch,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"llama.cpp could not load {info.path.name}: {exc}"[:300]) from None
        return cls(model=info, context_length=int(llm.n_ctx()), llm=llm)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def _token_stream(
        self, tokens: list[int], params: GenParams, cancelled: Callable[[], bool] = lambda: False
    ) -> Iterator[int]:
        # llama-cpp-python evaluates the prompt in one call: a cancel is heard from the first token on.
        greedy = params.temperature <= 0
        self.llm.set_seed(params.seed)
        self.llm.reset()  # no prefix reuse: see CTransformersBackend._token_stream
        yield from self.llm.generate(
            tokens,
            top_k=1 if greedy else params.top_k,
            top_p=1.0 if greedy else params.top_p,
            temp=0.0 if greedy else params.temperature,
            repeat_penalty=params.repetition_penalty,
            min_p=0.0,  # llama-cpp-python's default 0.05 filter has no ctransformers counterpart
            reset=True,
        )

    def _piece(self, token: int) -> bytes:
        return bytes(self.llm.detokenize([token]))

    def close(self) -> None:
        self.llm.close()


BACKENDS = ("ctransformers", "llama-cpp")


def load_backend(
    name: str,
    model_path: Path,
    cache_dir: Path,
    context_length: int,
    threads: int,
    batch: int,
    seed: int,
) -> Backend:
    """Validate the file, then load it with the named backend; :class:`ModelFileError` says why not."""
    info = inspect(model_path)
    if name == "ctransformers":
        return CTransformersBackend.load(info, cache_dir, context_length, threads, batch)
    if name == "llama-cpp":
        return LlamaCppBackend.load(info, context_length, threads, batch, seed)
    raise ModelFileError(f"unknown backend {name!r} (one of {', '.join(BACKENDS)})")
