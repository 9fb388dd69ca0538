"""Shared pieces of the figures: the Agg backend, sizes, run labels and colours, and NoData.

Every figure function returns one matplotlib Figure (one PNG in the report) with a title, labelled
axes with units and a legend, or raises NoData saying what the sweep lacks (the report prints the
reason instead of the figure).
"""
import matplotlib

if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
    matplotlib.use("Agg")  # files, not windows; notebooks keep their inline backend
import matplotlib.pyplot as plt  # noqa: E402

WIDTH = 7.0  # inches of one panel; figures are saved at 120 dpi
HEIGHT = 4.2


class NoData(Exception):
    """A figure that cannot be drawn from this sweep; the message says why."""


def panels(n, title, cols=None, width=WIDTH, height=HEIGHT, **kw):
    """A figure of n panels in a grid (at most `cols` across); returns (fig, flat list of axes)."""
    cols = cols or min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols * 0.75 if cols > 1 else width,
                                                  height * rows * (0.85 if rows > 1 else 1)),
                             squeeze=False, **kw)
    axes = axes.ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=13)
    return fig, list(axes[:n])


def finish(fig):
    fig.tight_layout()
    return fig


def legend_below(fig, ax, ncol=3):
    """One legend for the whole figure, under the panels (for figures whose many lines would
    hide the data under a legend inside the axes)."""
    handles, labels = ax.get_legend_handles_labels()
    rows = (len(labels) + ncol - 1) // ncol
    height = fig.get_size_inches()[1]
    bottom = min(0.5, (0.2 * rows + 0.1) / height)  # about a fifth of an inch per legend row
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    return fig


def run_labels(sweep):
    """{run: legend label}: the model, then what tells runs apart (scale, varying keys, seed)."""
    frame = sweep.frame().set_index("run")
    keys = sweep.varying_keys()
    many_scales = frame["scale"].nunique() > 1
    many_seeds = frame["seed"].nunique() > 1
    labels = {}
    for run, row in frame.iterrows():
        parts = [row["model"]]
        if many_scales:
            parts.append(str(row["scale"]))
        parts += [f"{row[k]}" for k in keys if not (isinstance(row[k], float) and row[k] != row[k])]  # NaN: a variant that leaves the key unset
        if many_seeds:
            parts.append(f"seed {row['seed']}")
        labels[run] = " ".join(parts)
    return labels


def run_colors(sweep):
    """{run: colour}, one per run in sweep order (tab10, then tab20 for larger sweeps)."""
    names = list(sweep.runs)
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def save(fig, path, dpi=120):
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
