"""What ``foldermind repair`` does to a damaged index database: check it, and copy what SQLite can still read into
a new file with the same schema.

SQLite cannot mend a damaged file in place. A file whose first bytes are garbled (the header: "file is not a
database") gets a copy with the header's fixed fields written back (every page size tried until the schema
reads); then each table is copied in rowid order, and a read that hits a damaged page skips ahead to the next
row that reads (probing further each time), so one bad page loses the rows on it and not the rest of the table.
Rows left pointing at a lost parent are dropped, the AUTOINCREMENT counters are kept (chunk ids are never
reused), and every document is marked for parsing again: the re-index, at the next start, replaces what the
damage took. The Tantivy folder and the usearch file, derived from the database, are rebuilt from the new file.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"SQLite format 3\x00"
PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512)
BATCH = 500
MAX_PROBES = 48
"""A damaged read skips ahead 1, 2, 4, ... rowids, at most this many times (past 2**47: the end of the table)."""


@dataclass
class Salvage:
    """What a copy kept and lost, table by table."""

    copied: dict[str, int] = field(default_factory=dict)
    damaged: dict[str, int] = field(default_factory=dict)
    """Tables where reads failed: how many damaged spots were skipped."""
    schema_read: bool = True
    header_fixed: bool = False


def check(path: Path, quick: bool = False) -> str:
    """``ok``, or what SQLite's integrity check (or opening the file) says is wrong, in one line. ``quick``: its
    quick check (every page read, indexes not compared with their tables: about half the time,
    docs/reliability.md)."""
    pragma = "quick_check" if quick else "integrity_check"
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as db:
            rows = [str(r[0]) for r in db.execute(f"PRAGMA {pragma}(20)")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    if rows == ["ok"]:
        return "ok"
    return f"{len(rows)} problems, first: {rows[0]}" if len(rows) > 1 else rows[0]


def header_ok(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(MAGIC)) == MAGIC


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=10, isolation_level=None)
    try:
        yield db
    finally:
        db.close()


def _schema(path: Path) -> list[tuple[str, str, str]] | None:
    """(type, name, sql) of every table, index and trigger, or None when the schema does not read."""
    try:
        with _opened(path) as db:
            rows = db.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
    except sqlite3.DatabaseError:
        return None
    return [(str(t), str(n), str(s)) for t, n, s in rows if not str(n).startswith("sqlite_")]


def _fix_header(path: Path) -> list[tuple[str, str, str]] | None:
    """Write the header's fixed fields into ``path`` (a copy) until its schema reads; the schema, or None."""
    with open(path, "r+b") as fh:
        fh.write(MAGIC)
    if (found := _schema(path)) is not None:
        return found
    for size in PAGE_SIZES:
        with open(path, "r+b") as fh:
            fh.seek(16)
            # page size (65536 is written as 1), write/read versions (2: WAL), no reserved bytes, 64/32/32
            fh.write((1 if size == 65536 else size).to_bytes(2, "big") + bytes([2, 2, 0, 64, 32, 32]))
        if (found := _schema(path)) is not None:
            return found
    return None


def _rows_after(db: sqlite3.Connection, table: str, after: int, limit: int) -> list[tuple[object, ...]]:
    query = f'SELECT rowid, * FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT ?'
    return db.execute(query, (after, limit)).fetchall()


def _readable(db: sqlite3.Connection, table: str, after: int) -> list[tuple[object, ...]] | None:
    """The first row after ``after`` ([] at the end of the table), or None when reading it hits damage."""
    try:
        return _rows_after(db, table, after, 1)
    except sqlite3.DatabaseError:
        return None


def _past_damage(db: sqlite3.Connection, table: str, after: int) -> list[tuple[object, ...]]:
    """The first row past the damage a read after ``after`` hit ([]: none reads): probed 1, 2, 4, ... rowids
    ahead, then narrowed down by halves between the last probe that failed and the one that read."""
    failed = after
    for k in range(MAX_PROBES):
        start = after + 2**k - 1
        found = _readable(db, table, start)
        if found is None:
            failed = start
            continue
        while start - failed > 1:
            mid = (start + failed) // 2
            nearer = _readable(db, table, mid)
            if nearer is None:
                failed = mid
            else:
                start, found = mid, nearer
        return found
    return []


def _copy_table(old: sqlite3.Connection, new: sqlite3.Connection, table: str) -> tuple[int, int]:
    """Every row of ``table`` that reads, rowids kept; returns (rows copied, damaged spots skipped)."""
    columns = [str(r[1]) for r in old.execute(f'PRAGMA table_info("{table}")')]
    marks = ",".join("?" * (len(columns) + 1))
    names = ",".join(f'"{c}"' for c in columns)
    insert = f'INSERT OR IGNORE INTO "{table}"(rowid, {names}) VALUES({marks})'
    after, copied, skipped, limit = -(2**63), 0, 0, BATCH
    while True:
        try:
            rows = _rows_after(old, table, after, limit)
        except sqlite3.DatabaseError:
            if limit > 1:  # the damage is somewhere in this batch: up to it one row at a time
                limit = 1
                continue
            skipped += 1
            rows, limit = _past_damage(old, table, after), BATCH
        if not rows:
            return copied, skipped
        new.executemany(insert, rows)
        copied += len(rows)
        after = int(rows[-1][0])  # type: ignore[call-overload]


def salvage(damaged: Path, out: Path) -> Salvage:
    """Copy what reads of ``damaged`` (with its ``-wal``) into a new database at ``out``; ``damaged`` is read
    from a copy and never changed."""
    result = Salvage()
    work = out.with_name(out.name + ".source")
    shutil.copyfile(damaged, work)
    wal = damaged.with_name(damaged.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, work.with_name(work.name + "-wal"))
    try:
        schema = _schema(work) if header_ok(work) else None
        if schema is None:
            schema = _fix_header(work)
            result.header_fixed = schema is not None
        if schema is None:
            result.schema_read = False
            schema = []
        out.unlink(missing_ok=True)
        with _opened(out) as new, _opened(work) as old:
            new.execute("PRAGMA foreign_keys=OFF")
            for kind, _name, sql in schema:
                if kind == "table":
                    new.execute(sql)
            new.execute("BEGIN")
            for kind, name, _sql in schema:
                if kind == "table":
                    copied, skipped = _copy_table(old, new, name)
                    result.copied[name] = copied
                    if skipped:
                        result.damaged[name] = skipped
            _keep_counters(old, new)
            new.execute("COMMIT")
            for kind, _name, sql in schema:
                if kind in ("index", "trigger"):
                    with contextlib.suppress(sqlite3.DatabaseError):  # an index over a column that no longer is
                        new.execute(sql)
            _drop_orphans(new)
    finally:
        for leftover in (work, work.with_name(work.name + "-wal"), work.with_name(work.name + "-shm")):
            leftover.unlink(missing_ok=True)
    return result


def _keep_counters(old: sqlite3.Connection, new: sqlite3.Connection) -> None:
    """The AUTOINCREMENT counters: the old file's where they read, and at least each table's largest id."""
    try:
        has = new.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone()
    except sqlite3.DatabaseError:
        return
    if not has:
        return
    counters: dict[str, int] = {}
    with contextlib.suppress(sqlite3.DatabaseError):
        counters = {str(n): int(s) for n, s in old.execute("SELECT name, seq FROM sqlite_sequence")}
    tables = [str(r[0]) for r in new.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        if table.startswith("sqlite_"):
            continue
        largest = new.execute(f'SELECT COALESCE(MAX(rowid), 0) FROM "{table}"').fetchone()[0]
        seq = max(counters.get(table, 0), int(largest))
        if seq:
            new.execute("DELETE FROM sqlite_sequence WHERE name = ?", (table,))
            new.execute("INSERT INTO sqlite_sequence(name, seq) VALUES(?, ?)", (table, seq))


def _drop_orphans(db: sqlite3.Connection) -> None:
    """Rows whose parent row was lost (a chunk of a document that did not read), until none is left."""
    for _ in range(8):  # a lost folder orphans documents, whose removal orphans chunks
        found = db.execute("PRAGMA foreign_key_check").fetchall()
        if not found:
            return
        for table, rowid, _parent, _fk in found:
            db.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
