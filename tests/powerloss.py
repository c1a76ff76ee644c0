"""Power cuts (issue 42): the kernel's home on the power-cut file system (tests/powercut_fs.py), a real folder
indexed while it is edited, and acknowledged commands at random moments; then a cut, a restart, and checks.

    python -m tests.powerloss --cycles N [--seed S] [--files F] [--compare-every K] [--json]

Each cycle: a few seconds of file operations on the folder (the soak's, tests/soak.py) and of commands, each
recorded as acknowledged when the CLI exits 0: `folders add` / `folders remove` of extra (empty) folders,
`folders add-criteria` / removing one, `token rotate`, `bus allow` / `bus deny` of a worker key, client keys'
`token add` / `revoke` / `rotate NAME` (tests/powerloss_keys.py); sometimes one more command left running. Two
canaries are written on the mount, one fsynced with its folder, one not. The cut: every process of the kernel
(and the command in flight) killed -9 at once, then the unsynced writes dropped, torn or reordered (the mode
drawn per cycle) and the file system mounted again. Then: `foldermind start` with no manual step (else a failed
start), the watcher's reconcile and a quiet index with no worker restarting over and over (a crash loop counts
as a failed start), every acknowledged command's effect present (the token must also let a client in:
`foldermind test-connection`; the client keys' checks), live searches for deleted versions finding nothing
(the soak's check_live). Every K cycles and at the end the kernel is stopped and the index compared with a
fresh index of the folder, by the soak's own comparison.

Prints one line of JSON: cycles, canary_unsynced_lost, canary_synced_kept, acknowledged, acknowledged_lost,
index_discrepancies, failed_starts, then what the run went through: the acknowledged commands by kind, the cuts
per mode, the cuts that took back part of the Tantivy folder or the usearch file, the starts whose indexer
rebuilt or repaired either from SQLite, and the workers' restarts after the starts. What went wrong goes to
stderr (and --report PATH). The folder lives off the mount: it is the user's disk, not the one losing power.
The client keys' steps are in tests/powerloss_keys.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

import psutil
import zmq

from foldermind.kernel import curve
from foldermind.protocol.runtime.home import Home
from tests.config import merge
from tests.helpers import NO_LLM, ONE_PARSER, cli, cli_process, remove_tree, short_tmpdir, wait_for
from tests.powercut_fs import MODES, PowerCutMount, fsync, fuse_missing
from tests.powerloss_keys import KeyLedger
from tests.soak import Soak, start_kernel, wait_quiet

CONFIG = merge(NO_LLM, ONE_PARSER)  # the front door serves the token check; no background summaries
EXTRA_FOLDERS = 3
SETTLE_S = 600.0
COMMANDS = ("folder", "criteria", "token", "key", "client")
CRASH_LOOP = 3  # restarts of one worker between a start and its checks
REPAIRS = ("vector index unreadable", "vector index repaired", "keyword index damaged", "keyword index unreadable")
"""The indexer's log lines when it rebuilds or repairs usearch or Tantivy from SQLite (workers/indexer)."""


@dataclass
class Tally:
    cycles: int = 0
    canary_unsynced_lost: int = 0
    canary_synced_kept: int = 0
    acknowledged: int = 0
    acknowledged_lost: int = 0
    index_discrepancies: int = 0
    failed_starts: int = 0
    commands: Counter[str] = field(default_factory=Counter)  # acknowledged, by kind
    modes: Counter[str] = field(default_factory=Counter)
    index_files_cut: int = 0  # cuts that took back or tore part of the Tantivy folder or the usearch file
    index_repairs: int = 0  # starts whose indexer rebuilt or repaired either from SQLite
    keyword_rebuilds: int = 0  # of them, those that rebuilt Tantivy
    worker_restarts: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self) if f.name != "problems"})


def say(msg: str) -> None:
    print(f"[powerloss {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def is_index_file(path: str) -> bool:
    """Whether ``path`` (on the mount) is part of the Tantivy index or the usearch file, not a temporary file."""
    folder, name = os.path.split(path)
    if folder == "/home/data/tantivy":
        return not name.startswith((".tmp", ".fuse_hidden"))
    return path == "/home/data/vectors.usearch"


class PowerLoss:
    def __init__(self, base: Path, seed: int, files: int, cycle_s: float) -> None:
        self.base, self.rng, self.files, self.cycle_s = base, random.Random(seed), files, cycle_s
        self.mount = PowerCutMount(base / "backing", base / "mnt")
        self.home = base / "mnt" / "home"  # made by foldermind itself, as a first start does
        self.canaries = base / "mnt" / "canary"  # beside it: fsyncing the canaries' folder syncs nothing of the home
        self.soak = Soak(files, 0, seed, self.home, short=True)
        self.soak.root = self.soak.corpus.root = base / "folder"  # the user's disk: off the mount
        self.extras = [base / f"extra{i}" for i in range(EXTRA_FOLDERS)]
        # What the acknowledged commands left: True / False, or None after one that was cut short (either holds).
        self.folders: dict[str, bool | None] = {str(p): False for p in self.extras}
        self.criteria: dict[str, bool | None] = {}
        self.keys: dict[str, bool | None] = {}
        self.clients = KeyLedger(self.home, self.soak.root, self.rng)
        self.token: str | None = None
        self._log_mark = 0
        self.inflight: subprocess.Popen[str] | None = None
        self.tally = Tally()
        self._names = 0

    # -- the kernel -----------------------------------------------------------------------------------

    def boot(self) -> bool:
        """Mount, then `foldermind start` as a user would after the machine came back."""
        if not os.path.ismount(self.mount.mountpoint):
            self.mount.mount()
        log = Home.resolve(self.home).log_file("indexer")
        self._log_mark = log.stat().st_size if log.exists() else 0
        try:
            self.soak.kernel = start_kernel(self.home, CONFIG)
        except Exception as exc:
            self.tally.failed_starts += 1
            self.problem(f"cycle {self.tally.cycles}: the kernel did not start: {str(exc)[-1500:]}")
            return False
        # The test's own config file, written by RunningKernel: saved durably, as an editor saves it.
        fsync(self.home / "config" / "supervisor.toml")
        fsync(self.home / "config")
        return True

    def problem(self, what: str) -> None:
        self.tally.problems.append(what)
        say(what)

    # -- commands -------------------------------------------------------------------------------------

    def run(self, *args: str, kind: str = "folder") -> str | None:
        """A command through the real CLI; its output when it reported done (exit 0): acknowledged."""
        done = cli(self.home, *args, timeout=300, check=False)
        if done.returncode == 0:
            self.tally.acknowledged += 1
            self.tally.commands[kind] += 1
            self.soak.corpus.note(f"acknowledged: {' '.join(args)}")
            return done.stdout
        self.soak.corpus.note(f"command {args} exited {done.returncode}: {done.stderr[-300:]}")
        return None

    def pick_command(self) -> tuple[str, tuple[str, ...], str, bool]:
        """(kind, CLI arguments, key, the state it leaves) for a command that makes sense now."""
        kind = self.rng.choice(COMMANDS)
        if kind == "folder":
            path = str(self.rng.choice(self.extras))
            if self.folders[path] is False:
                return kind, ("folders", "add", path), path, True
            return kind, ("folders", "remove", path), path, False
        if kind == "criteria":
            saved = [n for n, on in self.criteria.items() if on]
            if saved and self.rng.random() < 0.4:
                name = self.rng.choice(saved)
                return kind, ("folders", "remove", name), name, False
            self._names += 1
            name = f"crit{self._names}"
            return kind, ("folders", "add-criteria", "--name", name, "--query", "cells"), name, True
        if kind == "key":  # a remote worker's key admitted to the tcp bus, or one admitted before denied
            admitted = [n for n, on in self.keys.items() if on]
            if admitted and self.rng.random() < 0.4:
                name = self.rng.choice(admitted)
                return kind, ("bus", "deny", name), name, False
            self._names += 1
            name = f"worker{self._names}"
            return kind, ("bus", "allow", name, zmq.curve_keypair()[0].decode()), name, True
        if kind == "client":
            name, args = self.clients.pick()
            return kind, args, name, True
        return kind, ("token", "rotate"), "", True

    def table(self, kind: str) -> dict[str, bool | None]:
        return {"folder": self.folders, "criteria": self.criteria, "key": self.keys}[kind]

    def command(self) -> None:
        kind, args, key, state = self.pick_command()
        if kind == "folder" and self.folders[key] is None:
            return  # a cut-short command's outcome is unknown: not asked again until checked
        out = self.run(*args, kind=kind)
        if out is None:
            return
        if kind == "client":
            self.clients.acknowledged(key, args, out)
        elif kind == "token":
            self.token = out.strip().splitlines()[0]
        else:
            self.table(kind)[key] = state

    def start_inflight(self) -> None:
        """One command left running into the cut: never acknowledged, so either outcome holds."""
        kind, args, key, _ = self.pick_command()
        self.inflight = cli_process(self.home, *args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if kind == "token":
            self.token = None
        elif kind == "client":
            self.clients.cut_short(key, args)
        else:
            self.table(kind)[key] = None

    # -- one cycle ------------------------------------------------------------------------------------

    def activity(self) -> None:
        end = time.monotonic() + self.rng.uniform(0.3, 1.0) * self.cycle_s
        while time.monotonic() < end:
            if self.rng.random() < 0.35:
                self.command()
            else:
                for _ in range(self.rng.randint(1, 4)):
                    self.soak.corpus.random_op()
            time.sleep(self.rng.uniform(0.0, 0.5))
        if self.rng.random() < 0.3:
            self.start_inflight()
            time.sleep(self.rng.uniform(0.0, 1.0))

    def cut(self) -> None:
        n, canary = self.tally.cycles, self.canaries
        (canary / f"synced-{n}").write_text(f"cycle {n}")
        fsync(canary / f"synced-{n}")
        fsync(canary)
        (canary / f"unsynced-{n}").write_text(f"cycle {n}")  # after: the folder's fsync would keep its name
        k = self.soak.kernel
        procs: list[psutil.Process] = []
        if k is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs = [psutil.Process(k.kernel_pid), *k.descendants()]
        if self.inflight is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs.append(psutil.Process(self.inflight.pid))
        for proc in procs:  # all at once, as the power does
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(procs, timeout=30)
        if self.inflight is not None:
            self.inflight.wait()
            self.inflight = None
        if k is not None:
            k.stop()  # its sockets here; the kernel is gone
        self.soak.kernel = None
        mode = self.rng.choice(MODES)
        undone = self.mount.cut(mode, self.rng.randrange(1 << 30))
        self.tally.modes[mode] += 1
        index_files = [p for p in undone.pop("paths") if is_index_file(p)]
        self.tally.index_files_cut += bool(index_files)
        self.soak.corpus.note(f"power cut {n} ({mode}): {undone}, index files {index_files}")
        say(f"cut {n} ({mode}): {undone}, index files {index_files}")
        self.mount.mount()
        unsynced = canary / f"unsynced-{n}"  # lost: gone, or (torn) its name kept with a prefix of its bytes
        if not unsynced.is_file() or unsynced.read_text() != f"cycle {n}":
            self.tally.canary_unsynced_lost += 1
        if (canary / f"synced-{n}").is_file() and (canary / f"synced-{n}").read_text() == f"cycle {n}":
            self.tally.canary_synced_kept += 1

    def check_acknowledged(self) -> None:
        """Every acknowledged command's effect is there; an unknown one is learned, lost ones adopted."""
        listed = cli(self.home, "folders", "list", "--json", timeout=120, check=False)
        if listed.returncode != 0:
            self.problem(f"cycle {self.tally.cycles}: folders list failed: {listed.stderr[-500:]}")
            return
        entries = json.loads(listed.stdout)
        paths = {e["path"] for e in entries if e["kind"] == "path"}
        names = {e["name"] for e in entries if e["kind"] == "criteria"}
        main = str(self.soak.root)
        if main not in paths:
            self.lost(f"the main folder {main}")
            self.run("folders", "add", main, "--name", "Soak")
        admitted = set(curve.allowed(Home.resolve(self.home)))
        for table, present in ((self.folders, paths), (self.criteria, names), (self.keys, admitted)):
            for key, want in table.items():
                if want is not None and want != (key in present):
                    self.lost(f"{'registered' if want else 'removed'} {key}")
                table[key] = key in present
        stored = cli(self.home, "token", "show", timeout=60).stdout.strip()
        if self.token is not None and stored != self.token:
            self.lost("the rotated token (another one is stored)")
        self.token = stored
        connected = cli(self.home, "test-connection", timeout=120, check=False)
        if connected.returncode != 0:
            self.problem(f"cycle {self.tally.cycles}: the stored token does not let a client in: {connected.stdout}")
        lost, problems = self.clients.check()
        for what in lost:
            self.lost(what)
        for what in problems:
            self.problem(f"cycle {self.tally.cycles}: {what}")

    def check_start(self) -> None:
        """No crash loop since the start, and whether the indexer rebuilt or repaired an index from SQLite."""
        k = self.soak.kernel
        assert k is not None
        for w in k.status().workers:
            self.tally.worker_restarts += int(w["restarts"])
            if int(w["restarts"]) >= CRASH_LOOP:
                self.tally.failed_starts += 1
                self.problem(
                    f"cycle {self.tally.cycles}: {w['name']} restarted {w['restarts']} times ({w['last_error']})"
                )
        log = Home.resolve(self.home).log_file("indexer")
        with open(log, "rb") as fh:
            fh.seek(self._log_mark if log.stat().st_size >= self._log_mark else 0)  # else rotated meanwhile
            text = fh.read().decode("utf-8", "replace")
        repairs = [line for line in text.splitlines() if any(r in line for r in REPAIRS)]
        if repairs:
            self.tally.index_repairs += 1
            self.tally.keyword_rebuilds += any("keyword index" in line for line in repairs)
            self.soak.corpus.note(f"cycle {self.tally.cycles}: the indexer repaired: {repairs}")

    def lost(self, what: str) -> None:
        self.tally.acknowledged_lost += 1
        self.problem(f"cycle {self.tally.cycles}: acknowledged and lost after the cut: {what}")

    def settle(self) -> None:
        k = self.soak.kernel
        try:
            wait_for(lambda: self.soak.watcher_synced(k), SETTLE_S, 0.5, "the watcher's reconcile")
        except AssertionError as exc:
            self.soak.report.discrepancies.append(f"cycle {self.tally.cycles}: {exc}")
            return
        if not wait_quiet(self.home, timeout=SETTLE_S, still_s=4.0):
            self.soak.report.discrepancies.append(f"cycle {self.tally.cycles}: the index did not become quiet")

    def compare(self) -> None:
        """Stop the kernel and compare its index with a fresh one of the folder (the soak's comparison)."""
        k = self.soak.kernel
        assert k is not None
        k.stop()
        self.soak.kernel = None
        from tests.soak import read_index

        fresh_home = short_tmpdir("fm-plfresh-")
        try:
            fresh = self.soak.build_fresh(fresh_home)
            corpus = self.soak.corpus
            markers = {e.marker for e in corpus.files.values() if e.marker} | corpus.dead
            self.soak.compare(read_index(self.home, markers), fresh)
        finally:
            remove_tree(fresh_home)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.soak.close()
        with contextlib.suppress(Exception):
            self.mount.close()

    # -- the run --------------------------------------------------------------------------------------

    def run_cycles(self, cycles: int, compare_every: int) -> Tally:
        corpus = self.soak.corpus
        for p in self.extras:
            p.mkdir(parents=True, exist_ok=True)
        for _ in range(self.files):
            corpus.create()
        self.mount.mount()
        self.canaries.mkdir()
        fsync(self.mount.mountpoint)  # before the home exists: it syncs the canaries' folder only
        if not self.boot():
            return self.tally
        self.run("folders", "add", str(self.soak.root), "--name", "Soak")
        while self.tally.cycles < cycles:
            self.activity()
            self.cut()
            self.tally.cycles += 1
            if not self.boot():
                break  # a home that needs a manual step: the run stops here, with that finding
            self.settle()
            self.check_start()
            self.check_acknowledged()
            self.soak.check_live()
            last = self.tally.cycles == cycles
            if last or (compare_every and self.tally.cycles % compare_every == 0):
                say(f"cycle {self.tally.cycles}: comparing with a fresh index")
                self.compare()
                if not last and not self.boot():
                    break
            bad = self.soak.report.discrepancies
            for d in bad[self.tally.index_discrepancies :]:
                self.problem(f"cycle {self.tally.cycles}: index: {d}")
            self.tally.index_discrepancies = len(bad)
        return self.tally


def run_powerloss(
    cycles: int, seed: int = 1, files: int = 40, cycle_s: float = 6.0, compare_every: int = 0, log: Path | None = None
) -> Tally:
    why = fuse_missing()
    if why:
        raise RuntimeError(f"the power-cut file system cannot run here: {why}")
    base = short_tmpdir("fm-pl-")
    run = PowerLoss(base, seed, files, cycle_s)
    try:
        return run.run_cycles(cycles, compare_every)
    finally:
        run.close()
        if log is not None:
            log.write_text("\n".join(run.soak.corpus.log + run.tally.problems) + "\n", "utf-8")
        remove_tree(base)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--files", type=int, default=40, help="files in the folder at the start (mostly one chunk)")
    ap.add_argument("--cycle-seconds", type=float, default=6.0, help="at most this long of activity before a cut")
    ap.add_argument("--compare-every", type=int, default=25, help="a fresh-index comparison every K cycles too")
    ap.add_argument("--json", action="store_true", help="print only the one line of JSON on stdout")
    ap.add_argument("--report", type=Path, default=None, help="write the operations and problems here")
    args = ap.parse_args(argv)
    tally = run_powerloss(args.cycles, args.seed, args.files, args.cycle_seconds, args.compare_every, args.report)
    print(tally.line())
    if not args.json:
        print("\n".join(tally.problems) or "no problems")
    canaries = (tally.canary_synced_kept, tally.canary_unsynced_lost) == (tally.cycles, tally.cycles)
    return 0 if canaries and not tally.problems and not tally.index_discrepancies else 1


if __name__ == "__main__":
    sys.exit(main())
