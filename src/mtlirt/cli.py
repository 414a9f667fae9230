"""The ``mtlirt`` command."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from . import __version__
from .errors import InputError


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


def _read(args):
    from .data.responses import Responses

    if getattr(args, "data", None) is None:
        raise InputError("no data file given")
    ignore = [c for c in args.ignore_columns.split(",") if c]
    return Responses.read(args.data, domain_column=args.domain_column, ignore_columns=ignore,
                          drop_unassigned=args.drop_unassigned)


# ---------------------------------------------------------------- commands
def cmd_validate(args) -> int:
    r = _read(args)
    print(r.summary())
    return 0


def _check_simulation_outputs(args) -> None:
    """``simulate``'s --out and --truth, checked before simulating."""
    from .data.outputs import check_file, check_folder
    from .data.simulate import TRUTH_FOLDER

    check_file(args.out, what="table", overwrite=args.force)
    if args.truth:
        check_folder(args.truth, TRUTH_FOLDER, overwrite=args.force)
        if Path(args.out).resolve().is_relative_to(Path(args.truth).resolve()):
            raise InputError(f"the table {args.out} lies inside the --truth folder {args.truth}; write it elsewhere")


def cmd_simulate(args) -> int:
    from .data.simulate import simulate

    if args.preset == "paper":
        return _simulate_paper(args)
    args.n_llms = 1000 if args.n_llms is None else args.n_llms
    _check_simulation_outputs(args)
    sim = simulate(
        n_llms=args.n_llms,
        domain_sizes=args.domain_sizes,
        preset=args.preset,
        scale=args.scale,
        rank=args.rank,
        similarity=args.similarity,
        outlier_share=args.outlier_share,
        guessing=args.guessing,
        missing=args.missing,
        scenario=args.scenario,
        loading_range=args.loading_range,
        skew=args.skew,
        chance_cluster=args.chance_cluster,
        guessing_sd=args.guessing_sd,
        mc_share=args.mc_share,
        flawed_share=args.flawed_share,
        specialist_share=args.specialist_share,
        block_missing=args.block_missing,
        seed=args.seed,
    )
    return _write_simulation(sim, args)


def _simulate_paper(args) -> int:
    """``simulate --preset paper``: the seed paper's design; the other design options do not apply."""
    from .data.simulate import simulate_paper

    fixed = ("domain_sizes", "guessing", "missing", "loading_range", "skew", "chance_cluster",
             "guessing_sd", "mc_share", "flawed_share", "specialist_share", "block_missing")
    given = [f"--{k.replace('_', '-')}" for k in fixed if getattr(args, k, None) is not None]
    if args.rank != 1 or args.scale != 1.0 or args.scenario != "ideal" or args.outlier_share:
        given += ["--rank/--scale/--scenario/--outlier-share"]
    if given:
        raise InputError(f"--preset paper fixes the design: {', '.join(given)} do not apply")
    _check_simulation_outputs(args)
    sim = simulate_paper(args.similarity, n_llms=100 if args.n_llms is None else args.n_llms, seed=args.seed)
    return _write_simulation(sim, args)


def _write_simulation(sim, args) -> int:
    """Write a simulation's table (and, with ``--truth``, its truth) where the CLI was told.

    The truth is written first: a failure there leaves no table without its truth.
    """
    if args.truth:
        sim.write_truth(args.truth, overwrite=args.force)
    sim.write(args.out, overwrite=args.force)
    print(f"wrote {len(sim.responses):,} responses of {sim.domain_scores.shape[0]:,} LLMs to {args.out}")
    if args.truth:
        print(f"wrote the truth to {args.truth}")
    return 0


def cmd_convert(args) -> int:
    from .data.importers import convert_args
    from .data.outputs import check_file
    from .data.tables import table_format, write_table

    table_format(args.out)
    check_file(args.out, what="table", overwrite=args.force, inputs=args.src)
    df, summaries = convert_args(args)
    if len(df) == 0:
        raise InputError(f"no responses found in {', '.join(args.src)}")
    write_table(df, args.out, overwrite=args.force)
    for line in summaries:
        print(line)
    print(f"wrote {len(df):,} responses ({df['llm'].nunique()} LLMs, {df['item'].nunique()} items, "
          f"{df['domain'].nunique()} domains) to {args.out}")
    return 0


def cmd_fit(args) -> int:
    from .data.outputs import check_folder
    from .estimators.heldout import heldout_loglik
    from .fitting import ConvergenceWarning, check_options, data_record, fit
    from .results.estimate import check_interval
    from .results.fitdir import FIT_FOLDER, write_fit

    # the options as parsed, None where not given; the API checks them (before the table is read)
    options = dict(variant=args.variant, optimizer=args.optimizer, cv_seed=args.cv_seed, spec=args.model,
                   items=args.items, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler,
                   algorithm=args.algorithm, log_likelihood=args.log_likelihood, llm_side=args.llm_side,
                   thin=args.thin)
    check_options(args.method, rank=args.rank, model=args.item_model, guessing=args.guessing,
                  bootstrap=args.bootstrap, **options)
    check_interval(args.interval)
    if args.checks:
        from .evaluate.correlation_check import check_replicates

        check_replicates(args.check_replicates)
    check_folder(args.out, FIT_FOLDER, overwrite=args.force, inputs=[args.data])
    responses = _read(args)
    heldout = None
    data = responses
    if args.heldout:
        data, heldout = responses.holdout(args.heldout, seed=args.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = fit(data, args.method, rank=args.rank, gamma=args.gamma, model=args.item_model,
                  guessing=args.guessing, bootstrap=args.bootstrap, seed=args.seed, n_jobs=args.jobs, **options)
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    if heldout is not None:
        est.update_info(heldout={"share": args.heldout, **heldout_loglik(est, responses, heldout)},
                        data=data_record(responses))  # the table read, of which the fit saw a part
    checks = None
    if args.checks:
        from .evaluate.checks import run_checks

        checks = run_checks(est, data, n_replicates=args.check_replicates, seed=args.seed, max_draws=200)
        checks.record(est)
    out = write_fit(est, args.out, interval=args.interval, overwrite=args.force)
    info = est.info
    diag = info.get("diagnostics", {})
    print(f"wrote {args.method} fit of {responses.n_llms:,} LLMs x {responses.n_items:,} items "
          f"({responses.n_domains} domains) to {out}")
    if "rank" in info:
        print(f"selected rank: {info['rank']}")
    if "route" in info and info.get("algorithm") == "nuts":
        print(_route_line(info))
    for note in info.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    if "heldout" in info:
        print(f"held-out mean log-likelihood: {info['heldout']['mean_loglik']:.4f} "
              f"on {info['heldout']['n']:,} responses")
    if checks is not None:
        s = checks.summary()
        parts = []
        if "correlation" in s:
            parts.append(f"correlation: {s['correlation']['misfit_pairs']} of {s['correlation']['pairs']} pairs "
                         f"misfit, global p {s['correlation']['global_p']:.3f}")
        if "item_fit" in s:
            parts.append(f"S-X2: {s['item_fit']['misfit_items']} of {s['item_fit']['tested']} tested items misfit")
        if "loo_llm" in s:
            parts.append(f"leave-one-LLM-out: elpd {s['loo_llm']['elpd_loo']:.1f}, "
                         f"{s['loo_llm']['high_k']} LLMs with high Pareto k")
        parts += [f"{k} not run ({v})" for k, v in s.get("skipped", {}).items()]
        print("model checks (in fit.json): " + "; ".join(parts))
    if diag and diag.get("converged") is False:  # None: no convergence check (map)
        bad = ", ".join(f"{k}={v}" for k, v in diag.items() if k != "converged")
        advice = ("sample longer (--draws/--tune) or simplify the model" if args.method == "bayes" else
                  "its item calibration (EM) stopped at its sweep limit; look for degenerate items and "
                  "LLMs (mtlirt validate) or use --item-model 1pl")
        print(f"WARNING: THE FIT DID NOT CONVERGE ({bad}). Do not trust its numbers; {advice}.", file=sys.stderr)
        if args.strict:
            return 3
    return 0


def _route_line(info: dict) -> str:
    """The Bayesian fit's route in one line: items, LLM side, sampler, draws and why."""
    route = info["route"]
    side = f", LLM side {route['llm_side']}" if route.get("llm_side") else ""
    thin = info.get("thin") or 1
    kept = f", the LLM side drawn for every {thin}-th" if thin > 1 else ""
    return (f"route: items {route['items']}{side}, {info.get('sampler')}, {info.get('chains')} chains x "
            f"{info.get('draws'):,} draws{kept} ({route['reasons'].get('draws', '')})")


def _check_fit_dirs(dirs) -> None:
    for d in dirs:
        p = Path(d)
        if not (p / "posterior.nc").exists() and not (p.is_file() and p.suffix == ".nc"):
            raise InputError(f"{d} is not a fit folder (no posterior.nc); write one with mtlirt fit --out")


def _fit_records(dirs) -> dict:
    """``{folder as given: fit record}`` of fit folders (``fit.json``; else posterior.nc's info)."""
    from .results.fitdir import read_record

    return {str(d): read_record(d) for d in dirs}


def _llm_names(text: str | None) -> list[str] | None:
    """``--llms``: a file with one name per line (``#`` starts a comment), else comma-separated names."""
    if text is None:
        return None
    path = Path(text)
    if path.is_file():
        lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
        names = [x for x in lines if x]
        if not names:
            raise InputError(f"--llms: {text} holds no LLM name (one per line)")
        return names
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise InputError("--llms: no LLM name given (NAME,NAME or a file with one name per line)")
    return names


def cmd_report(args) -> int:
    from .data.outputs import check_file
    from .report.html import write_report
    from .results.fitdir import check_same_data

    _check_fit_dirs(args.fits)
    check_file(args.out, what="HTML report", overwrite=args.force, inputs=[*args.fits, args.data])
    llms = _llm_names(args.llms)
    responses = _read(args) if args.data else None
    check_same_data(_fit_records(args.fits), responses, data_name=args.data,
                    hint="a report shows fits of one table (mtlirt compare --allow-different-data compares "
                    "fits of different ones)")
    out = write_report(list(args.fits), args.out, responses=responses, title=args.title,
                       interval=args.interval, top=args.top, full_table=args.full_table, llms=llms,
                       top_llms=args.top_llms, overwrite=args.force)
    print(f"wrote {out}")
    return 0


def cmd_compare(args) -> int:
    import pandas as pd

    from .report.compare import compare
    from .results.fitdir import check_same_data

    _check_fit_dirs(args.fits)
    check_same_data(_fit_records(args.fits), allow_different_data=args.allow_different_data)
    table = compare(list(args.fits), interval=args.interval, allow_different_data=args.allow_different_data)
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.float_format", "{:.4g}".format):
        print(table.set_index(["a", "b"]).T.to_string())
    return 0


def cmd_demo(args) -> int:
    import os
    import time

    from .data.outputs import check_folder
    from .demo import DEMO_FOLDER, run_demo

    check_folder(args.out, DEMO_FOLDER, overwrite=args.force)
    os.environ.setdefault("MTLIRT_PROGRESS", "1")
    t0 = time.perf_counter()
    res = run_demo(args.out, seed=args.seed, n_llms=args.n_llms, scale=args.scale, bootstrap=args.bootstrap,
                   bayes=not args.no_bayes, overwrite=args.force)
    print()
    for line in res["headline"]:
        print(line)
    print(f"({time.perf_counter() - t0:.0f} s; data, truth and fit folders in {res['out']})")
    return 0


def _new_llm_settings(args) -> dict:
    """What ``score`` and ``adapt`` record in their folder's marker."""
    return {"fit": str(args.fit), "responses": str(args.responses), "interval": args.interval, "draws": args.draws,
            "seed": args.seed, "ignore_unknown_items": args.ignore_unknown_items}


def _new_llm_table(path):
    from .data.tables import read_table

    return read_table(path)


def cmd_score(args) -> int:
    from .data.outputs import check_folder
    from .evaluate.scoring import SCORE_FOLDER, Scorer
    from .results.fitdir import read_fit

    _check_fit_dirs([args.fit])
    check_folder(args.out, SCORE_FOLDER, overwrite=args.force, inputs=[args.fit, args.responses])
    scorer = Scorer(read_fit(args.fit), draws=args.draws, interval=args.interval)
    scores = scorer.score(_new_llm_table(args.responses), ignore_unknown_items=args.ignore_unknown_items,
                          seed=args.seed)
    out = scores.write(args.out, overwrite=args.force, settings=_new_llm_settings(args))
    print(f"scored {len(scores.overall)} LLM(s) on {scorer.n_domains} domains; wrote {out}/overall.csv and "
          f"{out}/domain_scores.csv")
    return 0


def cmd_adapt(args) -> int:
    from .data.outputs import check_folder
    from .evaluate.adaptive import ADAPT_FOLDER, replay
    from .evaluate.scoring import Scorer
    from .results.fitdir import read_fit

    _check_fit_dirs([args.fit])
    if args.budget is None and args.width is None:
        raise InputError("give --budget, --width or both (when to stop)")
    check_folder(args.out, ADAPT_FOLDER, overwrite=args.force, inputs=[args.fit, args.responses])
    scorer = Scorer(read_fit(args.fit), draws=args.draws, interval=args.interval)
    res = replay(scorer, _new_llm_table(args.responses), budget=args.budget, target=args.target,
                 width=args.width, seed=args.seed, ignore_unknown_items=args.ignore_unknown_items)
    res.write(args.out, overwrite=args.force,
              settings={**_new_llm_settings(args), "budget": args.budget, "width": args.width, "target": args.target})
    n = res.administered.groupby("llm").size() if len(res.administered) else None
    asked = f"{n.mean():.1f} items per LLM on average" if n is not None else "no items"
    print(f"adaptive test ({args.target}) of {len(res.scores.overall)} LLM(s), {asked}; wrote {args.out}/"
          "overall.csv, domain_scores.csv and administered.csv")
    return 0


def cmd_example_data(args) -> int:
    from .examples import FORMATS, copy_examples

    written = copy_examples(args.dir)
    print(f"wrote {len(written)} example files to {args.dir}: {', '.join(FORMATS)} (README.md says where each "
          "comes from)")
    return 0


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
    p.add_argument("--bootstrap", type=int, default=0, metavar="B",
                   help="bootstrap replicates for intervals of point estimates (mtl: intervals of the "
                   "estimation error; default 0: none)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes for the bootstrap (default: all cores)")
    p.add_argument("--interval", type=float, default=0.9, help="probability of the reported intervals (default 0.9)")
    p.add_argument("--heldout", type=_share, default=0.0, metavar="SHARE",
                   help="hold out this share of responses at random, fit on the rest, and record the held-out "
                   "log-likelihood in fit.json (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random step (default 0)")
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
                   "(independence Metropolis-Hastings, --llm-side integrated only); with --llm-side "
                   "integrated the default picks IMH where a pilot finds it fits, else nutpie")
    p.add_argument("--draws", type=int, default=None,
                   help="bayes: draws per chain (default: with the LLM side integrated, draws in blocks until the "
                   "convergence checks pass; 1000 otherwise)")
    p.add_argument("--tune", type=int, default=None,
                   help="bayes: tuning steps per chain (default 1000 for NUTS, 100 of burn-in for IMH)")
    p.add_argument("--chains", type=int, default=None, help="bayes: chains (default 4)")
    p.add_argument("--thin", type=int, default=None, metavar="N",
                   help="bayes --llm-side integrated: keep every N-th of the structure draws and draw the LLM side "
                   "for those only; convergence is checked on all of them (default: about 1,000 kept where the "
                   "structure's effective sample size allows)")
    p.add_argument("--log-likelihood", action=argparse.BooleanOptionalAction, default=None,
                   help="bayes: store the pointwise log-likelihood (per LLM and domain) in posterior.nc for "
                   "loo/compare; by default only when it holds at most 1e8 values (0.8 GB)")
    p.add_argument("--strict", action="store_true", help="exit with status 3 when the fit did not converge")
    p.add_argument("--checks", action="store_true",
                   help="run the model checks that apply (cross-domain correlation predictive check, S-X2 item "
                   "fit, leave-one-LLM-out for a posterior) on the data fitted and record them in fit.json's "
                   "diagnostics; mtlirt report shows the record")
    p.add_argument("--check-replicates", type=int, default=20, metavar="R",
                   help="--checks: replicated data sets of the correlation check, one single-domain fit each "
                   "(default 20, the report's)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="the fit folder to write: a new path, or a fit folder written earlier (with fit.json) "
                   "with --force")
    _force_option(p, "a fit folder (--out with fit.json)")
    _data_options(p)
    p.set_defaults(func=cmd_fit)


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
