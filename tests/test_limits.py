"""Limits that say what they are: text past the bus's message limit goes in parts, zip containers are capped by
the bytes their parts really inflate to, and the parser pool's memory budget is shared by its members.

The kernel tests run real parsers (and, for the text file, the watcher and the indexer) in homes made small on
purpose: a bus of 1 MiB, so a text file of 1.5 MB is past its limit, and a pool budget of 2048 MiB over two
parsers, so a container may inflate to 64 MB.
"""

from __future__ import annotations

import io
import itertools
import json
import sqlite3
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ChunkInfo, DescribeReply, DescribeRequest, ParseReply, ParseRequest
from foldermind.protocol.runtime.config import ConfigError, load
from foldermind.workers.parser import parts
from foldermind.workers.parser.chunker import MAX_CHUNK_CHARS, chunk, load_tokenizer
from foldermind.workers.parser.formats import ParseError, container, parse_file, parse_txt
from tests.config import Config, merge, render
from tests.filemakers import make_docx, make_epub, make_odt, make_pptx, make_xlsx
from tests.helpers import (
    FAST_RESTART,
    ONE_PARSER,
    RunningKernel,
    cli,
    only_workers,
    remove_tree,
    short_tmpdir,
    wait_for,
)
from tests.test_ingest import documents

MB = 1024 * 1024


def numbered_text(megabytes: float) -> str:
    """Words on one line, about ``megabytes`` MB of them: numbered, so they compress like text, not like zeros."""
    words: list[str] = []
    size, i = 0, 0
    while size < megabytes * MB:
        word = f"swell{i} of the tide"
        words.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(words)


# ------------------------------------------------------------------------------------------------
# In process: the parts, the chunker's character bound, the inflation cap of every zip format


def chunk_of(ordinal: int, text: str) -> ChunkInfo:
    return ChunkInfo(
        ordinal=ordinal,
        text=text,
        tokens=1,
        heading=None,
        page_start=None,
        page_end=None,
        line_start=1,
        line_end=1,
        char_start=0,
        char_end=len(text),
    )


def test_chunks_past_the_bus_limit_go_in_parts_that_each_fit_it_in_order() -> None:
    chunks = [chunk_of(i, f"word{i} " * 150) for i in range(2000)]  # ~2.3 MB of text
    cut = parts.split(chunks, MB)
    assert len(cut) > 2
    assert [c["ordinal"] for part in cut for c in part] == list(range(2000))
    assert all(sum(parts.chunk_bytes(c) for c in part) <= parts.REPLY_HEADROOM * MB for part in cut)
    assert parts.split([], MB) == [[]]  # a file without text: one reply, empty


def test_text_without_a_space_is_cut_into_chunks_of_bounded_characters_at_a_hard_length() -> None:
    text = "x" * 300_000 + " tail end"  # one word the tokenizer cannot split, then two it can
    doc = parse_txt(text.encode())
    chunks = chunk(doc.segments, load_tokenizer())
    assert all(len(c["text"]) <= MAX_CHUNK_CHARS for c in chunks)
    assert all(doc.text[c["char_start"] : c["char_end"]] == c["text"] for c in chunks)
    assert_covered([(c["char_start"], c["char_end"]) for c in chunks], len(text.rstrip()))
    assert len(chunks) >= 300_000 // MAX_CHUNK_CHARS


def assert_covered(spans: list[tuple[int, int]], length: int) -> None:
    """The spans, in order, leave no gap in ``[0, length)`` but between words (they may overlap)."""
    assert spans[0][0] == 0 and spans[-1][1] == length
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start <= end + 1, f"a gap from {end} to {start}"


def padded(path: Path, megabytes: float) -> Path:
    """The zip at ``path`` rewritten with its largest part (its content) followed by an XML comment of about
    ``megabytes`` MB of numbered words: well-formed, and it deflates like text (far below the zip-bomb ratio)."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        data = {info.filename: zf.read(info) for info in infos}
    largest = max(infos, key=lambda info: info.file_size).filename
    data[largest] += f"<!-- {numbered_text(megabytes)} -->".encode()
    out = path.with_name("padded-" + path.name)
    with zipfile.ZipFile(out, "w") as zf:
        for info in infos:
            zf.writestr(info, data[info.filename])  # each part compressed as it was
    return out


@pytest.fixture
def two_mb_inflation() -> Iterator[None]:
    """This process's inflation limit at 2 MB (what a parser capped at 32 MiB would have), then back."""
    before = container.inflate_limit_mb()
    assert container.limit_inflation(32) == 2
    yield
    container._inflate_mb = before


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.docx", "DOCX"), ("a.pptx", "PPTX"), ("a.xlsx", "XLSX"), ("a.odt", "OpenDocument"), ("a.epub", "EPUB")],
)
def test_every_zip_format_whose_parts_inflate_past_the_limit_is_refused_and_says_so(
    tmp_path: Path, name: str, kind: str, two_mb_inflation: None
) -> None:
    path = tmp_path / name
    {
        "a.docx": lambda: make_docx(path, "Tides", [("Swell", ["The tide comes in."])], []),
        "a.pptx": lambda: make_pptx(path, "tidal"),
        "a.xlsx": lambda: make_xlsx(path, "tidal"),
        "a.odt": lambda: make_odt(path, "tidal"),
        "a.epub": lambda: make_epub(path, "tidal"),
    }[name]()
    assert parse_file(path, 50 * MB).segments  # the file itself parses
    assert parse_file(padded(path, 0.5), 50 * MB).segments  # and so it does grown, under the limit
    big = padded(path, 2.5)
    assert max(i.file_size / i.compress_size for i in zipfile.ZipFile(big).infolist() if i.compress_size) < 200
    with pytest.raises(ParseError) as refused:
        parse_file(big, 50 * MB)
    assert (refused.value.code, refused.value.message) == (ErrorCode.FILE_TOO_LARGE, f"{kind} inflates past 2 MB")


def test_the_parser_memory_cap_is_the_pool_budget_shared_by_the_pool(tmp_path: Path) -> None:
    def config(parts: Config) -> int:
        toml = tmp_path / "supervisor.toml"
        toml.write_text(render(parts))
        cfg = load(toml)
        assert cfg.ingest_env()["FOLDERMIND_PARSER_MEMORY_MB"] == str(cfg.parser_memory_mb())
        return cfg.parser_memory_mb()

    assert config({}) == 3072 // 2  # the default budget over the default pool of two
    assert config({"ingest": {"parser_pool_memory_mb": 4096}, "workers": {"parser": {"count": 4}}}) == 1024
    assert config({"ingest": {"parser_pool_memory_mb": 4096}, "workers": {"parser": {"count": 1}}}) == 4096
    assert config({"ingest": {"parser_pool_memory_mb": 0}}) == 0  # no cap
    # A second table running the parser module shares the same budget.
    assert config({"workers": {"parser2": {"module": "foldermind.workers.parser", "count": 2}}}) == 3072 // 4
    with pytest.raises(ConfigError, match=r"leaves each parser 256 MiB; a parser needs at least 512"):
        config({"ingest": {"parser_pool_memory_mb": 2048}, "workers": {"parser": {"count": 8}}})


# ------------------------------------------------------------------------------------------------
# Real processes: a text file past the bus limit through the whole pipeline


def stored_chunks(home: Path, name: str) -> list[tuple[str, int, int]]:
    """(text, char_start, char_end) of a document's chunks in SQLite, in order."""
    db = sqlite3.connect(home / "data" / "index.sqlite")
    rows = db.execute(
        "SELECT c.text, c.char_start, c.char_end FROM chunks c JOIN documents d ON d.id = c.doc_id"
        " WHERE d.path LIKE ? ORDER BY c.ordinal",
        (f"%/{name}",),
    ).fetchall()
    db.close()
    return [(r[0], r[1], r[2]) for r in rows]


def test_a_one_line_text_file_past_the_bus_limit_is_indexed_in_parts_and_its_last_words_found(
    home_dir: Path,
) -> None:
    docs = home_dir / "long"
    docs.mkdir()
    # Under 0.9 of the 1 MiB bus as a file (its bytes go to the parser in one request), over it as chunks.
    line = numbered_text(0.85) + " the quetzalcoatlus glides " + numbered_text(0.001)  # no line break at all
    (docs / "one-line.txt").write_text(line)
    (docs / "no-spaces.txt").write_text("tide" * 220_000)  # 0.88 MB, one word: cut at a hard length
    config = merge(
        FAST_RESTART, only_workers("watcher", "parser", "indexer"), ONE_PARSER, {"bus": {"max_message_mb": 1}}
    )
    k = RunningKernel(home_dir, config).start()
    try:
        cli(home_dir, "folders", "add", str(docs))
        done = wait_for(
            lambda: (
                (d := documents(home_dir)).keys() == {"one-line.txt", "no-spaces.txt"}
                and all(r["status"] != "pending" for r in d.values())
                and d
            ),
            120,
            0.3,
            "both files parsed",
        )
        assert {n: (r["status"], r["error"]) for n, r in done.items()} == {
            "one-line.txt": ("indexed", None),
            "no-spaces.txt": ("indexed", None),
        }
        chunks = stored_chunks(home_dir, "one-line.txt")
        log = "".join(p.read_text() for p in (home_dir / "logs").glob("parser*.log"))
        assert " sent in 2 parts" in log or " sent in 3 parts" in log, log[-2000:]  # more than one message carries
        assert_covered([(a, b) for _, a, b in chunks], len(line))  # every part arrived, in order
        assert any("quetzalcoatlus" in t for t, _, _ in chunks[-3:])
        unsplit = stored_chunks(home_dir, "no-spaces.txt")
        assert all(len(t) <= MAX_CHUNK_CHARS for t, _, _ in unsplit)
        assert_covered([(a, b) for _, a, b in unsplit], 880_000)

        def found() -> list[dict[str, object]]:
            out = cli(home_dir, "search", "quetzalcoatlus", "--mode", "keyword", "--json").stdout
            return list(json.loads(out)["results"])

        # Polled over the bus (a CLI process is ~0.75 CPU-s), then asked of `foldermind search` once.
        wait_for(lambda: k.search("quetzalcoatlus")["results"], 60, 0.1, "the word near the end found")
        hits = found()
        assert {Path(str(h["file_path"])).name for h in hits} == {"one-line.txt"}
    finally:
        k.stop()


# ------------------------------------------------------------------------------------------------
# Real processes: the pool's budget and a DOCX whose XML inflates past its share

POOL_BUDGET_MB = 2048
POOL = {
    "ingest": {"parser_pool_memory_mb": POOL_BUDGET_MB},
    "workers": {"parser": {"count": 2, "on_demand": False}},
}


@pytest.fixture(scope="module")
def pool() -> Iterator[RunningKernel]:
    root = short_tmpdir()
    k = RunningKernel(root, merge(FAST_RESTART, only_workers("parser"), POOL))
    try:
        k.start()
        k.wait_all_running(60)
        yield k
    finally:
        k.stop()
        remove_tree(root)


def address_space_limit(pid: int) -> int:
    """The soft RLIMIT_AS of a running process, from /proc (what the kernel enforces)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max address space"):
            return int(line.split()[3])
    raise AssertionError("no address-space line")


def test_each_parser_of_the_pool_is_capped_at_its_share_of_the_budget(pool: RunningKernel) -> None:
    client = pool.client()
    for name in ("parser#1", "parser#2"):
        details = client.request(name, DescribeRequest(), DescribeReply, timeout=10).body.details
        assert details["memory_limit_mb"] == POOL_BUDGET_MB // 2
        assert details["inflate_limit_mb"] == POOL_BUDGET_MB // 2 // 16
        pid = pool.pids()[name]
        assert pid is not None and address_space_limit(pid) == POOL_BUDGET_MB // 2 * MB


def big_docx(path: Path, megabytes: int) -> Path:
    """A DOCX written by python-docx whose document.xml then holds ``megabytes`` MB of short paragraphs: an
    honest file (it deflates ~30 times, nothing like a bomb) that python-docx would hold as a tree of ~10 times
    its XML."""
    import docx

    base = io.BytesIO()
    docx.Document().save(base)
    with zipfile.ZipFile(base) as original, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in original.infolist():
            if info.filename != "word/document.xml":
                out.writestr(info, original.read(info))
                continue
            head, rest = original.read(info).decode().split("<w:body>")
            with out.open("word/document.xml", "w", force_zip64=True) as part:
                part.write((head + "<w:body>").encode())
                written, i = 0, 0
                while written < megabytes * MB:
                    block = "".join(
                        f"<w:p><w:r><w:t>Paragraph {j} of the long report on tides.</w:t></w:r></w:p>"
                        for j in range(i, i + 10_000)
                    ).encode()
                    part.write(block)
                    written += len(block)
                    i += 10_000
                part.write(("</w:body>" + rest.split("</w:body>")[1]).encode())
    return path


def test_a_docx_whose_xml_inflates_past_the_cap_fails_at_once_and_its_parser_stays_up(
    pool: RunningKernel, tmp_path: Path
) -> None:
    limit = POOL_BUDGET_MB // 2 // 16
    path = big_docx(tmp_path / "report.docx", 2 * limit)
    info = zipfile.ZipFile(path).getinfo("word/document.xml")
    assert info.file_size > limit * MB and info.file_size / info.compress_size < 200  # passes the ratio check
    before = pool.pids()
    client = pool.client()
    # To one parser by name, so "it stays up" is about the parser that read the file.
    with pytest.raises(JobError) as refused:
        client.request(
            "parser#1", ParseRequest(path=str(path), content=True), ParseReply, [path.read_bytes()], timeout=60
        )
    assert (refused.value.code, refused.value.message) == (ErrorCode.FILE_TOO_LARGE, f"DOCX inflates past {limit} MB")
    # Streamed: the parser never held the XML, let alone a tree of it (its whole peak RSS is less).
    pid = before["parser#1"]
    assert pid is not None
    peak_kib = int(Path(f"/proc/{pid}/status").read_text().split("VmHWM:")[1].split()[0])
    assert peak_kib * 1024 < info.file_size, f"peak RSS {peak_kib // 1024} MiB"
    # The same parser, still up, reads the next file.
    small = make_docx(tmp_path / "small.docx", "Tides", [("Swell", ["The quetzalcoatlus glides."])], [])
    ok = client.request(
        "parser#1", ParseRequest(path=str(small), content=True), ParseReply, [small.read_bytes()], timeout=30
    ).body
    assert any("quetzalcoatlus" in c["text"] for c in ok.chunks)
    assert pool.pids() == before and psutil.pid_exists(pid)
    assert pool.worker("parser#1")["restarts"] == 0


OUT_OF_MEMORY = """
import os, sys
from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import Envelope, ParseRequest
from foldermind.workers.framework.base import Request, WorkerContext
from foldermind.workers.parser import ParserWorker, spare_address_space
from foldermind.workers.parser.formats import container

spare_address_space()
os.environ["FOLDERMIND_PARSER_MEMORY_MB"] = "1024"
worker = ParserWorker(WorkerContext(name="parser#9", service="parser", bus_endpoint="ipc:///nowhere"))
worker.setup()
container._inflate_mb = 1024  # the scan let through: python-docx itself meets the cap
try:
    with open(sys.argv[1], "rb") as fh:  # the bytes go with the request, as the indexer sends them
        content = fh.read()
    worker.on_parse(Request(Envelope(kind=ParseRequest.KIND), ParseRequest(path=sys.argv[1], content=True), [content]))
except JobError as exc:
    print(exc.code, exc.message)
"""


def test_a_parser_that_meets_its_memory_cap_says_so_and_names_the_cap(tmp_path: Path) -> None:
    """In a process of its own, as a parser is (the cap cannot be lifted again): a DOCX that python-docx would
    hold as a tree of ~1.4 GiB, read under a 1 GiB cap with the inflation limit set out of the way. lxml fails
    to allocate and says only "unknown error"; the answer is out of memory, with the cap."""
    import subprocess
    import sys

    path = big_docx(tmp_path / "report.docx", 150)
    out = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY, str(path)], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == (
        "parse_failed out of memory: the file needs more than this parser's 1024 MiB"
        " (its share of [ingest] parser_pool_memory_mb)"
    ), out.stderr[-2000:]
