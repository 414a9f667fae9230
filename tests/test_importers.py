"""Converters from harness and leaderboard exports to the long table.

lm-eval, Open LLM Leaderboard v1 and wide fixtures are written here in the real
layouts: lm-eval's ``<output>/<model_name_sanitized>/samples_<task>_<date>.jsonl``
beside ``results_<date>.json``; the leaderboard's ``details_<org>__<model>``
repositories with one Parquet file per task and run.  HELM, Open LLM
Leaderboard v2, Inspect and Every Eval Ever read the example inputs shipped in
``mtlirt.examples`` (real files cut down, or real layouts; see its README.md).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mtlirt.examples
from mtlirt.cli import main
from mtlirt.data.importers import (
    CONVERT_KINDS,
    IMPORTERS,
    convert,
    from_every_eval_ever,
    from_helm,
    from_inspect,
    from_lm_eval,
    from_open_llm_leaderboard,
    from_open_llm_leaderboard_v2,
    from_wide,
)
from mtlirt.data.responses import Responses
from mtlirt.data.validate import DataWarning
from mtlirt.errors import InputError

DATE = "2024-05-13T12-30-45.123456"
DATE2 = "2024-06-01T08-00-00.000001"

# correctness per model and subject, 3 docs each
TRUTH = {
    "EleutherAI/pythia-160m": {"abstract_algebra": [1, 0, 0], "anatomy": [0, 1, 1]},
    "org/model-b": {"abstract_algebra": [1, 1, 0], "anatomy": [0, 0, 1]},
}


def _check_long(df: pd.DataFrame) -> None:
    assert list(df.columns) == ["llm", "item", "domain", "correct"]
    assert df["correct"].dtype == np.int8
    for c in ("llm", "item", "domain"):
        assert pd.api.types.is_string_dtype(df[c].dtype)
        assert all(isinstance(v, str) for v in df[c])


def _as_set(df: pd.DataFrame) -> set[tuple[str, str, str, int]]:
    return {(r.llm, r.item, r.domain, int(r.correct)) for r in df.itertuples()}


# --------------------------------------------------------------------------
# lm-eval


def _sample(doc_id: int, correct: float, *, metric: str = "acc", filt: str = "none", **extra) -> dict:
    """One line of samples_<task>_<date>.jsonl as lm-eval >= 0.4.3 writes it."""
    choices = ["0", "4", "2", "6"]
    rec = {
        "doc_id": doc_id,
        "doc": {
            "question": f"Question {doc_id}?",
            "subject": "abstract_algebra",
            "choices": choices,
            "answer": 1,
        },
        "target": "1",
        "arguments": {
            f"gen_args_{i}": {"arg_0": f"Question {doc_id}?\nAnswer:", "arg_1": f" {c}"}
            for i, c in enumerate(choices)
        },
        "resps": [[[-2.1, False]], [[-0.7, True]], [[-3.0, False]], [[-4.2, False]]],
        "filtered_resps": [[-2.1, False], [-0.7, True], [-3.0, False], [-4.2, False]],
        "filter": filt,
        "metrics": [metric, "acc_norm"] if metric == "acc" else [metric],
        "doc_hash": f"{doc_id:064x}",
        "prompt_hash": "b" * 64,
        "target_hash": "c" * 64,
        metric: correct,
    }
    if metric == "acc" and correct is not None:
        rec["acc_norm"] = 1.0 - correct
    rec.update(extra)
    return rec


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _lm_eval_run(root: Path, model: str, *, results_json: bool = True, date: str = DATE) -> Path:
    folder = root / model.replace("/", "__")
    for subject, ys in TRUTH[model].items():
        _write_jsonl(
            folder / f"samples_mmlu_{subject}_{date}.jsonl",
            [_sample(i, float(y)) for i, y in enumerate(ys)],
        )
    if results_json:
        results = {
            "results": {f"mmlu_{s}": {"alias": s, "acc,none": 0.5} for s in TRUTH[model]},
            "configs": {f"mmlu_{s}": {"task": f"mmlu_{s}"} for s in TRUTH[model]},
            "config": {"model": "hf", "model_args": f"pretrained={model},dtype=float16"},
            "model_name": model,
            "model_name_sanitized": model.replace("/", "__"),
        }
        (folder / f"results_{date}.json").write_text(json.dumps(results, indent=2))
    return folder


def test_lm_eval_folder_of_two_models(tmp_path):
    _lm_eval_run(tmp_path, "EleutherAI/pythia-160m")
    _lm_eval_run(tmp_path, "org/model-b", results_json=False)
    df = from_lm_eval(tmp_path)
    _check_long(df)
    assert len(df) == 12
    expected = set()
    for model, by_subject in TRUTH.items():
        # without a results JSON the LLM is the folder name (model_name_sanitized)
        name = model if model.startswith("Eleuther") else model.replace("/", "__")
        for subject, ys in by_subject.items():
            for i, y in enumerate(ys):
                expected.add((name, f"mmlu_{subject}/{i}", f"mmlu_{subject}", y))
    assert _as_set(df) == expected
    # file by file in sorted order, samples in file order
    assert df["item"].tolist()[:3] == [f"mmlu_abstract_algebra/{i}" for i in range(3)]


def test_lm_eval_single_file_llm_and_domains(tmp_path):
    folder = _lm_eval_run(tmp_path, "EleutherAI/pythia-160m")
    one = folder / f"samples_mmlu_anatomy_{DATE}.jsonl"
    df = from_lm_eval(one)
    assert df["llm"].unique().tolist() == ["EleutherAI/pythia-160m"]  # sibling results JSON
    assert df["correct"].tolist() == [0, 1, 1]
    df = from_lm_eval([one], llm="mine", domain_from=lambda t: t.removeprefix("mmlu_"))
    assert df["llm"].unique().tolist() == ["mine"]
    assert df["domain"].unique().tolist() == ["anatomy"]
    assert df["item"].tolist() == ["mmlu_anatomy/0", "mmlu_anatomy/1", "mmlu_anatomy/2"]
    df = from_lm_eval(folder, domain_from="common-prefix")
    assert sorted(df["domain"].unique()) == ["abstract_algebra", "anatomy"]
    df = from_lm_eval(folder, domain_from={"mmlu_anatomy": "bio", "mmlu_abstract_algebra": "math"})
    assert sorted(df["domain"].unique()) == ["bio", "math"]
    with pytest.raises(InputError, match="mmlu_anatomy"):
        from_lm_eval(folder, domain_from={"mmlu_abstract_algebra": "math"})


def test_lm_eval_metric_choice_and_bools(tmp_path):
    folder = _lm_eval_run(tmp_path, "EleutherAI/pythia-160m")
    df = from_lm_eval(folder, metric="acc_norm")
    assert df.loc[df["domain"] == "mmlu_anatomy", "correct"].tolist() == [1, 0, 0]
    _write_jsonl(
        tmp_path / "b" / f"samples_boolq_{DATE}.jsonl",
        [_sample(0, True), _sample(1, False), _sample(2, 1)],
    )
    df = from_lm_eval(tmp_path / "b", llm="m")
    assert df["correct"].tolist() == [1, 0, 1]


def test_lm_eval_filters_and_metric_fallback(tmp_path):
    # a generative task logs each doc once per filter
    recs = []
    for filt, ys in (("strict-match", [1, 0]), ("flexible-extract", [1, 1])):
        recs += [_sample(i, float(y), metric="exact_match", filt=filt) for i, y in enumerate(ys)]
    folder = tmp_path / "org__m"
    _write_jsonl(folder / f"samples_gsm8k_{DATE}.jsonl", recs)
    _write_jsonl(folder / f"samples_arc_easy_{DATE}.jsonl", [_sample(0, 1.0), _sample(1, 0.0)])

    # arc_easy has no exact_match: an error naming it and its metrics, unless allow_empty leaves it out
    with pytest.raises(InputError, match=r"1 of 2 samples files gives no responses: .*samples_arc_easy_.*\.jsonl: "
                                         r"no metric 'exact_match' \(its metrics: 'acc', 'acc_norm'\) \(choose one "
                                         r"with metric=\); pass allow_empty=True to leave it out"):
        from_lm_eval(folder, metric="exact_match", llm="m")
    with pytest.warns(DataWarning, match=r"left out 1 samples file that gives no responses: .*samples_arc_easy_"):
        df = from_lm_eval(folder, metric="exact_match", llm="m", allow_empty=True)
    assert df["item"].tolist() == ["gsm8k/0", "gsm8k/1"]
    assert df["correct"].tolist() == [1, 0]  # first filter: strict-match

    with pytest.warns(DataWarning, match="keep their first filter"):
        df = from_lm_eval(folder, metric=["acc", "exact_match"], filter="flexible-extract", llm="m")
    got = dict(zip(df["item"], df["correct"]))
    assert got == {"arc_easy/0": 1, "arc_easy/1": 0, "gsm8k/0": 1, "gsm8k/1": 1}

    with pytest.raises(InputError, match=r"no samples file .* has the filter 'nope' \(their filters: "
                                         r"'strict-match', 'flexible-extract'\); choose one with filter="):
        from_lm_eval(folder, metric="exact_match", filter="nope", llm="m", allow_empty=True)
    with pytest.raises(InputError, match=r"no responses found in .*: .*samples_arc_easy_.*: no metric 'bleu' \(its "
                                         r"metrics: 'acc', 'acc_norm'\).*samples_gsm8k_.*: no metric 'bleu' \(its "
                                         r"metrics: 'exact_match'\)"):
        from_lm_eval(folder, metric="bleu")


def test_lm_eval_latest_run_wins_and_gzip(tmp_path):
    folder = tmp_path / "org__m"
    _write_jsonl(folder / f"samples_piqa_{DATE}.jsonl", [_sample(0, 0.0)])
    newer = folder / f"samples_piqa_{DATE2}.jsonl.gz"
    with gzip.open(newer, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(_sample(0, 1.0)) + "\n")
    df = from_lm_eval(folder)
    assert df.to_dict("list") == {
        "llm": ["org__m"],
        "item": ["piqa/0"],
        "domain": ["piqa"],
        "correct": [1],
    }


def test_lm_eval_legacy_json_list(tmp_path):
    # lm-eval 0.4.0-0.4.2: --output_path out/run.json writes run.json and
    # <model_args with / and = as __>_<task>.jsonl holding a JSON list
    folder = tmp_path / "out"
    folder.mkdir()
    model_args = "pretrained=EleutherAI/pythia-160m,dtype=float16"
    (folder / "run.json").write_text(
        json.dumps(
            {
                "results": {"hellaswag": {"acc": 0.5}},
                "configs": {"hellaswag": {"task": "hellaswag"}},
                "config": {"model": "hf", "model_args": model_args},
            }
        )
    )
    legacy = folder / "pretrained__EleutherAI__pythia-160m,dtype__float16_hellaswag.jsonl"
    samples = [{k: v for k, v in _sample(i, float(i % 2)).items() if k != "filter"} for i in range(3)]
    legacy.write_text(json.dumps(samples, indent=2))
    df = from_lm_eval(folder)
    assert _as_set(df) == {
        ("EleutherAI/pythia-160m", f"hellaswag/{i}", "hellaswag", i % 2) for i in range(3)
    }


def test_lm_eval_errors_name_file_and_line(tmp_path):
    folder = tmp_path / "org__m"
    bad = _write_jsonl(folder / f"samples_piqa_{DATE}.jsonl", [_sample(0, 1.0), _sample(1, 0.5)])
    with pytest.raises(InputError, match=r"samples_piqa_.*line 2: acc is 0.5, not 0 or 1"):
        from_lm_eval(bad)

    bad.write_text(json.dumps(_sample(0, 1.0)) + "\n" + '{"doc_id": 1, "acc": 1.0\n')
    with pytest.raises(InputError, match=r"samples_piqa_.*: line 2 is not valid JSON"):
        from_lm_eval(folder)

    rec = _sample(1, 1.0)
    del rec["doc_id"]
    _write_jsonl(bad, [_sample(0, 1.0), rec])
    with pytest.raises(InputError, match="line 2 has no doc_id"):
        from_lm_eval(folder)

    rec = _sample(1, 1.0)
    del rec["acc"]
    _write_jsonl(bad, [_sample(0, 1.0), rec])
    with pytest.raises(InputError, match="line 2 has no 'acc' field"):
        from_lm_eval(folder)

    _write_jsonl(bad, [_sample(0, 1.0), _sample(0, 0.0)])
    with pytest.raises(InputError, match="line 2 repeats doc_id 0"):
        from_lm_eval(folder)

    _write_jsonl(bad, [_sample(0, None)])
    with pytest.raises(InputError, match="acc is None"):
        from_lm_eval(folder)

    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no lm-eval samples"):
        from_lm_eval(tmp_path / "empty")
    with pytest.raises(InputError, match="no such file"):
        from_lm_eval(tmp_path / "missing")


def test_lm_eval_same_item_twice_across_folders(tmp_path):
    _lm_eval_run(tmp_path / "a", "EleutherAI/pythia-160m")
    _lm_eval_run(tmp_path / "b", "EleutherAI/pythia-160m")
    with pytest.raises(InputError, match="'mmlu_abstract_algebra' in both .* pass only one"):
        from_lm_eval([tmp_path / "a", tmp_path / "b"], llm="same")


# --------------------------------------------------------------------------
# Open LLM Leaderboard details


def _details_table(ys: list[int], *, style: str) -> pa.Table:
    """A details split as the leaderboard stored it: prompts and a metric."""
    n = len(ys)
    cols = {
        "example": [f"Question {i}" for i in range(n)],
        "full_prompt": [f"The following are multiple choice questions.\n\nQuestion {i}\nAnswer:" for i in range(n)],
        "instruction": ["The following are multiple choice questions."] * n,
        "choices": [[" A", " B", " C", " D"]] * n,
        "gold": [1] * n,
    }
    if style == "acc":
        cols["acc"] = [float(y) for y in ys]
    else:
        cols["metrics"] = [{"acc": float(y)} for y in ys]
    return pa.table(cols)


def _oll_repo(root: Path, model: str, *, style: str) -> Path:
    repo = root / f"details_{model.replace('/', '__')}"
    for subject, ys in TRUTH_OLL[model].items():
        folder = repo / f"harness_hendrycksTest_{subject}_5"
        folder.mkdir(parents=True)
        pq.write_table(_details_table(ys, style=style), folder / "latest.parquet")
    return repo


TRUTH_OLL = {
    "meta-llama/Llama-2-7b-hf": {"abstract_algebra": [1, 0, 0], "anatomy": [0, 1, 1]},
    "org/model-b": {"abstract_algebra": [1, 1, 0], "anatomy": [0, 0, 1]},
}


def test_open_llm_leaderboard_two_models_both_styles(tmp_path):
    _oll_repo(tmp_path, "meta-llama/Llama-2-7b-hf", style="acc")
    _oll_repo(tmp_path, "org/model-b", style="metrics")
    df = from_open_llm_leaderboard(tmp_path)
    _check_long(df)
    assert len(df) == 12
    expected = {
        (model, f"{subject}/{i}", subject, y)
        for model, by_subject in TRUTH_OLL.items()
        for subject, ys in by_subject.items()
        for i, y in enumerate(ys)
    }
    assert _as_set(df) == expected
    one = tmp_path / "details_org__model-b" / "harness_hendrycksTest_anatomy_5" / "latest.parquet"
    df = from_open_llm_leaderboard(one)
    assert df.to_dict("list") == {
        "llm": ["org/model-b"] * 3,
        "item": ["anatomy/0", "anatomy/1", "anatomy/2"],
        "domain": ["anatomy"] * 3,
        "correct": [0, 0, 1],
    }


def test_open_llm_leaderboard_stored_repo_layout(tmp_path):
    # the repository as stored: <date>/details_harness|<task>|<n>_<date>.parquet,
    # several runs, plus aggregated results files that are not details
    repo = tmp_path / "datasets--open-llm-leaderboard--details_org__m" / "snapshots" / "abc123"
    old, new = "2023-08-19T16-35-46.942696", "2023-12-02T13-00-54.924067"
    for date, ys in ((old, [0, 0, 0]), (new, [1, 0, 1])):
        folder = repo / date
        folder.mkdir(parents=True)
        pq.write_table(
            _details_table(ys, style="metrics"),
            folder / f"details_harness|hendrycksTest-abstract_algebra|5_{date}.parquet",
        )
        pq.write_table(_details_table([1, 1], style="acc"), folder / f"details_harness|arc:challenge|25_{date}.parquet")
    pq.write_table(pa.table({"acc": [0.5]}), repo / f"results_{new}.parquet")
    df = from_open_llm_leaderboard(repo)
    got = {(r.item, r.domain, r.correct) for r in df.itertuples()}
    assert got == {
        ("abstract_algebra/0", "abstract_algebra", 1),
        ("abstract_algebra/1", "abstract_algebra", 0),
        ("abstract_algebra/2", "abstract_algebra", 1),
        ("arc_challenge/0", "arc_challenge", 1),
        ("arc_challenge/1", "arc_challenge", 1),
    }
    assert set(df["llm"]) == {"org/m"}
    df = from_open_llm_leaderboard(repo, tasks="harness_hendrycksTest_*_5")
    assert set(df["domain"]) == {"abstract_algebra"}


def test_open_llm_leaderboard_config_in_file_name_and_ids(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    t = _details_table([1, 0], style="acc").append_column("idx", pa.array([10, 11]))
    pq.write_table(t, folder / "details_org__m_harness_hendrycksTest_virology_5_2023-08-19T16-35-46.parquet")
    df = from_open_llm_leaderboard(folder)
    assert df.to_dict("list") == {
        "llm": ["org/m", "org/m"],
        "item": ["virology/10", "virology/11"],
        "domain": ["virology", "virology"],
        "correct": [1, 0],
    }


def test_open_llm_leaderboard_errors(tmp_path):
    repo = tmp_path / "details_org__m"
    folder = repo / "harness_hendrycksTest_anatomy_5"
    folder.mkdir(parents=True)
    bad = folder / "latest.parquet"
    pq.write_table(_details_table([1, 0], style="acc").set_column(5, "acc", pa.array([1.0, 0.25])), bad)
    with pytest.raises(InputError, match=r"latest\.parquet: acc must be 0 or 1; row 2 holds 0.25"):
        from_open_llm_leaderboard(repo)

    pq.write_table(_details_table([1, 0], style="acc"), bad)
    zero = repo / "harness_hendrycksTest_anatomy_0"
    zero.mkdir()
    pq.write_table(_details_table([0, 0], style="acc"), zero / "latest.parquet")
    with pytest.raises(InputError, match="more than once.*tasks="):
        from_open_llm_leaderboard(repo)
    df = from_open_llm_leaderboard(repo, tasks=["harness_hendrycksTest_*_5"])
    assert df["correct"].tolist() == [1, 0]

    tqa = repo / "harness_truthfulqa_mc_0"
    tqa.mkdir()
    pq.write_table(pa.table({"metrics": [{"mc1": 1.0, "mc2": 0.7}]}), tqa / "latest.parquet")
    both = ["harness_hendrycksTest_*_5", "harness_truthfulqa*"]
    with pytest.raises(InputError, match=r"1 of 2 details splits gives no responses: .*harness_truthfulqa_mc_0/"
                                         r"latest.parquet: no metric 'acc' \(its metrics: 'mc1', 'mc2'\)"):
        from_open_llm_leaderboard(repo, tasks=both)
    with pytest.warns(DataWarning, match="left out 1 details split that gives no responses: .*truthfulqa"):
        df = from_open_llm_leaderboard(repo, tasks=both, allow_empty=True)
    assert len(df) == 2
    with pytest.raises(InputError, match=r"no responses found in .*: no metric 'acc' \(its metrics: 'mc1', 'mc2'\)"):
        from_open_llm_leaderboard(tqa)

    stray = tmp_path / "stray" / "harness_hendrycksTest_anatomy_5"
    stray.mkdir(parents=True)
    pq.write_table(_details_table([1], style="acc"), stray / "latest.parquet")
    with pytest.raises(InputError, match="cannot tell the model"):
        from_open_llm_leaderboard(tmp_path / "stray")
    assert from_open_llm_leaderboard(tmp_path / "stray", llm="x")["llm"].tolist() == ["x"]

    odd = tmp_path / "details_org__n"
    odd.mkdir()
    pq.write_table(_details_table([1], style="acc"), odd / "something.parquet")
    with pytest.raises(InputError, match="something.parquet: cannot tell the task"):
        from_open_llm_leaderboard(odd)


# --------------------------------------------------------------------------
# wide matrix


def test_wide_domains_from_names_and_blanks(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(
        "model,abstract_algebra/q1,abstract_algebra/q2,anatomy:q1\n"
        "m1,1,0,\n"
        "m2,,1,1\n"
        "m3,0,NA,0\n"
    )
    df = from_wide(path)
    _check_long(df)
    assert df.to_dict("list") == {
        "llm": ["m1", "m1", "m2", "m2", "m3", "m3"],
        "item": [
            "abstract_algebra/q1",
            "abstract_algebra/q2",
            "abstract_algebra/q2",
            "anatomy:q1",
            "abstract_algebra/q1",
            "anatomy:q1",
        ],
        "domain": ["abstract_algebra", "abstract_algebra", "abstract_algebra", "anatomy", "abstract_algebra",
                   "anatomy"],
        "correct": [1, 0, 1, 1, 0, 0],
    }


def test_wide_item_domain_sources(tmp_path):
    frame = pd.DataFrame({"q1": [1, 0], "q2": [True, False], "x/q3": ["1", ""]}, index=pd.Index(["a", "b"], name="llm"))
    mapping = {"q1": "math", "q2": "bio"}
    df = from_wide(frame, mapping)  # the named index holds the LLMs; x/q3 falls back to its name
    assert _as_set(df) == {
        ("a", "q1", "math", 1),
        ("b", "q1", "math", 0),
        ("a", "q2", "bio", 1),
        ("b", "q2", "bio", 0),
        ("a", "x/q3", "x", 1),
    }
    assert list(frame.columns) == ["q1", "q2", "x/q3"]  # the caller's frame is untouched
    csv_map = tmp_path / "items.csv"
    csv_map.write_text("item,domain\nq1,math\nq2,bio\nx/q3,other\n")
    df2 = from_wide(frame.reset_index(), csv_map, llm_column="llm")
    assert dict(zip(df2["item"], df2["domain"])) == {"q1": "math", "q2": "bio", "x/q3": "other"}
    df3 = from_wide(frame, pd.Series(mapping))
    assert len(df3) == 5
    bad_map = tmp_path / "bad.csv"
    bad_map.write_text("question,subject\nq1,math\n")
    with pytest.raises(InputError, match="bad.csv: missing columns item, domain"):
        from_wide(frame, bad_map)


def test_wide_errors(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text("llm,math/q1,math/q2\nm1,1,2\nm2,0,1\n")
    with pytest.raises(InputError, match=r"LLM 'm1' item 'math/q2' = 2"):
        from_wide(path)
    path.write_text("llm,math/q1,math/q2\nm1,1,yes\nm2,0,1\n")
    with pytest.raises(InputError, match=r"LLM 'm1' item 'math/q2' = 'yes'"):
        from_wide(path)
    path.write_text("llm,q1,q2,math/q3\nm1,1,0,1\n")
    with pytest.raises(InputError, match=r"no domain for items 'q1', 'q2'"):
        from_wide(path)
    path.write_text("llm,math/q1\nm1,1\nm1,0\n")
    with pytest.raises(InputError, match="'m1' appear on more than one row"):
        from_wide(path)
    path.write_text("llm,math/q1,math/q1\nm1,1,0\n")
    with pytest.raises(InputError, match="repeated column name 'math/q1'"):
        from_wide(path)
    path.write_text("llm,math/q1\nm1,\n")
    with pytest.raises(InputError, match="every cell is blank"):
        from_wide(path)
    with pytest.raises(InputError, match="no column 'who'"):
        from_wide(pd.DataFrame({"a/b": [1]}), llm_column="who")


# --------------------------------------------------------------------------
# dispatch


def test_convert_dispatch(tmp_path):
    assert CONVERT_KINDS == (
        "lm-eval", "open-llm-leaderboard", "open-llm-leaderboard-v2", "helm", "inspect", "every-eval-ever", "wide"
    )
    assert set(CONVERT_KINDS) == set(IMPORTERS)
    path = tmp_path / "wide.csv"
    path.write_text("llm,math/q1\nm1,1\n")
    assert convert("wide", path)["correct"].tolist() == [1]
    assert convert("wide", [path])["correct"].tolist() == [1]
    with pytest.raises(InputError, match="one matrix"):
        convert("wide", [path, path])
    _oll_repo(tmp_path / "oll", "org/model-b", style="acc")
    assert len(convert("open_llm_leaderboard", tmp_path / "oll")) == 6
    _lm_eval_run(tmp_path / "lm", "EleutherAI/pythia-160m")
    assert len(convert("LM-Eval", tmp_path / "lm", metric="acc")) == 6
    with pytest.raises(InputError, match="unknown kind 'lighteval'"):
        convert("lighteval", path)


# --------------------------------------------------------------------------
# HELM, Open LLM Leaderboard v2, Inspect, Every Eval Ever: the package's examples (mtlirt.examples)

FIXTURES = Path(mtlirt.examples.__file__).parent
HELM = FIXTURES / "helm" / "runs" / "v1"
MMLU_RUN = "mmlu:subject=philosophy,method=multiple_choice_joint"
GPT2_MMLU = HELM / "mmlu-subject=philosophy,method=multiple_choice_joint,model=openai_gpt2"
PYTHIA_NQA = HELM / "narrative_qa-model=eleutherai_pythia-1b-v0"


def _copy_tree(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_helm_runs_exact_match_test_split():
    df = from_helm(FIXTURES / "helm")
    _check_long(df)
    # pythia did not run id65 (a missing instance); id11 and id1123 are valid-split instances
    assert _as_set(df) == {
        ("openai/gpt2", f"{MMLU_RUN}/id147", MMLU_RUN, 0),
        ("openai/gpt2", f"{MMLU_RUN}/id65", MMLU_RUN, 0),
        ("openai/gpt2", f"{MMLU_RUN}/id222", MMLU_RUN, 1),
        ("eleutherai/pythia-1b-v0", f"{MMLU_RUN}/id147", MMLU_RUN, 1),
        ("eleutherai/pythia-1b-v0", f"{MMLU_RUN}/id222", MMLU_RUN, 1),
    } | {(m, f"narrative_qa/{i}", "narrative_qa", 0)
         for m in ("openai/gpt2", "eleutherai/pythia-1b-v0") for i in ("id1413", "id1332", "id1340")}
    valid = from_helm(GPT2_MMLU, split="valid")
    assert valid.to_dict("list") == {"llm": ["openai/gpt2"], "item": [f"{MMLU_RUN}/id11"], "domain": [MMLU_RUN],
                                     "correct": [0]}
    one = from_helm(GPT2_MMLU / "per_instance_stats.json", domain_from="scenario", llm="gpt2")
    assert set(one["domain"]) == {"mmlu"} and set(one["llm"]) == {"gpt2"}
    assert set(from_helm(HELM, tasks="mmlu:*")["domain"]) == {MMLU_RUN}


def test_helm_non_binary_stat_needs_a_threshold():
    with pytest.raises(InputError, match=r"narrative_qa-model=eleutherai_pythia-1b-v0/per_instance_stats.json: "
                                         r"entry 1 \(instance id1413\): f1_score is 0.6, not 0 or 1; give threshold="):
        from_helm(PYTHIA_NQA, metric="f1_score")
    with pytest.raises(InputError, match=r"2 of 4 HELM runs give no responses: .*mmlu.*: no stat 'f1_score' \(its "
                                         r"stats: 'exact_match', 'num_references', 'num_train_trials', "
                                         r"'quasi_exact_match'\)"):
        from_helm(HELM, metric="f1_score", threshold=0.5)
    with pytest.warns(DataWarning, match="left out 2 HELM runs that give no responses: .*mmlu.*no stat 'f1_score'"):
        df = from_helm(HELM, metric="f1_score", threshold=0.5, allow_empty=True)
    got = dict(zip(zip(df["llm"], df["item"]), df["correct"]))
    # gpt2's F1 are 0, 0.33, 0.36 and pythia's 0.6, 0.2, 0.5: correct at >= 0.5
    assert got == {
        ("eleutherai/pythia-1b-v0", "narrative_qa/id1413"): 1,
        ("eleutherai/pythia-1b-v0", "narrative_qa/id1332"): 0,
        ("eleutherai/pythia-1b-v0", "narrative_qa/id1340"): 1,
        ("openai/gpt2", "narrative_qa/id1413"): 0,
        ("openai/gpt2", "narrative_qa/id1332"): 0,
        ("openai/gpt2", "narrative_qa/id1340"): 0,
    }
    with pytest.raises(InputError, match=r"no responses found in .*: no stat 'bleu' \(its stats: "):
        from_helm(HELM, metric="bleu")


def test_helm_errors_name_file_and_field(tmp_path):
    run = _copy_tree(GPT2_MMLU, tmp_path / "run")
    _edit_json(run / "per_instance_stats.json", lambda d: d[1].pop("stats"))
    with pytest.raises(InputError, match=r"run/per_instance_stats.json: entry 2: no field 'stats'"):
        from_helm(run)
    (run / "per_instance_stats.json").write_text('[{"instance_id": "id1",')
    with pytest.raises(InputError, match=r"per_instance_stats.json: line 1 is not valid JSON"):
        from_helm(run)
    run = _copy_tree(GPT2_MMLU, tmp_path / "nomodel")
    (run / "scenario_state.json").unlink()
    _edit_json(run / "run_spec.json", lambda d: d["adapter_spec"].pop("model"))
    with pytest.raises(InputError, match=r"nomodel: cannot tell the model; run_spec.json \(field adapter_spec.model\)"):
        from_helm(run)
    assert set(from_helm(run, llm="gpt2")["llm"]) == {"gpt2"}
    # without run_spec.json: the run name from the folder, the model from scenario_state.json
    bare = _copy_tree(GPT2_MMLU, tmp_path / "bare" / GPT2_MMLU.name)
    (bare / "run_spec.json").unlink()
    assert _as_set(from_helm(bare)) == _as_set(from_helm(GPT2_MMLU))
    with pytest.raises(InputError, match="domain_from must be 'subtask' or 'scenario'"):
        from_helm(run, llm="x", domain_from="task")
    with pytest.raises(InputError, match="not a HELM per_instance_stats.json"):
        from_helm(run / "run_spec.json")
    # the same model's run of one subtask in two suites
    _copy_tree(GPT2_MMLU, tmp_path / "suite2" / GPT2_MMLU.name)
    with pytest.raises(InputError, match="answers item .* more than once"):
        from_helm([GPT2_MMLU, tmp_path / "suite2"])


def test_helm_same_item_under_two_ids_and_same_llm_under_two_names(tmp_path):
    # the same instances run with another method: another subtask, same content
    run = _copy_tree(GPT2_MMLU, tmp_path / "suite" / "separate")
    _edit_json(run / "run_spec.json", lambda d: d.update(name=d["name"].replace("joint", "separate_original")))
    with pytest.warns(DataWarning, match=r"3 item contents appear under two or more ids .*"
                                         r"'mmlu:subject=philosophy,method=multiple_choice_joint/id147' and "
                                         r"'mmlu:subject=philosophy,method=multiple_choice_separate_original/id147'"):
        df = from_helm([GPT2_MMLU, run])
    assert df["domain"].nunique() == 2  # kept apart, as documented
    # the same model spelled two ways
    other = _copy_tree(PYTHIA_NQA, tmp_path / "suite2" / "nqa")
    _edit_json(other / "run_spec.json", lambda d: d["adapter_spec"].update(model="EleutherAI/Pythia-1b-v0"))
    pythia_mmlu = HELM / GPT2_MMLU.name.replace("openai_gpt2", "eleutherai_pythia-1b-v0")
    with pytest.warns(DataWarning, match=r"1 LLM appears under two or more names that differ only in case or in "
                                         r"'__' for '/': 'EleutherAI/Pythia-1b-v0' \(from .*nqa.*\) and "
                                         r"'eleutherai/pythia-1b-v0' \(from .*\); they are kept apart"):
        df = from_helm([other, GPT2_MMLU, pythia_mmlu])
    assert set(df["llm"]) == {"EleutherAI/Pythia-1b-v0", "eleutherai/pythia-1b-v0", "openai/gpt2"}


V2 = FIXTURES / "open_llm_leaderboard_v2"
LLAMA, QWEN = "meta-llama/Meta-Llama-3-8B", "Qwen/Qwen2-7B"


def test_open_llm_leaderboard_v2_samples_and_parquet():
    df = from_open_llm_leaderboard_v2(V2)
    _check_long(df)
    expected = {
        # the stored samples files: each benchmark's leaderboard metric
        (LLAMA, "bbh_navigate/0", "bbh_navigate", 1), (LLAMA, "bbh_navigate/1", "bbh_navigate", 0),
        (LLAMA, "bbh_navigate/2", "bbh_navigate", 1),
        (LLAMA, "mmlu_pro/0", "mmlu_pro", 1), (LLAMA, "mmlu_pro/1", "mmlu_pro", 0),
        (LLAMA, "mmlu_pro/2", "mmlu_pro", 0),
        (LLAMA, "ifeval/0", "ifeval", 0), (LLAMA, "ifeval/1", "ifeval", 1),
        # the Parquet configurations: the latest split wins over the older runs; doc 1 of BBH missing
        (QWEN, "bbh_navigate/0", "bbh_navigate", 1), (QWEN, "bbh_navigate/2", "bbh_navigate", 0),
        (QWEN, "mmlu_pro/0", "mmlu_pro", 0), (QWEN, "mmlu_pro/1", "mmlu_pro", 1), (QWEN, "mmlu_pro/2", "mmlu_pro", 1),
        (QWEN, "ifeval/0", "ifeval", 0), (QWEN, "ifeval/1", "ifeval", 1),
    }
    assert _as_set(df) == expected
    assert set(from_open_llm_leaderboard_v2(V2, domain_from="benchmark")["domain"]) == {"bbh", "mmlu_pro", "ifeval"}
    cat = from_open_llm_leaderboard_v2(V2, domain_from="category", tasks="leaderboard_mmlu_pro")
    assert dict(zip(cat["item"], cat["domain"])) == {"mmlu_pro/0": "business", "mmlu_pro/1": "law",
                                                     "mmlu_pro/2": "psychology"}


def test_open_llm_leaderboard_v2_list_metric_with_threshold():
    with pytest.raises(InputError, match=r"samples_leaderboard_ifeval_.*jsonl: line 1: inst_level_strict_acc is "
                                         r"\[True, False, True\], not 0 or 1; give threshold="):
        from_open_llm_leaderboard_v2(V2 / "meta-llama__Meta-Llama-3-8B-details", metric="inst_level_strict_acc",
                                     tasks="leaderboard_ifeval")
    df = from_open_llm_leaderboard_v2(V2, metric="inst_level_strict_acc", threshold=0.5, tasks="leaderboard_ifeval")
    # per-instruction results [T, F, T] and [T] (Llama), [F, F, T] and [T] (Qwen): means 2/3, 1, 1/3, 1
    assert dict(zip(zip(df["llm"], df["item"]), df["correct"])) == {
        (LLAMA, "ifeval/0"): 1, (LLAMA, "ifeval/1"): 1, (QWEN, "ifeval/0"): 0, (QWEN, "ifeval/1"): 1,
    }


def test_open_llm_leaderboard_v2_errors_and_names(tmp_path):
    src = V2 / "meta-llama__Meta-Llama-3-8B-details" / "meta-llama__Meta-Llama-3-8B"
    name = "samples_leaderboard_bbh_navigate_2024-06-16T19-10-04.926831.jsonl"
    lines = (src / name).read_text().splitlines()
    bad = tmp_path / "org__m" / name
    bad.parent.mkdir()
    rec = json.loads(lines[1])
    del rec["doc_id"]
    bad.write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(InputError, match=rf"{name}: line 2 has no doc_id field"):
        from_open_llm_leaderboard_v2(bad)
    stray = tmp_path / "stray" / name
    stray.parent.mkdir()
    stray.write_text(lines[0] + "\n")
    with pytest.raises(InputError, match=rf"{name}: cannot tell the model"):
        from_open_llm_leaderboard_v2(stray)
    assert from_open_llm_leaderboard_v2(stray, llm="mine")["llm"].tolist() == ["mine"]
    with pytest.raises(InputError, match="no Open LLM Leaderboard v2 details .* matching 'leaderboard_gpqa_\\*'"):
        from_open_llm_leaderboard_v2(V2, tasks="leaderboard_gpqa_*")
    # the same model as a folder named in lower case: two spellings of one LLM
    _copy_tree(src, tmp_path / "meta-llama__meta-llama-3-8b")
    with pytest.warns(DataWarning, match="under two or more names"):
        df = from_open_llm_leaderboard_v2([src, tmp_path / "meta-llama__meta-llama-3-8b"])
    assert set(df["llm"]) == {LLAMA, "meta-llama/meta-llama-3-8b"}


INSPECT = FIXTURES / "inspect" / "logs"
GPT4O, HAIKU = "openai/gpt-4o", "anthropic/claude-3-5-haiku-latest"


def test_inspect_eval_archives():
    with pytest.warns(DataWarning, match="1 sample without a score"):
        df = from_inspect(INSPECT, tasks="mmlu*")
    _check_long(df)
    # haiku's sample 3 errored: a missing response
    assert _as_set(df) == {
        (GPT4O, "mmlu_0_shot/1", "mmlu_0_shot", 0), (GPT4O, "mmlu_0_shot/2", "mmlu_0_shot", 1),
        (GPT4O, "mmlu_0_shot/3", "mmlu_0_shot", 1),
        (HAIKU, "mmlu_0_shot/1", "mmlu_0_shot", 1), (HAIKU, "mmlu_0_shot/2", "mmlu_0_shot", 0),
    }
    by_subject = from_inspect(sorted(INSPECT.glob("*.eval"))[0], domain_from="metadata.subject")
    assert dict(zip(by_subject["item"], by_subject["domain"])) == {
        "mmlu_0_shot/1": "college_physics", "mmlu_0_shot/2": "anatomy", "mmlu_0_shot/3": "anatomy"}


def test_inspect_json_log_epochs_and_partial_credit():
    log = next(INSPECT.glob("*gsm8k*.json"))
    # two epochs reduced by the mean: C and P give 0.75, I and I give 0
    with pytest.raises(InputError, match=r"gsm8k_.*\.json: samples\[0\]: scores.model_graded_qa.value is 0.75, "
                                         r"not 0 or 1; give threshold="):
        from_inspect(log)
    df = from_inspect(log, threshold=0.5, llm="gpt-4o")
    assert df.to_dict("list") == {"llm": ["gpt-4o"] * 2, "item": ["gsm8k/1", "gsm8k/2"], "domain": ["gsm8k"] * 2,
                                  "correct": [1, 0]}
    with pytest.warns(DataWarning, match=r"threshold=0.8 is above every value of the scores read \(0 to 0.75\): "
                                         "every response counts as incorrect"):
        assert from_inspect(log, threshold=0.8)["correct"].tolist() == [0, 0]


def test_inspect_errors(tmp_path):
    import zipfile

    src = sorted(INSPECT.glob("*.eval"))[0]
    broken = tmp_path / "broken.eval"
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(broken, "w") as out:
        for name in z.namelist():
            data = z.read(name)
            if name == "samples/2_epoch_1.json":
                sample = json.loads(data)
                del sample["id"]
                data = json.dumps(sample).encode()
            out.writestr(name, data)
    with pytest.raises(InputError, match=r"broken.eval: samples/2_epoch_1.json: no field 'id'"):
        from_inspect(broken)
    with pytest.raises(InputError, match=r"no field 'metadata.topic'"):
        from_inspect(src, domain_from="metadata.topic")
    headless = tmp_path / "headless.eval"
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(headless, "w") as out:
        for name in z.namelist():
            if name != "header.json":
                out.writestr(name, z.read(name))
    with pytest.raises(InputError, match=r"headless.eval: no header.json"):
        from_inspect(headless)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match=r"notes.txt: not an Inspect log"):
        from_inspect(tmp_path / "notes.txt")


EEE = FIXTURES / "every_eval_ever"
LLAMA31 = "meta-llama/Llama-3.1-8B-Instruct"


def test_every_eval_ever_instance_records():
    # a HELM-converted evaluation holds each sample once per metric: choose one result
    with pytest.raises(InputError, match=r"Llama-3.1-8B-Instruct/8b2e.*_samples.jsonl: line 4 repeats sample "
                                         r"'id1413' of 'narrative_qa' for 'meta-llama/Llama-3.1-8B-Instruct' "
                                         r"\(line 3; .*"
                                         r"'exact_match:test' and 'f1_score:test'\); select one result with tasks="):
        from_every_eval_ever(EEE)
    df = from_every_eval_ever(EEE, tasks=["mmlu", "exact_match:test"])
    _check_long(df)
    assert _as_set(df) == {
        (GPT4O, "mmlu/mmlu_anatomy_0", "mmlu", 1), (GPT4O, "mmlu/mmlu_anatomy_1", "mmlu", 1),
        (GPT4O, "mmlu/mmlu_astronomy_0", "mmlu", 0),
        (GPT4O, "narrative_qa/id1413", "narrative_qa", 0), (GPT4O, "narrative_qa/id1414", "narrative_qa", 1),
        # llama has no record of mmlu_astronomy_0: a missing instance
        (LLAMA31, "mmlu/mmlu_anatomy_0", "mmlu", 0), (LLAMA31, "mmlu/mmlu_anatomy_1", "mmlu", 1),
        (LLAMA31, "narrative_qa/id1413", "narrative_qa", 0), (LLAMA31, "narrative_qa/id1414", "narrative_qa", 0),
    }
    subj = from_every_eval_ever(EEE, tasks="mmlu", domain_from="metadata.subject")
    assert set(zip(subj["item"], subj["domain"])) == {("mmlu/mmlu_anatomy_0", "anatomy"),
                                                      ("mmlu/mmlu_anatomy_1", "anatomy"),
                                                      ("mmlu/mmlu_astronomy_0", "astronomy")}


def test_every_eval_ever_score_threshold_and_errors(tmp_path):
    with pytest.raises(InputError, match=r"8b2e.*_samples.jsonl: line 6: evaluation.score is 0.6, not 0 or 1; "
                                         r"give threshold="):
        from_every_eval_ever(EEE, metric="score", tasks="f1_score:test")
    df = from_every_eval_ever(EEE, metric="score", threshold=0.5, tasks="f1_score:test")
    # F1 0.4 and 1.0 (gpt-4o), 0.0 and 0.6 (llama)
    assert dict(zip(zip(df["llm"], df["item"]), df["correct"])) == {
        (GPT4O, "narrative_qa/id1413"): 0, (GPT4O, "narrative_qa/id1414"): 1,
        (LLAMA31, "narrative_qa/id1413"): 0, (LLAMA31, "narrative_qa/id1414"): 1,
    }
    with pytest.raises(InputError, match="metric must be 'is_correct' or 'score'"):
        from_every_eval_ever(EEE, metric="acc")
    src = next(EEE.rglob("3f6a*_samples.jsonl"))
    lines = src.read_text().splitlines()
    rec = json.loads(lines[1])
    del rec["sample_id"]
    bad = tmp_path / "bad_samples.jsonl"
    bad.write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(InputError, match=r"bad_samples.jsonl: line 2: no field 'sample_id'"):
        from_every_eval_ever(bad)


def test_every_eval_ever_same_item_two_ids_and_same_llm_two_names(tmp_path):
    src = next(EEE.rglob("3f6a*_samples.jsonl"))
    recs = [json.loads(x) for x in src.read_text().splitlines()][:3]
    # the same question under another id, from another model spelled with __ and upper case
    copy = [{**r, "model_id": "OpenAI__GPT-4o", "sample_id": r["sample_id"] + "_v2"} for r in recs]
    (tmp_path / "a_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / "b_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in copy))
    with pytest.warns(DataWarning) as caught:
        df = from_every_eval_ever(tmp_path)
    messages = [str(w.message) for w in caught]
    assert any("'OpenAI__GPT-4o' (from" in m and "'openai/gpt-4o' (from" in m for m in messages), messages
    assert any("3 item contents appear under two or more ids" in m and "'mmlu/mmlu_anatomy_0' and "
               "'mmlu/mmlu_anatomy_0_v2'" in m for m in messages), messages
    assert len(df) == 6


# --------------------------------------------------------------------------
# the command line: every importer, its options, and validate accepting the output

CLI_CASES = {
    "helm": ([str(HELM)], ["--metric", "f1_score", "--threshold", "0.5", "--tasks", "narrative_qa*"]),
    "open-llm-leaderboard-v2": ([str(V2)], ["--domain-from", "category", "--tasks", "leaderboard_mmlu_pro"]),
    "inspect": ([str(p) for p in sorted(INSPECT.glob("*.eval"))], ["--domain-from", "metadata.subject"]),
    "every-eval-ever": ([str(EEE)], ["--tasks", "mmlu,exact_match:test"]),
}


@pytest.mark.parametrize("kind", sorted(CLI_CASES))
def test_cli_convert_then_validate(kind, tmp_path, capsys):
    srcs, opts = CLI_CASES[kind]
    out = tmp_path / "long.csv"
    assert main(["convert", kind, *srcs, *opts, "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["validate", str(out)]) == 0
    r = Responses.read(out)
    assert r.n_llms == 2 and r.n_responses == len(pd.read_csv(out))


def test_cli_convert_option_of_another_kind(tmp_path, capsys):
    assert main(["convert", "inspect", str(INSPECT), "--split", "valid", "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mtlirt: error: --split does not apply to inspect (its options: --metric,")
    assert len(err.strip().splitlines()) == 1
    assert main(["convert", "helm", str(HELM), "--metric", "f1_score", "--out", str(tmp_path / "x.csv")]) == 2
    assert "f1_score is 0.6, not 0 or 1" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_lm_eval_threshold_for_a_non_binary_metric(tmp_path):
    folder = tmp_path / "org__m"
    _write_jsonl(folder / f"samples_squad_{DATE}.jsonl",
                 [_sample(i, v, metric="f1") for i, v in enumerate([0.2, 0.5, 0.9])])
    with pytest.raises(InputError, match=r"samples_squad_.*: line 1: f1 is 0.2, not 0 or 1; give threshold="):
        from_lm_eval(folder, metric="f1")
    assert from_lm_eval(folder, metric="f1", threshold=0.5)["correct"].tolist() == [0, 1, 1]
    with pytest.raises(InputError, match="threshold must be a number, not 'high'"):
        from_lm_eval(folder, metric="f1", threshold="high")


def test_helm_skips_perturbed_copies_and_other_trials(tmp_path):
    run = _copy_tree(GPT2_MMLU, tmp_path / "run")

    def add_copies(entries):
        first = entries[0]  # id147, exact_match 0
        right = json.loads(json.dumps(first).replace('"mean": 0.0', '"mean": 1.0'))
        entries.append({**right, "perturbation": {"name": "typos", "robustness": True, "computed_on": "perturbed"}})
        entries.append({**right, "train_trial_index": 1})

    _edit_json(run / "per_instance_stats.json", add_copies)
    df = from_helm(run)
    assert dict(zip(df["item"], df["correct"])) == {f"{MMLU_RUN}/id147": 0, f"{MMLU_RUN}/id65": 0,
                                                    f"{MMLU_RUN}/id222": 1}
    assert from_helm(run, trial=1)["correct"].tolist() == [1]


def test_inspect_latest_log_of_a_model_and_task_wins(tmp_path):
    import zipfile

    src = sorted(INSPECT.glob("*.eval"))[0]  # gpt-4o, created 2025-12-19T12:37:50
    older = tmp_path / "older.eval"
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(older, "w") as out:
        for name in z.namelist():
            data = json.loads(z.read(name))
            if name == "header.json":
                data["eval"]["created"] = "2025-12-01T00:00:00+00:00"
            if name.startswith("samples/"):
                data["scores"]["choice"]["value"] = "I"
            if name == "reductions.json":
                data = [{**r, "samples": [{**x, "value": 0} for x in r["samples"]]} for r in data]
            out.writestr(name, json.dumps(data))
    assert from_inspect([older])["correct"].tolist() == [0, 0, 0]
    assert from_inspect([older, src])["correct"].tolist() == [0, 1, 1]
    with pytest.raises(InputError, match="domain_from must be 'task' or 'metadata.FIELD' for Inspect logs"):
        from_inspect(src, domain_from="subject")


def test_registry_options_are_the_converters_keywords():
    import inspect as pyinspect

    from mtlirt.data.importers import OPTIONS

    for imp in IMPORTERS.values():
        params = pyinspect.signature(imp.function).parameters
        for flag in imp.options:
            assert OPTIONS[flag].keyword in params, f"{imp.name}: {flag} is not a keyword of {imp.function.__name__}"
    # every converter option with a command-line meaning is reachable (llm=, metric=, threshold= ...)
    assert {f for imp in IMPORTERS.values() for f in imp.options} == set(OPTIONS)


def test_cli_convert_then_validate_lm_eval_and_open_llm_leaderboard(tmp_path, capsys):
    _lm_eval_run(tmp_path / "lm", "EleutherAI/pythia-160m")
    _lm_eval_run(tmp_path / "lm", "org/model-b")
    _oll_repo(tmp_path / "oll", "meta-llama/Llama-2-7b-hf", style="acc")
    _oll_repo(tmp_path / "oll", "org/model-b", style="metrics")
    for kind, src in (("lm-eval", tmp_path / "lm"), ("open-llm-leaderboard", tmp_path / "oll")):
        out = tmp_path / f"{kind}.parquet"
        assert main(["convert", kind, str(src), "--out", str(out)]) == 0
        assert main(["validate", str(out)]) == 0
        assert Responses.read(out).n_responses == 12
