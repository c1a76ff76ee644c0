"""The no-answer sets' parts and check, as ``tests/bench/factoid_data/README.md`` fixes them: the newest set
(``noanswer9``) is the floor bench's held-out part, every earlier no-answer row (and the shape bench's ``none``
rows) tune; the check fails a row whose ``absent`` and ``present`` meet in one document, or whose ``present`` misses
the document it was written from."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import answer_floor, noanswer_check


def test_the_newest_no_answer_set_is_held_out_and_every_earlier_row_is_tune() -> None:
    asked = [a for a in answer_floor._questions() if a.kind != "answerable"]
    newest = {json.loads(line)["id"] for line in answer_floor.NOANSWER9.read_text("utf-8").splitlines() if line}
    earlier = {
        json.loads(line)["id"]
        for path in (
            answer_floor.NOANSWER,
            answer_floor.NOANSWER2,
            answer_floor.NOANSWER3,
            answer_floor.NOANSWER4,
            answer_floor.NOANSWER5,
            answer_floor.NOANSWER6,
            answer_floor.NOANSWER7,
            answer_floor.NOANSWER8,
        )
        for line in path.read_text("utf-8").splitlines()
        if line
    }
    assert len(newest) == 48 and len(earlier) == 90 + 48 + 48 + 48 + 48 + 48 + 48 + 48
    assert {a.id for a in asked} == newest | earlier
    assert {a.id for a in asked if a.split == "held_out"} == newest
    parts = answer_floor.splits()
    assert {parts[i] for i in newest} == {"held_out"} and {parts[i] for i in earlier} == {"tune"}


def test_only_asks_the_named_set_alone_and_without_leaves_it_out() -> None:
    asked = answer_floor._questions("noanswer9")
    assert len(asked) == 48 and {a.split for a in asked} == {"held_out"}
    rest = [a for a in answer_floor._questions("", "noanswer9") if a.kind != "answerable"]
    assert not {a.id for a in asked} & {a.id for a in rest} and {a.split for a in rest} == {"tune"}
    beside = answer_floor._questions("noanswer9", factoids="who4")
    who = [a for a in beside if a.kind == "answerable"]
    assert len(beside) == 48 + 18 and len(who) == 18 and {a.split for a in who} == {"held_out"}


def test_shape_rows_keep_their_citations_none_rows_tune_and_the_newest_batch_held_out(tmp_path: Path) -> None:
    row: dict[str, object] = {"id": "k-any-11", "shape": "none", "corpus": "*", "split": "held_out", "query": "hi"}
    row |= {"support": {}, "holds_gold_floorless": False, "cites_gold_floorless": False}
    cited = [{"quote": "q", "snippet": "s", "file_name": "f.txt", "location": {"heading": "h"}}]
    answerable = row | {"id": "f-x", "shape": "how", "split": "held_out", "batch": answer_floor.SHAPE_HELD_OUT[0]}
    answerable |= {"cited": cited}
    older = answerable | {"id": "f-y", "batch": 1}  # read before this session: tune whatever its hash split
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps([row, answerable, older]), encoding="utf-8")
    rows = answer_floor.shape_rows(path)
    assert [(a.kind, a.split) for a in rows] == [
        ("shape-none", "tune"),
        ("answerable", "held_out"),
        ("answerable", "tune"),
    ]
    assert rows[1].cited == cited and rows[2].cited == cited and rows[0].cited == []


def test_the_check_fails_a_row_whose_asked_thing_stands_beside_its_subject_or_whose_page_lacks_the_subject() -> None:
    docs = {"scifact": {"1": "LytA was discovered in 1990.", "2": "LytA sheds the capsule.", "3": "Nothing here."}}
    ok = {"id": "a", "corpus": "scifact", "present": r"\bLytA\b", "absent": r"\bcolou?r\b", "drawn": "2"}
    met = ok | {"id": "b", "absent": r"\bdiscover\w*"}
    elsewhere = ok | {"id": "c", "drawn": "3"}
    out = noanswer_check.failures([ok, met, elsewhere], docs)
    assert [line.split(":")[0] for line in out] == ["b", "c"]
