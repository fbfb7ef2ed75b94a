"""Resumable judging and the ``udcg judge`` command, with a scripted fake backend."""

from __future__ import annotations

import json

import pytest

from udcg.cli import main
from udcg.errors import InputError
from udcg.grade import runner
from udcg.grade.judges import TASKS, LLMJudge, RuleJudge
from udcg.io.authors import read_authors
from tests.conftest import ScriptedBackend


def grade_rome(chat, params) -> str:
    """Grade A when the passage holds 'Rome', B otherwise."""
    doc = chat[0]["content"].split("\nDocument: ")[-1].split("\n```")[0]
    return json.dumps({"motivation": "m", "grade": "A" if "Rome" in doc else "B"})


def authors_file(tmp_path, n_questions=3, n_passages=5):
    items = [{"example_id": f"q{i}", "question": f"capital {i}?", "answers": ["Rome"],
              "passages": [{"doc_id": f"d{j}", "text": ("Rome is it." if (i + j) % 3 == 0 else "Milan."),
                            "is_relevant": None if j else False} for j in range(n_passages)]}
             for i in range(n_questions)]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(items))
    return path


def test_kill_and_resume_gives_the_uninterrupted_output(tmp_path):
    path = authors_file(tmp_path)
    items = runner.passage_items(read_authors(path)[1])
    full = runner.judge_items(LLMJudge(ScriptedBackend(answer=grade_rome), TASKS["relevance"]), items, tmp_path / "full.cache", chunk_size=4)

    cache = tmp_path / "killed.cache"
    with pytest.raises(KeyboardInterrupt):
        runner.judge_items(LLMJudge(ScriptedBackend(answer=grade_rome, fault=KeyboardInterrupt, fault_after=2), TASKS["relevance"]), items, cache, chunk_size=4)
    assert len(cache.read_text().splitlines()) == 8  # two chunks finished
    with open(cache, "a") as f:
        f.write('{"key": "q2\\td0", "qid": "q2", "lab')  # a torn last line, as after kill -9
    second = ScriptedBackend(answer=grade_rome)
    done = []
    resumed = runner.judge_items(LLMJudge(second, TASKS["relevance"]), items, cache, chunk_size=4, progress=done.append)
    assert resumed == full
    assert len(second.prompts) == 15 - 8 and done[0] == 8 and sum(done) == 15
    assert [r["pid"] for r in full[:5]] == ["d0", "d1", "d2", "d3", "d4"]
    assert [r["label"] for r in full[:5]] == ["relevant", "irrelevant", "irrelevant", "relevant", "irrelevant"]


def test_cache_from_another_judge_is_refused(tmp_path):
    items = runner.passage_items(read_authors(authors_file(tmp_path))[1])
    runner.judge_items(RuleJudge(TASKS["relevance"]), items, tmp_path / "c")
    with pytest.raises(InputError, match="rules:containment"):
        runner.judge_items(LLMJudge(ScriptedBackend(answer=grade_rome), TASKS["relevance"]), items, tmp_path / "c")


def test_summary_and_write_back(tmp_path):
    path = authors_file(tmp_path, 1, 3)
    raw, questions = read_authors(path)
    items = runner.passage_items(questions)
    recs = runner.judge_items(LLMJudge(ScriptedBackend(answer="not json"), TASKS["relevance"], retries=0), items[:1],
                            tmp_path / "c1")
    recs += runner.judge_items(RuleJudge(TASKS["relevance"]), items[1:], tmp_path / "c2")
    s = runner.count_labels(recs)
    assert s == {"n": 3, "labels": {"irrelevant": 2}, "unparseable": 1, "repaired": 0, "retried": 0, "notes": 0}
    assert "unparseable=1" in runner.format_summary(s)
    out, skipped = runner.write_back(raw, recs, TASKS["relevance"])
    assert skipped == 1
    assert [p.get("is_relevant") for p in out[0]["passages"]] == [False, False, False]
    assert raw[0]["passages"][1]["is_relevant"] is None  # the caller's items are not mutated


def test_cli_rules_relevance_and_write_back(tmp_path, capsys):
    path = authors_file(tmp_path)
    out = tmp_path / "rel.jsonl"
    back = tmp_path / "back.json"
    assert main(["judge", "relevance", str(path), "-o", str(out), "--write-authors", str(back), "--no-progress"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 15 and {r["judge"] for r in rows} == {"rules:containment"}
    assert {r["prompt_version"] for r in rows} == {"rules-v1"}
    _, qs = read_authors(back)
    assert [p.relevant for p in qs[0].passages] == [True, False, False, True, False]
    assert "15 judged: irrelevant=10, relevant=5, unparseable=0" in capsys.readouterr().err


@pytest.fixture
def fake_registry(monkeypatch):
    backends = []

    def load_backend(spec):  # a spec resolved once (ModelSpec.load), never a name resolved again
        backends.append(ScriptedBackend(answer=grade_rome if spec.model == "good" else "I refuse.", name=spec.name))
        backends[-1].kw = dict(spec.options)
        return backends[-1]

    from udcg.llm import registry

    monkeypatch.setattr(registry, "load_backend", load_backend)  # reached by every ModelSpec.load
    return backends


def test_cli_model_judge_resume_and_unparseable(tmp_path, capsys, fake_registry):
    path = authors_file(tmp_path)
    out = tmp_path / "llm.jsonl"
    assert main(["judge", "relevance", str(path), "-o", str(out), "--judge", "good", "--no-progress"]) == 0
    first = out.read_text()
    assert main(["judge", "relevance", str(path), "-o", str(out), "--judge", "good", "--no-progress"]) == 0
    assert out.read_text() == first and fake_registry[-1].calls == []  # all from the cache
    assert fake_registry[0].kw == {}
    assert main(["judge", "relevance", str(path), "-o", str(out), "--judge", "good", "--no-progress",
                 "--batch-size", "4"]) == 0
    assert fake_registry[-1].kw == {"batch_size": 4}
    bad = tmp_path / "bad.jsonl"
    assert main(["judge", "relevance", str(path), "-o", str(bad), "--judge", "bad", "--no-progress", "--retries", "0"]) == 0
    rows = [json.loads(x) for x in bad.read_text().splitlines()]
    assert all(r["label"] is None and r["raw"] == "I refuse." and "no JSON" in r["error"] for r in rows)
    assert "unparseable=15" in capsys.readouterr().err


def test_cli_answers(tmp_path, capsys):
    path = tmp_path / "answers.jsonl"
    rows = [{"qid": "q", "cid": "c1", "question": "Q?", "answers": ["Rome"], "answer": "Rome.", "context_has_relevant": False},
            {"qid": "q", "cid": "c2", "question": "Q?", "answers": ["Rome"], "answer": "NO-RESPONSE", "context_has_relevant": True},
            {"qid": "q", "cid": "c3", "question": "Q?", "answers": ["Rome"], "answer": "Milan", "context_has_relevant": True}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o.jsonl"
    assert main(["judge", "answer", str(path), "-o", str(out), "--no-progress"]) == 0
    assert [json.loads(x)["label"] for x in out.read_text().splitlines()] == ["correct", "abstained", "wrong"]
    out2 = tmp_path / "o2.jsonl"
    assert main(["judge", "answer", str(path), "-o", str(out2), "--no-progress", "--require-relevant-context"]) == 0
    assert [json.loads(x)["label"] for x in out2.read_text().splitlines()] == ["wrong", "abstained", "wrong"]


@pytest.mark.parametrize("lines, message", [
    (['{"qid": "q", "cid": "c", "question": "Q?", "answers": ["a"]}'], "missing field 'answer'"),
    (['{"qid": "q", "cid": "c", "question": "Q?", "answers": [], "answer": "a"}'], "non-empty list"),
    (['{"qid": "q", "cid": "c", "question": "Q?", "answers": ["a"], "answer": "a", "context_has_relevant": "yes"}'], "true/false"),
    (['{"qid": "q", "cid": "c", "question": "Q?", "answers": ["a"], "answer": "a"}'] * 2, "duplicate (qid, cid)"),
])
def test_cli_bad_answer_input(tmp_path, capsys, lines, message):
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["judge", "answer", str(path), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert message in err and f"{path}:" in err and len(err.strip().splitlines()) == 1


def test_cli_refusals(tmp_path, capsys):
    path = authors_file(tmp_path)
    assert main(["judge", "grade", str(path), "-o", str(tmp_path / "g.jsonl")]) == 2
    assert "no rule-based judge" in capsys.readouterr().err
    noans = tmp_path / "noans.json"
    noans.write_text(json.dumps([{"example_id": "q", "question": "Q?", "passages": [{"doc_id": "d", "text": "t"}]}]))
    assert main(["judge", "relevance", str(noans), "-o", str(tmp_path / "r.jsonl")]) == 2
    assert "without 'answers'" in capsys.readouterr().err
    assert main(["judge", "relevance", str(path), "-o", str(path)]) == 2
    assert "an output never replaces an input" in capsys.readouterr().err


def test_cli_batch_size_is_the_forward_pass_and_chunk_size_the_cache_unit(tmp_path, capsys, fake_registry):
    """--batch-size goes to the model; --chunk-size cuts the work (default: the batch size, else 8)."""
    path = authors_file(tmp_path)  # 15 passages
    argv = ["judge", "relevance", str(path), "--judge", "good", "--no-progress"]
    cases = [(["--chunk-size", "5"], {}, [5, 5, 5]), (["--batch-size", "4"], {"batch_size": 4}, [4, 4, 4, 3]),
             (["--batch-size", "4", "--chunk-size", "6"], {"batch_size": 4}, [6, 6, 3]), ([], {}, [8, 7])]
    for extra, kw, chunks in cases:
        assert main([*argv, "-o", str(tmp_path / f"out{len(fake_registry)}.jsonl"), *extra]) == 0
        assert fake_registry[-1].kw == kw and [len(c.chats) for c in fake_registry[-1].calls] == chunks, extra
    assert main([*argv, "-o", str(tmp_path / "api.jsonl"), "--judge", "openai:some-model", "--batch-size", "4"]) == 2
    assert "--batch-size 4: 'openai:some-model' is an API model" in capsys.readouterr().err
    assert main([*argv, "-o", str(tmp_path / "zero.jsonl"), "--chunk-size", "0"]) == 2
    assert "--chunk-size 0: must be an integer >= 1" in capsys.readouterr().err


def test_judges_declare_what_the_runner_records(tmp_path):
    """Round five: the runner reads what every judge declares (``Judge``'s prompt_id, backend and
    shown), no getattr probing; the recorded prompt_version is the one it always was."""
    from pathlib import Path

    from udcg.grade.judges import Judge
    items = runner.passage_items(read_authors(authors_file(tmp_path, 1, 2))[1])
    llm = LLMJudge(ScriptedBackend(answer=grade_rome), TASKS["relevance"])
    rules = RuleJudge(TASKS["relevance"])
    assert (llm.prompt_id, rules.prompt_id, rules.backend) == ("relevance-v1", "rules-v1", None)
    assert llm.shown(items[0]) == llm.prompt(items[0]) and rules.shown(items[0]) == repr(items[0])
    assert [r["prompt_version"] for r in runner.judge_items(llm, items, tmp_path / "l")] == ["relevance-v1"] * 2
    assert [r["prompt_version"] for r in runner.judge_items(rules, items, tmp_path / "r")] == ["rules-v1"] * 2

    class Undeclared(Judge):  # a judge that forgets its prompt_id cannot be built
        name = "x"

        def judge(self, items):
            return []
    with pytest.raises(TypeError, match="prompt_id"):
        Undeclared()
    with pytest.raises(TypeError, match="not a udcg.grade.judges.Judge"):
        runner.judge_items(object(), items, tmp_path / "o")
    grade = Path(runner.__file__).parent
    assert [p.name for p in grade.glob("*.py") if "getattr(" in p.read_text()] == []
