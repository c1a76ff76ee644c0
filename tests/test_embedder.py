"""The embedder worker end to end: a real kernel, the real model, vectors as one raw buffer frame."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil
import pytest

from foldermind.protocol import frames
from foldermind.protocol.client import Reply
from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    EmbedReply,
    EmbedRequest,
    PingReply,
    PingRequest,
)
from foldermind.workers.embedding import model_files
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, cli, only_workers, remove_tree, short_tmpdir, wait_for

# The embedder alone: the other workers are not under test here, and each costs a process start.
EMBEDDER_ONLY = merge(FAST_RESTART, only_workers("embedder"), {"workers": {"embedder": {"on_demand": False}}})
"""The embedder alone, kept running: its own model residency is the subject here (it frees its model and stays
up); its on-demand start and idle exit are the kernel's, tested in tests/test_on_demand.py."""

os.environ["HF_HUB_OFFLINE"] = "1"

TEXTS = [
    "The cat sat on the warm windowsill and purred.",
    "A kitten is sleeping in the sun by the window.",
    "Quarterly revenue grew by twelve percent thanks to strong exports.",
    "The central bank raised interest rates to fight inflation.",
    "How do I reset my router's wifi password?",
    "x",
    "A much longer passage about photosynthesis: plants convert light, water and carbon dioxide into glucose "
    "and oxygen inside their chloroplasts, which hold the green pigment chlorophyll. " * 3,
]


def vectors_of(reply: Reply[EmbedReply]) -> npt.NDArray[np.float32]:
    body = reply.body
    assert body.dtype == "float32"
    assert len(reply.buffers) == 1
    raw = bytes(frames.buffer_bytes(reply.buffers[0]))
    assert len(raw) == body.count * body.dim * 4
    return np.frombuffer(raw, dtype=np.float32).reshape(body.count, body.dim)


def with_note(k: RunningKernel, text: str) -> dict[str, Any] | None:
    """The embedder's `status` entry once its heartbeat note (its model state line) contains ``text``."""
    worker = k.worker("embedder")
    return worker if text in worker["note"] else None


def start(k: RunningKernel) -> RunningKernel:
    """``RunningKernel.start``, but waiting for the embedder only (the other workers are not under test here)."""
    cli(k.root, "start")
    k.kernel_pid = int(k.home.pid_file.read_text())
    k.connect_events()
    # READY goes out before the model loads, so the worker is RUNNING within the start timeout.
    k.wait_state("embedder", "RUNNING", timeout=30)
    return k


@pytest.fixture(scope="module")
def embed_kernel() -> Iterator[RunningKernel]:
    """One kernel for the module: each model load costs seconds."""
    root = short_tmpdir()
    # fp32: its vectors are compared with the model's own (the int8 default moves them; tests/test_precision.py)
    k = RunningKernel(root, merge(EMBEDDER_ONLY, {"ingest": {"embed_quantize": "fp32"}}))
    try:
        yield start(k)
    finally:
        k.stop()
        remove_tree(root)


def test_embeds_normalised_vectors_like_the_model_itself(embed_kernel: RunningKernel) -> None:
    client = embed_kernel.client()
    reply = client.request("embedder", EmbedRequest(texts=TEXTS), EmbedReply, timeout=120)
    assert reply.body.count == len(TEXTS)
    assert reply.body.dim == 384
    assert reply.body.model == "all-MiniLM-L6-v2"
    vecs = vectors_of(reply)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_files.model_dir()), device="cpu")
    expected = model.encode(TEXTS, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(vecs, expected, atol=1e-5)

    sims = vecs @ vecs.T
    # cat ~ kitten, rates ~ revenue beat any cross-topic pair.
    assert sims[0, 1] > max(sims[0, 2], sims[0, 3], sims[0, 4]) + 0.2
    assert sims[2, 3] > max(sims[2, 0], sims[2, 1], sims[2, 4])

    empty = client.request("embedder", EmbedRequest(texts=[]), EmbedReply, timeout=30)
    assert (empty.body.count, empty.body.dim) == (0, 384)
    assert vectors_of(empty).shape == (0, 384)

    details = client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details
    assert details["state"] == "ready"
    assert details["model"] == "all-MiniLM-L6-v2"
    assert details["dim"] == 384
    assert details["error"] is None
    # The state line rides on the heartbeats into `status`.
    wait_for(lambda: with_note(embed_kernel, "model ready"), 10, 0.1, "embedder note")


def test_missing_model_is_a_typed_retryable_error_until_it_appears(home_dir: Path) -> None:
    # Long enough that the two requests below surely come within it on a loaded machine (2 s once did not).
    retry_s = 10
    late = home_dir / "late-model"  # does not exist yet
    env = {"FOLDERMIND_EMBED_MODEL_DIR": late, "FOLDERMIND_EMBED_RETRY_S": str(retry_s)}
    k = RunningKernel(home_dir, merge(EMBEDDER_ONLY, {"workers": {"embedder": {"env": env}}}))
    try:
        start(k)
        client = k.client()
        for _ in range(2):  # the second one comes within the retry interval: no new load attempt
            with pytest.raises(JobError) as caught:
                client.request("embedder", EmbedRequest(texts=["hello"]), EmbedReply, timeout=60)
            assert caught.value.code == "model_unavailable"
            assert caught.value.retryable
            assert str(late) in caught.value.info.message
            assert "config.json" in caught.value.info.message

        # The worker itself is fine: it answers, says why, and was never restarted.
        pid = k.worker("embedder")["pid"]
        assert client.request("embedder", PingRequest(), PingReply, timeout=10).body.pid == pid
        details = client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details
        assert details["state"] == "failed"
        assert str(late) in details["error"]
        assert details["loads"] == 1
        worker = wait_for(lambda: with_note(k, "model failed"), 10, 0.1, "embedder note")
        assert (worker["state"], worker["restarts"]) == ("RUNNING", 0)

        # The model turns up: the first request after the retry interval loads it, without a restart
        # (the ones before it still fail without a load attempt: `loads` ends at 2).
        late.symlink_to(model_files.model_dir(), target_is_directory=True)

        def embedded() -> Reply[EmbedReply] | None:
            try:
                return client.request("embedder", EmbedRequest(texts=["hello", "world"]), EmbedReply, timeout=120)
            except JobError:
                return None

        reply = wait_for(embedded, retry_s + 60, 0.5, "the model loaded after the retry interval")
        assert vectors_of(reply).shape == (2, 384)
        assert reply.body.model == "late-model"
        details = client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details
        assert (details["state"], details["loads"]) == ("ready", 2)
        assert k.worker("embedder")["pid"] == pid
    finally:
        k.stop()


def test_an_idle_embedder_frees_its_model_and_the_next_request_loads_it_again() -> None:
    root = short_tmpdir()
    k = RunningKernel(root, merge(EMBEDDER_ONLY, {"ingest": {"embed_idle_unload_s": 2}}))
    try:
        start(k)
        client = k.client()
        first = vectors_of(client.request("embedder", EmbedRequest(texts=TEXTS), EmbedReply, timeout=120))

        def describe() -> dict[str, Any]:
            return dict(client.request("embedder", DescribeRequest(), DescribeReply, timeout=10).body.details)

        loaded_rss = psutil.Process(k.worker("embedder")["pid"]).memory_info().rss
        unloaded = wait_for(lambda: (d := describe())["state"] == "unloaded" and d, 30, 0.2, "the idle unload")
        assert unloaded["unloads"] == 1 and unloaded["loads"] == 1
        assert wait_for(lambda: with_note(k, "unloaded after"), 10, 0.1, "the status note")
        freed_rss = psutil.Process(k.worker("embedder")["pid"]).memory_info().rss
        assert freed_rss < loaded_rss - 50 * 2**20, (loaded_rss, freed_rss)  # the model's memory given back

        again = vectors_of(client.request("embedder", EmbedRequest(texts=TEXTS), EmbedReply, timeout=120))
        np.testing.assert_array_equal(again, first)  # the same model, loaded again
        assert describe()["loads"] == 2
    finally:
        k.stop()
        remove_tree(root)
