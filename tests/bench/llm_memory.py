"""The llm worker's model residency: what a load costs, and the memory of the tree with the model
unloaded, loaded and freed again after ``[llm] idle_unload_s``.

    python -m tests.bench.llm_memory [--idle-unload-s 15]

1. In this process, side by side on the bundled SmolLM2 GGUF: the header read by the ``gguf`` package's
   ``GGUFReader`` against :func:`~foldermind.workers.llm.gguf_header.read_header`, and ctransformers' own
   CPU probe (py-cpuinfo) against :func:`~foldermind.workers.llm.backends.ctransformers_build`.
2. A fresh home with the default process map (``analysis = false``: nothing but the bench touches the
   model): the RSS of every process once the tree has started (the model unloaded), after a first chat
   answer over the bus (loaded), after the idle unload, and the times of the first chat and of one after the
   unload. Prints a markdown section for docs/benchmarks/llm.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import psutil

from foldermind.protocol.messages import ChatReply, ChatRequest
from tests.bench.kernels import BenchFailure, Kernel, say
from tests.bench.machine import facts
from tests.helpers import MODEL_CACHE

PASSAGE = {"file_name": "budget.txt", "text": "The budget for the obsidianwave project is forty thousand dollars."}
QUESTION = "What is the budget for the obsidianwave project?"


def timed(fn: object, repeat: int = 3) -> float:
    """The median wall time of ``fn()`` over ``repeat`` calls."""
    assert callable(fn)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def header_costs() -> dict[str, float]:
    import gguf
    from cpuinfo import get_cpu_info

    from foldermind.workers.llm.backends import ctransformers_build
    from foldermind.workers.llm.gguf_header import read_header
    from foldermind.workers.llm.model_file import bundled_model

    path = bundled_model()
    return {
        "gguf_reader_s": timed(lambda: gguf.GGUFReader(str(path))),
        "read_header_s": timed(lambda: read_header(path)),
        "cpuinfo_s": timed(get_cpu_info, repeat=1),
        "proc_cpuinfo_s": timed(ctransformers_build),
    }


def rss_table(kernel: Kernel) -> dict[str, int]:
    with kernel.client("bench-rss") as client:
        procs = kernel.processes(client)
    out: dict[str, int] = {}
    for name, proc in procs.items():
        try:
            out[name] = int(proc.memory_info().rss) + sum(
                int(c.memory_info().rss) for c in proc.children(recursive=True) if name != "kernel"
            )
        except psutil.Error:
            out[name] = 0
    kernel_proc = procs["kernel"]
    out["tree"] = int(kernel_proc.memory_info().rss) + sum(
        int(c.memory_info().rss) for c in kernel_proc.children(recursive=True)
    )
    return out


def chat(kernel: Kernel) -> tuple[float, ChatReply]:
    started = time.perf_counter()
    with kernel.client("bench-chat") as client:
        reply = client.request("llm", ChatRequest(question=QUESTION, passages=[PASSAGE]), ChatReply, timeout=120)
    return time.perf_counter() - started, reply.body


def residency(idle_unload_s: float) -> dict[str, object]:
    config = {"ingest": {"model_cache_dir": MODEL_CACHE}, "llm": {"analysis": False, "idle_unload_s": idle_unload_s}}
    kernel = Kernel("llm-memory", config)
    try:
        kernel.start()
        time.sleep(5)  # the tree's start-up work (the embedder's and indexer's model loads) settles
        unloaded = rss_table(kernel)
        first_s, first = chat(kernel)
        with kernel.client("bench-describe") as client:
            loaded_details = kernel.describe(client, "llm")
        loaded = rss_table(kernel)
        give_up = time.monotonic() + idle_unload_s * 3 + 30
        while True:
            with kernel.client("bench-describe") as client:
                if kernel.describe(client, "llm")["state"] == "unloaded":
                    break
            if time.monotonic() > give_up:
                raise BenchFailure("the llm did not unload its model")
            time.sleep(0.5)
        freed = rss_table(kernel)
        again_s, again = chat(kernel)
        with kernel.client("bench-describe") as client:
            again_details = kernel.describe(client, "llm")
        return {
            "unloaded": unloaded,
            "loaded": loaded,
            "freed": freed,
            "first_chat_s": first_s,
            "first_load_s": loaded_details["load_s"],
            "first_tokens": first.completion_tokens,
            "again_chat_s": again_s,
            "again_load_s": again_details["load_s"],
            "again_tokens": again.completion_tokens,
        }
    finally:
        kernel.stop()
        kernel.cleanup()


def mib(n: int) -> str:
    return f"{n / 2**20:.0f}"


def report(costs: dict[str, float], res: dict[str, object], machine: dict[str, str]) -> str:
    unloaded, loaded, freed = (res[k] for k in ("unloaded", "loaded", "freed"))
    assert isinstance(unloaded, dict) and isinstance(loaded, dict) and isinstance(freed, dict)
    lines = [
        "## Model residency: loaded on use, freed when idle",
        "",
        f"Machine: {machine['CPU']}, {machine['cores']}; {machine['date (UTC)']} UTC; foldermind"
        f" {machine['foldermind']}; load average before the run {machine['load average before the run']}."
        " `python -m tests.bench.llm_memory`.",
        "",
        "What one load of the bundled SmolLM2-135M costs, side by side in one process (median of 3):",
        "",
        "| step | before | now |",
        "|---|---:|---:|",
        f"| GGUF header (`gguf.GGUFReader` / `gguf_header.read_header`) | {costs['gguf_reader_s']:.2f} s"
        f" | {costs['read_header_s']:.3f} s |",
        f"| CPU build for ctransformers (py-cpuinfo / `/proc/cpuinfo`) | {costs['cpuinfo_s']:.2f} s"
        f" | {costs['proc_cpuinfo_s']:.4f} s |",
        "",
        f"In the llm worker: the first chat answer {res['first_chat_s']:.2f} s including the load"
        f" ({res['first_load_s']} s, {res['first_tokens']} tokens); after the idle unload"
        f" {res['again_chat_s']:.2f} s (load {res['again_load_s']} s, {res['again_tokens']} tokens).",
        "",
        "RSS in MiB (a worker with its children), a fresh home, `analysis = false`:",
        "",
        "| process | model unloaded (start) | loaded | freed after idle |",
        "|---|---:|---:|---:|",
    ]
    for name in unloaded:
        lines.append(f"| {name} | {mib(unloaded[name])} | {mib(loaded.get(name, 0))} | {mib(freed.get(name, 0))} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-unload-s", type=float, default=15.0)
    args = parser.parse_args()
    machine = facts(Path(__file__).resolve().parents[2])
    say("timing the header read and the CPU probe")
    costs = header_costs()
    say("running a kernel through load, idle unload and reload")
    res = residency(args.idle_unload_s)
    print(report(costs, res, machine))


if __name__ == "__main__":
    main()
