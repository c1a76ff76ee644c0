"""The single-box ceiling's report (:mod:`tests.bench.ceiling`): the table, the plot (an SVG drawn here, no
plotting library) and where the measured curve says one machine stops, computed from the figures.

Extrapolations are straight lines through the two largest sizes measured (memory and disk grow linearly
with the chunks; search latency is fitted the same way, which overstates HNSW's logarithmic part and
understates nothing measured): they say where to look, not what a run would give.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tests.bench.markdown import ms, para, put_section, summary_overview, table
from tests.bench.search import AIM_MEDIAN_MS, AIM_P95_MS
from tests.bench.transports import REPO

REPORT = REPO / "docs" / "benchmarks" / "ceiling.md"
PLOT = REPORT.with_suffix(".svg")
OVERVIEW = REPO / "docs" / "benchmarks" / "README.md"
HEADING = "Single-box ceiling"
NIGHT_H = 8.0  # an initial indexing that runs longer than a night is where a second machine pays
RAM_SHARE = 0.5  # the indexer may hold at most this share of RAM: the OS caches Tantivy and SQLite in the rest
DIM = 384  # all-MiniLM-L6-v2's vectors
GIB = 2**30
MIB = 2**20


def _steps(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in state.get("steps", []) if "latency" in s]


def _chunks(s: dict[str, Any]) -> int:
    return int(s["status"]["chunks"])


def _disk(s: dict[str, Any]) -> int:
    return int(sum(s["disk"].values()))


def _rss_total(s: dict[str, Any]) -> int:
    return int(sum(p["rss"] for p in s["rss"].values()))


def _slope(steps: list[dict[str, Any]], y: Any) -> tuple[float, float]:
    """(per chunk, at zero) of the line through the two largest sizes."""
    a, b = steps[-2], steps[-1]
    dx = _chunks(b) - _chunks(a)
    per = (y(b) - y(a)) / dx if dx else 0.0
    return per, y(b) - per * _chunks(b)


def _best_random(n: float) -> float:
    """The expected best cosine of ``n`` random unit vectors with a fixed one (the Gaussian maximum)."""
    return math.sqrt(2 * math.log(n)) / math.sqrt(DIM)


def _gib(x: float) -> str:
    return f"{x / GIB:.2f}"


def _n(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.1f}M"
    return f"{x / 1e3:.0f}k" if x >= 1e3 else f"{x:.0f}"


# --------------------------------------------------------------------------------------------
# the tables


def summary_rows(steps: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for s in steps:
        lat, b = s["latency"], s.get("build")
        build = f"{b['total_s']:,.0f}" if b else "-"
        rows.append(
            [
                f"{_chunks(s):,}",
                build,
                f"{_gib(s['disk']['sqlite'])} / {_gib(s['disk']['tantivy'])} / {_gib(s['disk']['usearch'])}",
                f"{s['rss']['indexer']['rss'] / MIB:,.0f} ({s['rss']['indexer']['peak'] / MIB:,.0f})",
                f"{_rss_total(s) / MIB:,.0f}",
                f"{s['running_s']:.1f} / {s['first_search_s']:.1f}",
                f"{ms(lat['keyword']['median'])} / {ms(lat['keyword']['p95'])}",
                f"{ms(lat['semantic']['median'])} / {ms(lat['semantic']['p95'])}",
                f"{ms(lat['hybrid']['median'])} / {ms(lat['hybrid']['p95'])}",
                f"{s['ndcg10']['hybrid']:.4f}",
            ]
        )
    return rows


SUMMARY_HEADER = [
    "chunks",
    "build step s",
    "disk GiB: SQLite / Tantivy / usearch",
    "indexer RSS MiB (peak)",
    "all RSS MiB",
    "start s: running / 1st search",
    "keyword ms med / p95",
    "semantic ms med / p95",
    "hybrid ms med / p95",
    "nDCG@10 hybrid",
]


def detail_rows(steps: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for s in steps:
        st = s["stages"]
        stages = ", ".join(f"{k} {ms(st[k])}" for k in ("embed", "keyword", "vector", "fuse", "rows") if k in st)
        rss = ", ".join(f"{k} {v['rss'] / MIB:,.0f}" for k, v in sorted(s["rss"].items()))
        nd = s["ndcg10"]
        share = s.get("synthetic_in_top10")
        shares = " / ".join(f"{share[m]:.0%}" for m in ("keyword", "semantic", "hybrid")) if share else "-"
        rows.append(
            [
                f"{_chunks(s):,}",
                f"{s['synthetic_docs']:,} + {s['status']['files'] - s['synthetic_docs']:,}",
                f"{nd['keyword']:.4f} / {nd['semantic']:.4f} / {nd['hybrid']:.4f}",
                shares,
                f"{ms(st.get('query_ms', math.nan))}: {stages}",
                rss,
                f"{s['tantivy_segments']}",
                f"{s['query_model_s']:.1f}",
                f"{s['load_before'][0]:.1f} / {s['load_after'][0]:.1f}"
                + (f"; CPU {s['quiet_cpu_percent']:.0f}% busy as the rounds began" if "quiet_cpu_percent" in s else ""),
            ]
        )
    return rows


def build_rows(steps: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for s in steps:
        b = s.get("build")
        if not b:
            continue
        rate = b["chunks"] / b["total_s"] if b["total_s"] else 0.0
        rows.append(
            [
                f"{_chunks(s):,}",
                f"+{b['chunks']:,} in {b['docs']:,} files",
                f"{b['text_s']:,.0f}",
                f"{b['sqlite_s']:,.0f}",
                f"{b['tantivy_s']:,.0f}",
                f"{b['usearch_s']:,.0f} ({b['chunks'] / b['usearch_s']:,.0f}/s)" if b["usearch_s"] else "-",
                f"{b['total_s']:,.0f} ({rate:,.0f} chunks/s)",
                "; ".join(b.get("notes") or []) or "-",
            ]
        )
    return rows


# --------------------------------------------------------------------------------------------
# where one box stops


def advice(state: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    """Paragraphs computed from the figures: per-chunk costs, the sizes where RAM, latency and ingestion
    time run out, and what to move to."""
    if len(steps) < 2:
        return para("Fewer than two sizes measured: no slope to extrapolate from yet.")
    last = steps[-1]
    ram = float(state.get("ram_bytes") or 0) or 24 * GIB
    idx_per, idx_zero = _slope(steps, lambda s: s["rss"]["indexer"]["rss"])
    disk_per, _ = _slope(steps, _disk)
    us_per, _ = _slope(steps, lambda s: s["disk"]["usearch"])
    sql_per, _ = _slope(steps, lambda s: s["disk"]["sqlite"])
    text_per = last["corpus_bytes"] / last["synthetic_chunks"] if last["synthetic_chunks"] else 0.0
    med_per, med_zero = _slope(steps, lambda s: s["latency"]["hybrid"]["median"])
    own_per, _ = _slope(steps, lambda s: s["stages"]["query_ms"])
    ram_n = (RAM_SHARE * ram - idx_zero) / idx_per if idx_per > 0 else math.inf
    med_n = (AIM_MEDIAN_MS - med_zero) / med_per if med_per > 0 else math.inf
    dim = DIM
    lines: list[str] = []
    text = (
        f"Per chunk, between the two largest sizes: the indexer's RSS grows {idx_per:,.0f} bytes, the disk"
        f" {disk_per:,.0f} bytes ({us_per:,.0f} of them the usearch file: {dim} float32s are {dim * 4:,} bytes,"
        " the rest is the HNSW graph, ~2 x 16 neighbour slots at the base layer, and the key; SQLite"
        f" {sql_per:,.0f} for ~{text_per:,.0f} bytes of text and a {dim * 4:,}-byte vector blob a row: a row that"
        " big fills most of a 4 KiB page by itself). The usearch index is"
        " loaded whole into the indexer's memory, so RAM, not disk, is what runs out first: with the indexer held"
        f" to {RAM_SHARE:.0%} of this machine's {ram / GIB:.0f} GiB (the OS page cache serves Tantivy and SQLite"
        f" from the rest), the line says about {_n(ram_n)} chunks on one box."
    )
    if math.isfinite(med_n) and med_n > 0:
        where = "beyond the sizes measured" if med_n > _chunks(last) else "within the sizes measured"
        text += (
            f" Hybrid search over MCP HTTP grows {med_per * 1e6:.1f} ms a million chunks at the median (the"
            f" indexer's own time {own_per * 1e6:.1f} ms of it): at that slope it reaches the {AIM_MEDIAN_MS:g} ms"
            f" median aim near {_n(med_n)} chunks ({where}; a straight line over HNSW's logarithmic search is"
            " pessimistic). The p95 column on this shared machine measures the other sessions' bursts as much"
            f" as the index: the aim for it is {AIM_P95_MS:g} ms."
        )
    lines += [*para(text), ""]
    real = state.get("scifact") or {}
    if real.get("seconds"):
        rate = real["chunks"] / real["seconds"]
        night = rate * NIGHT_H * 3600
        ingestion = (
            f"Ingestion, not search, is what a user meets first. The real subset ({real['chunks']:,} chunks)"
            f" was parsed and embedded at {rate:.1f} chunks/s on this shared machine, so {_n(_chunks(last))}"
            f" chunks would take {_chunks(last) / rate / 3600:,.1f} h, and more than a night ({NIGHT_H:g} h)"
            f" beyond about {_n(night)} chunks. That is where a second machine pays first: a remote embedder"
            " (`foldermind worker run embedder --connect`, a GPU box or a second desktop) joins the pool and takes"
            " its share by measured speed, while search stays on the laptop. The storage writes themselves are"
            " minor beside it: the build column above is all of SQLite, Tantivy and usearch for those chunks."
        )
        lines += [*para(ingestion), ""]
    lines += para(
        "When to move search off the box, and to what (on paper). Past the RAM line above, or when several"
        " users need the index at once, one process holding one HNSW graph and one Tantivy writer is the limit:"
        " usearch has no sharding or replicas, and Tantivy takes one writer per index (merges and commits are"
        " serialised in the indexer). The engine to move to is OpenSearch: it keeps both halves of hybrid"
        " search (BM25 and k-NN over HNSW, fused by its hybrid query's score normalisation, as foldermind's"
        " weighted fusion does), shards the vectors across nodes so each node's RAM holds only its share of"
        f" N x ({dim * 4:,} bytes + graph links), replicates for failover, and can store vectors as bytes or"
        " with product quantisation to cut that RAM 4x or more. Quickwit is the wrong fit here: it is Tantivy"
        " on object storage, excellent for append-only keyword search over logs at very large scale, but it has"
        " no vector search, so semantic and hybrid search would be lost; it suits only a keyword-only archive."
        " Until those limits, one box is simpler and faster (no network hop per search, no cluster to run)."
    )
    return lines


# --------------------------------------------------------------------------------------------
# the plot


def _poly(points: list[tuple[float, float]], color: str, dash: str = "") -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in points)
    return f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{extra}/>{dots}'


def _tick_step(top: float) -> float:
    """A round step (1, 2, 2.5 or 5 x 10^k) of which four reach at least ``top``."""
    raw = max(top, 1e-9) / 4
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)


def _panel(
    x0: int, title: str, unit: str, xs: list[float], series: list[tuple[str, str, str, list[float]]]
) -> list[str]:
    """One panel: chunks (log scale) across, ``series`` (label, color, dash, values) up."""
    w, h, left, top = 400, 260, 55, 40
    step = _tick_step(max((v for *_, vals in series for v in vals if math.isfinite(v)), default=1.0))
    top_y = step * 4
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    span = hi - lo or 1.0

    def px(x: float) -> float:
        return x0 + left + (math.log10(x) - lo) / span * (w - left - 15)

    def py(y: float) -> float:
        return top + h - y / top_y * h

    out = [
        f'<text x="{x0 + left}" y="22" font-size="14" font-weight="bold">{title}</text>',
        f'<line x1="{x0 + left}" y1="{top + h}" x2="{x0 + w - 15}" y2="{top + h}" stroke="#444"/>',
        f'<line x1="{x0 + left}" y1="{top}" x2="{x0 + left}" y2="{top + h}" stroke="#444"/>',
        f'<text x="{x0 + w // 2}" y="{top + h + 38}" font-size="12" text-anchor="middle">chunks (log scale)</text>',
        f'<text x="{x0 + 12}" y="{top + h // 2}" font-size="12" transform="rotate(-90 {x0 + 12} {top + h // 2})"'
        f' text-anchor="middle">{unit}</text>',
    ]
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{top + h + 16}" font-size="11" text-anchor="middle">{_n(x)}</text>')
    for i in range(5):
        y = step * i
        out.append(f'<text x="{x0 + left - 5}" y="{py(y) + 4:.1f}" font-size="11" text-anchor="end">{y:,g}</text>')
        out.append(f'<line x1="{x0 + left}" y1="{py(y):.1f}" x2="{x0 + w - 15}" y2="{py(y):.1f}" stroke="#ddd"/>')
    for i, (label, color, dash, vals) in enumerate(series):
        pts = [(px(x), py(v)) for x, v in zip(xs, vals, strict=True) if math.isfinite(v)]
        out.append(_poly(pts, color, dash))
        ly = top + 12 + 16 * i
        out.append(
            f'<line x1="{x0 + left + 10}" y1="{ly}" x2="{x0 + left + 30}" y2="{ly}" stroke="{color}"'
            f' stroke-width="2"{f" stroke-dasharray={chr(34)}{dash}{chr(34)}" if dash else ""}/>'
        )
        out.append(f'<text x="{x0 + left + 35}" y="{ly + 4}" font-size="11">{label}</text>')
    return out


def svg(steps: list[dict[str, Any]]) -> str:
    xs = [float(_chunks(s)) for s in steps]
    lat = [
        ("hybrid p95", "#c0392b", "5,3", [s["latency"]["hybrid"]["p95"] for s in steps]),
        ("hybrid median", "#c0392b", "", [s["latency"]["hybrid"]["median"] for s in steps]),
        ("semantic median", "#2471a3", "", [s["latency"]["semantic"]["median"] for s in steps]),
        ("keyword median", "#239b56", "", [s["latency"]["keyword"]["median"] for s in steps]),
    ]
    mem = [
        ("all processes' RSS", "#7d3c98", "", [_rss_total(s) / GIB for s in steps]),
        ("indexer RSS", "#c0392b", "", [s["rss"]["indexer"]["rss"] / GIB for s in steps]),
        ("index on disk", "#555555", "5,3", [_disk(s) / GIB for s in steps]),
    ]
    body = [
        *_panel(0, "Search over MCP HTTP", "ms", xs, lat),
        *_panel(420, "Memory and disk", "GiB", xs, mem),
    ]
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="840" height="345" font-family="sans-serif">'
        '<rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>\n"
    )


# --------------------------------------------------------------------------------------------


def summary(state: dict[str, Any]) -> list[str]:
    steps = _steps(state)
    if not steps:
        return ["No size measured yet."]
    m = state.get("machine", {})
    about = (
        f"Machine: {m.get('CPU', '?')}, {m.get('cores', '?')}, {m.get('RAM', '?')}; sizes measured"
        f" {steps[0]['date']} to {steps[-1]['date']}, foldermind {steps[-1]['commit']}. Each row is the same"
        " home grown further; the kernel ran the indexer, the embedder and the front door. Latency is end to"
        f" end through the `mcp` SDK client over HTTP, {steps[-1]['queries']} judged SciFact queries x"
        f" {steps[-1]['latency']['hybrid']['n'] // max(1, steps[-1]['queries'])} rounds per mode, top_k 20,"
        " the query-vector cache off. nDCG@10 is SciFact's (5,183 abstracts embedded by the real model) among"
        " the synthetic distractors (random vectors: weak semantic distractors; SciFact's own prose"
        " recombined: real BM25 distractors). A random unit vector's cosine with a query has a standard deviation"
        f" of 1/sqrt({DIM}) = {1 / math.sqrt(DIM):.3f}, so the best of N random distractors reaches about"
        f" {1 / math.sqrt(DIM):.3f} x sqrt(2 ln N) ({_best_random(1e5):.2f} at 100k, {_best_random(1e6):.2f} at 1M):"
        " they make the HNSW graph as big as a real one (its search cost), not semantic confusion; the Detail's"
        " synthetic share of the top 10 says how many reached the results. The machine is shared: its 1-minute"
        " load average during each measurement is in the Detail."
    )
    return [
        *table(SUMMARY_HEADER, summary_rows(steps)),
        "",
        f"![search latency, memory and disk against chunks]({PLOT.name})",
        "",
        *para(about),
        "",
        *advice(state, steps),
    ]


def render(state: dict[str, Any], root: Path) -> tuple[str, str]:
    steps = _steps(state)
    real = state.get("scifact") or {}
    how = (
        f"indexed and embedded by a real kernel in {real['seconds']:,.0f} s"
        if real.get("seconds")
        else "indexed by a real kernel (reused)"
    )
    lines = [
        "# The single-box ceiling: ~100k, ~300k and ~1M chunks on one machine",
        "",
        *para(
            f"Generated by `python -m tests.bench.ceiling --home DIR` (this run's home: `{root.name}`). One home"
            f" grows: SciFact as files ({real.get('chunks', 0):,} chunks, {how}: the real-model subset), then"
            " synthetic documents written through the indexer's own storage code (`Store`, `KeywordIndex`,"
            " `VectorIndex`): SciFact sentences of unjudged abstracts recombined into 110-160-word chunks, one"
            " file each document, random unit vectors recorded as the real model's (float32, as every vector is"
            " stored: the int8 default is the model's precision, not the index's). At each size a real kernel"
            " starts on the home and is measured, then stopped before the index grows again."
        ),
        "",
        "## Summary",
        "",
        *summary(state),
        "",
        "## Build: each growth step, by part (s)",
        "",
        *table(
            ["chunks after", "added", "text + files", "SQLite", "Tantivy", "usearch", "total", "notes"],
            build_rows(steps),
        ),
        "",
        *para(
            "Text: sentences drawn, files written and hashed. SQLite: the document and chunk rows and the"
            " vectors, in transactions of 500 documents. Tantivy: the journal applied and committed every ~50k"
            " chunks, then its merges waited for. usearch: HNSW inserts on one thread (as the ingest thread"
            " adds), then the file saved. None of this includes parsing or embedding: see the Summary's"
            " ingestion paragraph for what those cost."
        ),
        "",
        "## Detail",
        "",
        *table(
            [
                "chunks",
                "files: synthetic + SciFact",
                "nDCG@10 keyword / semantic / hybrid",
                "synthetic share of the top 10: keyword / semantic / hybrid",
                "indexer ms (hybrid, bus): stages",
                "RSS MiB by process",
                "Tantivy segments",
                "start to query model s",
                "load avg before / after (the rounds wait up to 60 s for < 10% CPU; not before 300k)",
            ],
            detail_rows(steps),
        ),
        "",
        "## Machine",
        "",
        *table(["", ""], [[k, v] for k, v in state.get("machine", {}).items()], "ll"),
        "",
    ]
    return "\n".join(lines), svg(steps) if steps else ""


def overview_body() -> str:
    """The body of ``## Single-box ceiling`` in docs/benchmarks/README.md: the report's Summary and a link ("" before a
    report is written)."""
    return summary_overview(
        REPORT,
        "How far one machine carries the index, with a synthetic corpus grown to ~1M chunks: the Summary of\n"
        f"[{REPORT.name}]({REPORT.name}), written by `python -m tests.bench.ceiling --home DIR`; build times by\n"
        "part, the detail per size and the machine are there.",
    )


def write(text: str, plot: str) -> None:
    REPORT.write_text(text, encoding="utf-8")
    if plot:
        PLOT.write_text(plot, encoding="utf-8")
    put_section(OVERVIEW, HEADING, overview_body())
