"""Draw one task kind's cost-vs-accuracy frontier (:class:`evaluation.report.frontier.KindFrontier`)
as a PNG: the I/O half of :mod:`evaluation.report.frontier`, shared by ``scripts/frontier_plot.py``
(calibration pools) and ``python -m calibration development`` (the development split's pools)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evaluation.report.frontier import KindFrontier, LadderPoint
from evaluation.routing.types import PREFILL_WEIGHT


def plot(kind: KindFrontier, path: Path, *, title: str, budgets: Mapping[str, float] | None = None) -> None:
    """Every fixed configuration grey, the frontier as a line, the ladder's points with intervals;
    ``budgets`` (effort -> mean cost budget) as dotted vertical lines, so a plot shows what each
    effort could have bought."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    ax.scatter([p.cost for p in kind.points], [p.accuracy for p in kind.points], s=12, color="0.7",
               label="fixed configuration", zorder=1)  # fmt: skip
    ax.plot([p.cost for p in kind.frontier], [p.accuracy for p in kind.frontier], "-o", color="tab:blue", ms=4,
            drawstyle="steps-post", label="Pareto frontier", zorder=2)  # fmt: skip
    last = 0.0
    for p in kind.frontier:  # label frontier points far enough apart on the log axis to be read
        if p is kind.frontier[-1] or p.cost > last * 1.25:
            ax.annotate(p.label, (p.cost, p.accuracy), fontsize=7, color="tab:blue", xytext=(3, -9),
                        textcoords="offset points")  # fmt: skip
            last = p.cost
    groups: dict[tuple[float, float], list[LadderPoint]] = {}
    for lp in kind.ladder:  # efforts that buy the same thing share one marker and one label
        groups.setdefault((round(lp.point.cost, 6), round(lp.point.accuracy, 6)), []).append(lp)
    labelled: set[bool] = set()
    for members in groups.values():
        p, on = members[0].point, members[0].on_frontier
        name = members[0].effort if len(members) == 1 else f"{members[0].effort}..{members[-1].effort}"
        ax.errorbar(p.cost, p.accuracy, yerr=[[p.accuracy - p.low], [p.high - p.accuracy]], fmt="D",
                    color="tab:red" if on else "tab:orange", ms=6, capsize=3, zorder=3,
                    label=None if on in labelled else
                    f"ladder effort, {'on' if on else 'below'} the frontier (95% interval)")  # fmt: skip
        labelled.add(on)
        ax.annotate(name, (p.cost, p.accuracy), fontsize=8, color="tab:red" if on else "tab:orange",
                    xytext=(5, 5), textcoords="offset points")  # fmt: skip
    ax.set_xscale("log")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(f"mean cost per request (generated + {PREFILL_WEIGHT:g} x prompt tokens, log)")
    ax.set_ylabel("accuracy")
    for effort, budget in (budgets or {}).items():
        ax.axvline(budget, color="0.5", ls=":", lw=0.8, zorder=0)
        ax.annotate(f"{effort} budget", (budget, 0.0), fontsize=6, color="0.4", rotation=90,
                    xytext=(2, 2), textcoords="offset points")  # fmt: skip
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
