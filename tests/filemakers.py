"""Real documents made on the fly, so no binary fixture is committed."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A valid PDF with one content stream per page (Helvetica text lines); an empty list of
    lines makes a page with no text at all, like a scan."""
    objects: list[bytes] = []
    kids = []
    font_id = 3 + 2 * len(pages)
    for i, lines in enumerate(pages):
        page_id, content_id = 3 + 2 * i, 4 + 2 * i
        kids.append(f"{page_id} 0 R")
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            ops.append(f"({_pdf_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1") if lines else b""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    catalog = b"<< /Type /Catalog /Pages 2 0 R >>"
    pages_obj = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode()
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    return _write_pdf(path, [catalog, pages_obj, *objects, font])


def make_encrypted_pdf(path: Path, text: str) -> Path:
    from pypdf import PdfReader, PdfWriter

    plain = make_pdf(path.with_suffix(".plain.tmp"), [[text]])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(user_password="secret", owner_password="owner")
    with open(path, "wb") as fh:
        writer.write(fh)
    plain.unlink()
    return path


def make_docx(path: Path, title: str, sections: list[tuple[str, list[str]]], table: list[list[str]]) -> Path:
    import docx

    doc = docx.Document()
    doc.add_heading(title, level=1)
    for heading, paragraphs in sections:
        doc.add_heading(heading, level=2)
        for text in paragraphs:
            doc.add_paragraph(text)
    if table:
        grid = doc.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    doc.save(str(path))
    return path


def make_zip_bomb_docx(path: Path, uncompressed_mb: int = 300) -> Path:
    """A DOCX-shaped zip whose document.xml inflates to hundreds of MB of zeros."""
    block = b"\0" * (1024 * 1024)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with zf.open("word/document.xml", "w", force_zip64=True) as fh:
            for _ in range(uncompressed_mb):
                fh.write(block)
    return path


# ------------------------------------------------------------------------------------------------
# Hostile files: each one small on disk, made in a few milliseconds.


def _write_pdf(path: Path, objects: list[bytes], root: int = 1) -> Path:
    """``objects`` numbered from 1 into a PDF with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{n} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    path.write_bytes(out.getvalue())
    return path


def _text_stream(text: str) -> bytes:
    ops = f"BT /F1 12 Tf 72 720 Td ({_pdf_escape(text)}) Tj ET".encode("latin-1")
    return b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream"


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def make_cyclic_pdf(path: Path, text: str) -> Path:
    """A page tree that contains itself: the root /Pages lists a page and then itself as a kid."""
    return _write_pdf(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            _text_stream(text),
            _FONT,
        ],
    )


def make_nested_pdf(path: Path, depth: int = 100_000) -> Path:
    """A page whose resources hold ``depth`` nested arrays (``[[[[...]]]]``): recursive readers overflow."""
    nested = b"[" * depth + b"]" * depth
    return _write_pdf(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> /Deep " + nested + b" >> >>",
            _text_stream("nested"),
            _FONT,
        ],
    )


def _one_page_pdf(path: Path, contents: bytes) -> Path:
    """A one-page PDF whose page content is the stream object ``contents`` (object 4)."""
    return _write_pdf(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            contents,
            _FONT,
        ],
    )


def make_huge_stream_pdf(path: Path, declared: int = 10**15) -> Path:
    """A content stream that declares ``/Length`` of a petabyte and holds a few bytes."""
    ops = b"BT /F1 12 Tf 72 720 Td (huge) Tj ET"
    return _one_page_pdf(path, b"<< /Length %d >>\nstream\n" % declared + ops + b"\nendstream")


def make_flate_bomb_pdf(path: Path, inflated_mb: int = 200) -> Path:
    """A page whose content stream inflates to ``inflated_mb`` MiB (spaces, ~1000:1)."""
    import zlib

    squeeze = zlib.compressobj(9)
    block = b" " * (1024 * 1024)
    packed = b"".join(squeeze.compress(block) for _ in range(inflated_mb)) + squeeze.flush()
    return _one_page_pdf(
        path, b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"
    )


BILLION_LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol0 "lol">'
    + "".join(f'<!ENTITY lol{n} "' + f"&lol{n - 1};" * 10 + '">' for n in range(1, 10))
    + "]>"
)
"""A DOCTYPE whose ``&lol9;`` expands to 10**9 "lol"s (3 GB) in a parser that resolves entities."""


def _docx_with_doctype(path: Path, text: str, doctype: str, entity: str) -> Path:
    """A real DOCX with a paragraph of ``text`` and one holding ``&entity;``, whose document.xml
    declares ``doctype``."""
    make_docx(path, "", [], [])
    with zipfile.ZipFile(path) as zf:
        parts = {info.filename: zf.read(info) for info in zf.infolist()}
    xml = parts["word/document.xml"].decode()
    body = xml.index("<w:body>") + len("<w:body>")
    paragraphs = f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p><w:p><w:r><w:t>&{entity};</w:t></w:r></w:p>"
    xml = xml[:body] + paragraphs + xml[body:]
    declaration_end = xml.index("?>") + 2 if xml.startswith("<?xml") else 0
    parts["word/document.xml"] = (xml[:declaration_end] + doctype + xml[declaration_end:]).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in parts.items():
            zf.writestr(name, data)
    return path


def make_billion_laughs_docx(path: Path, text: str) -> Path:
    """A DOCX whose document.xml carries the billion-laughs DOCTYPE and uses ``&lol9;``."""
    return _docx_with_doctype(path, text, BILLION_LAUGHS, "lol9")


def make_xxe_docx(path: Path, target: Path, text: str) -> Path:
    """A DOCX whose document.xml pulls ``target`` in through an external entity (XXE)."""
    return _docx_with_doctype(path, text, f'<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file://{target}">]>', "xxe")


def make_nested_html(path: Path, depth: int, inner: str) -> Path:
    """``depth`` nested ``<div>``s around ``inner``, with a paragraph before them."""
    path.write_text(
        "<html><head><title>Deep</title></head><body><p>Surface paragraph before the abyss.</p>"
        + "<div>" * depth
        + f"<p>{inner}</p>"
        + "</div>" * depth
        + "</body></html>"
    )
    return path
