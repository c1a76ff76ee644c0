"""Real documents made on the fly, so no binary fixture is committed."""

from __future__ import annotations

import io
import os
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def at(day: str) -> float:
    """Epoch seconds of an ISO date or time, UTC unless it says otherwise."""
    moment = datetime.fromisoformat(day)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def put(path: Path, text: str, day: str | None = None) -> None:
    """Write ``text`` to ``path`` (its folders made) and, with ``day``, date the file then (an ISO date)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if day is not None:
        os.utime(path, (at(day), at(day)))


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
    return make_zip_bomb(path, "word/document.xml", uncompressed_mb)


def make_zip_bomb(path: Path, member: str, uncompressed_mb: int = 300) -> Path:
    """A zip (any of the zip formats: the member says which) whose ``member`` inflates to
    ``uncompressed_mb`` MiB of zeros (~1000:1)."""
    block = b"\0" * (1024 * 1024)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with zf.open(member, "w", force_zip64=True) as fh:
            for _ in range(uncompressed_mb):
                fh.write(block)
    return path


def with_doctype(path: Path, member: str, doctype: str = "") -> Path:
    """The zip at ``path`` rewritten with ``doctype`` (the billion-laughs one by default) declared in the XML
    part ``member``, after its XML declaration."""
    doctype = doctype or BILLION_LAUGHS
    with zipfile.ZipFile(path) as zf:
        parts = {info.filename: zf.read(info) for info in zf.infolist()}
    xml = parts[member].decode()
    declaration_end = xml.index("?>") + 2 if xml.startswith("<?xml") else 0
    parts[member] = (xml[:declaration_end] + doctype + xml[declaration_end:]).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in parts.items():
            zf.writestr(name, data)
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


# ------------------------------------------------------------------------------------------------
# The office, e-book and mail formats, each written by its own library; ``marker`` lands in a known place.


def make_pptx(path: Path, marker: str, slides: int = 3, marked: int = 2) -> Path:
    """A deck of ``slides`` titled slides ("Slide title N"), ``marker`` in slide ``marked``'s body, a
    table on slide 1 and speaker notes on every slide."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    deck.core_properties.title = "Quarterly Review"
    deck.core_properties.author = "Ada Lovelace"
    for n in range(1, slides + 1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
        assert slide.shapes.title is not None
        slide.shapes.title.text = f"Slide title {n}"
        body = f"The {marker} figures are on this slide." if n == marked else f"Ordinary slide {n} about revenue."
        slide.placeholders[1].text_frame.text = body
        slide.notes_slide.notes_text_frame.text = f"Speaker notes for slide {n}."
        if n == 1:
            table = slide.shapes.add_table(2, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
            for r, row in enumerate([["Region", "Revenue"], ["North", "1200"]]):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
    deck.save(str(path))
    return path


def make_xlsx(path: Path, marker: str, rows: int = 20, marked_row: int = 7, sheet: str = "Ledger") -> Path:
    """A workbook: a "Summary" sheet, then ``sheet`` with a header and ``rows`` data rows, ``marker`` in
    data row ``marked_row`` (sheet row ``marked_row + 1``); written by openpyxl's streaming writer."""
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    book.properties.title = "Field Ledger"
    book.properties.creator = "Grace Hopper"
    summary = book.create_sheet("Summary")
    summary.append(["Total", rows])
    data = book.create_sheet(sheet)
    data.append(["Item", "Count", "Note"])
    for n in range(1, rows + 1):
        data.append([f"item{n}", n * 2, marker if n == marked_row else f"note {n}"])
    book.save(str(path))
    return path


def make_grid_xlsx(path: Path, rows: int, cols: int) -> Path:
    """A workbook of one sheet, "Wide", holding ``rows`` x ``cols`` numbers (0 .. cols-1 in every row):
    openpyxl's streaming writer writes it with one such row, then the sheet's rows are repeated from that
    row's text. The sheet is byte for byte the one openpyxl writes for all the rows (compared at 1001 x 1000),
    for ~0.7 CPU-s instead of ~4.2 (openpyxl's ``append`` of a million cells)."""
    import re

    from openpyxl import Workbook

    book = Workbook(write_only=True)
    book.create_sheet("Wide").append(list(range(cols)))
    buf = io.BytesIO()
    book.save(buf)
    sheet_name = "xl/worksheets/sheet1.xml"
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == sheet_name:
                xml = data.decode()
                start, end = xml.index("<sheetData>") + len("<sheetData>"), xml.index("</sheetData>")
                row = xml[start:end]  # <row r="1"><c r="A1" t="n"><v>0</v></c>...</row>
                assert row.count("<row ") == 1 and row.count("<c ") == cols, row[:200]
                template = re.sub(r'r="([A-Z]*)1"', r'r="\g<1>{n}"', row.replace("{", "{{").replace("}", "}}"))
                body = "".join(template.format(n=n) for n in range(1, rows + 1))
                data = (xml[:start] + body + xml[end:]).encode()
            dst.writestr(info, data)
    return path


def make_csv(path: Path, marker: str, rows: int = 20, marked_row: int = 7, delimiter: str = ",") -> Path:
    """A header and ``rows`` records (stdlib csv), ``marker`` in record ``marked_row`` (file line
    ``marked_row + 1``)."""
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        writer.writerow(["name", "city", "remark"])
        for n in range(1, rows + 1):
            writer.writerow([f"person{n}", "Oslo", marker if n == marked_row else f"remark, number {n}"])
    return path


def make_epub(path: Path, marker: str, chapters: int = 3, marked: int = 2) -> Path:
    """A book (ebooklib) of ``chapters`` chapters titled "Chapter N", ``marker`` in chapter ``marked``."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("foldermind-test")
    book.set_title("The Lighthouse Log")
    book.set_language("en")
    book.add_author("Mary Shelley")
    items = []
    for n in range(1, chapters + 1):
        item = epub.EpubHtml(title=f"Chapter {n}", file_name=f"chap{n}.xhtml", lang="en")
        body = f"The {marker} was seen at dawn." if n == marked else f"Nothing unusual in chapter {n}."
        item.content = f"<h1>Chapter {n}</h1><h2>Morning</h2><p>{body}</p>"
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)
    return path


def make_message(
    subject: str, body: str, sender: str = "Ada <ada@example.com>", attachments: list[tuple[str, bytes]] | None = None
) -> bytes:
    """One message (stdlib email), with ``attachments`` (file name, bytes) attached."""
    from datetime import datetime
    from email.message import EmailMessage
    from email.utils import format_datetime

    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = "Team <team@example.com>"
    msg["Date"] = format_datetime(datetime(2024, 3, 5, 9, 30, tzinfo=UTC))
    msg.set_content(body)
    for name, data in attachments or []:
        msg.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return msg.as_bytes()


def make_eml(path: Path, subject: str, body: str, attachments: list[tuple[str, bytes]] | None = None) -> Path:
    path.write_bytes(make_message(subject, body, attachments=attachments))
    return path


def make_mbox(path: Path, marker: str, messages: int = 5, marked: int = 3) -> Path:
    """A mailbox (stdlib mailbox) of ``messages`` messages, ``marker`` in message ``marked``'s body."""
    import mailbox

    box = mailbox.mbox(str(path), create=True)
    box.lock()
    try:
        for n in range(1, messages + 1):
            body = f"Please review the {marker} draft." if n == marked else f"Routine update number {n}."
            box.add(make_message(f"Status {n}", body))
        box.flush()
    finally:
        box.unlock()
        box.close()
    return path


def make_odt(path: Path, marker: str, paragraphs: int = 1) -> Path:
    """A text document (odfpy): title, "Setup" > "Windows" headings, ``marker`` under "Windows", then
    ``paragraphs - 1`` more paragraphs there."""
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    doc = OpenDocumentText()
    doc.meta.addElement(_odf_title("Field Manual"))
    doc.text.addElement(P(text="Introduction to the manual."))
    doc.text.addElement(H(outlinelevel=1, text="Setup"))
    doc.text.addElement(P(text="Unpack everything."))
    doc.text.addElement(H(outlinelevel=2, text="Windows"))
    doc.text.addElement(P(text=f"Run the {marker} installer."))
    for n in range(2, paragraphs + 1):
        doc.text.addElement(P(text=f"Step {n}: check the cable, then the switch, then the light."))
    doc.save(str(path))
    return path


def make_ods(path: Path, marker: str, rows: int = 10, marked_row: int = 4, sheet: str = "Stock") -> Path:
    """A spreadsheet (odfpy): sheet ``sheet`` with a header and ``rows`` rows, ``marker`` in data row ``marked_row``."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    table = Table(name=sheet)
    for values in [
        ["Item", "Count"],
        *[[marker if n == marked_row else f"item{n}", str(n)] for n in range(1, rows + 1)],
    ]:
        row = TableRow()
        for value in values:
            cell = TableCell()
            cell.addElement(P(text=value))
            row.addElement(cell)
        table.addElement(row)
    doc.spreadsheet.addElement(table)
    doc.save(str(path))
    return path


def make_odp(path: Path, marker: str, slides: int = 3, marked: int = 2) -> Path:
    """A presentation (odfpy): ``slides`` slides titled "Deck slide N", ``marker`` on slide ``marked``."""
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    doc = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    for n in range(1, slides + 1):
        page = Page(masterpagename=master)
        title = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        title.setAttrNS(PRESENTATIONNS, "class", "title")
        box = TextBox()
        box.addElement(P(text=f"Deck slide {n}"))
        title.addElement(box)
        page.addElement(title)
        body = Frame(width="20cm", height="10cm", x="1cm", y="5cm")
        body.setAttrNS(PRESENTATIONNS, "class", "outline")
        box = TextBox()
        box.addElement(P(text=f"The {marker} chart." if n == marked else f"Plain slide {n}."))
        body.addElement(box)
        page.addElement(body)
        doc.presentation.addElement(page)
    doc.save(str(path))
    return path


def _odf_title(text: str) -> object:
    from odf.dc import Title

    return Title(text=text)


def make_rtf(path: Path, marker: str, lines: int = 5, marked: int = 3) -> Path:
    """An RTF file (RTF is text: written here), with title and author in its info group and ``marker`` on
    paragraph ``marked``."""
    paragraphs = [
        f"The {marker} clause is on this line." if n == marked else f"Ordinary paragraph {n}."
        for n in range(1, lines + 1)
    ]
    body = "".join(f"{text}\\par\n" for text in paragraphs)
    path.write_text(
        "{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Times;}}{\\info{\\title Lease Terms}{\\author Jane Austen}}\n"
        f"\\f0 {body}}}",
        encoding="ascii",
    )
    return path


def render_page(lines: list[str], dpi: int = 200, points: int = 14, inches: tuple[float, float] = (8.5, 11)) -> Any:
    """A letter page (8.5 x 11 in, or ``inches``) at ``dpi`` with ``lines`` typeset in Pillow's own font at
    ``points`` pt, black on white, as a scanner would give it (a grey PIL image)."""
    from PIL import Image, ImageDraw, ImageFont

    page = Image.new("L", (int(inches[0] * dpi), int(inches[1] * dpi)), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=round(points / 72 * dpi))
    y = dpi
    for line in lines:
        draw.text((dpi, y), line, font=font, fill=0)
        y += round(points * 1.5 / 72 * dpi)
    return page


def make_scanned_pdf(path: Path, pages: list[list[str]], dpi: int = 200) -> Path:
    """An image-only PDF (Pillow's PDF writer: one grey image per page, no text layer at all)."""
    images = [render_page(lines, dpi) for lines in pages]
    images[0].save(path, "PDF", save_all=True, append_images=images[1:], resolution=dpi)
    return path


def make_mixed_pdf(path: Path, text_lines: list[str], scanned_lines: list[str], dpi: int = 200) -> Path:
    """A PDF whose page 1 has a text layer (``text_lines``) and page 2 is a scan of ``scanned_lines``."""
    from pypdf import PdfReader, PdfWriter

    text = make_pdf(path.with_suffix(".text.tmp"), [text_lines])
    scan = make_scanned_pdf(path.with_suffix(".scan.tmp"), [scanned_lines], dpi)
    writer = PdfWriter()
    for part in (text, scan):
        writer.append(PdfReader(part))
    with open(path, "wb") as fh:
        writer.write(fh)
    text.unlink()
    scan.unlink()
    return path


def make_image(path: Path, lines: list[str], dpi: int = 200, inches: tuple[float, float] = (8.5, 11)) -> Path:
    """An image file of ``lines`` (its format from the suffix: .png, .jpg, .tiff, ...), a letter page or
    ``inches``."""
    render_page(lines, dpi, inches=inches).save(path)
    return path


def make_image_bomb(path: Path, side: int = 30_000) -> Path:
    """A real decompression bomb: a grey PNG of ``side`` x ``side`` pixels (900 Mpx for 30,000) of zeros, ~4 MB
    on disk, written row block by row block so making it never holds the pixels."""
    import struct
    import zlib

    assert side % 100 == 0, "written 100 rows at a time"

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    deflate = zlib.compressobj(1)
    block = bytes(side + 1) * 100  # 100 rows: each a filter byte and its pixels
    idat = b"".join([*(deflate.compress(block) for _ in range(side // 100)), deflate.flush()])
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path
