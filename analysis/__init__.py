"""amor-run's results as DataFrames, paper tables and figures (see analysis/README.md).

    from analysis import load_sweep, tables, figures
    sweep = load_sweep("results/quickstart")
    tables.amor_table(sweep)
"""
from . import fig_evals, fig_gates, fig_training, markdown, tables  # noqa: F401
from .plotting import NoData  # noqa: F401
from .run import Run, TokenSet  # noqa: F401
from .sweep import Sweep, load_sweep  # noqa: F401

__all__ = ["Run", "TokenSet", "Sweep", "load_sweep", "NoData", "tables", "markdown", "figures",
           "fig_training", "fig_gates", "fig_evals"]


class figures:  # noqa: N801 - one namespace for every figure function
    loss_curves = staticmethod(fig_training.loss_curves)
    fire_rate_and_threshold = staticmethod(fig_training.fire_rate_and_threshold)
    entropy_histograms = staticmethod(fig_gates.entropy_histograms)
    gate_rate_by_position = staticmethod(fig_gates.gate_rate_by_position)
    gate_rate_by_task = staticmethod(fig_gates.gate_rate_by_task)
    fire_rate_by_role = staticmethod(fig_gates.fire_rate_by_role)
    niah_heatmaps = staticmethod(fig_evals.niah_heatmaps)
    ppl_by_position = staticmethod(fig_evals.ppl_by_position)
    oryx_switch = staticmethod(fig_evals.oryx_switch)
