"""The ``mtlirt`` command."""

from __future__ import annotations

import argparse
import sys
import warnings

from . import __version__
from .cli_commands import (
    cmd_adapt,
    cmd_compare,
    cmd_convert,
    cmd_demo,
    cmd_example_data,
    cmd_fit,
    cmd_report,
    cmd_score,
    cmd_simulate,
    cmd_validate,
)
from .config import NUTS_DRAWS, NUTS_DRAWS_MAX, NUTS_TUNE
from .errors import InputError
from .memory import small_pages


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def _os_message(exc: OSError) -> str:
    """An ``OSError`` as one readable clause: ``cannot write X: No space left on device``, ``X: Permission denied``."""
    if exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return exc.strerror or str(exc) or type(exc).__name__


def _showwarning(message, category, filename, lineno, file=None, line=None):
    print(f"mtlirt: warning: {_one_line(message)}", file=sys.stderr)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("domain sizes must be positive integers")
    return values


def _share(text: str) -> float:
    v = float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text}")
    return v


def _floor(text: str) -> float | str | None:
    word = text.strip().lower()
    if word in ("estimate", "auto"):
        return word
    if word == "none":
        return None
    try:
        return _share(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto, estimate, none or a share in [0, 1), got {text}") from None


def _range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI, got {text!r}") from None
    return lo, hi


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--domain-column", default="domain", metavar="NAME",
                   help="column holding each item's domain (default: domain; e.g. subject)")
    p.add_argument("--ignore-columns", default="", metavar="A,B",
                   help="comma-separated extra columns to ignore instead of rejecting the table")
    p.add_argument("--drop-unassigned", action="store_true",
                   help="drop rows without a domain (with a warning) instead of rejecting them")


def _force_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--force", action="store_true",
                   help=f"replace {what} written earlier; without it an existing --out is an error. A file "
                   "given as input, and a folder mtlirt did not write, are never replaced")


def _new_llm_options(p: argparse.ArgumentParser, marker: str) -> None:
    p.add_argument("--out", required=True, metavar="DIR",
                   help=f"output folder: a new path, or one written earlier (with its {marker}) with --force")
    p.add_argument("--ignore-unknown-items", action="store_true",
                   help="drop responses to items the fit does not hold (default: an error naming them)")
    p.add_argument("--interval", type=float, default=0.9, help="probability of the intervals (default 0.9)")
    p.add_argument("--draws", type=int, default=20,
                   help="Bayesian fits: posterior draws of the structure averaged over (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed (expected-accuracy draws, tie-breaks; default 0)")


def _add_score(sub) -> None:
    p = sub.add_parser("score", help="score new LLMs against a fit's items and structure, without refitting",
                       description="Score new LLMs from any subset of a fit's items: the fit's items and "
                       "structure stay fixed; every LLM gets its overall score, every domain score of the fit "
                       "(domains it has no responses in included) and its expected accuracy on the whole "
                       "benchmark, with intervals. Writes overall.csv and domain_scores.csv.")
    p.add_argument("fit", metavar="FIT_DIR", help="a fit folder (mtlirt fit --out)")
    p.add_argument("responses", metavar="RESPONSES",
                   help="long table llm, item, correct (domain optional; it must match the fit's)")
    _new_llm_options(p, "score.json")
    _force_option(p, "a score folder (--out with score.json)")
    p.set_defaults(func=cmd_score)


def _add_adapt(sub) -> None:
    p = sub.add_parser("adapt", help="replay an adaptive test across domains for LLMs with known answers",
                       description="Replay a computerised adaptive test for each LLM of --responses (its "
                       "answers are the oracle): each next item, in any domain, is the one whose answer is "
                       "expected to shrink the posterior variance of the target most; stop at --budget items "
                       "or once the target's interval is narrower than --width. Writes overall.csv, "
                       "domain_scores.csv and administered.csv (llm, step, item, domain, correct).")
    p.add_argument("fit", metavar="FIT_DIR", help="a fit folder (mtlirt fit --out)")
    p.add_argument("--responses", required=True, metavar="FULL",
                   help="long table llm, item, correct: the answers the test may ask for")
    p.add_argument("--budget", type=int, default=None, metavar="K", help="largest number of items per LLM")
    p.add_argument("--width", type=float, default=None,
                   help="stop once the target's interval is narrower than this")
    p.add_argument("--target", choices=("overall", "domains", "accuracy"), default="overall",
                   help="what the items are chosen for: the overall score, the domain scores (sum of their "
                   "variances) or the expected accuracy (default overall)")
    _new_llm_options(p, "adapt.json")
    _force_option(p, "an adaptive-test folder (--out with adapt.json)")
    p.set_defaults(func=cmd_adapt)


def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check a results table and print its summary",
                       description="Check a long results table (llm, item, domain, correct; CSV, "
                       "gzip CSV or Parquet) and print a summary, or the first error found.")
    p.add_argument("data", metavar="FILE", help="the results table")
    _data_options(p)
    p.set_defaults(func=cmd_validate)


def _add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a leaderboard with known truth",
                       description="Simulate item-level results from the multi-domain IRT model "
                       "(docs: Model and estimators) and write them as a long table, with the truth on request.")
    p.add_argument("--n-llms", type=int, default=None, help="number of LLMs (default 1000; 100 with --preset paper)")
    p.add_argument("--preset", choices=["mmlu", "paper"], default=None,
                   help="domain sizes of a real benchmark: mmlu = the 57 MMLU subjects (default when "
                   "--domain-sizes is not given); paper = the seed paper's simulation design (100 LLMs, 18 "
                   "domains of 50-100 items, heterogeneity --similarity h; takes --n-llms and --seed only)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply the preset's domain sizes (floor 1 item; default 1)")
    p.add_argument("--domain-sizes", type=_int_list, default=None, metavar="N,N,...",
                   help="comma-separated item counts of the domains")
    p.add_argument("--rank", type=int, default=1, help="number of overall traits (default 1)")
    p.add_argument("--similarity", type=float, default=0.1,
                   help="share h of each inlier domain trait's variance not explained by the overall "
                   "traits (default 0.1)")
    p.add_argument("--outlier-share", type=_share, default=0.0,
                   help="share of domains whose trait is independent of the overall traits (default 0)")
    p.add_argument("--scenario", choices=["ideal", "realistic"], default="ideal",
                   help="ideal: the model itself (default); realistic: every departure below at a level "
                   "measured on real leaderboards (each flag overrides its level)")
    p.add_argument("--guessing", type=_share, default=None,
                   help="guessing floor c of the multiple-choice items (ideal 0, realistic 0.2)")
    p.add_argument("--missing", type=_share, default=None,
                   help="share of responses missing at random (ideal 0, realistic 0.05)")
    p.add_argument("--loading-range", type=_range, default=None, metavar="LO,HI",
                   help="per-domain loadings drawn uniformly from [LO, HI] (realistic 0.6,0.98)")
    p.add_argument("--skew", type=float, default=None,
                   help="skew-normal shape of the overall trait's population (ideal 0, realistic 4)")
    p.add_argument("--chance-cluster", type=_share, default=None, metavar="SHARE",
                   help="share of LLMs in a lump near chance (ideal 0, realistic 0.05)")
    p.add_argument("--guessing-sd", type=float, default=None,
                   help="sd of the per-item guessing, a 3PL truth (ideal 0, realistic 0.05)")
    p.add_argument("--mc-share", type=float, default=None, metavar="SHARE",
                   help="share of multiple-choice domains, the ones with guessing (ideal 1, realistic 0.75)")
    p.add_argument("--flawed-share", type=float, default=None, metavar="SHARE",
                   help="share of flawed items: upper asymptote < 1 or negative discrimination "
                   "(ideal 0, realistic 0.04)")
    p.add_argument("--specialist-share", type=float, default=None, metavar="SHARE",
                   help="share of LLMs with a large deviation in 1-3 domains (ideal 0, realistic 0.03)")
    p.add_argument("--block-missing", type=_share, default=None, metavar="SHARE",
                   help="share of LLMs that ran only some domains (ideal 0, realistic 0.4)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, metavar="FILE", help="output table (.parquet, .csv or .csv.gz)")
    p.add_argument("--truth", metavar="DIR", default=None,
                   help="also write the true scores, items and settings to this folder (a new path, or a truth "
                   "folder written earlier, with truth.json, with --force)")
    _force_option(p, "an existing --out table and --truth folder")
    p.set_defaults(func=cmd_simulate)


def _add_convert(sub) -> None:
    from .data.importers import IMPORTERS, add_convert_arguments

    kinds = "; ".join(f"{imp.name} = {imp.summary}" for imp in IMPORTERS.values())
    p = sub.add_parser("convert", help="convert harness or leaderboard exports into a long table",
                       description=f"Convert item-level results into the long table llm, item, domain, correct: "
                       f"{kinds}. Each option says which kinds take it.")
    add_convert_arguments(p)
    _force_option(p, "an existing --out table")
    p.set_defaults(func=cmd_convert)


def _add_fit(sub) -> None:
    p = sub.add_parser("fit", help="fit a model and write scores with intervals",
                       description="Fit a model to a results table and write a fit folder: domain_scores.csv, "
                       "overall.csv, items.csv, domain_correlation.csv, fit.json and posterior.nc. The folder "
                       "appears only when the fit succeeded. Bad input: a one-line error and exit status 2; "
                       "a Bayesian fit that did not converge: a loud warning (exit status 3 with --strict).")
    p.add_argument("data", metavar="DATA", help="the results table (CSV, gzip CSV or Parquet)")
    _fit_estimator_options(p)
    _fit_uncertainty_options(p)
    _fit_bayes_options(p)
    _fit_check_options(p)
    p.add_argument("--out", required=True, metavar="DIR",
                   help="the fit folder to write: a new path, or a fit folder written earlier (with fit.json) "
                   "with --force")
    _force_option(p, "a fit folder (--out with fit.json)")
    _data_options(p)
    p.set_defaults(func=cmd_fit)


def _fit_estimator_options(p: argparse.ArgumentParser) -> None:
    """``mtlirt fit``: the estimator and the frequentist methods' item model."""
    p.add_argument("--method", default="mtl", choices=["mtl", "stl", "pooled", "accuracy", "bayes"],
                   help="estimator: mtl (spectral multi-task learning, default), stl (each domain alone), "
                   "pooled (one 2PL over all items), accuracy (proportion correct), bayes (PyMC model)")
    p.add_argument("--rank", type=int, default=None,
                   help="number of overall traits (mtl); selected from the data by default")
    p.add_argument("--gamma", type=float, default=None, metavar="C",
                   help="mtl: report the biased regularisation's shrunk scores at this penalty (gamma = C sqrt(N + "
                   "log K)) instead of the factor model's posterior means (the default)")
    p.add_argument("--variant", default=None, metavar="NAME",
                   help="mtl variant: default (the package's estimator), paper (the seed paper's estimator, C "
                   "by its 5-fold cross-validation; --gamma fixes its C), paper-global or paper-local (its baselines)")
    p.add_argument("--optimizer", default=None, choices=["fast", "adam"],
                   help="paper variants: fast (default; ours, reaches the exact minimiser of the paper's objective) "
                   "or adam (the paper's projected Adam with its early stop: the paper's published output)")
    p.add_argument("--cv-seed", type=int, default=None, metavar="S",
                   help="--variant paper: seed of its cross-validation folds (default --seed); the paper's code "
                   "draws them from numpy.random.default_rng(S + 100003)")
    p.add_argument("--item-model", default="2pl", choices=["2pl", "1pl"],
                   help="item model of the frequentist methods (default 2pl)")
    p.add_argument("--guessing", type=_floor, default="auto", metavar="C",
                   help="guessing floors (lower asymptotes) of the frequentist methods: auto (default: one floor "
                   "per domain where the data call for it), estimate (one floor in every domain), none (the 2PL), "
                   "or a fixed c for every item (e.g. 0.25 for four options)")


def _fit_uncertainty_options(p: argparse.ArgumentParser) -> None:
    """``mtlirt fit``: the bootstrap, the intervals, the held-out share and the seed."""
    p.add_argument("--bootstrap", type=int, default=0, metavar="B",
                   help="bootstrap replicates for intervals of point estimates (mtl: intervals of the "
                   "estimation error; default 0: none)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes for the bootstrap (default: all cores)")
    p.add_argument("--interval", type=float, default=0.9, help="probability of the reported intervals (default 0.9)")
    p.add_argument("--heldout", type=_share, default=0.0, metavar="SHARE",
                   help="hold out this share of responses at random, fit on the rest, and record the held-out "
                   "log-likelihood in fit.json (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random step (default 0)")


def _fit_bayes_options(p: argparse.ArgumentParser) -> None:
    """``mtlirt fit --method bayes``: the model and its inference settings."""
    p.add_argument("--model", default=None, metavar="NAME",
                   help="bayes: a model specification shipped with mtlirt by name or a .toml path (default factor-2pl)")
    p.add_argument("--items", default=None, choices=["auto", "joint", "fixed"],
                   help="bayes: sample item parameters jointly, or fix them at calibrated values and sample the "
                   "LLM side with tabulated sufficient statistics (for leaderboard scale); 'auto' (default): "
                   "joint with at most 200 LLMs and 60,000 responses, else fixed")
    p.add_argument("--algorithm", default=None, choices=["nuts", "advi", "map"],
                   help="bayes: NUTS sampling (default), ADVI, or the MAP point")
    p.add_argument("--llm-side", default=None, choices=["auto", "integrated", "sampled"],
                   help="bayes --items fixed: 'integrated' integrates every LLM's overall trait and domain scores "
                   "out, samples only the loadings and draws the LLM side exactly (factor traits of rank 1-2); "
                   "'sampled' samples the overall traits; 'auto' (default): integrated wherever it applies")
    p.add_argument("--sampler", default=None, choices=["nutpie", "pymc", "numpyro", "imh"],
                   help="bayes: NUTS implementation (default nutpie; numpyro needs the jax extra), or 'imh' "
                   "(independence Metropolis-Hastings from the proposal its pilot chose, --llm-side integrated "
                   "only); with --llm-side integrated the default picks IMH where a pilot finds it fits, else "
                   "nutpie")
    p.add_argument("--draws", type=int, default=None,
                   help="bayes: draws per chain (default: until the convergence checks pass: IMH in blocks, "
                   f"nutpie from {NUTS_DRAWS} to {NUTS_DRAWS_MAX}; {NUTS_DRAWS} with the other samplers)")
    p.add_argument("--tune", type=int, default=None,
                   help=f"bayes: tuning steps per chain (default {NUTS_TUNE} for NUTS; for IMH a burn-in of 20-100 "
                   "steps set by its pilot)")
    p.add_argument("--chains", type=int, default=None, help="bayes: chains (default 4)")
    p.add_argument("--target-accept", type=float, default=None, metavar="P",
                   help="bayes, NUTS: target acceptance rate, kept as given (default 0.9, or 0.8 with the domain "
                   "traits integrated out; raised halfway to 1 once where a run diverges)")
    p.add_argument("--thin", type=float, default=None, metavar="N",
                   help="bayes --llm-side integrated: keep every N-th of the structure draws (a number >= 1, evenly "
                   "spaced where it is not whole) and draw the LLM side for those only; convergence is checked on "
                   "all of them (default: 1,000 kept)")
    p.add_argument("--log-likelihood", action=argparse.BooleanOptionalAction, default=None,
                   help="bayes: store the pointwise log-likelihood (per LLM and domain) in posterior.nc for "
                   "loo/compare; by default only when it holds at most 1e8 values (0.8 GB)")


def _fit_check_options(p: argparse.ArgumentParser) -> None:
    """``mtlirt fit``: convergence made an error, and the model checks."""
    p.add_argument("--strict", action="store_true", help="exit with status 3 when the fit did not converge")
    p.add_argument("--checks", action="store_true",
                   help="run the model checks that apply (cross-domain correlation predictive check, S-X2 item "
                   "fit, leave-one-LLM-out for a posterior) on the data fitted and record them in fit.json's "
                   "diagnostics; mtlirt report shows the record")
    p.add_argument("--check-replicates", type=int, default=20, metavar="R",
                   help="--checks: replicated data sets of the correlation check, one single-domain fit each "
                   "(default 20, the report's)")


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of one or several fits",
                       description="Write one self-contained HTML file: data summary, leaderboard with "
                       "intervals and rank intervals, IRT rank against raw-accuracy rank, LLM x domain heatmap "
                       "and domain profiles, domain difficulty and size, item map, correlation structure, "
                       "diagnostics, model checks, and a comparison section when several fits are given. Every "
                       "figure is an inline SVG that saves as SVG or PNG; every table downloads as CSV.")
    p.add_argument("fits", nargs="+", metavar="DIR", help="fit folders written by mtlirt fit")
    p.add_argument("--out", default="report.html", metavar="FILE",
                   help="the HTML file (default report.html; an existing one is replaced with --force only)")
    p.add_argument("--data", default=None, metavar="FILE",
                   help="the results table the fits came from (checked against the fingerprint in fit.json): "
                   "data summary, raw accuracy for the rank comparison, model checks")
    p.add_argument("--title", default="mtlirt report", help="title of the report")
    p.add_argument("--interval", type=float, default=0.9, help="probability of the intervals shown (default 0.9)")
    p.add_argument("--top", type=int, default=50, help="rows of the leaderboard table (default 50)")
    p.add_argument("--full-table", action="store_true", help="show every LLM in the leaderboard table")
    p.add_argument("--llms", default=None, metavar="NAMES|FILE",
                   help="the LLMs whose domain profiles and heatmap rows to show: comma-separated names, or a "
                   "file with one name per line (default: the --top-llms best in the heatmap, the 3 best "
                   "profiles)")
    p.add_argument("--top-llms", type=int, default=30, metavar="N",
                   help="rows of the LLM x domain heatmap without --llms (default 30)")
    _force_option(p, "an existing --out file")
    _data_options(p)
    p.set_defaults(func=cmd_report)


def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="print the agreement of two or more fits",
                       description="Print the comparison table of fits: correlation of overall and domain "
                       "scores, rank agreement and top-10 overlap, mean interval widths, held-out log-likelihood.")
    p.add_argument("fits", nargs="+", metavar="DIR", help="two or more fit folders")
    p.add_argument("--interval", type=float, default=0.9, help="probability of the intervals compared (default 0.9)")
    p.add_argument("--allow-different-data", action="store_true",
                   help="compare fits of different tables (by the LLMs and domains they share); by default fits "
                   "whose fit.json records different data fingerprints are refused")
    p.set_defaults(func=cmd_compare)


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="simulate an MMLU-shaped leaderboard, fit MTL and Bayes, write a report",
                       description="The main job on built-in data: simulate a leaderboard of 600 LLMs on MMLU's 57 "
                       "subjects (sizes x 0.25), fit the MTL estimator with a bootstrap and the Bayesian model "
                       "(items fixed at the MTL calibration), write both fit folders and an HTML report, and print "
                       "a five-line headline.")
    p.add_argument("--out", default="demo-output", metavar="DIR",
                   help="output folder (default demo-output): a new path, or a demo folder written earlier "
                   "(with demo.json) with --force")
    p.add_argument("--seed", type=int, default=2026, help="seed (default 2026)")
    p.add_argument("--n-llms", type=int, default=None, help="number of LLMs (default 600)")
    p.add_argument("--scale", type=float, default=None, help="multiply MMLU's subject sizes (default 0.25)")
    p.add_argument("--bootstrap", type=int, default=40, help="bootstrap replicates of the MTL fit (default 40)")
    p.add_argument("--no-bayes", action="store_true", help="skip the Bayesian fit")
    _force_option(p, "a demo folder (--out with demo.json)")
    p.set_defaults(func=cmd_demo)


def _add_example_data(sub) -> None:
    p = sub.add_parser("example-data", help="copy small example inputs of every format mtlirt convert reads",
                       description="Copy the example inputs shipped with the package into DIR: a long table "
                       "(long/), wide matrices (wide/) and, in each harness's own layout, lm-evaluation-harness "
                       "samples (lm_eval/), Open LLM Leaderboard v1 and v2 details (open_llm_leaderboard/, "
                       "open_llm_leaderboard_v2/), HELM runs (helm/), Inspect logs (inspect/) and Every Eval "
                       "Ever records (every_eval_ever/), with a README.md on their sources and licences. The "
                       "worked examples of the documentation run on them. Existing files are never overwritten: "
                       "if any is there, nothing is written.")
    p.add_argument("dir", metavar="DIR", help="folder to copy them into (created if need be)")
    p.set_defaults(func=cmd_example_data)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mtlirt",
        description="Measure LLMs from item-level leaderboard results: domain and overall scores "
        "with intervals, by multi-domain IRT (representation MTL and a Bayesian twin in PyMC).",
    )
    parser.add_argument("--version", action="version", version=f"mtlirt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_validate(sub)
    _add_simulate(sub)
    _add_convert(sub)
    _add_fit(sub)
    _add_report(sub)
    _add_compare(sub)
    _add_demo(sub)
    _add_score(sub)
    _add_adapt(sub)
    _add_example_data(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    warnings.showwarning = _showwarning
    try:
        with small_pages():  # the command's large arrays without huge-page advice (mtlirt.memory)
            return int(args.func(args) or 0)
    except InputError as exc:
        print(f"mtlirt: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # permissions, a full disk, a file where a folder should be, ...
        print(f"mtlirt: error: {_one_line(_os_message(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mtlirt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
