"""Each document stemmed in its own language (:mod:`foldermind.workers.indexer.storage.keyword.languages`):
detection on real text in-process, then a real kernel indexing a mixed folder (German, French, Spanish, English,
Japanese) and searched over the bus, and an index of the previous field layout built again from SQLite on start."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tantivy

from foldermind.protocol.messages import (
    SearchReply,
    SearchRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.workers.indexer.search.snippets import first_match
from foldermind.workers.indexer.storage.keyword.bm25 import SCHEMA_VERSION, KeywordIndex
from foldermind.workers.indexer.storage.keyword.languages import SAMPLE_CHARS, UNDETERMINED, detect, stemmed_as
from foldermind.workers.indexer.storage.keyword.terms import text_terms
from tests.folder_world import FolderWorld, folder_world
from tests.helpers import remove_tree, wait_for

GERMAN = (
    "Bauamt der Stadt, Abteilung Hochbau\n\n"
    "Die Genehmigungen für den Umbau des Gebäudes in der Lindenstraße wurden am 12. März erteilt. "
    "Die Anträge der Eigentümer lagen seit dem Herbst vor; die Prüfung der Statik hat länger gedauert, als "
    "das Amt erwartet hatte. Mit den Arbeiten darf erst begonnen werden, wenn der Nachweis über den "
    "Brandschutz vorliegt.\n"
)
FRENCH = (
    "Service de l'urbanisme de la commune\n\n"
    "Les permis de construire pour la rénovation de l'école ont été délivrés par la mairie au mois de mai. "
    "Les travaux commenceront après les vacances d'été, lorsque les élèves auront quitté le bâtiment, et "
    "devraient durer jusqu'à la fin de l'automne.\n"
)
SPANISH = (
    "Concejalía de Urbanismo del Ayuntamiento\n\n"
    "Las licencias de obra para la reforma del mercado municipal fueron aprobadas en el pleno de abril. "
    "Los comerciantes podrán seguir vendiendo durante las obras, que se harán por fases para que el mercado "
    "no tenga que cerrar en ningún momento.\n"
)
ENGLISH = (
    "Planning office, building control\n\n"
    "The permits for the extension of the library were issued in June after the neighbours' objections had "
    "been heard. The contractor is running two crews so that the reading rooms can open again before the "
    "autumn term begins.\n"
)
JAPANESE = "東京都の建築許可は来月に発行される予定です。工事は秋に始まり、図書館は冬まで閉館します。\n"
FILES = {"bauamt.txt": GERMAN, "urbanisme.txt": FRENCH, "mercado.txt": SPANISH, "library.txt": ENGLISH}
FILES["tokyo.txt"] = JAPANESE
LANGUAGES = {"bauamt.txt": "de", "urbanisme.txt": "fr", "mercado.txt": "es", "library.txt": "en", "tokyo.txt": "ja"}

# ------------------------------------------------------------------------------------------------
# in-process: detection and the stemmer a language gets


def test_the_language_of_real_paragraphs_is_detected() -> None:
    for name, text in FILES.items():
        assert detect([text]) == LANGUAGES[name], name
    assert detect(["Hallo"]) == UNDETERMINED  # too little to be sure of
    assert detect([]) == UNDETERMINED and detect([""]) == UNDETERMINED
    # Control characters CLD2 refuses and a lone surrogate (not UTF-8) leave the sample, never raise.
    assert detect(["\x85\x00\ud800 " + GERMAN]) == "de"
    # Only the first SAMPLE_CHARS characters are read: a German start of that length decides.
    assert detect([GERMAN * (SAMPLE_CHARS // len(GERMAN) + 1), ENGLISH * 200]) == "de"
    assert detect([GERMAN, ENGLISH * 200]) == "en"


def test_every_language_without_a_stemmer_is_stemmed_as_english() -> None:
    assert stemmed_as("de") == "de" and stemmed_as("nn") == "no"  # Nynorsk: the Norwegian stemmer
    for other in ("ja", "zh", "zh-Hant", "pl", UNDETERMINED, None):
        assert stemmed_as(other) == "en", other
    assert text_terms("Genehmigungen Genehmigung", "de") == ["genehm", "genehm"]
    assert text_terms("Genehmigungen Genehmigung", "en") == ["genehmigungen", "genehmigung"]  # as before
    assert text_terms("running runs permits", "en") == ["run", "run", "permit"]


def test_a_german_document_is_scored_on_the_same_scale_as_the_english_ones_beside_it(tmp_path: Path) -> None:
    """BM25 weighs a match by the field's average length and document count: a few German documents among many
    English ones must not be measured against a field of their own (where they would all look overlong)."""
    english = [
        f"Report {i} of the finance team: the quarterly figures were filed on time again this year." for i in range(40)
    ]
    english.append("Report 40 of the finance team: the zeppelin figures were filed on time again this year.")
    german = (
        "Bericht der Finanzabteilung: alle Genehmigungen wurden auch in diesem Jahr wieder ganz pünktlich und"
        " vollständig eingereicht."
    )
    assert len(text_terms(german, "de")) == len(text_terms(english[-1])) == 16
    texts = [*english, german]
    rows = [
        {"id": i, "doc_id": i, "text": t, "heading": None, "folder_id": "f", "language": detect([t])}
        for i, t in enumerate(texts, 1)
    ]
    assert rows[-1]["language"] == "de" and rows[0]["language"] == "en"
    index = KeywordIndex(tmp_path / "t")
    index.replace([], rows)
    index.commit()
    (zeppelin,), _ = index.search("zeppelin", 5)
    (genehmigung,), _ = index.search("Genehmigung", 5)
    assert (zeppelin.chunk_id, genehmigung.chunk_id) == (len(english), len(texts))
    assert genehmigung.score == pytest.approx(zeppelin.score, rel=0.01)  # one match each, same length, same IDF
    index.close()


def test_a_snippet_starts_at_the_first_word_matched_in_the_documents_language() -> None:
    assert first_match(GERMAN, "Genehmigung", "de") == GERMAN.index("Genehmigungen")
    assert first_match(GERMAN, "Genehmigung", "en") is None  # what an English stemmer saw
    assert first_match(ENGLISH, "permit", "en") == ENGLISH.index("permits")


# ------------------------------------------------------------------------------------------------
# a real kernel


class World(FolderWorld):
    def language(self, name: str) -> Any:
        return self.call(SummaryRequest(str(self.root / "docs" / name)), SummaryReply).analysis.get("language")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with folder_world(FILES, "fml-", "languages-test", World) as w:
        yield w


def test_a_german_word_finds_the_german_document_that_holds_only_another_form(world: World) -> None:
    assert "Genehmigung " not in GERMAN and "Antrag " not in GERMAN  # only the plurals stand in the file
    assert world.found("Genehmigung") == ["bauamt.txt"]
    assert world.found("Antrag Statik") == ["bauamt.txt"]
    for mode in ("keyword", "hybrid"):
        reply: SearchReply = world.call(SearchRequest("Genehmigung", mode), SearchReply)
        first = reply.results[0]
        assert first["file_name"] == "bauamt.txt", mode
        assert "Die Genehmigungen" in first["snippet"], first["snippet"]


def test_french_and_spanish_forms_find_their_documents(world: World) -> None:
    assert world.found("délivrer permis") == ["urbanisme.txt"]  # délivrés; English stems keep them apart
    assert world.found("licencia aprobado") == ["mercado.txt"]  # aprobadas


def test_phrases_and_exclusions_are_stemmed_in_the_documents_language(world: World) -> None:
    assert world.found('"Genehmigung für den Umbau"') == ["bauamt.txt"]
    assert world.found("Genehmigung -Brandschutz") == []  # excluded in its German form as well
    assert world.found("Genehmigung -permit") == ["bauamt.txt"]
    for mode in ("keyword", "hybrid"):
        assert "bauamt.txt" not in world.found('Umbau "Genehmigung der Stadt"', mode), mode


def test_english_documents_keep_their_english_stemming(world: World) -> None:
    assert world.found("permit run")[0] == "library.txt"  # permits, running
    assert world.found("running") == ["library.txt"]
    assert world.found("permits issued library")[0] == "library.txt"


def test_cjk_text_is_still_found_by_its_bigrams(world: World) -> None:
    assert world.found("建築許可") == ["tokyo.txt"]
    assert world.found("図書館") == ["tokyo.txt"]


def test_each_documents_language_is_in_its_summary(world: World) -> None:
    for name, code in LANGUAGES.items():
        assert world.language(name) == code, name


def test_an_index_of_older_fields_is_built_again_and_every_language_detected(world: World) -> None:
    """Put the previous version's marks in (a Tantivy index of version 1's fields, the meta saying 1, no language
    known), start again: the indexer empties Tantivy, replays every document from SQLite and detects each
    language on the way."""
    world.kernel.stop()
    old = world.kernel.home.data_dir / "tantivy"
    remove_tree(old)
    old.mkdir()
    builder = tantivy.SchemaBuilder()  # version 1: English stemmed by Tantivy, the text stored
    builder.add_integer_field("chunk_id", stored=True, indexed=True, fast=True)
    builder.add_integer_field("doc_id", stored=False, indexed=True, fast=True)
    builder.add_text_field("folder_id", stored=False, tokenizer_name="raw")
    builder.add_text_field("text", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("heading", stored=False, tokenizer_name="en_stem")
    builder.add_text_field("cjk", stored=False, tokenizer_name="whitespace")
    writer = tantivy.Index(builder.build(), path=str(old)).writer(heap_size=15_000_000, num_threads=1)
    writer.add_document(tantivy.Document(chunk_id=1, doc_id=1, folder_id="x", text=GERMAN, heading="", cjk=""))
    writer.commit()
    writer.wait_merging_threads()
    db = sqlite3.connect(world.kernel.home.data_dir / "index.sqlite")
    with db:
        db.execute("UPDATE meta SET value = '1' WHERE key = 'tantivy_schema'")
        assert db.execute("UPDATE documents SET language = NULL").rowcount == len(FILES)
    db.close()
    world.restart()
    wait_for(lambda: world.found("Genehmigung") == ["bauamt.txt"], 60, 0.2, "the German document found again")
    wait_for(world.ready, 60, 0.2, "every chunk in the rebuilt keyword index")
    for name, code in LANGUAGES.items():
        assert world.language(name) == code, name
    db = sqlite3.connect(world.kernel.home.data_dir / "index.sqlite")
    assert db.execute("SELECT value FROM meta WHERE key = 'tantivy_schema'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()
    assert world.found("建築許可") == ["tokyo.txt"] and world.found("running") == ["library.txt"]
