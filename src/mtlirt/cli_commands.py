"""The sub-commands of the ``mtlirt`` command (:mod:`mtlirt.cli` parses the arguments and runs them): one
``cmd_*`` function per sub-command, each taking the parsed arguments and returning the exit status."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from .errors import InputError


def _read(args):
    from .data.responses import Responses

    if getattr(args, "data", None) is None:
        raise InputError("no data file given")
    ignore = [c for c in args.ignore_columns.split(",") if c]
    return Responses.read(args.data, domain_column=args.domain_column, ignore_columns=ignore,
                          drop_unassigned=args.drop_unassigned)


def cmd_validate(args) -> int:
    r = _read(args)
    print(r.summary())
    return 0


def _check_simulation_outputs(args) -> None:
    """``simulate``'s --out and --truth, checked before simulating."""
    from .data.outputs import check_file, check_folder
    from .data.simulation import TRUTH_FOLDER

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
    from .data.sim_paper import simulate_paper

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


def _not_converged_advice(method: str, diag: dict) -> str:
    """What to do about a fit that did not converge: a Bayesian fit's divergences or short run, or a
    frequentist fit's item calibration."""
    if method != "bayes":
        return ("its item calibration (EM) stopped at its sweep limit; look for degenerate items and "
                "LLMs (mtlirt validate) or use --item-model 1pl")
    if diag.get("divergences"):
        return f"{diag['divergences']} divergent transitions: a higher --target-accept (e.g. 0.99) or a simpler model"
    return f"sample longer than its {diag.get('n_draws')} draws per chain (--draws, --tune) or simplify the model"


def cmd_fit(args) -> int:
    from .data.outputs import check_folder
    from .estimators.heldout import heldout_loglik
    from .fitting import check_options, data_record, fit
    from .progress import enabled as progress_enabled
    from .results.estimate import check_interval
    from .results.finish import ConvergenceWarning
    from .results.fitdir import FIT_FOLDER, write_fit

    # the options as parsed, None where not given; the API checks them (before the table is read)
    options = dict(variant=args.variant, optimizer=args.optimizer, cv_seed=args.cv_seed, spec=args.model,
                   items=args.items, draws=args.draws, tune=args.tune, chains=args.chains, sampler=args.sampler,
                   algorithm=args.algorithm, log_likelihood=args.log_likelihood, llm_side=args.llm_side,
                   thin=args.thin, target_accept=args.target_accept)
    check_options(args.method, rank=args.rank, model=args.item_model, guessing=args.guessing,
                  bootstrap=args.bootstrap, **options)
    if args.method == "bayes":  # the sampler's own bars follow the same switch as mtlirt's stage lines
        options["progress"] = progress_enabled()
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
        print(_checks_line(checks.summary()))
    if diag and diag.get("converged") is False:  # None: no convergence check (map)
        bad = ", ".join(f"{k}={v}" for k, v in diag.items() if k != "converged")
        advice = _not_converged_advice(args.method, diag)
        print(f"WARNING: THE FIT DID NOT CONVERGE ({bad}). Do not trust its numbers; {advice}.", file=sys.stderr)
        if args.strict:
            return 3
    return 0


def _checks_line(s: dict) -> str:
    """The model checks' summary (``ModelChecks.summary()``) in one line."""
    parts = []
    if "correlation" in s:
        parts.append(f"correlation: {s['correlation']['misfit_pairs']} of {s['correlation']['pairs']} pairs "
                     f"misfit, global p {s['correlation']['global_p']:.3f}")
    if "item_fit" in s:
        it = s["item_fit"]
        parts.append(f"S-X2: {it['misfit_items']} of {it['tested']} tested items misfit "
                     f"({it['misfit_rmsea_above_bound']} of them by an RMSEA above {it['rmsea_bound']:g})")
    if "loo_llm" in s:
        parts.append(f"leave-one-LLM-out: elpd {s['loo_llm']['elpd_loo']:.1f}, "
                     f"{s['loo_llm']['high_k']} LLMs with high Pareto k")
    parts += [f"{k} not run ({v})" for k, v in s.get("skipped", {}).items()]
    parts += [f"{k} failed ({v})" for k, v in s.get("failed", {}).items()]
    return "model checks (in fit.json): " + "; ".join(parts)


def _route_line(info: dict) -> str:
    """The Bayesian fit's route in one line: items, LLM side, sampler, draws and why."""
    from .config import thinned_positions

    route = info["route"]
    side = f", LLM side {route['llm_side']}" if route.get("llm_side") else ""
    thin = info.get("thin") or 1
    kept = (f", the LLM side drawn for {len(thinned_positions(info['draws'], thin)):,} per chain (every "
            f"{thin:.4g}-th)" if thin > 1 else "")
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
