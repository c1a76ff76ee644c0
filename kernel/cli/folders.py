"""``foldermind folders add|add-criteria|list|show|retry|remove`` and ``foldermind search``."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import click

from foldermind.kernel.cli.common import (
    DEMO_DESCRIPTION,
    chunks_line,
    connect,
    current_home,
    failed_and_not_read,
    home_option,
    one_line,
    require_running,
    suffix_counts,
    typed,
)
from foldermind.kernel.cli.status import fetch_status
from foldermind.protocol.errors import BusError, JobError
from foldermind.protocol.messages import (
    CriteriaAddReply,
    CriteriaAddRequest,
    CriteriaInfo,
    FolderAddReply,
    FolderAddRequest,
    FolderDocumentsReply,
    FolderDocumentsRequest,
    FolderListReply,
    FolderListRequest,
    FolderRemoveReply,
    FolderRemoveRequest,
    FolderRetryReply,
    FolderRetryRequest,
    IndexStatusReply,
    IndexStatusRequest,
    SearchReply,
    SearchRequest,
)
from foldermind.protocol.messages.indexer import iso_time
from foldermind.protocol.runtime import folder_names
from foldermind.protocol.runtime.folder_names import Known
from foldermind.protocol.runtime.home import Home


def _call(home: Home, to: str, msg: Any, reply: Any, timeout: float = 30) -> Any:
    require_running(home)
    with connect(home) as client:
        try:
            return client.request(to, msg, reply, timeout=timeout).body
        except JobError as exc:
            raise click.ClickException(exc.message) from exc
        except BusError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group()
def folders() -> None:
    """Register, list and remove Smart Folders."""


@folders.command("add")
@home_option
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--name", default="", help="Display name (default: the folder's name).")
@click.option("--description", default="", help="What the folder holds.")
@click.option("--wait", is_flag=True, help="Show progress until the folder is indexed.")
def folders_add(path: str, name: str, description: str, wait: bool) -> None:
    """Register PATH as a Smart Folder and index it."""
    home = current_home()
    folder = _call(home, "indexer", FolderAddRequest(os.path.abspath(path), name, description), FolderAddReply).folder
    click.echo(f"registered {folder['name']} ({folder['id']}): {folder['path']}")
    demo = next((f for f in _folders(home) if f["description"] == DEMO_DESCRIPTION and f["id"] != folder["id"]), None)
    if demo is not None:  # `make run`'s demo, foldermind's own pages, would come up in the searches of yours
        click.echo(
            f"the demo folder (foldermind's own docs) is still searched with yours:"
            f" `{typed(home, 'folders', 'remove', demo['path'])}` takes it out"
        )
    if wait:
        _wait_indexed(home, folder["id"])


@folders.command("add-criteria")
@home_option
@click.option("--name", required=True, help="Display name, unique among criteria folders.")
@click.option("--query", default="", help='Documents holding any of these words ("a phrase", -word as in search).')
@click.option("--types", "types", default="", help="Only these file extensions, comma-separated: pdf,docx.")
@click.option("--modified-after", default="", help="An ISO date (2025-01-01) or duration (P30D: the last 30 days).")
@click.option("--modified-before", default="", help="An ISO date or duration (P1Y: not modified for a year).")
@click.option("--within", type=click.Path(exists=True, file_okay=False), default=None, help="Only inside this folder.")
@click.option("--description", default="", help="What the folder holds.")
def folders_add_criteria(
    name: str,
    query: str,
    types: str,
    modified_after: str,
    modified_before: str,
    within: str | None,
    description: str,
) -> None:
    """Save a criteria Smart Folder: the indexed documents that match the criteria at each use (listed with
    their count, searched with --folder ID). --within must be a registered folder or inside one; without it
    the folder spans them all."""
    request = CriteriaAddRequest(
        name,
        query,
        _types(types),
        modified_after,
        modified_before,
        os.path.abspath(within) if within else "",
        description,
    )
    saved = _call(current_home(), "indexer", request, CriteriaAddReply).folder
    click.echo(f"saved {saved['name']} ({saved['id']}): {saved['file_count']} documents match now")


def _types(raw: str) -> list[str]:
    return [t for t in (part.strip() for part in raw.split(",")) if t]


def _criteria_line(c: CriteriaInfo) -> str:
    parts = [
        f"query {c['query']!r}" if c["query"] else "",
        f"types {','.join(c['file_types'])}" if c["file_types"] else "",
        f"modified after {c['modified_after']}" if c["modified_after"] else "",
        f"modified before {c['modified_before']}" if c["modified_before"] else "",
        f"within {c['within']}" if c["within"] else "in every folder",
    ]
    return "criteria: " + ", ".join(p for p in parts if p)


def _folder(home: Home, folder_id: str) -> dict[str, Any]:
    for f in _call(home, "indexer", FolderListRequest(), FolderListReply, timeout=10).folders:
        if f["id"] == folder_id:
            return dict(f)
    raise click.ClickException("the folder was removed meanwhile")


def _wait_indexed(home: Home, folder_id: str) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[extra]}"),
    ) as bar:
        files = bar.add_task("files    ", total=None, extra="")
        embedded = bar.add_task("embedding", total=None, extra="")
        postponed = ""
        while True:
            f = _folder(home, folder_id)
            done = f["files_indexed"] + f["files_failed"] + f.get("files_skipped", 0)
            bar.update(files, total=max(f["files_total"], 1), completed=done, extra=f"{f['files_failed']} failed")
            bar.update(embedded, total=max(f["chunks"], 1), completed=f["chunks_embedded"], extra="chunks")
            if f["state"] in ("ready", "embedding") and done >= f["files_total"]:
                if f["chunks_embedded"] >= f["chunks"]:
                    break
                postponed = _embedder_trouble(home)
                if postponed:  # keyword search works already; vectors follow once the model loads
                    break
            time.sleep(0.3)
    click.echo(
        f"indexed: {f['files_indexed']} files ({failed_and_not_read(f)}), {f['chunks']} chunks, "
        f"{f['chunks_embedded']} embedded"
    )
    if postponed:
        click.echo(f"embedding postponed: {postponed}")


def _embedder_trouble(home: Home) -> str:
    """Why the embedder cannot embed now ('' when it can)."""
    status = fetch_status(home)
    if status is None:
        return ""
    embedders = [w for w in status.workers if w["service"] == "embedder"]
    if not embedders:  # [workers.embedder] enabled = false: nothing would ever embed, so --wait would never end
        return "no embedder runs ([workers.embedder] enabled = false); keyword search only"
    for w in embedders:
        if w["state"] == "IDLE" or (w["state"] == "STARTING" and not w["last_error"]):
            continue  # on demand: started for the first batch (or starting now), not in trouble
        if w["state"] != "RUNNING":
            return f"the embedder is {w['state']}: {w['last_error'] or ''}".rstrip(": ")
        if w.get("note", "").startswith("model failed"):
            return str(w["note"])
    return ""


@folders.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def folders_list(as_json: bool) -> None:
    """Every Smart Folder with its indexing progress, then every criteria folder with its count."""
    home = current_home()
    reply = _call(home, "indexer", FolderListRequest(with_criteria=True), FolderListReply, timeout=10)
    found, saved = reply.folders, reply.criteria
    if as_json:
        times = ("added_at", "last_organized_at", "changed_at")
        entries = [{"kind": "path", **f, **{t: iso_time(f[t]) for t in times}} for f in found]
        entries += [{"kind": "criteria", **c} for c in saved]
        click.echo(json.dumps(entries, indent=2))
        return
    if not found:
        click.echo(f"no Smart Folders yet: {typed(home, 'folders', 'add', 'PATH')}")
    for f in found:
        click.echo(f"{f['id']}  {f['name']:<20} {f['path']}")
        click.echo(
            f"    {f['state']}: {f['files_indexed']}/{f['files_total']} files, {failed_and_not_read(f)}, "
            f"{chunks_line(f)}"
        )
    for c in saved:
        click.echo(f"{c['id']}  {c['name']:<20} {_criteria_line(c)}")
        click.echo(f"    {c['file_count']} documents match now")


STATES = ("failed", "skipped", "unsupported")
PAGE = 500


@folders.command("show")
@home_option
@click.argument("folder")
@click.option("--failed", is_flag=True, help="Files a parser could not read, with the reason.")
@click.option("--skipped", is_flag=True, help="Files left unindexed without being read, with the reason.")
@click.option("--unsupported", is_flag=True, help="Files no parser reads (by suffix; the first 200 by name).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def folders_show(folder: str, failed: bool, skipped: bool, unsupported: bool, as_json: bool) -> None:
    """Every file of the Smart Folder FOLDER (its id, path or name) with its state (indexed, pending, failed, skipped,
    unsupported) and the reason it is not indexed; --failed, --skipped, --unsupported show only those."""
    home = current_home()
    wanted = [s for s, on in zip(STATES, (failed, skipped, unsupported), strict=True) if on]
    info = _resolve(home, folder)
    files = _documents(home, info["id"], [s for s in wanted if s != "unsupported"]) if wanted != ["unsupported"] else []
    if not wanted or "unsupported" in wanted:
        status = _call(home, "indexer", IndexStatusRequest(max_failures=0, folder=info["id"]), IndexStatusReply)
        files += [_unsupported(path) for path in status.unsupported_files]
    if as_json:
        click.echo(json.dumps({"folder": info, "files": files}, indent=2, ensure_ascii=False))
        return
    click.echo(f"{info['id']}  {info['name']}  {info['path']}")
    click.echo(
        f"    {info['state']}: {info['files_indexed']}/{info['files_total']} files indexed, {failed_and_not_read(info)}"
    )
    if info.get("unsupported") and (not wanted or "unsupported" in wanted):
        listed = sum(f["state"] == "unsupported" for f in files)
        more = f" (the first {listed} listed)" if listed < info["files_unsupported"] else ""
        click.echo(f"    not read, by suffix: {suffix_counts(info['unsupported'], most=50)}{more}")
    root = info["path"].rstrip("/") + "/"
    for f in files:
        shown = f["path"][len(root) :] if f["path"].startswith(root) else f["path"]
        click.echo(f"{f['state']:<12} {one_line(shown)}" + (f"  {one_line(f['reason'])}" if f["reason"] else ""))
    if not files:
        click.echo(f"no {' or '.join(wanted)} files" if wanted else "no files yet")
    if any(f["state"] == "failed" for f in files):  # failed until the file changes, but for this
        retry = typed(home, "folders", "retry", info["id"])
        click.echo(f"`{retry}` parses the failed files again (after an upgrade or a fix)")


def _resolve(home: Home, folder: str, criteria: bool = False) -> Any:
    """The Smart Folder FOLDER names (its id, its path, or its name when no other folder has it; a name that is
    also a directory here names the folder of that name: :func:`~foldermind.protocol.runtime.folder_names.choose`,
    the indexer's rule); among the criteria folders too when ``criteria``."""
    reply = _call(home, "indexer", FolderListRequest(with_criteria=criteria), FolderListReply, timeout=10)
    known: list[Any] = [*reply.folders, *reply.criteria]
    try:
        chosen = folder_names.choose(
            [Known(f["id"], f["name"], f.get("path", "")) for f in known], folder, folder_names.here(folder)
        )
        return known[chosen]
    except folder_names.NotOneFolder as exc:
        raise click.ClickException(f"{exc}: {typed(home, 'folders', 'list')} shows them") from None


def _folders(home: Home) -> list[Any]:
    return list(_call(home, "indexer", FolderListRequest(), FolderListReply, timeout=10).folders)


def _documents(home: Home, folder_id: str, statuses: list[str]) -> list[dict[str, Any]]:
    """Every document of the folder (with one of ``statuses``, when given): path, state and reason."""
    out: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:
        request = FolderDocumentsRequest(folder=folder_id, after=after, limit=PAGE, statuses=statuses)
        reply = _call(home, "indexer", request, FolderDocumentsReply)
        for d in reply.documents:
            reason = d.get("error") or ""
            if d["status"] == "indexed":
                reason = f"read as {d['format']}" if d["format"] else ""
            out.append({"path": d["path"], "state": d["status"], "reason": reason, "format": d["format"]})
        after = reply.next_after
    return out


def _unsupported(path: str) -> dict[str, Any]:
    suffix = os.path.splitext(os.path.basename(path))[1].lower()
    named = f"{suffix} files" if suffix else "a file with no suffix"
    return {
        "path": path,
        "state": "unsupported",
        "reason": f"no parser reads {named}, and its first bytes are not text",
        "format": None,
    }


@folders.command("retry")
@home_option
@click.argument("folder", required=False)
def folders_retry(folder: str | None) -> None:
    """Try the failed files of the Smart Folder FOLDER (its id, path or name; every folder without it) again: a
    file quarantined after a parser failed on it twice stays so until it changes, or until this is run (once a
    new foldermind or a fixed cause should read it)."""
    home = current_home()
    target = _resolve(home, folder)["id"] if folder else ""
    reply = _call(home, "indexer", FolderRetryRequest(target), FolderRetryReply)
    named = reply.folder
    where = f"{named['name']} ({named['id']})" if named is not None else ""
    if not reply.retried:
        click.echo(f"no failed files in {where or 'any Smart Folder'}")
        return
    files = "1 failed file" if reply.retried == 1 else f"{reply.retried} failed files"
    follow = typed(home, "folders", "show", named["id"], "--failed") if named is not None else typed(home, "status")
    scope = f"of {where}" if where else "across the Smart Folders"
    click.echo(f"{files} {scope} will be parsed again; `{follow}` shows how they fare")


@folders.command("remove")
@home_option
@click.argument("folder")
def folders_remove(folder: str) -> None:
    """Unregister a Smart Folder (by id, path or name) and purge its index entries, with the criteria folders within
    it; or remove a criteria folder (by id or name). Files are never touched."""
    home = current_home()
    reply = _call(home, "indexer", FolderRemoveRequest(_resolve(home, folder, criteria=True)["id"]), FolderRemoveReply)
    gone = {c["id"] for c in reply.criteria} | ({reply.folder["id"]} if reply.folder is not None else set())
    from foldermind.protocol.runtime.client_keys import ClientKeys  # keyring: only for this command

    ClientKeys(home).drop_folders(gone)  # the indexer drops them from every scope already; the registry follows
    if reply.folder is None:
        click.echo(f"removed the criteria folder {reply.criteria[0]['name']} (no document or file is touched)")
        return
    click.echo(f"removed {reply.folder['name']} ({reply.documents_purged} documents purged from the index)")
    for c in reply.criteria:
        click.echo(f"removed the criteria folder {c['name']} (it lay within it)")


@click.command()
@home_option
@click.argument("query")
@click.option("--mode", type=click.Choice(["hybrid", "semantic", "keyword"]), default="hybrid", show_default=True)
@click.option("--top-k", type=click.IntRange(1, 50), default=10, show_default=True)
@click.option(
    "--folder", "folder_id", default=None, help="Only this Smart Folder (id; a criteria folder's id or name)."
)
@click.option("--types", "types", default="", help="Only these file extensions, comma-separated: pdf,docx.")
@click.option("--path-glob", default="", help="Only paths matching this glob, relative to the folder: 'reports/**'.")
@click.option(
    "--modified-after",
    default="",
    help="Only files modified on or after this ISO date (UTC), or within a duration (P7D).",
)
@click.option("--modified-before", default="", help="Only files modified before this ISO date (UTC) or duration ago.")
@click.option("--group-by-file", is_flag=True, help="At most one result per file (its best passage).")
@click.option("--min-score", type=float, default=None, help="Only results scoring at least this.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def search(
    query: str,
    mode: str,
    top_k: int,
    folder_id: str | None,
    types: str,
    path_glob: str,
    modified_after: str,
    modified_before: str,
    group_by_file: bool,
    min_score: float | None,
    as_json: bool,
) -> None:
    """Search the indexed documents (the search_documents tool from a terminal). In QUERY, "two words" in
    double quotes must appear together and -word leaves out results holding that word."""
    request = SearchRequest(
        query,
        mode,
        top_k,
        folder_id,
        file_types=_types(types),
        path_glob=path_glob,
        modified_after=modified_after,
        modified_before=modified_before,
        min_score=min_score,
        group_by_file=group_by_file,
    )
    reply = _call(current_home(), "indexer", request, SearchReply)
    if as_json:
        body = reply.to_body()
        for hit in body["results"]:
            hit["modified_at"] = iso_time(hit["modified_at"])  # as the MCP tool gives it
        click.echo(json.dumps(body, indent=2, ensure_ascii=False))
        return
    if reply.note:
        click.echo(f"({reply.note})")
    for i, r in enumerate(reply.results, 1):
        loc = r["location"]
        where = ", ".join(
            x
            for x in (
                f"p. {loc['page']}" if "page" in loc else "",
                f"OCR, {loc.get('ocr_confidence', 0):.0%} confident" if loc.get("ocr") else "",
                loc.get("heading", ""),
                f"lines {loc['line_start']}-{loc['line_end']}",
            )
            if x
        )
        click.echo(f"{i}. {one_line(r['file_path'])}  ({where})  score {r['score']:.3f}")
        click.echo(f"   {' '.join(r['snippet'].split())}")
    click.echo(f"{len(reply.results)} of {reply.total_matches} matches, {reply.query_ms:.1f} ms, {reply.mode_used}")
