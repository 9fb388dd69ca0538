"""Figures of evaluations' per-example datasets (/eval/<task>/<name>): NIAH length x depth
heatmaps, Oryx perplexity around a mixer switch, perplexity by position."""
import numpy as np
import pandas as pd

from .plotting import NoData, finish, panels, run_colors, run_labels
from .tables import NIAH_TASKS


def niah_grid(run, tasks=None):
    """Mean score (a fraction) per (length, depth) over the run's NIAH tasks: a DataFrame with
    context lengths as rows and needle depths as columns; empty when the run has no NIAH task."""
    tasks = tasks or NIAH_TASKS
    frames = [run.examples(t) for t in tasks if t in run.tasks()]
    frames = [f for f in frames if {"score", "length", "depth"} <= set(f.columns) and len(f)]
    if not frames:
        return pd.DataFrame()
    ex = pd.concat(frames, ignore_index=True)
    return ex.pivot_table(index="length", columns="depth", values="score", aggfunc="mean")


def niah_heatmaps(sweep, tasks=None):
    """One heatmap per run: NIAH score (mean over the niah_* tasks and passkey, or `tasks`)
    by context length (rows) and needle depth (columns)."""
    grids = {n: niah_grid(r, tasks) for n, r in sweep.runs.items()}
    grids = {n: g for n, g in grids.items() if not g.empty}
    if not grids:
        raise NoData("no run has a NIAH task with per-example score, length and depth")
    labels = run_labels(sweep)
    fig, axes = panels(len(grids), f"NIAH score by context length and needle depth — sweep {sweep.name}",
                       cols=min(len(grids), 4), width=5.5, height=4.2, constrained_layout=True)
    for ax, (name, g) in zip(axes, grids.items()):
        im = ax.imshow(100 * g.to_numpy(), vmin=0, vmax=100, cmap="RdYlGn", aspect="auto", origin="lower")
        ax.set_xticks(range(g.shape[1]), [f"{100 * d:.0f}" for d in g.columns])
        ax.set_yticks(range(g.shape[0]), [f"{int(v):,}" for v in g.index])
        if g.size <= 60:  # numbers in the cells while they stay legible
            for (i, j), v in np.ndenumerate(g.to_numpy()):
                if np.isfinite(v):
                    ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7)
        ax.set(xlabel="needle depth (% of context)", ylabel="context length (tokens)", title=labels[name])
        ax.title.set_fontsize(10)
    fig.colorbar(im, ax=axes, label="score (% string_match_all)", shrink=0.8)
    return fig  # constrained layout, not tight_layout: it leaves room for the shared colorbar


def oryx_switch(sweep):
    """Oryx runs: perplexity exp(mean NLL) at each token offset from the position where the
    schedule switches mixer (offset 0 = first token after the switch)."""
    runs = {n: r for n, r in sweep.runs.items() if "oryx_switch" in r.tasks()}
    if not runs:
        raise NoData("no run has the oryx_switch evaluation (Oryx models only)")
    labels, colors = run_labels(sweep), run_colors(sweep)
    fig, (ax,) = panels(1, f"Oryx: perplexity around a mixer switch — sweep {sweep.name}")
    for name, run in runs.items():
        ex = run.examples("oryx_switch").sort_values("offset")
        ax.plot(ex["offset"], np.exp(ex["loss"]), color=colors[name], label=labels[name])
    ax.axvline(0, color="black", linestyle="--", label="switch")
    ax.set(xlabel="token offset from the mixer switch (tokens)", ylabel="perplexity (exp mean NLL)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return finish(fig)


def ppl_by_position(sweep):
    """Perplexity per position bucket (length extrapolation), one line per run."""
    runs = {n: r for n, r in sweep.runs.items() if "ppl_by_position" in r.tasks()}
    if not runs:
        raise NoData("no run has the ppl_by_position evaluation")
    labels, colors = run_labels(sweep), run_colors(sweep)
    fig, (ax,) = panels(1, f"Perplexity by token position — sweep {sweep.name}")
    for name, run in runs.items():
        ex = run.examples("ppl_by_position").sort_values("position")
        ax.plot(ex["position"], np.exp(ex["loss"]), marker="o", color=colors[name], label=labels[name])
    ax.set(xlabel="position bucket start (tokens)", ylabel="perplexity (exp mean NLL)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return finish(fig)
