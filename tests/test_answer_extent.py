"""What a quote takes in and what a sentence holds (issue 38, answers that hold what is asked): a list's item is quoted
with the line ending in a colon that introduces its list, and that line with every item of its list; an item is quoted
whole, with its sentences on its bullet's line or indented under it; a sentence that names its subject by an
abbreviation holds the words the abbreviation stands for. Pure functions on real text (the 4ti2 manual's NEWS chapter
as the PDF parser extracts it, Django 4.2's GZip middleware section, SciFact abstract 20649735, pytest's release notes:
tests/pytest_docs/); the same rules end to end through ``chat_with_documents`` on a real kernel, embedding model and
MCP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldermind.workers.indexer.evidence import evidence, sentences
from tests.helpers import require_bundled_model
from tests.test_answers import extractive, serving
from tests.test_quote_context import _quoted

require_bundled_model()

NEWS = (  # 4ti2's manual (4ti2-doc, Debian 12), chapter 6, as the project's PDF parser extracts it
    "Chapter 6. NEWS: Changes to 4ti2 since version 1.2 51\n"
    "News in 4ti2 version 1.5, compared to 1.4:\n"
    "* Latest version of new qsolve.\n"
    "News in 4ti2 version 1.4, compared to 1.3.2:\n"
    "* Portability fixes\n"
    "* New abstract C and C++ API (callable library), header files in 4ti2/\n"
    "* New implementation of zsolve in C++\n"
    "News in 4ti2 version 1.3.2, compared to 1.3.1:\n"
    "* New build system, using GNU Autoconf, Automake, and Libtool.\n"
    'This allows 4ti2 to be built using the standard "./configure &&\n'
    'make && make install" sequence.\n'
    "* Bug fixes\n"
)
GZIP = (  # Django 4.2.16, docs/ref/middleware.txt, "GZip middleware" (its reST as the text parser reads it)
    "GZip middleware\n"
    "---------------\n\n"
    "The ``django.middleware.gzip.GZipMiddleware`` compresses content for browsers\n"
    "that understand GZip compression (all modern browsers).\n\n"
    "This middleware should be placed before any other middleware that need to\n"
    "read or write the response body so that compression happens afterward.\n\n"
    "It will NOT compress content if any of the following are true:\n\n"
    "* The content body is less than 200 bytes long.\n\n"
    "* The response has already set the ``Content-Encoding`` header.\n\n"
    "* The request (the browser) hasn't sent an ``Accept-Encoding`` header\n"
    "  containing ``gzip``.\n\n"
    "If the response has an ``ETag`` header, the ETag is made weak to comply with\n"
    ":rfc:`9110#section-8.8.1`.\n"
)
ABSTRACT = (  # SciFact, abstract 20649735, as the corpus file holds it
    "Outcome of repeated radiosurgery for recurrent metastatic brain tumors.\n\n"
    "OBJECTIVE We investigated the outcome of repeated gamma knife radiosurgery (GKS) for local or remote recurrence "
    "after initial radiosurgery. MATERIAL AND METHODS We retrospectively reviewed 204 patients who were treated with "
    "GKS. Among them 43 patients (21%) underwent GKS more than once. The second GKS was given for recurrence at the "
    "previously treated sites in 16 patients, new lesions at remote sites in 13, and both local recurrence and new "
    "lesions in 14. RESULTS The median survival from the first GKS was 36 (7-190) weeks in all patients and 68 "
    "(16-156) weeks in 43 patients with repeated GKS. The median time from the first GKS to the second was 37 weeks. "
    "The median survival from the second radiosurgical intervention was 32 (7-132) weeks. Local control rate at 6 "
    "months after salvage GKS was 90.7%. RPA class was the commonly dominant prognostic factor in both initial and "
    "salvage GKS. CONCLUSION Recurrence is common for patients with metastatic brain tumors after initial "
    "radiosurgery. Local control and survival time after salvage treatment are comparable with those after initial "
    "radiosurgery. GKS as a salvage treatment may provide additional survival benefit in selected patients.\n"
)


RELEASE = (Path(__file__).parent / "pytest_docs" / "release-2.0.0.rst").read_text("utf-8")
CHANGES = (  # pytest 8.3.4's docs, announce/release-2.8.6.rst: two items of its list of changes
    "- fix #628: fixed internal UnicodeDecodeError when doctests contain unicode.\n"
    "  Thanks Jason R. Coombs for the report and Bruno Oliveira for the PR.\n\n"
    "- fix #1334: Add captured stdout to jUnit XML report on setup error.\n"
    "  Thanks Georgy Dyuldin for the PR.\n"
)


def test_a_list_item_is_quoted_with_the_colon_line_that_introduces_its_list_over_the_items_before_it() -> None:
    assert [s.item for s in sentences.split(NEWS, 1)][:4] == [False, False, True, False]
    quote = _quoted(NEWS, "New implementation of zsolve")
    assert quote.startswith("News in 4ti2 version 1.4, compared to 1.3.2: * Portability fixes"), quote
    assert quote.endswith("New implementation of zsolve in C++"), quote
    # an item is an item, not a definition list's term with its description
    assert _quoted(NEWS, "New abstract C").startswith("News in 4ti2 version 1.4, compared to 1.3.2:")
    # a finished item of a list brings its colon line too
    assert _quoted(GZIP, "The content body is less than 200 bytes long.").startswith("It will NOT compress content")
    # a paragraph is no list item: it stands alone
    assert _quoted(GZIP, "If the response has an").startswith("If the response has an")


def test_a_colon_line_brings_every_item_of_its_list_finished_sentences_or_not() -> None:
    quote = _quoted(GZIP, "It will NOT compress content")
    assert "less than 200 bytes long." in quote and "``Content-Encoding`` header." in quote, quote
    assert quote.endswith("containing ``gzip``."), quote
    assert "ETag" not in quote, quote  # the paragraph after the list is not an item of it


def test_a_list_item_is_quoted_whole_with_its_sentences_on_its_line_or_indented_under_its_bullet() -> None:
    assert _quoted(RELEASE, 'removed the "disabled"') == (
        'removed the "disabled" attribute in test classes. Use the skipping and pytestmark mechanism to skip or xfail '
        "a test class."
    )
    assert _quoted(CHANGES, "fix #1334") == (
        "fix #1334: Add captured stdout to jUnit XML report on setup error. Thanks Georgy Dyuldin for the PR."
    )
    assert _quoted(CHANGES, "fix #628").endswith("Jason R. Coombs for the report and Bruno Oliveira for the PR.")
    # a line not indented under the bullet is not the item's: the next release's heading stays out
    assert _quoted(NEWS, "Latest version of new qsolve").endswith("* Latest version of new qsolve.")


def test_an_abbreviation_stands_for_the_words_before_its_parenthesis_that_spell_it() -> None:
    defined = sentences.abbreviations(
        ABSTRACT + " skin and soft tissue infections (SSTIs); 95% CI (1.5-2.0); see the table (below); a small "
        "embedded SQL database library (SQLite)."
    )
    assert defined == {
        "GKS": sentences.content_terms("gamma knife radiosurgery"),
        "SSTI": sentences.content_terms("soft tissue infections"),
    }
    held = sentences.stands_for("Local control rate at 6 months after salvage GKS was 90.7%.", defined)
    assert held == sentences.content_terms("gamma knife radiosurgery")
    assert sentences.stands_for("the proportion of community-onset SSTIs", defined) == defined["SSTI"]
    assert not sentences.stands_for("The median survival was 32 weeks.", defined)


def test_a_sentence_naming_its_subject_by_abbreviation_covers_the_question_s_words_for_it() -> None:
    hit = {"text": ABSTRACT, "chunk_index": 0, "location": {"line_start": 1, "heading": None}, "file_path": "/a.txt"}
    found = evidence.EvidenceService._candidates([hit])  # type: ignore[list-item]
    question = "What was the local control rate after salvage gamma knife radiosurgery?"
    evidence.EvidenceService._cover(question, "", found)
    by_text = {c.sentence.text: c.coverage for c in found}
    answer = by_text["Local control rate at 6 months after salvage GKS was 90.7%."]
    assert answer == pytest.approx(1.0), by_text  # every term of the question: "GKS" holds gamma knife radiosurgery
    assert answer == max(by_text.values()), by_text


CHKCONFIG = (  # Celery 5.4.0's docs (its sdist), history/changelog-2.4.rst: one item of the 2.4.0 changes
    "* RHEL init-script: Changed worker start-up priority.\n\n"
    "    The default start / stop priorities for MySQL on RHEL are:\n\n"
    "    .. code-block:: console\n\n"
    "        # chkconfig: - 64 36\n\n"
    "    Therefore, if Celery is using a database as a broker / message store, it\n"
    "    should be started after the database is up and running, otherwise errors\n"
    "    will ensue. This commit changes the priority in the init-script to:\n\n"
    "    .. code-block:: console\n\n"
    "        # chkconfig: - 85 15\n\n"
    "    which are the default recommended settings for 3-rd party applications\n"
    "    and assure that Celery will be started after the database service & shut\n"
    "    down before it terminates.\n"
)
FLASK_RUN = (  # Flask 3.1's docs, cli.rst, "Debug Mode", its sentence made to end with a colon, a :caption: added
    "To enable debug mode, use the ``--debug`` option:\n\n"
    ".. code-block:: console\n"
    "    :caption: the debug server\n\n"
    "     $ flask --app hello run --debug\n"
    '      * Serving Flask app "hello"\n'
    "      * Debug mode: on\n\n"
    "The ``--debug`` option can also be passed to the top level ``flask`` command.\n"
)


def test_a_code_directive_s_lines_are_quoted_line_by_line_after_the_colon_that_introduces_them() -> None:
    """walk2 (j-celery-docs-12): ".. code-block:: console" and its lines were run into the sentence before them."""
    assert _quoted(CHKCONFIG, "This commit changes") == (
        "Therefore, if Celery is using a database as a broker / message store, it should be started after the "
        "database is up and running, otherwise errors will ensue. This commit changes the priority in the init-script "
        "to:\n# chkconfig: - 85 15"
    )
    assert _quoted(CHKCONFIG, "The default start / stop") == (
        "The default start / stop priorities for MySQL on RHEL are:\n# chkconfig: - 64 36"
    )
    # The directive's options are not its content, and its lines keep their indentation within the block.
    quote = _quoted(FLASK_RUN, "To enable debug mode")
    assert quote == (
        "To enable debug mode, use the ``--debug`` option:\n"
        '$ flask --app hello run --debug\n * Serving Flask app "hello"\n * Debug mode: on'
    ), quote
    # A prose directive is no code block, and a sentence not ending with a colon brings nothing.
    assert _quoted(SETTINGS, "If you set") == (
        "If you set :setting:`DEBUG` to ``False``, you also need to properly set the :setting:`ALLOWED_HOSTS` setting."
    )
    assert _quoted(FLASK_RUN, "The ``--debug`` option can also") == (
        "The ``--debug`` option can also be passed to the top level ``flask`` command."
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    files = {
        "4ti2-news.txt": NEWS,
        "gzip-middleware.txt": GZIP,
        "20649735.txt": ABSTRACT,
        "release-2.0.0.rst": RELEASE,
        "changelog-2.4.rst": CHKCONFIG,
    }
    with serving(files) as url_token:
        yield url_token


def test_a_release_note_item_is_answered_with_the_release_it_is_listed_under(served: Any) -> None:
    out = extractive(served, "Which 4ti2 release brought the new implementation of zsolve in C++?")
    quote = next(c["quote"] for c in out["citations"] if "zsolve in C++" in c["quote"])
    assert quote.startswith("News in 4ti2 version 1.4, compared to 1.3.2:"), out["answer"]


def test_a_finished_list_item_is_quoted_with_the_line_that_says_what_its_list_is(served: Any) -> None:
    out = extractive(served, "Which response header keeps GZipMiddleware from compressing a response?")
    quotes = [c["quote"] for c in out["citations"] if "Content-Encoding" in c["quote"]]
    assert quotes and "It will NOT compress content if any of the following are true:" in quotes[0], out["answer"]


def test_a_question_spelling_out_an_abbreviation_is_answered_by_the_sentence_using_it(served: Any) -> None:
    # without the long form, the abstract's OBJECTIVE sentence (which spells it out) was quoted first
    out = extractive(served, "What was the median time between the first and second gamma knife radiosurgery?")
    assert "The median time from the first GKS to the second was 37 weeks." in out["citations"][0]["quote"], out


def test_a_removed_feature_s_item_is_quoted_with_what_replaces_it_the_rest_of_its_list_item(served: Any) -> None:
    out = extractive(served, "What replaces the disabled attribute on test classes in pytest 2.0?")
    removed = next(c["quote"] for c in out["citations"] if 'removed the "disabled" attribute' in c["quote"])
    assert removed.endswith("Use the skipping and pytestmark mechanism to skip or xfail a test class."), out["answer"]


SETTINGS = (  # Django 4.2.16, docs/topics/settings.txt (its reST as the text parser reads it)
    "The basics\n==========\n\n"
    "A settings file is just a Python module with module-level variables.\n\n"
    "Here are a couple of example settings::\n\n"
    '    ALLOWED_HOSTS = ["www.example.com"]\n'
    "    DEBUG = False\n"
    '    DEFAULT_FROM_EMAIL = "webmaster@example.com"\n\n'
    ".. note::\n\n"
    "    If you set :setting:`DEBUG` to ``False``, you also need to properly set\n"
    "    the :setting:`ALLOWED_HOSTS` setting.\n\n"
    "In your Django apps, use settings by importing the object\n"
    "``django.conf.settings``. Example::\n\n"
    "    from django.conf import settings\n\n"
    "    if settings.DEBUG:\n"
    "        # Do something\n"
    "        ...\n\n"
    "Note that ``django.conf.settings`` isn't a module -- it's an object.\n"
)


def test_a_rest_literal_block_is_quoted_line_by_line_after_the_sentence_that_introduces_it() -> None:
    """walk2: a reST ``::`` block was run together into one line of prose."""
    assert _quoted(SETTINGS, "Here are a couple of example settings") == (
        "Here are a couple of example settings:\n"
        'ALLOWED_HOSTS = ["www.example.com"]\n'
        "DEBUG = False\n"
        'DEFAULT_FROM_EMAIL = "webmaster@example.com"'
    )
    quote = _quoted(SETTINGS, "Example::")  # the whole block, its indentation within it kept
    assert quote == "Example:\nfrom django.conf import settings\nif settings.DEBUG:\n    # Do something", quote
    # Prose stays one line, and a quote without a literal block is as before.
    assert _quoted(SETTINGS, "A settings file is just") == (
        "A settings file is just a Python module with module-level variables."
    )


def test_a_code_directive_s_line_is_answered_as_a_line_of_its_own_under_its_colon_line(served: Any) -> None:
    """End to end (the real text parser, index and evidence over MCP): walk2's ".. code-block:: console" quote."""
    out = extractive(served, "What chkconfig start and stop priorities does the RHEL init script use now?")
    quote = next(c["quote"] for c in out["citations"] if "85 15" in c["quote"])
    assert quote.endswith("This commit changes the priority in the init-script to:\n# chkconfig: - 85 15"), quote
