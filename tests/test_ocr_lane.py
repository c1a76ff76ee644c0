"""Image files, read with OCR, keep to a lane of their own in the parse window: while text files wait, one image at a
time is parsed, so images that come first in a folder's order no longer hold the whole parser pool while its text
files wait (walk2: two images in a row held both parsers for a minute; docs/benchmarks/ingest.md), and every image
is still parsed, in its turn.

A real kernel (watcher, the default pool of two parsers, indexer) whose parsers hold an image's parse while the
test's flag exists (``FOLDERMIND_TEST_PARSER_HOLD``: no CPU used, standing for a minute of OCR), and the real
SQLite index for the lane's query. The folder's own files are recorded before its subfolder's, so its two images
come before the text files in its order.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from foldermind.workers.framework.faults import PARSER_HOLD
from foldermind.workers.indexer.storage.database import SCHEMA
from foldermind.workers.indexer.storage.store import Store
from tests.config import merge
from tests.filemakers import make_image
from tests.helpers import FAST_RESTART, RunningKernel, cli, only_workers, wait_for, wait_found
from tests.test_ingest import documents

HOLDING = "holding a parse until the test lets it go"
IMAGES = {"board.png": "The whiteboard lists the okapi budget.", "poster.png": "The poster shows the okapi parade."}
NOTES = {f"note{i}.txt" for i in range(6)}


def holds(home: Path) -> int:
    """How many parses the parsers have held so far (each says so in its log)."""
    return sum(log.read_text(errors="replace").count(HOLDING) for log in (home / "logs").glob("parser*.log"))


def test_text_files_are_indexed_while_an_image_holds_a_parser_and_the_images_after_them(home_dir: Path) -> None:
    docs = home_dir / "docs"
    (docs / "notes").mkdir(parents=True)
    for name, line in IMAGES.items():
        make_image(docs / name, [line], dpi=150, inches=(6, 2))
    for name in NOTES:
        (docs / "notes" / name).write_text(f"{name}: the quokka census counted the island's families.\n")
    flag = home_dir / "ocr-hold"
    flag.write_text("hold")
    parser = {"env": {PARSER_HOLD: f".png:{flag}"}}
    config = merge(FAST_RESTART, only_workers("watcher", "parser", "indexer"), {"workers": {"parser": parser}})
    k = RunningKernel(home_dir, config).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        wait_for(lambda: holds(home_dir) >= 1, 60, 0.1, "the first image's parse held")
        # main: both parsers held an image each, and the text files waited for them.
        wait_found(k, "quokka census", NOTES, 120, "every text file found")
        state = documents(home_dir)
        assert {n: state[n]["status"] for n in IMAGES} == {"board.png": "pending", "poster.png": "pending"}, (
            "an image was parsed before the text files were found: the held one's hold ran out (30 s), or no lane"
        )
        assert max(state[n]["id"] for n in IMAGES) < min(state[n]["id"] for n in NOTES), "images not first in order"

        flag.unlink()  # the OCR is done: both images are read all the same
        wait_found(k, "okapi", set(IMAGES), 180, "both images read with OCR and found")
    finally:
        flag.unlink(missing_ok=True)
        k.stop()


def test_each_lane_s_next_files_are_read_from_an_index_and_an_older_database_gets_its_lanes(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    folder = store.folders.add(str(tmp_path / "docs"), "docs", "")
    names = ["a.txt", "b.PNG", "c.pdf", "d.jpeg", "e.rst"]
    with store.tx() as db:
        for name in names:
            store.documents.mark_pending(db, folder.id, str(tmp_path / "docs" / name), 1, 1)
    lanes = {ocr: [Path(d.path).name for d in store.documents.pending(10, ocr=ocr)] for ocr in (False, True)}
    assert lanes == {False: ["a.txt", "c.pdf", "e.rst"], True: ["b.PNG", "d.jpeg"]}
    assert [Path(d.path).name for d in store.documents.pending(10)] == names
    plan = " ".join(
        str(r[-1])
        for r in store.db.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM documents WHERE status = 'pending' AND ocr = 1 ORDER BY id LIMIT 4"
        )
    )
    assert "documents_pending_lane" in plan and "SCAN documents" not in plan, plan

    with store.tx() as db:  # a move to another suffix changes its lane
        assert store.documents.move(db, str(tmp_path / "docs" / "a.txt"), str(tmp_path / "docs" / "a.png"), folder.id)
    assert [Path(d.path).name for d in store.documents.pending(10, ocr=True)] == ["a.png", "b.PNG", "d.jpeg"]

    # A database made before the lanes (the schema without the column): it is added, and its images marked, at open.
    old = tmp_path / "old.sqlite"
    raw = sqlite3.connect(old)
    raw.executescript("\n".join(line for line in SCHEMA.splitlines() if not line.lstrip().startswith("ocr ")))
    raw.execute("INSERT INTO folders(id, name, path, added_at) VALUES ('f', 'docs', ?, 0)", (str(tmp_path / "docs"),))
    raw.executemany(
        "INSERT INTO documents(folder_id, path, original_path, updated_at) VALUES ('f', ?, ?, 0)",
        [(str(tmp_path / "docs" / n),) * 2 for n in ("a.png", "b.PNG", "c.pdf", "d.jpeg", "e.rst")],
    )
    raw.commit()
    raw.close()
    reopened = Store(old)
    assert [Path(d.path).name for d in reopened.documents.pending(10, ocr=True)] == ["a.png", "b.PNG", "d.jpeg"]
    assert [Path(d.path).name for d in reopened.documents.pending(10, ocr=False)] == ["c.pdf", "e.rst"]
