"""A fit's leaderboard in the report: the overall scores with their intervals, rank intervals and
probabilities of a top place, and the IRT rank against the raw-accuracy rank."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import plots
from .html_blocks import _e, _fmt, _howto, _table
from .html_figures import _figure


def _leaderboard(est, interval: float, top: int, full_table: bool, k_top: int = 10, fname: str = "fit") -> str:
    tab = est.overall_scores(interval)
    n = len(tab)
    has = est.uncertainty_source is not None
    pct = f"{interval:.0%}"
    df = pd.DataFrame({"rank": tab["rank"], "LLM": tab["llm"], "score": tab["score"]})
    full = tab.copy()
    if has:
        df[f"{pct} interval"] = [f"{lo:.3f} to {hi:.3f}" for lo, hi in zip(tab["lower"], tab["upper"])]
        df["sd"] = tab["sd"]
        df[f"rank {pct} interval"] = [f"{a}–{b}" if a != b else f"{a}"
                                      for a, b in zip(tab["rank_lower"], tab["rank_upper"])]
        p = est.prob_top(k_top)
        df[f"P(top {k_top})"] = p.reindex(tab["llm"]).to_numpy()
        full[f"p_top{k_top}"] = df[f"P(top {k_top})"].to_numpy()
    else:
        full = full.drop(columns=["sd", "lower", "upper", "rank_lower", "rank_upper"])
    if "expected_accuracy" in tab:
        df["expected accuracy"] = tab["expected_accuracy"]
    num = ("rank", "score", f"{pct} interval", "sd", f"rank {pct} interval", f"P(top {k_top})", "expected accuracy")
    fmts = {f"P(top {k_top})": lambda v: f"{v:.2f}", "expected accuracy": lambda v: f"{v:.3f}",
            "score": lambda v: f"{v:.3f}", "sd": lambda v: _fmt(v, 3)}
    csv = (full, f"{fname}-leaderboard.csv")
    out = []
    if n > top and full_table:
        out.append(_table(df.iloc[:top], num=num, name=("LLM",), formats=fmts))
        out.append(f'<p class="note">Showing the top {top} of {n:,} LLMs; all of them below.</p>')
        out.append(f"<details><summary>All {n:,} LLMs</summary>"
                   + _table(df, num=num, name=("LLM",), formats=fmts, cls="tall", csv=csv) + "</details>")
    elif n > top:
        out.append(_table(df.iloc[:top], num=num, name=("LLM",), formats=fmts, csv=csv))
        out.append(f'<p class="note">Showing the top {top} of {n:,} LLMs. The full table is the CSV above '
                   "(and <code>overall.csv</code> in the fit folder); to list every LLM here, pass "
                   "<code>--full-table</code> to <code>mtlirt report</code> (in Python, "
                   "<code>full_table=True</code>).</p>")
    else:
        out.append(_table(df, num=num, name=("LLM",), formats=fmts, csv=csv))
    if not has:
        out.append('<p class="note">This is a point estimate without bootstrap replicates: no intervals.</p>')
    return "\n".join(out)


def _accuracy_section(aid: str, est, accuracy, source: str | None, interval: float, dpi: int,
                      fname: str, n_show: int = 10) -> str:
    """IRT rank against raw-accuracy rank: figure, the LLMs that move most, the CSV of all."""
    out = [f'<h3 id="{_e(aid)}-accuracy">IRT rank against raw accuracy</h3>', _howto(
        "Each point is an LLM: its place by raw accuracy (the mean of its domain accuracies, the number a "
        "leaderboard shows) against its place by the IRT overall score; points on the dashed line keep their "
        "place. The IRT score weighs each item by how well it tells LLMs apart and each domain by what it "
        "shares with the others, so an LLM moves when its right answers fall on easy, weakly discriminating "
        "items or in domains that say little about the overall ability. The grey bar is the IRT rank "
        "interval: a move that takes the accuracy rank outside it is larger than the estimation error. "
        "Labels read <i>name: accuracy rank → IRT rank</i>.")]
    if est.method == "accuracy":
        out.append('<p class="note">This fit is the raw-accuracy baseline itself: its ranks are the accuracy '
                   "ranks.</p>")
        return "\n".join(out)
    if accuracy is None:
        out.append('<p class="note">Not drawn: raw accuracy needs the data. Pass the results table the fit came '
                   "from (<code>mtlirt report ... --data TABLE</code>; in Python <code>responses=</code>), or "
                   "add a fit of the accuracy baseline (<code>mtlirt fit TABLE --method accuracy</code>).</p>")
        return "\n".join(out)
    try:
        shift = plots.rank_shift(est, accuracy, interval)
    except ValueError as exc:
        out.append(f'<p class="note">Not drawn: {_e(exc)}.</p>')
        return "\n".join(out)
    if source:
        out.append(f'<p class="note">Raw accuracy from {_e(source)}.</p>')
    from scipy.stats import spearmanr

    rho = float(spearmanr(shift["accuracy_rank"], shift["rank"]).statistic) if len(shift) > 2 else float("nan")
    moved = int((shift["shift"] != 0).sum())
    outside = int(shift["outside"].sum())
    has_int = bool(shift["rank_lower"].notna().any())
    out.append(f"<p>{moved:,} of {len(shift):,} LLMs change place (Spearman ρ between the two rankings "
               f"{rho:.3f}; median move {np.median(np.abs(shift['shift'])):.0f}, largest "
               f"{int(np.abs(shift['shift']).max())} places)"
               + (f"; for {outside:,} the accuracy rank lies outside the IRT {interval:.0%} rank interval."
                  if has_int else ".") + "</p>")
    out.append(_figure(lambda: plots.rank_vs_accuracy(est, accuracy, interval=interval),
                       "IRT rank against raw-accuracy rank; the LLMs that move most are named.", dpi=dpi,
                       name=f"{fname}-rank-vs-accuracy"))
    show = shift.head(n_show)
    tab = pd.DataFrame({"LLM": show["llm"], "IRT rank": show["rank"], "accuracy rank": show["accuracy_rank"],
                        "move": [f"{v:+d}" for v in show["shift"]], "raw accuracy": show["accuracy"],
                        "IRT score": show["score"]})
    if has_int:
        tab.insert(2, f"IRT rank {interval:.0%} interval",
                   [f"{int(a)}–{int(b)}" if a != b else f"{int(a)}" for a, b in zip(show["rank_lower"],
                                                                                     show["rank_upper"])])
        tab["outside the interval"] = show["outside"].to_numpy()
    out.append(f"<h4>The {len(show)} LLMs that move most</h4>")
    out.append(_table(tab, num=[c for c in tab.columns if c not in ("LLM", "outside the interval")], name=("LLM",),
                      formats={"raw accuracy": lambda v: f"{v:.3f}", "IRT score": lambda v: f"{v:.3f}"},
                      csv=(shift, f"{fname}-rank-vs-accuracy.csv")))
    return "\n".join(out)
