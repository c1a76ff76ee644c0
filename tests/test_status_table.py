"""`status`'s table of workers sizes its columns to what they hold."""

from __future__ import annotations

from foldermind.kernel.cli.status import worker_table
from foldermind.protocol.messages import WorkerInfo


def worker(name: str, state: str, **extra: object) -> WorkerInfo:
    info: dict[str, object] = {
        "name": name,
        "service": name.split("@")[0].split("#")[0],
        "state": state,
        "pid": 4242,
        "uptime_s": 61.0,
        "restarts": 0,
        "in_flight": 1,
        "last_error": None,
        "rss_bytes": 50 * 2**20,
        "note": "",
        "remote": False,
        "key": None,
        "past_error": None,
        "error_at": None,
        **extra,
    }
    return info  # type: ignore[return-value]


def test_a_remote_members_long_name_does_not_run_into_its_state() -> None:
    remote = "parser@build-server-in-the-basement.example.org:123456"
    lines = worker_table(
        [worker("watcher", "RUNNING"), worker(remote, "REMOTE", remote=True, key="box-a"), worker("llm", "IDLE")]
    )
    header, rows = lines[0], lines[1:]
    state_at, pid_end = header.index("STATE"), header.index("PID") + len("PID")
    for row, state in zip(rows, ["RUNNING", "REMOTE", "IDLE"], strict=True):
        assert row[state_at : state_at + len(state)] == state, (header, row)
        assert row[state_at - 2 : state_at] == "  ", "a gap between the name and its state"
        assert row[:pid_end].endswith("4242"), "the PID column stays aligned"
    assert rows[1].startswith(remote) and "remote, key box-a" in rows[1]


def test_a_map_of_short_names_keeps_the_usual_widths() -> None:
    lines = worker_table([worker("parser#1", "RUNNING"), worker("embedder", "STARTING")])
    assert lines[0].index("STATE") == 14 and lines[0].index("PID") == 14 + 10 + 5
    assert lines[2].startswith("embedder      STARTING")
