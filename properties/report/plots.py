"""The report's figures, drawn with matplotlib's object API (no pyplot, no global state; PNG through Agg).

Each function takes what a section shows (properties/report/sections.py) and returns a Figure; page.py saves it.
"""

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402  (after the backend is chosen)

GOOD, BAD, MUTED, ACCENT, EXTRA = "#2e7d32", "#c62828", "#9e9e9e", "#1565c0", "#ef6c00"
WIDTH = 9.0  # inches at DPI: the page's content width
DPI = 110


def _figure(height):
    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def _tidy(ax, title, xlabel, ylabel):
    ax.set_title(title, loc="left", fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def parts(parts):
    """The gate's parts: tests passed, failed and skipped, as stacked horizontal bars, seconds at the end."""
    fig, ax = _figure(0.24 * len(parts) + 1.0)
    names = [p["name"] for p in parts][::-1]
    passed = [p["passed"] for p in parts][::-1]
    failed = [p["failed"] for p in parts][::-1]
    skipped = [p["skipped"] for p in parts][::-1]
    ax.barh(names, passed, color=GOOD, label="passed")
    ax.barh(names, failed, left=passed, color=BAD, label="failed")
    ax.barh(names, skipped, left=[a + b for a, b in zip(passed, failed)], color=MUTED, label="skipped")
    for y, p in enumerate(parts[::-1]):
        ax.text(p["passed"] + p["failed"] + p["skipped"], y, f"  {p['seconds']:.0f} s", va="center", fontsize=8)
    _tidy(ax, "Tests per part of the gate (time at the end of each bar)", "tests", "")
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    ax.margins(x=0.1)
    return fig


def colors(names):
    """name -> one colour of matplotlib's cycle, the same in every figure of a page."""
    return {name: f"C{i % 10}" for i, name in enumerate(names)}


def times(bs, times, subject, title, color):
    """Per-launch time against b, one line per variant (log scale: the eager path is 10x the rest)."""
    from matplotlib.ticker import LogLocator, ScalarFormatter

    fig, ax = _figure(4.6)
    for name, values in times.items():
        points = [(b, t) for b, t in zip(bs, values) if t is not None and t > 0]
        if not points:
            continue
        xs, ys = zip(*points)
        bold = name == subject
        ax.plot(xs, ys, marker="o", markersize=4 if not bold else 6, linewidth=3 if bold else 1.4,
                label=name + (" (subject)" if bold else ""), zorder=3 if bold else 2, color=color[name])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter("")
    ax.set_xticks(bs)
    _tidy(ax, title, "b (tokens)", "µs per launch (median, log scale)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    return fig


def ratios(bs, ratios, factors, title, color):
    """The subject's speedup over each FlashInfer baseline against b, with the targets' factors."""
    fig, ax = _figure(3.8)
    for name, values in ratios.items():
        points = [(b, r) for b, r in zip(bs, values) if r is not None]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", markersize=4, label=name, color=color[name])
    for label, factor in factors.items():
        ax.axhline(factor, color=MUTED, linestyle="--", linewidth=1)
        ax.text(bs[-1], factor, f" target {factor:g}x ({label})", va="bottom", ha="right", fontsize=8, color="#555")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(bs)
    _tidy(ax, title, "b (tokens)", "baseline time / subject time")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    return fig


def peer_differences(rows):
    """The FlashInfer peer's weights per b: how many equal the model's bits and how many are off (by at most
    their row's max ulp), as stacked bars."""
    fig, ax = _figure(3.2)
    rows = [r for r in rows if not r["error"]]
    bs = [r["b"] for r in rows]
    same = [r["weights"] - r["differ"] for r in rows]
    off = [r["differ"] for r in rows]
    ax.bar(bs, same, color=GOOD, label="same bits as the model")
    ax.bar(bs, off, bottom=same, color=EXTRA, label="bits differ")
    for b, s, o, r in zip(bs, same, off, rows):
        ulp = "NaN" if r["max_ulp"] is None else f"max {r['max_ulp']} ulp"
        ax.text(b, s + o, ulp, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(bs)
    _tidy(ax, "FlashInfer fused routing: its weights against the model's, per b", "b (tokens)", "weights")
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    ax.margins(y=0.15)
    return fig


def ulp_histogram(distributions, title):
    """Counts per ulp distance, one bar group per labelled distribution (log count scale)."""
    fig, ax = _figure(3.4)
    distances = sorted({u for _, counts in distributions for u in counts})
    width = 0.8 / max(len(distributions), 1)
    for i, (label, counts) in enumerate(distributions):
        xs = [distances.index(u) + (i - (len(distributions) - 1) / 2) * width for u in distances]
        ax.bar(xs, [counts.get(u, 0) for u in distances], width=width, label=label)
    ax.set_xticks(range(len(distances)), [str(u) for u in distances])
    ax.set_yscale("log")
    _tidy(ax, title, "distance from the model's weight (ulp)", "weights (log scale)")
    if len(distributions) > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    return fig


def harness_targets(by_target):
    """Harness mutants per file they edit, killed and not."""
    fig, ax = _figure(0.3 * len(by_target) + 1.0)
    names = sorted(by_target, key=lambda t: sum(by_target[t].values()))
    killed = [by_target[t].get("killed", 0) for t in names]
    other = [sum(by_target[t].values()) - k for t, k in zip(names, killed)]
    ax.barh(names, killed, color=GOOD, label="killed")
    ax.barh(names, other, left=killed, color=BAD, label="not killed")
    _tidy(ax, "Harness mutants per file they edit", "mutants", "")
    ax.grid(False, axis="y")
    ax.legend(loc="lower right", frameon=False)
    return fig


def soak_families(families, runs):
    """Rows per family of each soak run, one panel per run sharing the families' axis."""
    fig = Figure(figsize=(WIDTH, 0.2 * len(families) + 1.4), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(runs), sharey=True, squeeze=False)[0]
    for ax, (name, counts) in zip(axes, runs):
        ax.barh(families[::-1], [counts.get(f, 0) for f in families[::-1]], color=ACCENT)
        ax.set_title(name.removesuffix(".json"), fontsize=8)
        ax.tick_params(axis="both", labelsize=7)
        ax.xaxis.get_offset_text().set_fontsize(7)
        ax.grid(True, axis="x", alpha=0.3)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    fig.suptitle("Soak: rows per family of each run", x=0.01, ha="left", fontsize=11)
    return fig


def keys(keys, picks, reference, title):
    """One row's keys c = s + bias per expert (infinite keys drawn at the edge of the axis), the reference's
    picks ringed with their rank, every other implementation's picks that differ marked with a cross."""
    import numpy as np

    fig, ax = _figure(2.6)
    keys = np.asarray(keys, np.float64)
    finite = np.isfinite(keys)
    low, high = (keys[finite].min(), keys[finite].max()) if finite.any() else (-1.0, 1.0)
    pad = (high - low) * 0.08 or 1.0
    shown = np.nan_to_num(keys, posinf=high + pad, neginf=low - pad)
    experts = np.arange(len(keys))
    ax.scatter(experts[finite], shown[finite], s=6, color=MUTED, label="key")
    if (~finite).any():
        ax.scatter(experts[~finite], shown[~finite], s=10, marker="v", color="#6d4c41", label="±inf key")
    ref = picks.get(reference, [])
    ax.scatter(ref, shown[ref], s=70, facecolors="none", edgecolors=GOOD, linewidths=1.6, label=f"{reference} picks")
    for rank, e in enumerate(ref, 1):
        ax.annotate(str(rank), (e, shown[e]), textcoords="offset points", xytext=(5, 5), fontsize=7, color=GOOD)
    for name, ids in picks.items():
        extra = [e for e in ids if e not in ref]
        if name != reference and extra:
            ax.scatter(extra, shown[extra], s=50, marker="x", color=BAD, label=f"{name} picks, not {reference}'s")
    ax.set_xlim(-2, len(keys) + 1)
    ax.set_xticks(range(0, len(keys) + 1, 32))
    _tidy(ax, title, "expert", "key")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    return fig
