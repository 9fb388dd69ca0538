"""`python3 -m analysis report results/<sweep>`: the tables and figures of a sweep in one folder.

Writes <out>/report.md and <out>/report.html (the same content) and <out>/figures/<name>.png, one
PNG per figure. <out> defaults to results/<sweep>/report/. A table or figure the sweep cannot
support (no Oryx run, no NIAH task ...) is replaced by a line saying why, so the command works on
any sweep, including one still running.
"""
import html
import os
import time

from . import fig_evals, fig_gates, fig_training, markdown, tables
from .plotting import NoData, save
from .sweep import load_sweep

TABLES = [
    ("Training summary", tables.training_summary),
    ("AMOR table", tables.amor_table),
    ("Oryx table", tables.oryx_table),
    ("Gate and entropy by token role", tables.gate_by_role),
]

FIGURES = [
    ("loss_curves", "Loss curves", fig_training.loss_curves),
    ("fire_rate_threshold", "AMOR fire rate and threshold over training", fig_training.fire_rate_and_threshold),
    ("entropy_fired_skipped", "Entropy of fired and skipped tokens", fig_gates.entropy_histograms),
    ("gate_rate_by_position", "Gate rate by token position", fig_gates.gate_rate_by_position),
    ("gate_rate_by_task", "Gate rate by task", fig_gates.gate_rate_by_task),
    ("fire_rate_by_role", "Gate fire rate by token role", fig_gates.fire_rate_by_role),
    ("niah_heatmaps", "NIAH: context length x needle depth", fig_evals.niah_heatmaps),
    ("ppl_by_position", "Perplexity by position", fig_evals.ppl_by_position),
    ("oryx_switch", "Oryx: perplexity around a mixer switch", fig_evals.oryx_switch),
]


def build(sweep_dir, out_dir=None, log=print):
    """Writes the report; returns {'markdown': path, 'html': path, 'figures': [png paths],
    'skipped': [(section, reason)]}."""
    sweep = load_sweep(sweep_dir)
    out_dir = os.path.abspath(out_dir or os.path.join(sweep.dir, "report"))
    fig_dir = os.path.join(out_dir, "figures")
    os.makedirs(fig_dir, exist_ok=True)
    md = [f"# Sweep `{sweep.name}`\n",
          f"{len(sweep.runs)} runs with a run.h5 in `{sweep.dir}`; report written "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} by `python3 -m analysis report`.\n",
          "Scores are percentages; perplexities are exp(mean NLL); a dash is a value the run does "
          "not have. Scale is the preset's size, or d<d_model>xL<n_layers> without a preset.\n"]
    htm = [f"<h1>Sweep {html.escape(sweep.name)}</h1>", f"<p>{html.escape(md[1])}</p>", f"<p>{html.escape(md[2])}</p>"]
    skipped, pngs = [], []
    for title, fn in TABLES:
        table = fn(sweep)
        md.append(f"## {title}\n")
        htm.append(f"<h2>{html.escape(title)}</h2>")
        if table.empty:
            reason = "; ".join(table.attrs.get("notes", [])) or "no data"
            skipped.append((title, reason))
            md.append(f"_Skipped: {reason}._\n")
            htm.append(f"<p><em>Skipped: {html.escape(reason)}.</em></p>")
            continue
        md.append(markdown.to_markdown(table))
        htm.append(markdown.to_html(table))
        for note in table.attrs.get("notes", []):
            md.append(f"- note: {note}")
            htm.append(f"<p>note: {html.escape(note)}</p>")
        md.append("")
    md.append("## Figures\n")
    htm.append("<h2>Figures</h2>")
    for name, title, fn in FIGURES:
        md.append(f"### {title}\n")
        htm.append(f"<h3>{html.escape(title)}</h3>")
        try:
            fig = fn(sweep)
        except NoData as e:
            skipped.append((title, str(e)))
            md.append(f"_Skipped: {e}._\n")
            htm.append(f"<p><em>Skipped: {html.escape(str(e))}.</em></p>")
            continue
        path = os.path.join(fig_dir, name + ".png")
        save(fig, path)
        pngs.append(path)
        doc = " ".join((fn.__doc__ or "").split())
        md.append(f"![{title}](figures/{name}.png)\n\n{doc}\n")
        htm.append(f'<img src="figures/{name}.png" alt="{html.escape(title)}" style="max-width:100%">'
                   f"<p>{html.escape(doc)}</p>")
        log(f"figure {name}.png")
    md_path, html_path = os.path.join(out_dir, "report.md"), os.path.join(out_dir, "report.html")
    _write(md_path, "\n".join(md) + "\n")
    style = "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse}" \
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style>"
    _write(html_path, f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(sweep.name)}"
                      f"</title>{style}</head><body>\n" + "\n".join(htm) + "\n</body></html>\n")
    for section, reason in skipped:
        log(f"skipped {section}: {reason}")
    return {"markdown": md_path, "html": html_path, "figures": pngs, "skipped": skipped}


def _write(path, text):
    """Written to a temporary name and renamed, so a reader never sees half a report."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
