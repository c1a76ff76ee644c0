"""The supervisor's state machine and restart policy, in-process: legal transitions declared and enforced,
backoff doubling to its cap, the restart limit in its window, a stable run forgiving past failures.

No process is spawned here: a slot's exits are fed to the policy with explicit times, so a 60 s window or a
30 s backoff cap is checked in microseconds. test_faults.py proves the same policy with real crashing workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from foldermind.kernel.slot import Slot
from foldermind.kernel.states import TRANSITIONS, IllegalTransition, State
from foldermind.kernel.supervisor import Supervisor
from foldermind.protocol.runtime.config import LLM_MODULE, SupervisorConfig, WorkerSpec
from foldermind.protocol.runtime.home import Home


def supervisor(tmp_path: Path, **restart: float) -> tuple[Supervisor, Slot, list[tuple[State, State]]]:
    config = SupervisorConfig.model_validate(
        {"restart": {"backoff_jitter": 0.0, **restart}, "workers": {"w": WorkerSpec(module="x").model_dump()}}
    )
    seen: list[tuple[State, State]] = []
    sup = Supervisor(Home.resolve(tmp_path), config, lambda slot, old, reason: seen.append((old, slot.state)))
    return sup, sup.slots["w"], seen


def test_every_state_change_not_declared_is_refused_and_the_slot_keeps_its_state(tmp_path: Path) -> None:
    sup, slot, seen = supervisor(tmp_path)
    for old in State:
        for new in State:
            slot.state = old
            if new in TRANSITIONS[old]:
                sup._set(slot, new, "test")
                assert slot.state is new and seen[-1] == (old, new)
            else:
                with pytest.raises(IllegalTransition, match=f"{old} -> {new}"):
                    sup._set(slot, new, "test")
                assert slot.state is old


def test_the_declared_machine_never_reaches_running_except_from_starting() -> None:
    assert [old for old, allowed in TRANSITIONS.items() if State.RUNNING in allowed] == [State.STARTING]
    assert all(State.BACKOFF not in TRANSITIONS[old] for old in (State.EXITED, State.BACKOFF, State.FAILED))


def test_a_slot_is_idle_only_at_start_or_after_it_was_let_go_and_leaves_idle_only_to_start_or_stop() -> None:
    assert sorted(old for old, allowed in TRANSITIONS.items() if State.IDLE in allowed) == [
        State.EXITED,
        State.STOPPING,
    ]
    assert TRANSITIONS[State.IDLE] == {State.STARTING, State.EXITED}


def test_backoff_doubles_from_the_initial_delay_up_to_its_cap(tmp_path: Path) -> None:
    sup, slot, _ = supervisor(tmp_path, backoff_initial_s=0.5, backoff_max_s=3.0, max_restarts=100, window_s=1000)
    delays = []
    for i in range(6):
        now = 100.0 + i
        slot.state = State.RUNNING
        sup._failed_exit(slot, now)
        assert slot.state is State.BACKOFF and slot.due is not None
        delays.append(round(slot.due - now, 3))
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]


def test_more_than_max_restarts_within_the_window_ends_failed_until_restarted(tmp_path: Path) -> None:
    sup, slot, _ = supervisor(tmp_path, max_restarts=3, window_s=60)
    for t in (0.0, 10.0, 20.0):
        slot.state = State.RUNNING
        sup._failed_exit(slot, t)
        assert slot.state is State.BACKOFF
    slot.state = State.RUNNING
    sup._failed_exit(slot, 30.0)
    assert slot.state is State.FAILED and slot.due is None


def test_exits_older_than_the_window_do_not_count_toward_the_limit(tmp_path: Path) -> None:
    sup, slot, _ = supervisor(tmp_path, max_restarts=2, window_s=60)
    for t in (0.0, 50.0, 100.0, 150.0, 200.0):  # never more than 2 within any 60 s
        slot.state = State.RUNNING
        sup._failed_exit(slot, t)
        assert slot.state is State.BACKOFF, t


def test_a_run_longer_than_stable_after_starts_the_backoff_over(tmp_path: Path) -> None:
    sup, slot, _ = supervisor(tmp_path, backoff_initial_s=0.5, stable_after_s=10, max_restarts=100, window_s=1000)
    for t in (0.0, 1.0, 2.0):
        slot.state = State.RUNNING
        slot.running_since = t - 0.1
        sup._failed_exit(slot, t)
    assert slot.due is not None and round(slot.due - 2.0, 3) == 2.0  # 0.5, 1, 2: short runs
    slot.state = State.RUNNING
    slot.running_since = 5.0
    sup._failed_exit(slot, 20.0)  # ran 15 s: stable
    assert slot.due is not None and round(slot.due - 20.0, 3) == 0.5


def _map(tmp_path: Path, *services: str, on_demand: dict[str, int] | None = None) -> tuple[Supervisor, list[str]]:
    """A supervisor whose spawn only records the slot and marks it STARTING (no process: the order is the
    subject; tests/bench/coldstart.py times real starts). ``on_demand``: services run on demand, with their count."""
    workers = {s: WorkerSpec(module="x").model_dump() for s in services}
    for s, count in (on_demand or {}).items():
        workers[s] = WorkerSpec(module="x", on_demand=True, count=count).model_dump()
    config = SupervisorConfig.model_validate({"workers": workers})
    sup = Supervisor(Home.resolve(tmp_path), config, lambda slot, old, reason: None)
    spawned: list[str] = []

    def spawn(slot: Slot) -> None:
        spawned.append(slot.name)
        sup._set(slot, State.STARTING, "spawned (recorded)")

    sup.spawn = spawn  # type: ignore[method-assign]
    return sup, spawned


def test_the_indexer_and_front_door_start_first_and_the_rest_follow_once_both_are_running(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, "watcher", "indexer", "embedder", "frontdoor")
    sup.start_all()
    assert spawned == ["indexer", "frontdoor"]
    # the waiting ones still count as serving: a job for them queues instead of failing as unservable
    assert sup.may_serve("embedder") and sup.may_serve("watcher")
    assert sup.slots["embedder"].state is State.EXITED
    sup._set(sup.slots["indexer"], State.RUNNING, "ready")
    assert spawned == ["indexer", "frontdoor"]  # the front door is still STARTING
    sup._set(sup.slots["frontdoor"], State.RUNNING, "ready")
    assert sorted(spawned[2:]) == ["embedder", "watcher"]
    assert not sup.held


def test_an_indexer_that_fails_to_start_does_not_hold_the_rest_back(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, "indexer", "embedder")
    sup.start_all()
    sup._set(sup.slots["indexer"], State.BACKOFF, "no READY within start_timeout_s")
    assert spawned == ["indexer", "embedder"]


def test_a_map_without_an_indexer_starts_everything_at_once_and_a_stop_spawns_no_held_slot(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, "watcher", "embedder")
    sup.start_all()
    assert sorted(spawned) == ["embedder", "watcher"]
    sup2, spawned2 = _map(tmp_path / "b", "indexer", "embedder")
    sup2.start_all()
    sup2.stop_all()  # the indexer has no process: it goes EXITED, and the held embedder is never spawned
    assert spawned2 == ["indexer"] and not sup2.may_serve("embedder")


def test_a_held_slot_restarted_by_request_starts_at_once_and_only_once(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, "indexer", "embedder")
    sup.start_all()
    assert sup.restart("embedder") == ["embedder"]
    sup._set(sup.slots["indexer"], State.RUNNING, "ready")
    assert spawned == ["indexer", "embedder"]


def test_an_on_demand_slot_waits_idle_and_a_demand_starts_it_once_while_it_starts(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, "indexer", on_demand={"llm": 1})
    sup.start_all()
    assert spawned == ["indexer"] and sup.slots["llm"].state is State.IDLE
    assert sup.may_serve("llm")  # a job for it queues instead of failing as unservable
    sup.demand("llm")
    sup.demand("llm")  # a second job while it starts: it takes the queue once READY
    assert spawned == ["indexer", "llm"] and sup.slots["llm"].restarts == 0


def test_a_demand_on_an_on_demand_pool_starts_its_next_idle_member_only_once_the_last_is_up(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, on_demand={"parser": 3})
    sup.start_all()
    sup.demand("parser")
    sup.demand("parser")
    assert spawned == ["parser#1"]
    sup._set(sup.slots["parser#1"], State.RUNNING, "ready")
    sup.demand("parser")  # parser#1 is busy and a job waits: the pool grows by one
    assert spawned == ["parser#1", "parser#2"]


def test_an_idle_slot_stops_to_exited_and_a_restart_starts_it(tmp_path: Path) -> None:
    sup, spawned = _map(tmp_path, on_demand={"llm": 1, "embedder": 1})
    sup.start_all()
    assert sup.restart("llm") == ["llm"] and spawned == ["llm"]
    sup.stop_all()
    assert sup.slots["embedder"].state is State.EXITED and not sup.may_serve("embedder")
    sup.demand("embedder")  # stopping: nothing starts
    assert spawned == ["llm"]


def test_an_on_demand_llm_asked_to_load_at_start_starts_with_the_kernel(tmp_path: Path) -> None:
    llm = WorkerSpec(module=LLM_MODULE, on_demand=True).model_dump()
    for load, starts in (("at_start", True), ("on_use", False)):
        config = SupervisorConfig.model_validate({"llm": {"load": load}, "workers": {"llm": llm}})
        sup = Supervisor(Home.resolve(tmp_path / load), config, lambda slot, old, reason: None)
        sup.spawn = lambda slot: None  # type: ignore[method-assign]
        sup.start_all()
        assert (sup.slots["llm"].state is State.IDLE) is not starts
