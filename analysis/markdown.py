"""Tables as text for reports: Markdown (GitHub pipes) and HTML, with the numbers a paper prints.

Columns listed in df.attrs["percent"] are fractions printed x100 with one decimal; perplexities get
two decimals, losses three, large counts none; NaN prints as an empty cell ("–").
"""
import html
import math

import pandas as pd


def format_cell(column, value, percent):
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if column in percent:
        return f"{100 * value:.1f}"
    if isinstance(value, (int,)) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1000):
        return f"{int(value):,}"
    if "ppl" in column:
        return f"{value:.2f}"
    if "loss" in column:
        return f"{value:.3f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def _rows(df):
    """Header and string rows, the index levels as leading columns."""
    percent = set(df.attrs.get("percent", []))
    flat = df.reset_index()
    header = [str(c) + (" (%)" if c in percent else "") for c in flat.columns]
    rows = [[format_cell(c, v, percent) for c, v in zip(flat.columns, rec)]
            for rec in flat.itertuples(index=False)]
    return header, rows


def to_markdown(df):
    if df is None or df.empty:
        return "_(empty)_\n"
    header, rows = _rows(df)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_html(df):
    if df is None or df.empty:
        return "<p><em>(empty)</em></p>\n"
    header, rows = _rows(df)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>\n" for r in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


def show(df):
    """In a notebook: the table as the report prints it (a DataFrame of strings)."""
    header, rows = _rows(df)
    return pd.DataFrame(rows, columns=header)
