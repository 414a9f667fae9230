"""Converters account for every input: the bad-input cases of ``mtlirt convert``.

Each failing case is built in ``tmp_path`` from the example inputs shipped in
``mtlirt.examples`` (a HELM run with only its ``valid`` split, an
Inspect log without samples, ...) and run through the command line from that
folder: the exit status is 2, stderr is one line ``mtlirt: error: ...`` naming
the source and what it has, and no file in the folder changed (its hash before
and after).  ``--allow-empty`` turns a source without responses into a warning
naming it, and the summary line accounts for it.
"""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mtlirt.examples
from _corpus import snapshot
from mtlirt.cli import main
from mtlirt.data.importers import from_helm, from_lm_eval
from mtlirt.data.validate import DataWarning
from mtlirt.errors import InputError

FIXTURES = Path(mtlirt.examples.__file__).parent
HELM = FIXTURES / "helm" / "runs" / "v1"
PYTHIA_MMLU = "mmlu-subject=philosophy,method=multiple_choice_joint,model=eleutherai_pythia-1b-v0"
GPT2_MMLU = "mmlu-subject=philosophy,method=multiple_choice_joint,model=openai_gpt2"
INSPECT = FIXTURES / "inspect" / "logs"
DATE = "2024-05-13T12-30-45.123456"


def _refused(work: Path, monkeypatch, capsys, *argv: str) -> str:
    """Run ``mtlirt *argv`` in ``work``: exit 2, one error line, no file changed; return the line."""
    monkeypatch.chdir(work)
    before = snapshot(work)
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtlirt: error: "), captured.err
    assert snapshot(work) == before
    return lines[0]


def _accepted(work: Path, monkeypatch, capsys, *argv: str) -> tuple[str, list[str]]:
    """Run ``mtlirt *argv`` in ``work`` with warnings shown: exit 0; return stdout and the warning lines."""
    monkeypatch.chdir(work)
    with warnings.catch_warnings():
        warnings.simplefilter("always", DataWarning)
        assert main(list(argv)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err.strip().splitlines()


def _valid_only(run: Path) -> Path:
    """Keep only the ``valid`` split of a HELM run's stats (as a run of a scenario without a test split)."""
    path = run / "per_instance_stats.json"
    entries = json.loads(path.read_text())
    for e in entries:
        e["stats"] = [s for s in e["stats"] if s["name"].get("split") != "test"]
    path.write_text(json.dumps(entries))
    return run


@pytest.fixture
def helm_suite(tmp_path) -> Path:
    """A suite of two MMLU runs (two LLMs) whose pythia run has only a ``valid`` split."""
    suite = tmp_path / "suite"
    for run in (GPT2_MMLU, PYTHIA_MMLU):
        shutil.copytree(HELM / run, suite / run)
    _valid_only(suite / PYTHIA_MMLU)
    return tmp_path


def test_helm_run_with_only_a_valid_split_is_named(helm_suite, monkeypatch, capsys):
    line = _refused(helm_suite, monkeypatch, capsys, "convert", "helm", "suite", "--out", "out.csv")
    assert f"1 of 2 HELM runs gives no responses: {helm_suite / 'suite' / PYTHIA_MMLU}: 'exact_match' only in " \
           "split 'valid' (use --split valid); pass --allow-empty to leave it out" in line

    out, warned = _accepted(helm_suite, monkeypatch, capsys,
                            "convert", "helm", "suite", "--allow-empty", "--out", "out.csv")
    assert warned == [f"mtlirt: warning: left out 1 HELM run that gives no responses: "
                      f"{helm_suite / 'suite' / PYTHIA_MMLU}: 'exact_match' only in split 'valid' (use --split valid)"]
    assert out.splitlines() == [
        f"read 1 of 2 HELM runs (3 responses); left out 1 that gives no responses ({PYTHIA_MMLU})",
        "wrote 3 responses (1 LLMs, 3 items, 1 domains) to out.csv",
    ]
    assert set(pd.read_csv(helm_suite / "out.csv")["llm"]) == {"openai/gpt2"}

    # the split it has reads it
    out, _ = _accepted(helm_suite, monkeypatch, capsys,
                       "convert", "helm", f"suite/{PYTHIA_MMLU}", "--split", "valid", "--out", "valid.csv")
    assert out.splitlines()[0] == "read 1 HELM run (1 responses)"


def test_helm_valid_only_run_alone_names_its_splits(helm_suite, monkeypatch, capsys):
    line = _refused(helm_suite, monkeypatch, capsys, "convert", "helm", f"suite/{PYTHIA_MMLU}", "--out", "out.csv")
    assert line == (f"mtlirt: error: no responses found in suite/{PYTHIA_MMLU}: {helm_suite / 'suite' / PYTHIA_MMLU}: "
                    "'exact_match' only in split 'valid' (use --split valid)")
    line = _refused(helm_suite, monkeypatch, capsys,
                    "convert", "helm", "suite", "--metric", "bleu", "--allow-empty", "--out", "out.csv")
    assert "no stat 'bleu' (its stats: 'exact_match', 'num_references', 'num_train_trials', 'quasi_exact_match') " \
           "(choose one with --metric)" in line


def test_python_callers_see_keywords(helm_suite):
    run = helm_suite / "suite" / PYTHIA_MMLU
    with pytest.raises(InputError, match=r"'exact_match' only in split 'valid' \(use split='valid'\)$"):
        from_helm(run)
    with pytest.raises(InputError, match=r"pass allow_empty=True to leave it out$"):
        from_helm(helm_suite / "suite")
    with pytest.warns(DataWarning, match=r"left out 1 HELM run that gives no responses: .*eleutherai_pythia"):
        df = from_helm(helm_suite / "suite", allow_empty=True)
    assert set(df["llm"]) == {"openai/gpt2"}


def test_threshold_outside_the_metric_is_refused(tmp_path, monkeypatch, capsys):
    shutil.copytree(HELM, tmp_path / "runs")
    base = ("convert", "helm", "runs", "--metric", "f1_score", "--tasks", "narrative_qa*", "--out", "out.csv")
    # F1 in [0, 1]: a proportion, so T must lie in (0, 1]
    line = _refused(tmp_path, monkeypatch, capsys, *base, "--threshold", "2")
    assert line == ("mtlirt: error: --threshold 2 is outside (0, 1]: the values of 'f1_score' read are proportions "
                    "(0 to 0.6), so every response would count as incorrect")
    line = _refused(tmp_path, monkeypatch, capsys, *base, "--threshold", "0")
    assert line.endswith("so every response would count as correct")
    # inside (0, 1] but above every value: read, with a warning
    out, warned = _accepted(tmp_path, monkeypatch, capsys, *base, "--threshold", "0.9")
    assert warned == ["mtlirt: warning: --threshold 0.9 is above every value of 'f1_score' read (0 to 0.6): every "
                      "response counts as incorrect"]
    assert pd.read_csv(tmp_path / "out.csv")["correct"].eq(0).all()


def test_threshold_of_a_metric_beyond_one_lies_within_its_values(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "org__m"
    folder.mkdir()
    lines = [{"doc_id": i, "filter": "none", "metrics": ["bleu"], "bleu": v} for i, v in enumerate([12.5, 40.0, 81.0])]
    (folder / f"samples_wmt_{DATE}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    line = _refused(tmp_path, monkeypatch, capsys,
                    "convert", "lm-eval", "org__m", "--metric", "bleu", "--threshold", "100", "--out", "out.csv")
    assert line == ("mtlirt: error: --threshold 100 is outside the values of 'bleu' read (12.5 to 81): every "
                    "response would count as incorrect; give a threshold above 12.5 and at most 81")
    line = _refused(tmp_path, monkeypatch, capsys,
                    "convert", "lm-eval", "org__m", "--metric", "bleu", "--threshold", "12.5", "--out", "out.csv")
    assert "every response would count as correct" in line
    assert from_lm_eval(folder, metric="bleu", threshold=40)["correct"].tolist() == [0, 1, 1]


def _strip_samples(src: Path, dst: Path) -> Path:
    """A copy of an Inspect ``.eval`` log whose evaluation ended in an error before any sample."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for name in z.namelist():
            if name.startswith("samples/") or name == "reductions.json":
                continue
            data = z.read(name)
            if name == "header.json":
                header = json.loads(data)
                header["status"] = "error"
                data = json.dumps(header).encode()
            out.writestr(name, data)
    return dst


def test_inspect_log_without_samples_names_its_model(tmp_path, monkeypatch, capsys):
    gpt4o, haiku = sorted(INSPECT.glob("*.eval"))
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(gpt4o, logs)
    empty = _strip_samples(haiku, logs / haiku.name)
    line = _refused(tmp_path, monkeypatch, capsys, "convert", "inspect", "logs", "--out", "out.csv")
    assert line == (f"mtlirt: error: 1 of 2 Inspect logs gives no responses: {empty}: no samples of "
                    "anthropic/claude-3-5-haiku-latest (status 'error'); pass --allow-empty to leave it out")
    # a scorer the logs do not have: the scorers they have
    line = _refused(tmp_path, monkeypatch, capsys,
                    "convert", "inspect", "logs", "--metric", "match", "--allow-empty", "--out", "out.csv")
    assert "no score from 'match' (its scorers: 'choice') (choose one with --metric)" in line

    out, warned = _accepted(tmp_path, monkeypatch, capsys,
                            "convert", "inspect", "logs", "--allow-empty", "--out", "out.csv")
    assert warned == [f"mtlirt: warning: left out 1 Inspect log that gives no responses: {empty}: no samples of "
                      "anthropic/claude-3-5-haiku-latest (status 'error')"]
    assert out.splitlines()[0] == f"read 1 of 2 Inspect logs (3 responses); left out 1 that gives no responses " \
                                  f"({empty.name})"


def test_lm_eval_without_the_metric_lists_the_metrics_and_the_flag(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "org__m"
    folder.mkdir()
    recs = [{"doc_id": i, "filter": "strict-match", "metrics": ["exact_match"], "exact_match": float(i % 2)}
            for i in range(3)]
    gsm8k = folder / f"samples_gsm8k_{DATE}.jsonl"
    gsm8k.write_text("".join(json.dumps(r) + "\n" for r in recs))
    line = _refused(tmp_path, monkeypatch, capsys, "convert", "lm-eval", "org__m", "--out", "out.parquet")
    assert line == (f"mtlirt: error: no responses found in org__m: {gsm8k}: no metric 'acc' (its metrics: "
                    "'exact_match') (choose one with --metric)")
    assert "metric=" not in line
    line = _refused(tmp_path, monkeypatch, capsys,
                    "convert", "lm-eval", "org__m", "--metric", "exact_match", "--filter", "none", "--out", "o.csv")
    assert line.endswith("has the filter 'none' (their filters: 'strict-match'); choose one with --filter")


def test_open_llm_leaderboard_split_without_the_metric(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "details_org__m"
    for config, table in (
        ("harness_arc_challenge_25", pa.table({"acc": [1.0, 0.0]})),
        ("harness_truthfulqa_mc_0", pa.table({"metrics": [{"mc1": 1.0, "mc2": 0.7}]})),
    ):
        (repo / config).mkdir(parents=True)
        pq.write_table(table, repo / config / "latest.parquet")
    line = _refused(tmp_path, monkeypatch, capsys, "convert", "open-llm-leaderboard", "details_org__m",
                    "--out", "out.csv")
    assert line.endswith("harness_truthfulqa_mc_0/latest.parquet: no metric 'acc' (its metrics: 'mc1', 'mc2') "
                         "(choose one with --metric); pass --allow-empty to leave it out")
    line = _refused(tmp_path, monkeypatch, capsys, "convert", "open-llm-leaderboard-v2", str(FIXTURES /
                    "open_llm_leaderboard_v2"), "--tasks", "leaderboard_bbh*", "--metric", "acc", "--out", "o.csv")
    assert "no metric 'acc' (its metrics: 'acc_norm') (choose one with --metric)" in line


def test_every_eval_ever_file_without_records(tmp_path, monkeypatch, capsys):
    shutil.copytree(FIXTURES / "every_eval_ever", tmp_path / "eee")
    empty = tmp_path / "eee" / "data" / "mmlu" / "org" / "m" / "0000_samples.jsonl"
    empty.parent.mkdir(parents=True)
    empty.write_text("")
    line = _refused(tmp_path, monkeypatch, capsys, "convert", "every-eval-ever", "eee", "--tasks",
                    "mmlu,exact_match:test", "--out", "out.csv")
    assert line.endswith(f"{empty}: no records; pass --allow-empty to leave it out")


def test_wide_llm_row_without_a_cell(tmp_path, monkeypatch, capsys):
    (tmp_path / "wide.csv").write_text("llm,math/q1,math/q2\nm1,1,0\nm2,,\nm3,0,1\n")
    line = _refused(tmp_path, monkeypatch, capsys, "convert", "wide", "wide.csv", "--out", "out.csv")
    assert line == ("mtlirt: error: wide.csv: 1 of 3 LLM rows ('m2') have no 0/1 cell, so they would vanish from "
                    "the long table; fill them in, delete them, or pass --allow-empty to leave them out")
    out, warned = _accepted(tmp_path, monkeypatch, capsys,
                            "convert", "wide", "wide.csv", "--allow-empty", "--out", "out.csv")
    assert warned == ["mtlirt: warning: wide.csv: left out 1 of 3 LLM rows ('m2') without a 0/1 cell"]
    assert out.splitlines()[0] == "read 3 LLM rows x 2 item columns of wide.csv (4 responses, 2 blank cells)"


def test_wide_matrix_given_as_a_long_table(tmp_path, monkeypatch, capsys):
    items = [f"q{j}" for j in range(705)]
    wide = pd.DataFrame([[k % 2 for k in range(705)]] * 3, columns=items)
    wide.insert(0, "llm", ["a", "b", "c"])
    wide.to_csv(tmp_path / "matrix.csv", index=False)
    line = _refused(tmp_path, monkeypatch, capsys, "validate", "matrix.csv")
    assert line == ("mtlirt: error: missing columns item, domain, correct: the table needs llm, item, domain, "
                    "correct (found 706 columns: llm, q0, q1, q2, q3 and 701 more); this looks like a wide LLM x "
                    "item matrix (one row per LLM, one 0/1 column per item): turn it into the long table with "
                    "mtlirt convert wide FILE --out LONG.csv")
    # a long table with another column name is not taken for a matrix
    pd.DataFrame({"llm": ["a"], "item": ["x"], "domain": ["d"], "score": [1]}).to_csv(tmp_path / "long.csv",
                                                                                      index=False)
    line = _refused(tmp_path, monkeypatch, capsys, "validate", "long.csv")
    assert line == ("mtlirt: error: missing column correct: the table needs llm, item, domain, correct (found: llm, "
                    "item, domain, score)")


def test_summary_accounts_for_superseded_and_unselected_sources(tmp_path, monkeypatch, capsys):
    v2 = FIXTURES / "open_llm_leaderboard_v2"
    out, warned = _accepted(tmp_path, monkeypatch, capsys, "convert", "open-llm-leaderboard-v2", str(v2),
                            "--tasks", "leaderboard_bbh*", "--out", "out.csv")
    assert warned == []
    # Qwen's bbh_navigate: latest, a dated copy of it and an older run; llama's one file; 6 files of other tasks
    assert out.splitlines()[0] == ("read 2 of 10 details files (5 responses); 2 superseded by the latest run of the "
                                   "same LLM and task; 6 not matching --tasks")


def test_helm_trial_and_single_valued_metric(tmp_path):
    run = HELM / GPT2_MMLU
    with pytest.raises(InputError, match=r"'exact_match' in split 'test' only in train trial 0 \(use trial=0\)$"):
        from_helm(run, trial=1)
    folder = tmp_path / "org__m"
    folder.mkdir()
    lines = [{"doc_id": i, "filter": "none", "metrics": ["bleu"], "bleu": 50.0} for i in range(3)]
    (folder / f"samples_wmt_{DATE}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(InputError, match=r"every value of 'bleu' read is 50: no threshold tells the responses apart"):
        from_lm_eval(folder, metric="bleu", threshold=50)
