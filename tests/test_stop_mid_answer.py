"""A chat answer in hand when its llm worker is asked to stop ends at its next token (workers/llm, ``req.stopping()``):
its caller gets a typed, retryable ``worker_lost`` and the worker exits 0, where it generated on to the answer's end
and, past its stop grace, was killed.

Real kernel, the real SmolLM2-135M-Instruct on ctransformers, the llm alone. Its tokens are slowed on purpose
(``FOLDERMIND_TEST_LLM_SLOW``: each sleeps 3 s, a slow model on a busy machine; asleep, it is not "still working" to
the kernel's grace), with a stop grace of 10 s: an answer of more than four tokens more outlasts it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from foldermind.protocol.client import BusClient
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ChatReply, ChatRequest, Message, StopReply, StopRequest
from tests.config import merge
from tests.helpers import FAST_RESTART, RunningKernel, only_workers, require_bundled_model, wait_for

require_bundled_model()

PASSAGE = (
    "The river Seine flows through Paris. Its banks hold the Louvre, the Musee d'Orsay and Notre-Dame; "
    "thirty-seven bridges cross it within the city, the oldest the Pont Neuf, finished in 1607."
)


def test_a_chat_answer_in_hand_at_a_stop_ends_at_its_next_token_with_a_typed_error(home_dir: Path) -> None:
    slow = home_dir / "slow"
    slow.write_text("3")
    llm = {"env": {"FOLDERMIND_TEST_LLM_SLOW": f"3:{slow}"}, "restart": {"stop_grace_s": 10.0}}
    policy = {"llm": {"load": "at_start", "max_answer_tokens": 64, "timeout_s": 600}}
    k = RunningKernel(home_dir, merge(FAST_RESTART, only_workers("llm"), policy, {"workers": {"llm": llm}})).start()
    partials: list[Message] = []
    outcome: dict[str, object] = {}

    def ask() -> None:
        request = ChatRequest(
            question="Describe everything the passage says about the river, bridge by bridge.",
            passages=[{"file_name": "seine.txt", "text": PASSAGE}],
            stream=True,
        )
        try:
            with BusClient(k.home.bus_endpoint, name="asker") as client:
                outcome["reply"] = client.request("llm", request, ChatReply, timeout=600, on_partial=partials.append)
        except JobError as exc:
            outcome["error"] = exc

    asking = threading.Thread(target=ask)
    try:
        wait_for(lambda: "ready" in (k.worker("llm").get("note") or ""), 180, 0.2, "the model loaded")
        asking.start()
        wait_for(lambda: partials, 180, 0.1, "the answer's first words")
        with BusClient(k.home.bus_endpoint, name="stopper") as client:
            report = client.request("kernel", StopRequest(), StopReply, timeout=300).body.report
        asking.join(60)
        assert report["llm"] == "exited 0", report  # was: killed after 10 s grace
        error = outcome.get("error")
        assert isinstance(error, JobError), outcome
        assert error.code is ErrorCode.WORKER_LOST and error.retryable, error
        assert "the llm worker is stopping: the chat answer was stopped after" in error.message, error
        assert "chat answer stopped after" in k.home.log_file("llm").read_text()
    finally:
        slow.unlink(missing_ok=True)
        k.stop()
        asking.join(60)
