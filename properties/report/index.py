"""The run's page, reports/index.html: every section from its sources, each figure beside it."""

import re

from common.provenance import REPO_ROOT, commit, utc_now
from properties.mutants import freshness
from properties.report import page, plots, sections

# (id, title, the command that fills it) of every section, in page order; a section without data names it.
SECTIONS = (
    ("verify", "Verdict", "make verify"),
    ("bench", "Benchmarks", "make bench"),
    ("ulp", "Weight differences in ulp", "make bench; per-implementation verdicts in reports/verdict-*.json"),
    ("mutants", "Kernel mutants", f"{freshness.REFRESH} on a GPU to write the kernel's evidence record, "
                                  f"{freshness.EVIDENCE.relative_to(REPO_ROOT)}"),
    ("harness_mutants", "Harness mutants", "make harness-mutants"),
    ("soak", "Soak", "make soak"),
)


def _slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def context(loaded, html_path):
    """The template's context for ``loaded`` (section -> [Source]), its figures saved beside ``html_path``."""
    page_dir = html_path.parent
    images = page.Images(html_path)
    out = {"sections": SECTIONS, "commands": {id_: command for id_, _, command in SECTIONS}, "title": "Muse Spark routing harness: report",
           "subtitle": f"written {utc_now()} at commit {(commit() or 'unknown')[:12]}"}

    out["verify"] = [sections.verify(s, page_dir) for s in loaded.get("verify", [])]
    for v in out["verify"]:
        v["plot"] = images.add("verify-parts", plots.parts(v["parts"]))

    out["bench"] = [sections.bench(s, page_dir) for s in loaded.get("bench", [])]
    for i, b in enumerate(out["bench"]):
        color = plots.colors([name for name, _ in b["variants"]])
        for m in b["modes"]:
            m["times_plot"] = images.add(f"bench{i}-{m['mode']}-times", plots.times(
                b["bs"], m["times"], b["subject"], f"{m['title']}: per-launch time against b", color))
            m["ratios_plot"] = images.add(f"bench{i}-{m['mode']}-ratios", plots.ratios(
                b["bs"], m["ratios"], b["factors"], f"{m['title']}: {b['subject']} against each FlashInfer baseline",
                color))

    peers = []
    for i, s in enumerate(loaded.get("bench", [])):
        peer = sections.peer_ulp(s)
        if peer is None:
            continue
        peer["file"] = out["bench"][i]["file"]
        peer["plot"] = images.add(f"ulp-peer{i}", plots.peer_differences(peer["rows"]))
        peer["histogram"] = None
        if peer["distribution"]:
            counts = [(f"b={r['b']}", r["counts"]) for r in peer["rows"] if r.get("counts")]
            peer["histogram"] = images.add(f"ulp-peer{i}-histogram", plots.ulp_histogram(
                counts, "FlashInfer fused routing: distance of its weights from the model's"))
        peers.append(peer)
    verdicts = [sections.verdict(s, page_dir) for s in loaded.get("verdicts", [])]
    for v in verdicts:
        v["plot"] = None
        if v["distributions"]:
            v["plot"] = images.add(f"ulp-{_slug(v['implementation'])}", plots.ulp_histogram(
                [(d["label"], d["counts"]) for d in v["distributions"]],
                f"{v['implementation']}: distance of its weights from the model's"))
    out["ulp"] = {"peers": peers, "verdicts": verdicts}

    out["mutants"] = [sections.mutants(s, page_dir) for s in loaded.get("mutants", [])]
    out["harness_mutants"] = [sections.harness_mutants(s, page_dir) for s in loaded.get("harness_mutants", [])]
    for h in out["harness_mutants"]:
        h["plot"] = images.add("harness-targets", plots.harness_targets(h["by_target"]))

    out["soak"] = sections.soak(loaded.get("soak", []), page_dir)
    out["soak"]["plot"] = images.add("soak-families", plots.soak_families(
        out["soak"]["families"], [(r["file"]["name"], r["families"]) for r in out["soak"]["runs"]])) \
        if out["soak"]["runs"] else None
    return out


def write(loaded, html_path):
    """Write the page and its figures; return its path."""
    return page.write(html_path, "index.html.j2", context(loaded, html_path))
