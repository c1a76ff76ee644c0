"""The rules that write the shape bench's known-item queries (tests/bench/shapes/rules.py): seeded and
repeatable, a scramble keeps the common words a person remembers, and the split is a hash of the id alone;
and the bench's scores (tests/bench/shapes/run.py) on constructed outcomes; batch 2's question checks; a held-out
batch (3) held out whole, every other row by its hash; keyword-list batches repeatable, held out, on fresh documents;
the fifth corpus's known items (the same program, its own seed) checked mechanically, and its sets held out whole.
The text is the project's own architecture notes, read by the real parser (a real document, not a stub)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.bench.shapes import generate, rules
from tests.bench.shapes.corpora import CELERY, Corpus
from tests.bench.shapes.generate import HELD_OUT_BATCHES, KNOWN, _check_batch2, _check_split, draw_corpus
from tests.bench.shapes.run import Outcome, Run, Scores, rank, separation
from tests.bench.shapes.sets import DATA

REPO = Path(__file__).resolve().parents[1]
TEXT = (REPO / "docs" / "architecture.md").read_text("utf-8")


def test_the_same_seed_draws_the_same_queries_and_another_seed_other_ones() -> None:
    first = [rules.scramble(TEXT, rules.rng_for("c", "scramble")) for _ in range(1)]
    again = [rules.scramble(TEXT, rules.rng_for("c", "scramble")) for _ in range(1)]
    other = [rules.scramble(TEXT, rules.rng_for("d", "scramble")) for _ in range(1)]
    assert first == again and first[0] is not None
    assert first != other
    assert rules.fragment(TEXT, rules.rng_for("c", "fragment")) == rules.fragment(TEXT, rules.rng_for("c", "fragment"))


def test_drawing_a_folder_twice_writes_the_same_rows(tmp_path: Path) -> None:
    for name in ("architecture.md", "development.md", "reliability.md", "security.md"):
        shutil.copy(REPO / "docs" / name, tmp_path / name)
    rows = draw_corpus("docs", tmp_path, 3)
    assert rows == draw_corpus("docs", tmp_path, 3)
    assert {r["shape"] for r in rows} >= {"fragment", "scramble", "keywords"}
    for r in rows:
        assert (tmp_path / r["file"]).is_file() and r["split"] == rules.split_of(r["id"])


def test_a_scramble_keeps_common_words_and_only_words_of_the_page() -> None:
    page = set(rules.word_string(TEXT).split())
    shuffled = 0
    for seed in range(40):
        query = rules.scramble(TEXT, rules.rng_for(str(seed), "scramble"))
        assert query is not None
        words = query.split()
        common = [w for w in words if w in rules.COMMON]
        assert 8 <= len(words) <= 10 and len(set(words)) == len(words)
        assert len(common) >= 2 and len(words) - len(common) >= 4, query
        assert set(words) <= page
        shuffled += rules.word_string(query) not in rules.word_string(TEXT)
    assert shuffled >= 30  # in scrambled order, not a phrase of the page


def test_a_fragment_is_consecutive_words_of_one_clean_sentence() -> None:
    for seed in range(20):
        fragment = rules.fragment(TEXT, rules.rng_for(str(seed), "fragment"))
        assert fragment is not None and 5 <= len(fragment.split()) <= 8
        assert rules.word_string(fragment).lower() in rules.word_string(TEXT)


def test_a_rest_title_is_a_heading_and_a_code_line_a_command() -> None:
    raw = "Install\n=======\n\nRunning the tests\n-----------------\n\n::\n\n    $ pytest -x --durations=10\n"
    assert rules.headings(raw, raw, "rst") == ["Running the tests"]  # one word: too short
    found = rules.commands(raw + "raise ValueError: no such option here\n")
    assert "pytest -x --durations=10" in found and "--durations=10" in found
    assert "ValueError: no such option here" in found


def test_the_split_is_a_hash_of_the_id_and_holds_out_about_a_third() -> None:
    rows = [
        json.loads(line) for path in (KNOWN, DATA / "questions.jsonl") for line in path.read_text("utf-8").splitlines()
    ]
    assert len(rows) > 500
    for row in rows:
        assert _check_split(row) == [], row["id"]
    hashed = [r for r in rows if r.get("batch") not in HELD_OUT_BATCHES]
    assert all(r["split"] == rules.split_of(r["id"]) for r in hashed)
    held = sum(r["split"] == "held_out" for r in hashed) / len(hashed)
    assert 0.25 < held < 0.42
    assert rules.split_of("a-x-00") == rules.split_of("a-x-00")


def test_a_held_out_batch_is_held_out_whole_and_an_older_row_keeps_its_hash() -> None:
    tune_id = next(f"f-x-{n:02d}" for n in range(100) if rules.split_of(f"f-x-{n:02d}") == "tune")
    assert _check_split({"id": tune_id, "split": "held_out", "batch": 3}) == []
    assert _check_split({"id": tune_id, "split": "tune", "batch": 3})
    assert _check_split({"id": tune_id, "split": "tune", "batch": 5})  # batch 5 (session 52) likewise
    assert _check_split({"id": tune_id, "split": "tune", "batch": 7})  # and batch 7 (session 53)
    assert _check_split({"id": tune_id, "split": "tune", "batch": 8})  # the fifth corpus's batch (session 53)
    assert _check_split({"id": tune_id, "split": "held_out", "batch": 8}) == []
    assert _check_split({"id": tune_id, "split": "tune", "batch": 9})  # and batch 9 (session 54)
    assert _check_split({"id": tune_id, "split": "tune", "batch": 10})  # and batch 10 (session 55)
    assert _check_split({"id": tune_id, "split": "tune", "batch": 11})  # and batch 11 (session 55, for 56)
    assert _check_split({"id": tune_id, "split": "tune", "batch": 12})  # and batch 12 (session 56, for the next)
    assert _check_split({"id": tune_id, "split": "tune", "batch": 13})  # and batch 13 (Flask's known items)
    assert _check_split({"id": tune_id, "split": "tune", "batch": 2}) == []
    assert _check_split({"id": tune_id, "split": "held_out", "batch": 2})
    assert _check_split({"id": tune_id, "split": "held_out"})


def test_the_scores_count_the_first_gold_file_and_the_floor_reads_top_scores() -> None:
    def outcome(qid: str, shape: str, files: list[str], top: float | None) -> Outcome:
        return Outcome(qid, shape, "c", "tune", True, "keyword", files, top)

    assert rank(["x", "g", "g"], ("g",)) == 2 and rank(["x"] * 10 + ["g"], ("g",)) == 0
    s = Scores()
    for o in (outcome("a", "fragment", ["g", "x"], 3.0), outcome("b", "fragment", ["x", "y", "g"], 2.0)):
        s.add(o, ("g",))
    assert (s.n, s.top1, s.hit5) == (2, 1, 2) and abs(s.mrr - (1 + 1 / 3)) < 1e-9
    run = Run(
        outcomes=[outcome("a", "fragment", [], 3.0), outcome("k", "none", [], None), outcome("k2", "none", [], 5.0)]
    )
    none, answerable, auc, n = separation(run, "keyword", "all")
    assert (none, answerable, n) == (2.5, 3.0, 2) and auc == 0.5  # beats the empty search (0), loses to 5.0


def test_a_batch_2_question_that_holds_its_answer_or_copies_its_passage_is_reported() -> None:
    passage = "To find out the current value of a particular option use aspell config option"
    passages = {("manuals", "a.html"): passage}
    row = {"id": "i-x", "corpus": "manuals", "drawn": "a.html", "answer": "aspell config", "query": ""}
    page = "<p>use 'aspell config option' to print it</p>"
    fine = {**row, "query": "Which command prints the current value of a single Aspell option?"}
    assert _check_batch2(fine, page, passages) == []
    own = {**row, "query": "What does aspell config print?"}
    assert [p for p in _check_batch2(own, page, passages) if "its own answer" in p]
    copied = {**row, "query": "How do I find out the current value of a particular option?"}
    assert [p for p in _check_batch2(copied, page, passages) if "repeats 'find out the current value of'" in p]
    assert [p for p in _check_batch2(fine, "<p>nothing here</p>", passages) if "does not hold" in p]


def test_a_keyword_list_batch_is_repeatable_held_out_and_skips_the_documents_used_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("architecture.md", "development.md", "reliability.md", "security.md", "tuning.md"):
        shutil.copy(REPO / "docs" / name, tmp_path / name)
    three = generate.draw_keywords("docs", tmp_path, 3, 3)
    assert three == generate.draw_keywords("docs", tmp_path, 3, 3) and len(three) == 3
    assert three != generate.draw_keywords("docs", tmp_path, 3, 2)  # another batch, another seed
    for r in three:
        assert str(r["id"]).startswith("c3-docs-") and r["split"] == "held_out" and r["batch"] == 3
        words = set(rules.content_words((tmp_path / str(r["file"])).read_text("utf-8")))
        assert set(str(r["query"]).split()) <= words
    used = {str(three[0]["file"])}
    monkeypatch.setattr(generate, "used_for_keywords", lambda corpus, batch: used)
    assert all(r["file"] not in used for r in generate.draw_keywords("docs", tmp_path, 3, 3))


def test_every_keyword_list_batch_on_disk_is_held_out_and_on_documents_no_earlier_list_used() -> None:
    for batch, (path, _) in generate.KEYWORD_BATCHES.items():
        rows = generate.keyword_rows(path)
        assert len(rows) == 4 * generate.KEYWORDS_PER
        for r in rows:
            assert r["split"] == "held_out" and r["batch"] == batch and r["shape"] == "keywords"
            assert r["file"] not in generate.used_for_keywords(r["corpus"], batch)


def docs_corpus(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    for name in ("architecture.md", "development.md", "reliability.md", "security.md", "tuning.md"):
        shutil.copy(REPO / "docs" / name, tmp_path / name)
    return tmp_path


def test_a_held_out_known_item_set_is_the_same_program_with_its_own_seed_every_row_held_out(tmp_path: Path) -> None:
    folder = docs_corpus(tmp_path)
    rows = draw_corpus("docs", folder, 2, 53, 8)
    assert rows == draw_corpus("docs", folder, 2, 53, 8)
    assert {r["shape"] for r in rows} >= {"fragment", "scramble", "keywords"}
    assert all(r["split"] == "held_out" and r["batch"] == 8 for r in rows)
    assert [r["query"] for r in rows] != [r["query"] for r in draw_corpus("docs", folder, 2)]  # seed 38's draw
    assert draw_corpus("docs", folder, 2) == draw_corpus("docs", folder, 2, rules.SEED)  # known.jsonl's unchanged


def test_the_fifth_corpus_known_items_check_holds_on_a_fresh_draw_and_reports_a_changed_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = docs_corpus(tmp_path / "docs")
    monkeypatch.setattr(generate, "build", lambda name, root: Corpus(name, folder, 5))
    monkeypatch.setattr(generate, "KNOWN4", ("docs", 53))
    monkeypatch.setattr(generate, "KNOWN4_FILE", tmp_path / "known4.jsonl")
    rows = draw_corpus("docs", folder, 3, 53, generate.CORPUS5_BATCH)

    def check(written: list[dict[str, object]]) -> list[str]:
        (tmp_path / "known4.jsonl").write_text("".join(json.dumps(r) + "\n" for r in written), encoding="utf-8")
        return generate.check_known(tmp_path, per=3)

    assert check(rows) == []
    tune = [{**rows[0], "split": "tune"}, *rows[1:]]
    assert [p for p in check(tune) if "not the rows a fresh draw writes" in p]
    assert [p for p in check(tune) if p.startswith(f"{rows[0]['id']}: split 'tune'")]
    moved = [{**rows[0], "query": "kombu rabbitmq broker"}, *rows[1:]]
    assert [p for p in check(moved) if "is not in" in p]
    assert [p for p in check(rows + rows[-1:]) if "more than 3" in p]


def test_the_fifth_corpus_sets_on_disk_are_held_out_whole_and_within_their_rules() -> None:
    known = generate.keyword_rows(generate.KNOWN4_FILE)
    shapes = Counter(r["shape"] for r in known)
    assert set(shapes) == set(rules.SHAPES) and max(shapes.values()) <= 25
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text("utf-8").splitlines()]
    batch8 = [r for r in questions if r.get("batch") == generate.CORPUS5_BATCH]
    assert Counter(r["shape"] for r in batch8) == {"how": 12, "number": 8, "which": 8}
    assert generate.CORPUS5_BATCH in HELD_OUT_BATCHES
    for r in known + batch8:
        assert (r["corpus"], r["split"], r["batch"]) == (CELERY, "held_out", generate.CORPUS5_BATCH), r["id"]
    assert not [r for r in questions if r["corpus"] == CELERY and r.get("batch") not in (generate.CORPUS5_BATCH, 9)]


def test_shape_batch_9_on_disk_is_held_out_whole_with_its_rules_quotas() -> None:
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text("utf-8").splitlines()]
    batch9 = [r for r in questions if r.get("batch") == 9]
    assert 9 in HELD_OUT_BATCHES and all(r["split"] == "held_out" and r["source"] == "new" for r in batch9)
    quotas = {CELERY: {"how": 10, "number": 7, "which": 7}}  # its draw's last 27 passages (data/README.md)
    for corpus in (CELERY, "django-docs", "scifact"):
        got = Counter(r["shape"] for r in batch9 if r["corpus"] == corpus)
        assert got == quotas.get(corpus, {"how": 12, "number": 8, "which": 8}), corpus
    assert all(r["drawn"] == r["files"][0] for r in batch9)


@pytest.mark.parametrize("batch", [10, 11])
def test_shape_batches_10_and_11_on_disk_are_held_out_whole_with_their_rules_quotas(batch: int) -> None:
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text("utf-8").splitlines()]
    rows = [r for r in questions if r.get("batch") == batch]
    assert batch in HELD_OUT_BATCHES and all(r["split"] == "held_out" and r["source"] == "new" for r in rows)
    for corpus in ("django-docs", "scifact"):
        got = Counter(r["shape"] for r in rows if r["corpus"] == corpus)
        assert got == {"how": 20, "number": 10, "which": 10}, corpus
    assert len(rows) == 80 and all(r["drawn"] == r["files"][0] for r in rows)


def test_shape_batch_12_on_disk_is_held_out_whole_with_its_rules_quotas() -> None:
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text("utf-8").splitlines()]
    batch12 = [r for r in questions if r.get("batch") == 12]
    assert 12 in HELD_OUT_BATCHES and all(r["split"] == "held_out" and r["source"] == "new" for r in batch12)
    quotas = {"flask-docs": {"how": 20, "number": 6, "which": 10}}  # its draw's 68 passages held 6 numbers
    for corpus in ("flask-docs", "scifact"):
        got = Counter(r["shape"] for r in batch12 if r["corpus"] == corpus)
        assert got == quotas.get(corpus, {"how": 20, "number": 10, "which": 10}), corpus
    assert len(batch12) == 76 and all(r["drawn"] == r["files"][0] for r in batch12)
    assert not [r for r in questions if r["corpus"] == "flask-docs" and r.get("batch") != 12]


def test_the_sixth_corpus_known_items_on_disk_are_held_out_whole_as_batch_13() -> None:
    path, corpus, seed, batch = generate.known_set(5)
    known = generate.keyword_rows(path)
    assert (corpus, seed, batch) == ("flask-docs", 56, 13) and batch in HELD_OUT_BATCHES
    assert Counter(r["shape"] for r in known) == dict.fromkeys(rules.SHAPES, 25)
    assert all((r["corpus"], r["split"], r["batch"]) == (corpus, "held_out", batch) for r in known)
