"""Figures of the training logs (/train): loss curves; AMOR fire rate and threshold over training."""
import numpy as np

from .plotting import NoData, finish, legend_below, panels, run_colors, run_labels


def smooth(y, span):
    """Exponential moving average with the pandas `span` convention (alpha = 2 / (span + 1)),
    ignoring NaN; what the loss curves draw over the raw, noisy per-step losses."""
    alpha = 2.0 / (span + 1.0)
    out = np.empty(len(y))
    acc = np.nan
    for i, v in enumerate(y):
        if np.isfinite(v):
            acc = v if not np.isfinite(acc) else (1 - alpha) * acc + alpha * v
        out[i] = acc
    return out


def loss_curves(sweep, span=None):
    """Training loss per step, one line per run; one panel per value of the varying swept keys
    (e.g. MQAR and the corpus have different loss scales)."""
    frame = sweep.frame().set_index("run")
    keys = sweep.varying_keys()
    groups = {}
    for run in sweep.runs:
        groups.setdefault(tuple(frame.loc[run, k] for k in keys), []).append(run)
    labels, colors = run_labels(sweep), run_colors(sweep)
    curves = {r: sweep.runs[r].train() for r in sweep.runs}
    if not any(len(c) for c in curves.values()):
        raise NoData("no run has logged training steps (/train is empty)")
    fig, axes = panels(len(groups), f"Training loss — sweep {sweep.name}")
    for ax, (group, runs) in zip(axes, groups.items()):
        for run in runs:
            tr = curves[run]
            if not len(tr):
                continue
            s = span or max(1, len(tr) // 20)
            ax.plot(tr["step"], tr["loss"], color=colors[run], alpha=0.25, linewidth=0.8)
            ax.plot(tr["step"], smooth(tr["loss"].to_numpy(), s), color=colors[run], label=labels[run])
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("training loss (nats/token)")
        ax.set_title(", ".join(f"{k} = {v}" for k, v in zip(keys, group)) or "all runs", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return finish(fig)


def fire_rate_and_threshold(sweep):
    """AMOR runs: the share of gate decisions that fired (per block where K > 1) and the
    threshold tau = m + kappa*s, against the training step."""
    runs = {n: r for n, r in sweep.runs.items() if r.amor_blocks > 0}
    if not runs:
        raise NoData("no AMOR run (model.kind: amor) in this sweep")
    labels, colors = run_labels(sweep), run_colors(sweep)
    fig, (ax_f, ax_t) = panels(2, f"AMOR gates over training — sweep {sweep.name}", cols=2)
    styles = ["-", "--", ":", "-."]
    for name, run in runs.items():
        tr = run.train()
        k = run.amor_blocks
        for b in range(k):
            suffix = f" block {b}" if k > 1 else ""
            fr = tr.get(f"fire_rate_{b}", tr["fire_rate"])
            ta = tr.get(f"tau_{b}", tr["tau"])
            ax_f.plot(tr["step"], 100 * fr, styles[b % 4], color=colors[name], label=labels[name] + suffix)
            ax_t.plot(tr["step"], ta, styles[b % 4], color=colors[name], label=labels[name] + suffix)
    ax_f.set(xlabel="optimizer step", ylabel="fire rate (% of tokens)", title="gate fire rate")
    ax_t.set(xlabel="optimizer step", ylabel="threshold τ (normalised entropy)", title="threshold τ = m + κ·s")
    for ax in (ax_f, ax_t):
        ax.grid(alpha=0.3)
    return legend_below(fig, ax_f)
