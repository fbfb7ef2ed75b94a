"""Property-based fuzzing of the input readers (issue 17): whatever bytes a file holds, a reader
returns a value or raises a one-line ``InputError`` — never another exception. Readers: the
authors' JSON / JSONL (``udcg.io.authors.read_authors``), contexts (``udcg.flows.scoring.read_contexts``,
then scored with every metric family), TREC runs and qrels (``udcg.io.trec``), BEIR collections
(``udcg.io.beir.read_collection``), validate configs (``udcg.experiment.config.load_config``)
and saved UDCG_theta models (``udcg.flows.theta.load_theta``).

Inputs are small: near-valid records whose fields take, one time in five, a value of any JSON type
instead (and edge numbers: huge, tiny, negative, 300-digit integers), written as JSONL, a JSON
list, one pretty-printed object or YAML, then sometimes cut, spliced with a hostile token (NaN,
Infinity, a 400-digit integer, a BOM, NUL, deep brackets, a YAML alias or tag) or random bytes.
Hypothesis draws one seed per example and a seeded ``random.Random`` builds the file (cheap, so
the suite tries ``FUZZ_EXAMPLES`` = 2,000 inputs per reader in seconds); ``derandomize=True``
makes every run try the same inputs, and a failure names its seed and file bytes. Set
UDCG_FUZZ_EXAMPLES to try more."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from udcg.errors import InputError

FUZZ_EXAMPLES = int(os.environ.get("UDCG_FUZZ_EXAMPLES", "2000"))
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
SEEDS = st.integers(0, 2**64 - 1)

# ---------------------------------------------------------------- values, records and files

EDGE = [0, 1, -1, 2, 5, 6, 0.5, -0.5, 1.5, 1e-300, 1e308, -1e308, 2**53, 10**12, -(10**12), 10**299, 3.7, 1e6,
        -1e6, True, False, None, "", "x", "NaN", "q1", "d1", " ", "é"]
KEYS = ["qid", "cid", "relevant", "utilities", "p_abs", "text", "passages", "k", "coef", "_id", "x", ""]


def any_value(rng: random.Random, depth: int = 0):
    """Any JSON value, at most 3 levels deep."""
    r = rng.random()
    if depth < 3 and r < 0.12:
        return [any_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 3 and r < 0.2:
        return {rng.choice(KEYS): any_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return rng.choice(EDGE) if r < 0.7 else rng.choice([rng.uniform(-2, 2), rng.randint(-3, 7), rng.choice(KEYS)])


class Gen:
    """Value makers over one seeded Random. Half the examples are *clean* (every value of its
    field's kind and range, related fields consistent, the file well-formed: these reach the
    scoring code); the other half are *wild* (one value in five of any JSON type, out-of-range
    numbers, hostile tokens spliced into the file)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.wild = self.rng.random() < 0.5
        self.k = 1

    def near(self, make: Callable[[], object]):
        return make() if not self.wild or self.rng.random() < 0.8 else any_value(self.rng)

    def record(self, required: dict[str, Callable], optional: dict[str, Callable]) -> dict:
        keep = 0.95 if self.wild else 1.0
        out = {k: self.near(make) for k, make in required.items() if self.rng.random() < keep}
        out.update({k: self.near(make) for k, make in optional.items() if self.rng.random() < 0.4})
        return out

    def pick(self, valid: tuple, odd: tuple = ()):
        return lambda: self.rng.choice(valid + odd if self.wild else valid)

    def num(self, low: float, high: float):
        def make():
            if self.wild and self.rng.random() < 0.3:
                return self.rng.choice(EDGE[:18])
            return self.rng.uniform(low, high) if self.rng.random() < 0.7 else self.rng.randint(int(low), int(high))
        return make

    def ints(self, low: int, high: int, odd: tuple = ()):
        return lambda: self.rng.choice(odd) if odd and self.wild and self.rng.random() < 0.3 else self.rng.randint(low, high)

    def text(self):
        return lambda: "".join(self.rng.choice("ab Ωé\"\\\t") for _ in range(self.rng.randint(0, 8)))

    def listof(self, make: Callable, k: int | None = None):
        return lambda: [self.near(make) for _ in range(self.rng.randint(0, 4) if k is None else k)]

    def many(self, make: Callable, low: int = 0, high: int = 4) -> list:
        return [make() for _ in range(self.rng.randint(low if self.wild else max(low, 1), high))]


IDS, ODD_IDS = ("q1", "q2", "q3", 0, 1), ("", " ", "q 1", "é", True, None)
OUTCOMES, ODD_OUTCOMES = ("correct", "wrong", "abstained"), ("maybe", None, 1)
TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"9" * 400, b"[" * 60, b"{" * 30, b"}", b"]", b'"', b"\\",
          b"\n", b"\r\n", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b",", b":", b"null", b"-", b"0.", b"1e"]


def passage(g: Gen, j: int) -> dict:
    return g.record({"doc_id": g.pick((f"d{j}",), ODD_IDS), "text": g.text(), "is_relevant": g.pick((True, False), ("yes",))},
                    {"title": g.text(), "grade": g.ints(1, 5, (0, 6, 2.5)), "score": g.num(-2, 2),
                     "models_info": lambda: {g.rng.choice(["m", "n"]) if g.wild else "m": g.record({"no_res_prob": g.num(0, 1)}, {})
                                             for _ in range(g.rng.randint(0, 2))}})


def authors_item(g: Gen, i: int = 0) -> dict:
    n = g.rng.randint(0 if g.wild else 1, 3)
    return g.record({"example_id": g.pick((f"q{i}",), ODD_IDS), "question": g.text(),
                     "passages": lambda: [passage(g, j) for j in range(n)]},
                    {"answers": g.listof(g.text()), "udcg": lambda: any_value(g.rng) if g.wild else {"m": 0.5},
                     "metrics": lambda: any_value(g.rng) if g.wild else {}, "outcome": g.pick(OUTCOMES, ODD_OUTCOMES)})


def context(g: Gen, i: int = 0) -> dict:
    if g.wild:
        k = g.rng.randint(0, 4)
        per = lambda make: g.listof(make, k if g.rng.random() < 0.8 else g.rng.randint(0, 4))  # noqa: E731
        counts = g.listof(g.pick((0, 1, 2, 3), (-1, 10**7, 0.5)), 5)
        return g.record({"qid": g.pick(IDS, ODD_IDS)},
                        {"cid": g.pick(IDS, ODD_IDS), "relevant": per(g.pick((True, False))),
                         "utilities": per(g.num(-1.5, 1.5)), "p_abs": per(g.num(-0.5, 1.5)),
                         "grades": per(g.ints(0, 6)), "corpus_grades": counts, "pool_grades": counts,
                         "n_relevant": g.num(-1, 6), "erag": per(g.num(-1, 2)), "answer_ll": per(g.num(-50, 1)),
                         "contains": per(g.pick((True, False))), "metrics": lambda: any_value(g.rng),
                         "udcg": lambda: any_value(g.rng), "outcome": g.pick(OUTCOMES, ODD_OUTCOMES)})
    k, rng = g.k, g.rng
    rel = [rng.random() < 0.5 for _ in range(k)]
    p_abs = [rng.choice([0.0, 1.0, rng.random()]) for _ in range(k)]
    u = [(1 if r else -1) * (1 - p) for r, p in zip(rel, p_abs)]
    grades = [rng.randint(1, 5) for _ in range(k)]
    pool = [grades.count(v) + rng.randint(0, 2) for v in range(1, 6)]
    out = {"qid": f"q{rng.randint(0, 2)}", "cid": f"c{i}", "outcome": rng.choice(OUTCOMES)}
    out.update(rng.choice([{"relevant": rel, "utilities": u}, {"relevant": rel, "p_abs": p_abs}, {"utilities": u},
                           {"relevant": rel, "p_abs": p_abs, "utilities": u}, {"relevant": rel}]))
    extras = {"grades": grades, "corpus_grades": [c + rng.randint(0, 2) for c in pool], "pool_grades": pool,
              "n_relevant": sum(rel) + rng.randint(0, 3), "erag": [rng.random() for _ in range(k)],
              "answer_ll": [-rng.random() * 20 for _ in range(k)], "contains": [rng.random() < 0.5 for _ in range(k)]}
    out.update({name: v for name, v in extras.items() if rng.random() < 0.6})
    return out


def theta(g: Gen) -> dict:
    k = g.rng.randint(1, 4) if not g.wild else g.rng.randint(0, 4)
    variant = g.rng.choice(["full", "rel-only", "binary"])
    width = (k if variant == "rel-only" else 2 * k) if not g.wild else g.rng.choice([k, 2 * k, k + 1])
    return g.record({"type": g.pick(("UDCGTheta",), ("udcg", None)), "k": g.pick((k,), (-1, 0, 10**12, "3", 2.5)),
                     "params": lambda: g.record({"variant": g.pick((variant,), ("x",))},
                                                {"C": g.num(0.001, 1), "standardize": g.pick((True, False)),
                                                 "bogus": g.ints(0, 1)} if g.wild else {"C": g.num(0.001, 1)}),
                     "coef": g.listof(g.num(-2, 2), width)},
                    {"coef_standardized": g.listof(g.num(-2, 2), width), "n_pairs": g.ints(0, 5, (-1, "x")),
                     "scaler": lambda: {"mean": g.listof(g.num(-1, 1), width)(), "scale": g.listof(g.num(0.1, 2), width)()}})


def encode(g: Gen, records: list[dict]) -> bytes:
    """JSONL, a JSON list, or one pretty-printed object (wild: or any JSON, then mutated)."""
    form = g.rng.randrange(4 if g.wild else 3)
    if form == 2 and len(records) != 1:
        form = 0
    text = ("".join(json.dumps(r) + "\n" for r in records) if form == 0 else json.dumps(records, indent=1) if form == 1
            else json.dumps(records[0], indent=2) if form == 2 else json.dumps(any_value(g.rng)))
    return mutate(g, text.encode())


def mutate(g: Gen, data: bytes, tokens: list[bytes] = TOKENS) -> bytes:
    r = g.rng.random()
    if not g.wild or r < 0.3:
        return data
    if r < 0.92:
        at = g.rng.randint(0, len(data))
        insert = g.rng.choice(tokens) if g.rng.random() < 0.7 else g.rng.randbytes(g.rng.randint(1, 6))
        data = data[:at] + insert + data[at:]
        return data[: g.rng.randint(0, len(data))] if g.rng.random() < 0.3 else data
    return g.rng.randbytes(g.rng.randint(0, 64))


TREC_TOKENS = ["q1", "q2", "Q0", "0", "d1", "d2", "d3", "1", "2", "-1", "2.5", "nan", "inf", "1e308", "1e-320", "x",
               "query-id", "corpus-id", "score", "é", "1" * 400]


def trec(g: Gen, kind: str) -> bytes:
    """A run (``qid Q0 docid rank score tag``), TREC qrels (``qid 0 docid rel``) or BEIR qrels."""
    rng, lines = g.rng, []
    if not g.wild:
        if kind == "beir" and rng.random() < 0.5:
            lines.append("query-id\tcorpus-id\tscore\n")
        for q in range(rng.randint(1, 3)):
            for rank, d in enumerate(rng.sample(range(6), rng.randint(1, 4)), start=1):
                rel = rng.choice([0, 1, 2, -1, 0.5, 3])
                lines.append({"run": f"q{q} Q0 d{d} {rank} {rng.uniform(-5, 5):.3f} tag\n", "qrels": f"q{q} 0 d{d} {rel}\n",
                              "beir": f"q{q}\td{d}\t{rel}\n"}[kind])
        return "".join(lines).encode()
    width = {"run": 6, "qrels": 4, "beir": 3}[kind]
    for _ in range(rng.randint(0, 5)):
        n = width if rng.random() < 0.85 else rng.randint(0, 7)
        lines.append(rng.choice([" ", "\t", "  "]).join(rng.choice(TREC_TOKENS) for _ in range(n)) + rng.choice(["\n", "\r\n"]))
    return mutate(g, "".join(lines).encode())


def check(reader, *args) -> None:
    """The property: a value or an InputError. Anything else fails the test with its traceback."""
    try:
        reader(*args)
    except InputError as e:
        assert str(e) and "\n" not in str(e).strip(), f"an InputError must be one line: {e!r}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# ---------------------------------------------------------------- the readers


def _file(folder: Path, name: str, data: bytes) -> Path:
    note(f"{name}: {data[:2000]!r}")
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@FUZZ
@given(seed=SEEDS)
def test_fuzz_authors_format(folder, seed):
    from udcg.io.authors import read_authors

    g = Gen(seed)
    items = [authors_item(g, i) for i in range(g.rng.randint(0 if g.wild else 1, 4))]
    path = _file(folder, g.rng.choice(["authors.json", "authors.jsonl"]), encode(g, items))
    check(read_authors, path)


def _read_and_score(path: Path) -> None:
    from udcg.flows.scoring import read_contexts, score_rows
    from udcg.metrics.contexts import parse_metrics

    rows = read_contexts(str(path))
    for metric in parse_metrics("UDCG,UDCG@2,P@1,RR,AP,nDCG,R,Rprec,ERR,AUC-PR,RA-nWG,PROC@2,%PROC,N-Recall5,Harm,"
                                "eRAG,ANSWER_PROB,containment"):
        try:  # each metric alone: one whose field is missing must not hide the others
            values = score_rows(rows, [metric])[str(metric)]
        except InputError:
            continue
        assert len(values) == len(rows)


@FUZZ
@given(seed=SEEDS)
def test_fuzz_contexts_read_and_scored(folder, seed):
    g = Gen(seed)
    g.k = g.rng.randint(1, 4)
    records = [context(g, i) if g.rng.random() < 0.85 else authors_item(g, i) for i in range(g.rng.randint(0 if g.wild else 1, 5))]
    check(_read_and_score, _file(folder, "contexts.jsonl", encode(g, records)))


@FUZZ
@given(seed=SEEDS)
def test_fuzz_trec_run(folder, seed):
    from udcg.io.trec import read_run

    check(read_run, _file(folder, "run.txt", trec(Gen(seed), "run")))


@FUZZ
@given(seed=SEEDS)
def test_fuzz_trec_qrels(folder, seed):
    from udcg.io.trec import read_qrels

    g = Gen(seed)
    check(read_qrels, _file(folder, "qrels.txt", trec(g, g.rng.choice(["qrels", "beir"]))))


@FUZZ
@given(seed=SEEDS)
def test_fuzz_beir_collection(folder, seed):
    from udcg.io.beir import read_collection

    g = Gen(seed)
    docs = [g.record({"_id": g.pick((f"d{i}",), ODD_IDS), "text": g.text()},
                     {"title": g.text(), "metadata": lambda: any_value(g.rng) if g.wild else {}}) for i in range(g.rng.randint(1, 6))]
    queries = [g.record({"_id": g.pick((f"q{i}",), ODD_IDS), "text": g.text()},
                        {"metadata": lambda: g.record({"answers": g.listof(g.text())}, {})}) for i in range(g.rng.randint(1, 3))]
    _file(folder, "beir/corpus.jsonl", encode(g, docs))
    _file(folder, "beir/queries.jsonl", encode(g, queries))
    _file(folder, "beir/qrels/test.tsv", trec(g, g.rng.choice(["qrels", "beir"])))
    check(read_collection, folder / "beir")


YAML_TOKENS = [b".inf", b".nan", b"&a [1]", b"*a", b"!!python/object:os.system", b"9" * 5000, b"\t", b": :", b"- - -",
               b"[" * 200, b"\x00", b"\xff"]


def config(g: Gen) -> dict:
    any_ = lambda: any_value(g.rng)  # noqa: E731
    size = g.rng.randint(2, 8)
    names = ["UDCG"] + g.rng.sample(["nDCG@2", "P", "RR", "AP", "Success", "RA-nWG"], g.rng.randint(0, 3))
    odd = {"reader": any_, "extra": any_} if g.wild else {}
    return g.record({}, {
        "name": g.pick(("fuzz", "a-b")), "seed": g.ints(0, 5, (-2, 2**40, 1.5, "x")), **odd,
        "data": lambda: g.record({}, {"questions": g.pick(("popqa-sample",), ("nope", "../x")), "limit": g.ints(1, 5, (-1, 0)),
                                      "select": g.pick(("first", "random"), ("x",))}),
        "pool": lambda: g.record({}, {"size": g.ints(size, size, (-1, 0)), "source": g.pick(("dataset", "bm25"), ("x",))}),
        "contexts": lambda: g.record({}, {"k": g.ints(1, 2, (-1, 9)), "n_contexts": g.ints(1, 3, (-1,)),
                                          "balance": g.num(0, 1)}),
        "metrics": lambda: g.record({}, {"names": lambda: names + (["PROC", "bogus", "RR(rel=1,rel=2)"] if g.wild else []),
                                         "gamma": g.num(0, 2), "baseline": g.pick(("UDCG",), ("P", 3)),
                                         "n_boot": g.ints(1, 3, (-1,))}),
        "theta": lambda: g.record({}, {"C": g.pick((0.01, "auto"), (-1, 1e308, "x")), "C_grid": g.listof(g.num(0.001, 10))})})


@FUZZ
@given(seed=SEEDS)
def test_fuzz_validate_config(folder, seed):
    import yaml

    from udcg.experiment.config import load_config

    g = Gen(seed)
    data = mutate(g, yaml.safe_dump(config(g), allow_unicode=True).encode(), YAML_TOKENS)
    check(load_config, _file(folder, "config.yaml", data), [], str(folder / "run"))


@FUZZ
@given(seed=SEEDS)
def test_fuzz_theta_model(folder, seed):
    import numpy as np

    from udcg.flows.theta import load_theta

    g = Gen(seed)

    def load_and_predict(p):
        model = load_theta(p)
        model.predict(np.zeros((1, model.k_)))

    check(load_and_predict, _file(folder, "theta.json", encode(g, [theta(g)])))
