"""Figures of AMOR's per-token gates (/tokens/<set>/{entropy, gate}).

gate is [K, total]: gate[k, t] = 1 where block k's attention fired at token t. The entropy is the
model's normalised next-token entropy H/log V in [0, 1] (what the gates threshold, measured at
each block's input; the recorded one is the output distribution's).
"""
import numpy as np
import pandas as pd

from .plotting import NoData, finish, legend_below, panels, run_colors, run_labels
from .tables import gate_by_role


def _gated_runs(sweep, token_set=None):
    runs = {n: r for n, r in sweep.runs.items() if r.amor_blocks > 0}
    if not runs:
        raise NoData("no AMOR run (model.kind: amor) in this sweep")
    if token_set is not None:
        runs = {n: r for n, r in runs.items() if token_set in r.token_sets()}
        if not runs:
            raise NoData(f"no AMOR run recorded the token set '{token_set}'")
    return runs


def entropy_histograms(sweep, token_set="valid", block=0, bins=40):
    """Per AMOR run, the distribution of normalised entropy over tokens where block `block`
    fired and where it was skipped (densities, so both shapes show whatever the fire rate), with
    the block's final training threshold."""
    runs = _gated_runs(sweep, token_set)
    labels = run_labels(sweep)
    fig, axes = panels(len(runs), f"Entropy of fired and skipped tokens (block {block}, "
                                  f"token set '{token_set}') — sweep {sweep.name}")
    edges = np.linspace(0, 1, bins + 1)
    for ax, (name, run) in zip(axes, runs.items()):
        ts = run.tokens(token_set)
        entropy, gate = ts.array("entropy"), ts.array("gate")[block].astype(bool)
        ax.hist(entropy[~gate], bins=edges, density=True, alpha=0.6, color="tab:blue",
                label=f"skipped (n={np.count_nonzero(~gate)})")
        ax.hist(entropy[gate], bins=edges, density=True, alpha=0.6, color="tab:red",
                label=f"fired (n={np.count_nonzero(gate)})")
        tr = run.train()
        tau_col = f"tau_{block}" if f"tau_{block}" in tr else "tau"
        if len(tr) and np.isfinite(tr[tau_col].iloc[-1]):
            ax.axvline(tr[tau_col].iloc[-1], color="black", linestyle="--", label=f"final τ = {tr[tau_col].iloc[-1]:.3f}")
        ax.set(xlabel="normalised entropy H / log V", ylabel="density", title=labels[name])
        ax.title.set_fontsize(10)
        ax.legend(fontsize=8)
    return finish(fig)


def gate_rate_by_position(sweep, token_set="valid", n_bins=16):
    """Fire rate (share of gate decisions over all blocks) against the token's position in its
    sequence, positions grouped into n_bins equal bins, one line per AMOR run."""
    runs = _gated_runs(sweep, token_set)
    labels, colors = run_labels(sweep), run_colors(sweep)
    fig, (ax,) = panels(1, f"Gate fire rate by token position (token set '{token_set}') — sweep {sweep.name}")
    for name, run in runs.items():
        frame = run.tokens(token_set).frame()
        gates = frame[[c for c in frame if c.startswith("gate_")]].to_numpy().mean(1)
        top = frame["position"].max() + 1
        width = max(1, int(np.ceil(top / n_bins)))
        bucket = frame["position"] // width
        rate = pd.Series(100 * gates).groupby(bucket.to_numpy()).mean()
        ax.plot(rate.index * width + width / 2, rate.values, marker="o", color=colors[name], label=labels[name])
    ax.set(xlabel="token position in the sequence (tokens)", ylabel="fire rate (% of gate decisions)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return finish(fig)


def gate_rate_by_task(sweep):
    """Fire rate (share of gate decisions over all blocks and recorded tokens) per token set,
    i.e. per evaluated task, as grouped bars: one group per task, one bar per AMOR run."""
    runs = _gated_runs(sweep)
    labels, colors = run_labels(sweep), run_colors(sweep)
    rates = {}
    for name, run in runs.items():
        for task in run.token_sets():
            gate = run.tokens(task).array("gate")
            if gate.size:
                rates.setdefault(task, {})[name] = 100 * gate.mean()
    if not rates:
        raise NoData("no AMOR run recorded any token set with gates")
    tasks = list(rates)
    fig, (ax,) = panels(1, f"Gate fire rate by task — sweep {sweep.name}",
                        width=max(7.0, 1.2 * len(tasks) + 3))
    width = 0.8 / len(runs)
    x = np.arange(len(tasks))
    for i, name in enumerate(runs):
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, [rates[t].get(name, np.nan) for t in tasks], width,
               color=colors[name], label=labels[name])
    ax.set_xticks(x, tasks, rotation=30, ha="right")
    ax.set(xlabel="token set (task)", ylabel="fire rate (% of gate decisions)")
    ax.grid(alpha=0.3, axis="y")
    return legend_below(fig, ax)


def fire_rate_by_role(sweep):
    """Fire rate (share of gate decisions over all AMOR blocks) by token role, one panel per
    recorded token set that holds roles (MQAR: key, value, query, filler; NIAH / passkey: other,
    haystack, distractor, needle, question, answer), one bar per AMOR run: whether attention fires
    where recall happens (MQAR's query tokens, the NIAH question) or on the filler. Bars carry
    their value in %; under each role, its token count (the largest over the runs)."""
    table = gate_by_role(sweep)
    if table.empty or "fire rate" not in table.columns:
        raise NoData("no AMOR run recorded token roles (run.h5 /tokens/<set>/role with gates)")
    table = table[table["fire rate"].notna()].reset_index()
    if table.empty:
        raise NoData("no AMOR run recorded token roles (run.h5 /tokens/<set>/role with gates)")
    colors = run_colors(sweep)  # bars are labelled by run name: unique, and short in variant sweeps
    sets = list(pd.unique(table["token set"]))
    fig, axes = panels(len(sets), f"Gate fire rate by token role — sweep {sweep.name}", cols=min(len(sets), 2),
                       width=9.0)
    for ax, name in zip(axes, sets):
        part = table[table["token set"] == name]
        roles = list(pd.unique(part["role"]))
        runs = list(pd.unique(part["run"]))
        width = 0.8 / len(runs)
        x = np.arange(len(roles))
        for i, run in enumerate(runs):
            rows = part[part["run"] == run].set_index("role")
            bars = ax.bar(x + (i - (len(runs) - 1) / 2) * width,
                          [100 * rows["fire rate"].get(r, np.nan) for r in roles], width,
                          color=colors[run], label=run)
            ax.bar_label(bars, fmt="%.1f", fontsize=6)  # small rates (0.2%) stay readable
        counts = part.groupby("role", sort=False)["tokens"].max()
        ax.set_xticks(x, [f"{r}\n(n={counts[r]})" for r in roles], fontsize=8)
        ax.set(xlabel="token role", ylabel="fire rate (% of gate decisions)", title=f"token set '{name}'")
        ax.set_ylim(0, min(100.0, 100 * float(part["fire rate"].max()) * 1.2 + 2))
        ax.title.set_fontsize(10)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return finish(fig)
