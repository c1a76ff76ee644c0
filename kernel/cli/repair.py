"""``foldermind repair``: a damaged index database replaced by what can still be read of it, and the checks
``doctor`` makes of the database and of workers that keep failing.

The kernel must be stopped (the indexer is the database's only writer). :mod:`.salvage` copies what reads into a
new file; once that passes SQLite's check, the damaged file is kept aside, named ``index.sqlite.damaged-<UTC
time>``, and the new one takes its place. Every document is marked for parsing again and the Tantivy folder and
usearch file (derived) are removed, so the next start indexes the Smart Folders again from their files and
rebuilds both indexes from the new database.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from pathlib import Path

import click

from foldermind.kernel.cli import salvage
from foldermind.kernel.cli.common import home_option, kernel_running, typed
from foldermind.protocol.runtime.home import Home

DATABASE = "index.sqlite"
DERIVED = ("tantivy", "vectors.usearch", "vectors.usearch.draft")
DAMAGE_WORDS = "database damaged"
"""How the indexer's status note begins when its database is damaged."""


def _prepare_reindex(path: Path) -> None:
    """Every document to be parsed again, nothing left for the keyword index to replay, and no record of the
    derived indexes (removed beside it): the next start rebuilds them from this file."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        db.execute("BEGIN")
        if "documents" in tables:
            db.execute("UPDATE documents SET status = 'pending', attempts = 0, sha256 = NULL, error = NULL")
        for table in ("journal", "dead_vectors"):
            if table in tables:
                db.execute(f"DELETE FROM {table}")
        if "meta" in tables:
            db.execute("DELETE FROM meta WHERE key IN ('tantivy_seq', 'tantivy_schema')")
        db.execute("COMMIT")


def _folders(path: Path) -> int:
    with contextlib.suppress(sqlite3.DatabaseError), contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT COUNT(*) FROM folders").fetchone()[0])
    return 0


@click.command("repair")
@home_option
def repair() -> None:
    """Check the index database; if it is damaged, keep it aside, copy what reads into a new one and have the
    Smart Folders indexed again at the next start (foldermind must be stopped)."""
    from foldermind.kernel.cli.common import current_home

    home = current_home()
    if kernel_running(home):
        raise click.ClickException(f"foldermind is running: `{typed(home, 'stop')}` first, then repair")
    if (holder := home.index_holder()) is not None:  # a kernel with another XDG_RUNTIME_DIR
        raise click.ClickException(f"foldermind is running with its sockets in {holder}: stop it first, then repair")
    data = home.data_dir
    db = data / DATABASE
    if not db.exists():
        click.echo(f"no index database in {data}: nothing to repair")
        return
    found = salvage.check(db)
    if found == "ok":
        click.echo(f"{db} passed SQLite's integrity check: nothing to repair")
        return
    click.echo(f"{db} is damaged: {found}")
    size = sum(p.stat().st_size for p in (db, db.with_name(DATABASE + "-wal")) if p.exists())
    free = shutil.disk_usage(data).free
    if free < 2 * size:  # a working copy of the damaged file, and the new one
        raise click.ClickException(
            f"repair needs about {2 * size / 1048576:.0f} MiB free in {data} ({free / 1048576:.0f} MiB are): free"
            " some space and run it again"
        )
    # The new file is made beside the damaged one, which stays in place until the new one has passed its check.
    fresh = db.with_name(DATABASE + ".repairing")
    try:
        result = salvage.salvage(db, fresh)
        _prepare_reindex(fresh)
        after = salvage.check(fresh)
        if after != "ok":  # never put a file in place that SQLite itself refuses
            raise click.ClickException(f"the copy failed its own check ({after}); {db} is left as it was")
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    aside = db.with_name(f"{DATABASE}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    db.rename(aside)
    for suffix in ("-wal", "-shm"):
        extra = db.with_name(DATABASE + suffix)
        if extra.exists():
            extra.rename(aside.with_name(aside.name + suffix))
    fresh.rename(db)
    for name in DERIVED:
        target = data / name
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    if result.header_fixed:
        click.echo("its header was garbled: written back")
    for table, rows in result.copied.items():
        lost = f", {result.damaged[table]} damaged spots skipped" if table in result.damaged else ""
        click.echo(f"  {table}: {rows} rows copied{lost}")
    click.echo(f"the damaged file is kept as {aside}")
    folders = _folders(db)
    if not result.schema_read or not folders:
        click.echo(
            f"no Smart Folder could be read back: `{typed(home, 'start')}`, then add your folders again"
            f" (`{typed(home, 'folders', 'add', 'PATH')}`)"
        )
    else:
        what = "Smart Folder" if folders == 1 else f"{folders} Smart Folders"
        click.echo(f"`{typed(home, 'start')}` indexes the {what} again and rebuilds the indexes")


def database_state(home: Home, indexer_note: str | None) -> tuple[str, str]:
    """("ok" | "fail", detail) for the index database: the running indexer's word, else a read-only check of
    the file with SQLite's quick check (the kernel stopped: nothing writes it)."""
    if indexer_note is not None:
        if DAMAGE_WORDS in indexer_note:
            return "fail", indexer_note
        return "ok", "the indexer reads the index database"
    db = home.data_dir / DATABASE
    if not db.exists():
        return "ok", "no index database yet"
    if not salvage.header_ok(db):
        return "fail", f"{db} is damaged: its header is not SQLite's (file is not a database)"
    found = salvage.check(db, quick=True)
    return ("ok", f"{db} passed SQLite's quick check") if found == "ok" else ("fail", f"{db} is damaged: {found}")


def health(home: Home) -> list[tuple[str, str, str, str]]:
    """(name, status, detail, fix) of doctor's checks of the workers (one that keeps failing, with its cause)
    and of the index database."""
    from foldermind.kernel.cli.common import connect
    from foldermind.protocol.errors import BusError
    from foldermind.protocol.messages import StatusReply, StatusRequest

    out: list[tuple[str, str, str, str]] = []
    note: str | None = None
    if kernel_running(home):
        workers = []
        with contextlib.suppress(BusError), connect(home) as client:
            workers = client.request("kernel", StatusRequest(), StatusReply, timeout=5).body.workers
        for w in workers:
            if w["state"] in ("FAILED", "BACKOFF"):
                fix = f"`{typed(home, 'logs', w['name'])}`; once fixed, `{typed(home, 'restart', w['name'])}`"
                out.append((f"worker {w['name']}", "fail", f"{w['state']}: {w['last_error'] or 'no reason'}", fix))
            if w["name"] == "indexer" and w["state"] == "RUNNING":  # else the file is checked, read-only
                note = str(w.get("note") or "")
    status, detail = database_state(home, note)
    fix = f"`{typed(home, 'stop')}`, then `{typed(home, 'repair')}`" if status == "fail" else ""
    out.append(("database", status, detail, fix))
    return out
