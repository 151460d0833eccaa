"""A self-contained HTML report of jaxsched results: tables sortable by metric, SVG plots.

Reads the JSON documents the commands write (snapshot, event, evolve, tune, cvx, gpushare, gpushare --search) and the
benchmark suite's results/bench.json, plus event mode's utilization CSVs
(PREFIX_<policy>.csv). Plots are inline SVG and the page's only script (sorting, an
error log) is inline, so the page needs no network when viewed.
"""

from __future__ import annotations

import csv
import html
import json
import math
import os
from typing import NamedTuple

from .errors import InputError
from .output import overload_note

DEFINITIONS = {
    "placed%": "tasks placed / tasks (POLICIES.md, snapshot metrics)",
    "placed_w%": "demand placed / all demand, demand = sum of a task's requests",
    "util": "allocated / capacity of the dimension, over all machines",
    "holes%": "standard slots left in free capacity / slots of the whole capacity",
    "strand": "free capacity of the dimension on machines with no standard slot left / all free capacity",
    "compaction": "smallest share of machines (random order) that still packs every task; 1.0 = ceiling",
    "inflation": "largest multiplier of the workload that still packs 100%",
    "latency": "event mode: first placement - arrival, over placed tasks (seconds)",
    "never": "event mode: tasks still pending when the replay ends",
    "pend_mean": "event mode: time-weighted mean of arrived tasks neither running nor finished",
    "objective": "CvxCluster: sum of priority weights u_i over placed tasks (1 free, 2 batch, 4 production)",
    "gpu_alloc": "GPU sharing: allocated milli-GPU / all milli-GPU, at each arrived GPU demand (% of capacity)",
    "gpu_frag": "GPU sharing: idle milli-GPU that the typical pods cannot use (FGD's fragmentation), % of capacity",
    "gpu_frag_ratio": "GPU sharing: fragmentation / idle milli-GPU, %",
}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")

SCRIPT = """
window.jaxschedErrors = [];
function logError(msg) { window.jaxschedErrors.push(String(msg));
  document.getElementById('errors').textContent = window.jaxschedErrors.join('\\n'); }
window.onerror = function (msg, src, line) { logError(msg + ' (line ' + line + ')'); };
var origError = console.error; console.error = function () { logError(Array.from(arguments).join(' '));
  origError.apply(console, arguments); };
function sortTable(th) {
  var table = th.closest('table'), col = Array.from(th.parentNode.children).indexOf(th);
  var body = table.tBodies[0], rows = Array.from(body.rows);
  var dir = th.dataset.dir === 'desc' ? 'asc' : 'desc'; th.dataset.dir = dir;
  rows.sort(function (a, b) {
    var x = parseFloat(a.cells[col].dataset.v), y = parseFloat(b.cells[col].dataset.v);
    if (isNaN(x) || isNaN(y)) { x = a.cells[col].textContent; y = b.cells[col].textContent;
      return dir === 'asc' ? x.localeCompare(y) : y.localeCompare(x); }
    return dir === 'asc' ? x - y : y - x; });
  rows.forEach(function (r) { body.appendChild(r); });
}
document.querySelectorAll('th.sortable').forEach(function (th) {
  th.addEventListener('click', function () { sortTable(th); }); });
if (location.hash === '#selftest') {  // the browser test: sort every table by its second column, check
  var ok = true;
  document.querySelectorAll('table').forEach(function (t) {
    var th = t.tHead.rows[0].cells[1]; if (!th) return; sortTable(th);
    var v = Array.from(t.tBodies[0].rows).map(function (r) { return parseFloat(r.cells[1].dataset.v); })
      .filter(function (x) { return !isNaN(x); });
    for (var i = 1; i < v.length; i++) if (v[i] > v[i - 1]) ok = false; });
  document.body.dataset.sorted = ok ? 'ok' : 'wrong';
}
document.body.dataset.ready = '1';
"""

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th.sortable { cursor: pointer; background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
dl { font-size: 0.85em; color: #444; } dt { font-weight: bold; float: left; width: 9em; } dd { margin-left: 10em; }
section { border-top: 2px solid #ddd; margin-top: 1.5em; } svg { margin: 0.5em 1em 0.5em 0; }
#errors { color: #b00; }
"""


def _esc(x) -> str:
    return html.escape(str(x))


def _num(v, scale=1.0, digits=2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v * scale:,.{digits}f}"


def table(head: list[str], rows: list[list[tuple[str, float | None]]]) -> str:
    """A sortable table: rows of (text, sort value) cells; the first column is the name."""
    out = ["<table><thead><tr>" + "".join(f'<th class="sortable">{_esc(h)}</th>' for h in head) + "</tr></thead><tbody>"]
    for row in rows:
        cells = "".join(f'<td data-v="{"" if v is None else v}">{_esc(t)}</td>' for t, v in row)
        out.append(f"<tr>{cells}</tr>")
    return "\n".join(out) + "</tbody></table>"


class Chart(NamedTuple):
    """A line chart of named (x, y) series, as the report draws it in SVG and `figures` through
    matplotlib; `bands` gives a series a shaded (x, low, high) band in its color, `xlim` shows
    only that range of x (a zoom)."""

    title: str
    xlabel: str
    ylabel: str
    series: dict
    bands: dict = {}
    logx: bool = False
    xlim: tuple | None = None

    def visible(self) -> tuple[dict, dict]:
        """The points drawn: each series' finite (x, y) and each band's finite (x, low, high)
        within `xlim`, x > 0 on a log axis."""
        finite = lambda *v: all(u is not None and math.isfinite(u) for u in v)
        inside = lambda x: (x > 0 or not self.logx) and (self.xlim is None or self.xlim[0] <= x <= self.xlim[1])
        series = {name: [(x, y) for x, y in zip(xs, ys) if finite(x, y) and inside(x)]
                  for name, (xs, ys) in self.series.items()}
        bands = {name: [(x, a, b) for x, a, b in zip(*band) if finite(x, a, b) and inside(x)]
                 for name, band in self.bands.items()}
        return series, bands


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: multiples of 1, 2, 2.5 or 5 times a power of ten,
    about `count` intervals; the first is at most lo and the last at least hi."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"ticks need a finite range, got {lo}..{hi}")
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    digits = max(0, -math.floor(math.log10(step) + 1e-9) + (1 if step / mag == 2.5 else 0))
    return [round(k * step, digits) for k in range(first, last + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering [lo, hi] (lo > 0)."""
    return [10.0 ** k for k in range(math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9) + 1)] \
        if hi > lo else [10.0 ** math.floor(math.log10(lo)), 10.0 ** (math.floor(math.log10(lo)) + 1)]


def _tick_label(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e6 else f"{v:.0e}"


def line_chart(chart: Chart, width: int = 560, height: int = 300) -> str:
    """The SVG of a Chart: axes with round ticks, the series, their bands and a legend."""
    series, bands = chart.visible()
    pts = [p for v in series.values() for p in v] + [(x, y) for v in bands.values() for x, a, b in v for y in (a, b)]
    if not pts:
        return f"<p>{_esc(chart.title)}: no data</p>"
    xs_all, ys_all = [p[0] for p in pts], [p[1] for p in pts]
    if chart.logx:
        xticks = log_ticks(min(xs_all), max(xs_all))
    else:
        lo, hi = chart.xlim if chart.xlim else (min(xs_all), max(xs_all))
        xticks = nice_ticks(lo, hi)
    yticks = nice_ticks(min(ys_all), max(ys_all))
    tx = (lambda x: math.log10(x)) if chart.logx else (lambda x: x)
    x0, x1, y0, y1 = tx(xticks[0]), tx(xticks[-1]), yticks[0], yticks[-1]
    L, R, T, B = 60, 150, 25, 40
    sx = lambda x: L + (tx(x) - x0) / (x1 - x0) * (width - L - R)
    sy = lambda y: height - B - (y - y0) / (y1 - y0) * (height - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
           f'<text x="{L}" y="15" font-size="13">{_esc(chart.title)}</text>',
           f'<line x1="{L}" y1="{height - B}" x2="{width - R}" y2="{height - B}" stroke="#444"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{height - B}" stroke="#444"/>']
    for yv in yticks:
        out.append(f'<text class="ytick" x="{L - 5}" y="{sy(yv) + 4:.1f}" font-size="10" text-anchor="end">'
                   f'{_tick_label(yv)}</text>')
    for xv in xticks:
        out.append(f'<text class="xtick" x="{sx(xv):.1f}" y="{height - B + 14}" font-size="10" '
                   f'text-anchor="middle">{_tick_label(xv)}</text>')
    out.append(f'<text x="{(L + width - R) / 2}" y="{height - 5}" font-size="11" text-anchor="middle">'
               f'{_esc(chart.xlabel)}</text>')
    out.append(f'<text x="12" y="{(T + height - B) / 2}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 12 {(T + height - B) / 2})">{_esc(chart.ylabel)}</text>')
    for n, (name, points) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        if bands.get(name):
            keep = bands[name]
            ring = [(sx(x), sy(b)) for x, _, b in keep] + [(sx(x), sy(a)) for x, a, _ in reversed(keep)]
            out.append(f'<polygon fill="{color}" fill-opacity="0.15" stroke="none" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in ring) + '"/>')
        p = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{p}"/>')
        out.append(f'<text x="{width - R + 8}" y="{T + 14 * n + 10}" font-size="11" fill="{color}">{_esc(name)}</text>')
    return "\n".join(out) + "</svg>"


def bar_chart(values: dict[str, float], title: str, width: int = 560) -> str:
    """A horizontal SVG bar chart of named values."""
    vals = {k: v for k, v in values.items() if v is not None and math.isfinite(v)}
    if not vals:
        return ""
    top = max(max(vals.values()), 1e-12)
    h = 22 * len(vals) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img">',
           f'<text x="0" y="15" font-size="13">{_esc(title)}</text>']
    for n, (name, v) in enumerate(vals.items()):
        y = 25 + 22 * n
        w = (width - 260) * v / top
        out.append(f'<text x="150" y="{y + 13}" font-size="11" text-anchor="end">{_esc(name)}</text>')
        out.append(f'<rect x="155" y="{y}" width="{w:.1f}" height="16" fill="{PALETTE[n % len(PALETTE)]}"/>')
        out.append(f'<text x="{160 + w:.1f}" y="{y + 13}" font-size="11">{v:.3f}</text>')
    return "\n".join(out) + "</svg>"


def _definitions(keys) -> str:
    items = [(k, DEFINITIONS[k]) for k in keys if k in DEFINITIONS]
    return "<dl>" + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in items) + "</dl>"


def _snapshot(doc, name) -> str:
    pol = doc["policies"]
    first = next(iter(pol.values()))
    keys = [k for k in first if isinstance(first[k], dict)]
    head = ["policy"] + keys
    rows = []
    for p, m in pol.items():
        row = [(p, None)]
        for k in keys:
            v = m.get(k, {})
            row.append((f"{_num(v['mean'], 1, 4)} ± {_num(v['std'], 1, 4)}", v["mean"]) if "mean" in v else ("-", None))
        rows.append(row)
    out = [f"<h2>Snapshot: {_esc(name)}</h2>", f"<p>{_esc(_workload_line(doc))}</p>", table(head, rows)]
    note = overload_note(pol)
    if note:
        out.append(f"<p class='note'>{_esc(note)}</p>")
    for key in ("compaction", "inflation"):
        vals = {p: m[key]["mean"] for p, m in pol.items() if "mean" in m.get(key, {})}
        out.append(bar_chart(vals, f"{key} (mean over trials)"))
    out.append(_definitions(["placed%", "placed_w%", "util", "holes%", "strand", "compaction", "inflation"]))
    return "\n".join(out)


def _workload_line(doc) -> str:
    w = doc.get("workload", {})
    return ", ".join(f"{k} {v}" for k, v in w.items() if isinstance(v, (int, float, str)) and k != "trace_dir")


def _event(doc, name, csvs) -> list:
    pol = doc["policies"]
    keys = list(next(iter(pol.values()))["mean"])
    rows = [[(p, None)] + [(_num(m["mean"].get(k), 1, 3), m["mean"].get(k)) for k in keys] for p, m in pol.items()]
    out = [f"<h2>Event replay: {_esc(name)}</h2>", f"<p>{_esc(_workload_line(doc))}</p>", table(["policy"] + keys, rows)]
    cdf = {}
    for p, m in pol.items():
        q = m["trials"][0].get("latency_cdf_s", []) if m["trials"] else []
        if q:
            cdf[p] = ([max(x, 1e-3) for x in q], [k / 100 for k in range(len(q))])
    if cdf:
        out.append(Chart("latency CDF (trial 0; 0 s drawn at 1 ms)", "latency (s, log)", "fraction of placed tasks",
                         cdf, logx=True))
    bands = [b for b in ("production", "middle", "free")
             if any(f"latency_{b}_p99_s" in m["mean"] for m in pol.values())]
    if bands:
        keys = [(f"{b} p{q}", f"latency_{b}_p{q}_s") for b in bands for q in (50, 99)]
        rows = [[(p, None)] + [(_num(m["mean"].get(k), 1, 3), m["mean"].get(k)) for _, k in keys]
                for p, m in pol.items()]
        out += ["<p>Latency by priority band (s; production 9-11, middle 2-8, free 0-1)</p>",
                table(["policy"] + [c for c, _ in keys], rows)]
    timing = doc.get("timing", {}).get("cvxcluster", {}) if isinstance(doc.get("timing"), dict) else {}
    rounds = {p: dict(m["cvx"], **(timing.get(p) if isinstance(timing.get(p), dict) else {}))
              for p, m in pol.items() if isinstance(m.get("cvx"), dict)}
    if rounds:
        keys = ("rounds", "tasks_per_s", "round_s_mean", "round_s_p99", "candidates_mean", "allocation_s")
        rows = [[(p, None)] + [(_num(c.get(k), 1, 3), c.get(k)) for k in keys] for p, c in rounds.items()]
        out += ["<p>CvxCluster rounds (tasks placed per second of allocation; round wall time in s)</p>",
                table(["row"] + list(keys), rows)]
    queue = {p: csvs[p]["pending"] for p in pol if "pending" in csvs.get(p, {})}
    if queue:
        out.append(Chart("pending tasks over time", "time (s)", "pending tasks", queue))
    for p in pol:
        series = {k: v for k, v in csvs.get(p, {}).items() if k.startswith("util_")}
        if series:
            out.append(Chart(f"utilization over time: {p}", "time (s)", "utilization", series))
    out.append(_definitions(["util", "latency", "never", "pend_mean"]))
    return out


def _evolve(doc, name) -> list:
    hist = doc["history"]
    g = [h["index"] for h in hist]
    series = {k: (g, [h[k] for h in hist]) for k in ("best", "median", "heldout", "relaxed", "hard")
              if isinstance(hist[0].get(k), (int, float))}
    rows = [[(k, None), (_num(doc[k].get("train"), 100, 3), doc[k].get("train")),
             (_num(doc[k].get("heldout"), 100, 3), doc[k].get("heldout"))]
            for k in ("champion", "alpha_evolve") if isinstance(doc.get(k), dict)]
    out = [f"<h2>Tuning ({_esc(doc['experiment'])}): {_esc(name)}</h2>",
           Chart("objective per generation / step", "generation or step", "demand-weighted placed fraction", series)]
    if rows:
        out.append(table(["genome", "train %", "held-out %"], rows))
    return out


def _cvx(doc, name) -> str:
    out = [f"<h2>CvxCluster: {_esc(name)}</h2>", f"<p>{_esc(_workload_line(doc))}</p>"]
    c = doc.get("cvxcluster")
    if c:
        rows = [[(f"trial {t}", t), (_num(o, 1, 1), o), (str(n), n), (_num(o / c["dual"], 100, 2), o / c["dual"])]
                for t, (o, n) in enumerate(zip(c["objective"], c["placed"]))]
        out.append(table(["allocation", "objective", "placed", "% of dual bound"], rows))
    if doc.get("exact"):
        x = doc["exact"]
        out.append(table(["reference", "objective", "seconds"], [
            [("HiGHS LP", None), (_num(x["lp_objective"], 1, 2), x["lp_objective"]), (_num(x["lp_seconds"]), x["lp_seconds"])],
            [("HiGHS MIP" + ("" if x["mip_optimal"] else " (time limit)"), None),
             (_num(x["mip_objective"], 1, 1), x["mip_objective"]), (_num(x["mip_seconds"]), x["mip_seconds"])]]))
    if doc.get("online"):
        keys = ["rate_multiplier", "rounds", "placed", "tasks_per_s", "solve_s_mean", "solve_s_max", "queue_max",
                "latency_s_p99"]
        out.append(table(keys, [[(_num(r[k], 1, 3), r[k]) for k in keys] for r in doc["online"]]))
    out.append(_definitions(["objective"]))
    return "\n".join(out)


ZOOM = (80, 130)  # arrived GPU demand (%) where the GPU-sharing policies part


def _gpushare(doc, name) -> list:
    pol = doc["policies"]
    xs = doc.get("arrived_percent", list(range(131)))
    w = doc.get("workload", {})
    out = [f"<h2>GPU sharing: {_esc(name)}</h2>",
           f"<p>pod list {_esc(w.get('pod_list'))}, {_esc(w.get('nodes'))} nodes, {_esc(w.get('gpus'))} GPUs; "
           f"mean over seeds, band from min to max</p>"]
    mean = lambda v: sum(x for x in v if x is not None) / max(1, sum(x is not None for x in v))
    rows = [[(p, None)] + [(_num(mean(e[c]["at_100"])), mean(e[c]["at_100"])) for c in ("alloc", "frag", "frag_ratio")]
            + [(str(len(e["seeds"])), len(e["seeds"]))] for p, e in pol.items()]
    out.append(table(["policy", "alloc % @100", "frag % @100", "frag ratio @100", "seeds"], rows))
    for curve, label in (("alloc", "GPU allocation ratio (%)"), ("frag", "fragmentation (% of GPU capacity)"),
                         ("frag_ratio", "fragmented share of idle GPUs (%)")):
        series = {p: (xs, e[curve]["mean"]) for p, e in pol.items()}
        bands = {p: (xs, e[curve]["min"], e[curve]["max"]) for p, e in pol.items() if len(e["seeds"]) > 1}
        for xlim in (None, ZOOM):
            title = f"{label} against arrived workload" + ("" if xlim is None else f" (zoom: {xlim[0]}-{xlim[1]}%)")
            out.append(Chart(title, "arrived GPU demand (% of capacity)", label, series, bands, xlim=xlim))
    out.append(_definitions(["gpu_alloc", "gpu_frag", "gpu_frag_ratio"]))
    return out


def _gpushare_search(doc, name) -> list:
    srch = doc["search"]
    out = [f"<h2>GPU-sharing family search: {_esc(name)}</h2>",
           f"<p>strategy {_esc(srch['strategy'])}, {srch['evaluations']} genomes evaluated ({srch['runs']:,} runs); "
           f"champion training fitness {srch['champion']['train_fitness']:.3f}% against FGD's "
           f"{srch['FGD']['train_fitness']:.3f}% (mean allocation over arrived 90..130%)</p>"]
    h = srch["history"]
    xs = [r["evaluations"] for r in h]
    out.append(Chart("best training fitness against evaluations", "genomes evaluated", "fitness (%)",
                     {"best": (xs, [r["best"] for r in h]), "generation median": (xs, [r["median"] for r in h]),
                      "FGD": (xs, [srch["FGD"]["train_fitness"]] * len(xs))}))
    for key, title in (("heldout", "held-out lists"), ("train_heldout_seeds", "training lists, held-out seeds")):
        rows = [[(n, None)] + [(_num(e[p]["mean"], 1, 2), e[p]["mean"]) for p in ("champion", "FGD", "BestFit")]
                + [(f"{e['vs_FGD']['mean']:+.2f} ± {e['vs_FGD']['sd']:.2f}", e["vs_FGD"]["mean"]),
                   (f"{e['vs_FGD']['better']}/{len(e['seeds'])}", e["vs_FGD"]["better"])] for n, e in doc[key].items()]
        out.append(f"<h3>{title}: allocation % at arrived 100%</h3>")
        out.append(table(["list", "champion", "FGD", "BestFit", "champion - FGD", "seeds better"], rows))
    g = doc["goal"]
    out.append(f"<p>goal ({_esc(g['rule'])}): {'met' if g['met'] else 'not met'}; held-out mean lead "
               f"{g['heldout_mean_lead_pp']:+.3f} pp</p>")
    return out


def _bench(doc, name) -> str:
    rows = []
    for b, entry in doc["benchmarks"].items():
        for fig, value, goal in entry["headlines"]:
            met = "" if goal is None else ("yes" if value >= goal else "no")
            rows.append([(b, None), (fig, None), (f"{value:,.3g}", value), ("" if goal is None else f"{goal:g}", goal),
                         (met, None)])
    return f"<h2>Benchmarks: {_esc(name)}</h2>" + table(["benchmark", "figure", "value", "goal", "met"], rows)


def _read_csv(path) -> dict[str, tuple[list[float], list[float]]]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: cannot read it as CSV ({e})") from None
    head, data = (rows[0], rows[1:]) if rows else ([], [])
    if not head or head[0] != "time_s":
        raise InputError(f"{path}: not a jaxsched utilization CSV (first column must be time_s)")
    try:
        t = [float(r[0]) for r in data]
        return {h: (t, [float(r[i]) for r in data]) for i, h in enumerate(head)
                if h.startswith("util_") or h in ("running", "pending")}
    except (ValueError, IndexError):
        raise InputError(f"{path}: a row is not numeric or has too few columns") from None


VIEWS = {"snapshot": _snapshot, "evolve": _evolve, "tune": _evolve, "cvx": _cvx, "gpushare": _gpushare,
         "gpushare-search": _gpushare_search, "bench": _bench}  # each kind's section but event's, which also takes the utilization CSVs


def _fail(path, kind, what):
    raise InputError(f"{path}: not a valid jaxsched {kind} result: {what}")


def _dict_of_dicts(doc, key, path, kind, need=()):
    """doc[key]: a non-empty {name: dict}, each holding the keys in `need`."""
    v = doc.get(key)
    if not isinstance(v, dict) or not v:
        _fail(path, kind, f"'{key}' must be a non-empty object")
    for name, entry in v.items():
        if not isinstance(entry, dict):
            _fail(path, kind, f"'{key}.{name}' must be an object, got {type(entry).__name__}")
        for k in need:
            if k not in entry:
                _fail(path, kind, f"'{key}.{name}' has no '{k}'")
    return v


def check_result(doc, path: str) -> str:
    """The kind of a result document (snapshot, event, evolve, tune, cvx, gpushare, gpushare-search, bench), its
    fields checked before anything is rendered; InputError naming the file and the field."""
    if isinstance(doc, dict) and "benchmarks" in doc and "experiment" not in doc:
        for b, entry in _dict_of_dicts(doc, "benchmarks", path, "benchmark", ("headlines",)).items():
            rows = entry["headlines"]
            if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 3 and
                                                     isinstance(r[1], (int, float)) for r in rows):
                _fail(path, "benchmark", f"'benchmarks.{b}.headlines' must be [figure, value, goal] rows")
        return "bench"
    if not isinstance(doc, dict) or "jaxsched" not in doc or "experiment" not in doc:
        raise InputError(f"{path}: not a jaxsched result (a JSON object with 'jaxsched' and 'experiment' fields, "
                         "as the commands' --json writes)")
    kind = doc["experiment"]
    if kind == "snapshot":
        for p, metrics in _dict_of_dicts(doc, "policies", path, kind).items():
            for m, v in metrics.items():
                if not isinstance(v, dict) or not ({"mean", "std"} <= set(v) or "not_computed" in v or "undefined" in v):
                    _fail(path, kind, f"'policies.{p}.{m}' must be an object with mean and std")
    elif kind == "event":
        for p, entry in _dict_of_dicts(doc, "policies", path, kind, ("mean", "trials")).items():
            if not isinstance(entry["mean"], dict) or not isinstance(entry["trials"], list):
                _fail(path, kind, f"'policies.{p}' must hold a 'mean' object and a 'trials' list")
    elif kind in ("evolve", "tune"):
        hist = doc.get("history")
        if not isinstance(hist, list) or not hist or not all(isinstance(h, dict) and "index" in h for h in hist):
            _fail(path, kind, "'history' must be a non-empty list of generations or steps")
    elif kind == "cvx":
        if not any(isinstance(doc.get(k), (dict, list)) and doc.get(k) for k in ("cvxcluster", "exact", "online")):
            _fail(path, kind, "it holds none of 'cvxcluster', 'exact' and 'online'")
        c = doc.get("cvxcluster")
        if c is not None and not (isinstance(c, dict) and isinstance(c.get("objective"), list)
                                  and isinstance(c.get("placed"), list) and isinstance(c.get("dual"), (int, float))):
            _fail(path, kind, "'cvxcluster' must hold 'objective' and 'placed' lists and a 'dual' number")
    elif kind == "gpushare":
        for p, entry in _dict_of_dicts(doc, "policies", path, kind, ("alloc", "frag", "frag_ratio", "seeds")).items():
            for c in ("alloc", "frag", "frag_ratio"):
                if not isinstance(entry[c], dict) or not {"mean", "min", "max", "at_100"} <= set(entry[c]):
                    _fail(path, kind, f"'policies.{p}.{c}' must hold mean, min, max and at_100")
    elif kind == "gpushare-search":
        srch = doc.get("search")
        if not isinstance(srch, dict) or not isinstance(srch.get("history"), list) or not srch["history"] \
                or not all(isinstance(r, dict) and {"evaluations", "best", "median"} <= set(r) for r in srch["history"]):
            _fail(path, kind, "'search.history' must be a non-empty list of generations")
        for k in ("strategy", "evaluations", "runs", "champion", "FGD"):
            if k not in srch:
                _fail(path, kind, f"'search' has no '{k}'")
        for key in ("heldout", "train_heldout_seeds"):
            for n, e in _dict_of_dicts(doc, key, path, kind, ("champion", "FGD", "BestFit", "vs_FGD", "seeds")).items():
                if not all(isinstance(e[p], dict) and "mean" in e[p] for p in ("champion", "FGD", "BestFit", "vs_FGD")):
                    _fail(path, kind, f"'{key}.{n}' must hold champion, FGD, BestFit and vs_FGD with a mean")
        if not isinstance(doc.get("goal"), dict) or not {"met", "rule", "heldout_mean_lead_pp"} <= set(doc["goal"]):
            _fail(path, kind, "'goal' must hold met, rule and heldout_mean_lead_pp")
    else:
        raise InputError(f"{path}: a jaxsched result of an unknown experiment {kind!r}")
    return kind


def report_sections(paths: list[str]) -> list[tuple[str, list]]:
    """Each JSON result's section of the report: (file name, parts), a part being HTML or a Chart.

    Args:
        paths: result files of the commands (snapshot, event, evolve, tune, cvx, gpushare JSON,
            results/bench.json) and event utilization CSVs.

    Raises:
        InputError: a file that is not a jaxsched result, naming it.
    """
    if not paths:
        raise InputError("no result files given")
    docs, csvs = [], {}
    for path in paths:
        if path.endswith(".csv"):
            policy = os.path.basename(path)[:-4].split("_", 1)[-1]
            csvs[policy] = _read_csv(path)
            continue
        try:
            with open(path) as f:
                docs.append((path, json.load(f)))
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: not a JSON file ({e})") from None
    sections = []
    for path, doc in docs:
        name, kind = os.path.basename(path), check_result(doc, path)
        try:
            parts = _event(doc, name, csvs) if kind == "event" else VIEWS[kind](doc, name)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, StopIteration) as e:
            raise InputError(f"{path}: a {kind} result this report cannot read ({type(e).__name__}: {e})") from None
        sections.append((name, [parts] if isinstance(parts, str) else parts))
    return sections


def build_report(paths: list[str], sections: list[tuple[str, list]] | None = None) -> str:
    """The HTML page for these result files (JSON documents and utilization CSVs).

    Args:
        paths: result files of the commands (snapshot, event, evolve, tune, cvx, gpushare JSON,
            results/bench.json) and event utilization CSVs.
        sections: their `report_sections`, where already read (default: read here).

    Returns:
        One self-contained HTML page.

    Raises:
        InputError: a file that is not a jaxsched result, naming it.
    """
    sections = report_sections(paths) if sections is None else sections
    body = "\n".join("<section>" + "\n".join(line_chart(p) if isinstance(p, Chart) else p for p in parts)
                     + "</section>" for _, parts in sections)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>jaxsched report</title>"
            f"<style>{STYLE}</style></head><body><h1>jaxsched report</h1>"
            f"<p>{len(sections)} result(s): {_esc(', '.join(os.path.basename(p) for p in paths))}. Click a column "
            f"header to sort.</p><pre id=\"errors\"></pre>\n{body}\n<script>{SCRIPT}</script></body></html>\n")
