"""Tiny random-weight GGUF models written on the fly with the ``gguf`` package, so no model file is
committed. Deterministic (seeded numpy): the same call writes the same bytes.

All are llama-architecture transformers small enough to load in milliseconds: 2 layers, 64-wide
embeddings, 4 heads, a 128-wide feed-forward, F32 weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

EMBED, HEADS, LAYERS, FF = 64, 4, 2, 128

_SENTENCE = (
    "the of and to in is was for on that with as by at from it this are be or an a "
    "capital France Paris city river document answer question The What where who"
)
WORDS = tuple(_SENTENCE.split())
"""Whole words of the tiny vocabularies."""

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# GGUF token types
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6


@dataclass(frozen=True, slots=True)
class TinyModel:
    path: Path
    tokens: list[str]
    """Token texts by id (as stored in the file)."""
    merges: list[str]
    """``"a b"`` merge rules by rank (BPE models; empty for SentencePiece)."""
    bos: int
    eos: int
    controls: dict[str, int]


def _weights(rng: np.random.Generator, *shape: int) -> npt.NDArray[np.float32]:
    return (rng.standard_normal(shape) * 0.2).astype(np.float32)


def _add_hparams(w: gguf.GGUFWriter, name: str, context: int) -> None:
    w.add_name(name)
    w.add_context_length(context)
    w.add_embedding_length(EMBED)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(EMBED // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)  # all F32


def _add_layers(w: gguf.GGUFWriter, rng: np.random.Generator) -> None:
    for i in range(LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(EMBED, np.float32))
        for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + n + ".weight", _weights(rng, EMBED, EMBED))
        w.add_tensor(p + "ffn_norm.weight", np.ones(EMBED, np.float32))
        w.add_tensor(p + "ffn_gate.weight", _weights(rng, FF, EMBED))
        w.add_tensor(p + "ffn_up.weight", _weights(rng, FF, EMBED))
        w.add_tensor(p + "ffn_down.weight", _weights(rng, EMBED, FF))


def _finish(w: gguf.GGUFWriter, path: Path, version: int) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if version != 3:  # v3 only added big-endian files: a little-endian v3 file is a valid v2 file
        with path.open("r+b") as fh:
            fh.seek(4)
            fh.write(version.to_bytes(4, "little"))


def write_spm_llama(
    path: Path,
    *,
    version: int = 2,
    context: int = 512,
    words: Sequence[str] = WORDS,
    space_token: bool = True,
    seed: int = 0,
) -> TinyModel:
    """A SentencePiece-style llama model like the 2023 llama GGUF files: ``<unk> <s> </s>``, all 256 byte
    tokens ``<0x00>``..``<0xFF>`` (type 6), ``▁`` (unless ``space_token`` is false), then each word with its
    ``▁`` prefix and scores. SentencePiece merges two adjacent pieces only when their concatenation is in
    the vocabulary, so every word brings its prefixes along (``▁t``, ``▁th``, ``▁the``): words become one
    token, everything else falls back to byte tokens. Has ``output.weight``; the output rows of the three
    special tokens are zero, so random weights never pick ``</s>`` and generation runs to its limit, and
    those of the byte tokens are scaled down, so the output is mostly words."""
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}: 2 or 3")
    rng = np.random.default_rng(seed)
    pieces: list[str] = []
    for word in words:
        full = "\u2581" + word
        for n in range(2, len(full) + 1):
            if full[:n] not in pieces:
                pieces.append(full[:n])
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256
    if space_token:
        tokens.append("\u2581")
        types.append(NORMAL)
    tokens += pieces
    types += [NORMAL] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [-float(i) for i in range(len(pieces))]
    vocab = len(tokens)

    w = gguf.GGUFWriter(str(path), "llama")
    _add_hparams(w, "tiny-spm", context)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_tensor("token_embd.weight", _weights(rng, vocab, EMBED))
    w.add_tensor("output_norm.weight", np.ones(EMBED, np.float32))
    output = _weights(rng, vocab, EMBED) * 4  # sharper logits: fewer near-ties
    output[:3] = 0.0
    output[3:259] *= 0.25  # mostly words, some bytes
    w.add_tensor("output.weight", output)
    _add_layers(w, rng)
    _finish(w, path, version)
    return TinyModel(path, tokens, [], bos=1, eos=2, controls={"<s>": 1, "</s>": 2})


def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (``Ġ`` for space, ``Ċ`` for newline, ...)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def _apply_merges(chars: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Byte-level BPE of one pre-token: apply the best-ranked applicable merge until none applies."""
    parts = list(chars)
    while len(parts) > 1:
        rank, i = min((ranks.get((parts[i], parts[i + 1]), len(ranks)), i) for i in range(len(parts) - 1))
        if rank == len(ranks):
            break
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def write_bpe_llama(path: Path, *, words: Sequence[str] = WORDS, seed: int = 1, name: str = "tiny-bpe") -> TinyModel:
    """A GPT-2 byte-level-BPE llama model as SmolLM2 ships it: ``tokenizer.ggml.model = "gpt2"``, pre
    ``smollm``; the 256 single-byte tokens (GPT-2 alphabet, GPT-2 order) first, then merged tokens with
    valid ``tokenizer.ggml.merges`` (each word, with and without a leading ``Ġ``, becomes one token through
    pairwise merges such as ``Ġ t``, ``h e``, ``Ġt he``), then the control tokens ``<|endoftext|>``,
    ``<|im_start|>`` (bos), ``<|im_end|>`` (eos); a ChatML chat template; no scores, no ``output.weight``
    (tied embeddings, the control tokens' scaled down so generation runs to its limit); GGUF v3."""
    rng = np.random.default_rng(seed)
    table = gpt2_bytes_to_unicode()
    tokens = list(table.values())
    known = set(tokens)
    ranks: dict[tuple[str, str], int] = {}
    for word in words:
        for text in (" " + word, word):
            chars = [table[b] for b in text.encode("utf-8")]
            # Merge the word's current pieces pairwise with new (lowest-priority) rules until it is one token:
            # rules added later never apply before the earlier ones, so every word stays reachable.
            while len(parts := _apply_merges(chars, ranks)) > 1:
                for a, b in zip(parts[::2], parts[1::2], strict=False):
                    ranks[a, b] = len(ranks)
                    if a + b not in known:
                        known.add(a + b)
                        tokens.append(a + b)
    merges = [f"{a} {b}" for a, b in ranks]
    controls = {"<|endoftext|>": len(tokens), "<|im_start|>": len(tokens) + 1, "<|im_end|>": len(tokens) + 2}
    tokens += list(controls)
    types = [NORMAL] * (len(tokens) - 3) + [CONTROL] * 3
    vocab = len(tokens)

    w = gguf.GGUFWriter(str(path), "llama")
    _add_hparams(w, name, 2048)
    w.add_uint32("llama.vocab_size", vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(controls["<|im_start|>"])
    w.add_eos_token_id(controls["<|im_end|>"])
    w.add_unk_token_id(controls["<|endoftext|>"])
    w.add_pad_token_id(controls["<|endoftext|>"])
    w.add_chat_template(CHATML)
    embed = _weights(rng, vocab, EMBED) * 4
    # Tied output: scaled-down control tokens (which end a turn) are never the likeliest. Not so far down
    # that the RMS norm's epsilon, which the two llama.cpp generations may handle differently, matters.
    embed[-3:] *= 0.05
    w.add_tensor("token_embd.weight", embed)
    w.add_tensor("output_norm.weight", np.ones(EMBED, np.float32))
    _add_layers(w, rng)
    _finish(w, path, 3)
    return TinyModel(path, tokens, merges, bos=controls["<|im_start|>"], eos=controls["<|im_end|>"], controls=controls)


def write_arch(path: Path, arch: str = "gemma3") -> Path:
    """A minimal GGUF of another architecture: a plausible header, a tiny vocabulary, one tensor."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_context_length(512)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>", "\u2581a"])
    w.add_token_scores([0.0, 0.0, 0.0, -1.0])
    w.add_token_types([UNKNOWN, CONTROL, CONTROL, NORMAL])
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    _finish(w, path, 3)
    return path
