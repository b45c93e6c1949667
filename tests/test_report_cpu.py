"""The report pages as a person opens them: built from the recorded results and corpus cases, every section
present, every figure a non-empty file, every link to a file that exists; the viewer on every example and
mutant case; one-line errors; the pages not blank in a headless Chromium where one is installed."""

import html.parser
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kernel.layout import EXPERTS, metadata_field
from properties import replay
from properties.engine import casefile
from properties.engine.compare import disagreements
from properties.engine.floats import f32_bits
from properties.mutants import freshness
from properties.report import case, index, screenshot, sections, sources
from properties.report.__main__ import main as report_main
from properties.view import main as view_main

CORPORA = casefile.CORPORA
VIEWED = sorted((CORPORA / "examples").glob("*.json")) + sorted((CORPORA / "mutants").glob("*.json"))
METADATA_CASE = CORPORA / "examples" / "soak-fault-ties-to-highest-index.json"
WEIGHTS_CASE = CORPORA / "mutants" / "primitives.div_full_f32.ptx_sibling.1.json"
VERDICT = {"implementation": "user_kernel", "families": {
    "all_equal": {"weights": {"rows": 10, "rows_differ": 3, "ulp": {"0": 70, "1": 8, "3": 2}}},
    "plain": {"weights": {"rows": 10, "rows_differ": 0, "ulp": {"0": 80}}}}}
# A stated evidence record (properties/mutants/generated.py's shape, its figures distinct so each is found).
EVIDENCE_TOTAL = {"sites": 516, "mutants": 917, "killed": 668, "not_viable": 48, "crashed": 72, "equivalent": 129,
                  "survived": 0, "not_run": 0, "score": "788/788"}
EVIDENCE_REFRESH = {"seconds": 167.5, "seed": "evidence.json", "actions": {"confirm": 881, "probe": 36},
                    "results": {"by case": 855, "by its tier": 26, "reprobed": 36}, "confirmed_by_case": 855,
                    "confirmed_by_tier": 26, "reprobed": 36, "recompiled": 41, "variants_compiled": 412,
                    "equivalent_by_digest": 7}


class Page(html.parser.HTMLParser):
    """The ids, image sources, links and classed cells of one HTML page."""

    def __init__(self, path):
        super().__init__()
        self.ids, self.images, self.links, self.classes, self.text = set(), [], [], [], []
        self.feed(Path(path).read_text())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "a":
            self.links.append(attrs["href"])
        self.classes.append((tag, attrs.get("class", "").split()))

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag, css_class):
        return sum(t == tag and css_class in c for t, c in self.classes)


def assert_whole(path):
    """Every image is a non-empty file, every link names a file that exists or an id of the page."""
    page = Page(path)
    assert page.images, f"{path} has no figure"
    for src in page.images:
        image = path.parent / src
        assert image.is_file() and image.stat().st_size > 0, src
    for href in page.links:
        if href.startswith("#"):
            assert href[1:] in page.ids, href
        else:
            assert not href.startswith(("http:", "https:", "/")), f"{href}: the page must open offline"
            assert (path.parent / href).is_file(), href
    return page


def evidence(folder, **changes):
    """A stated evidence record written to ``folder``/evidence.json, made for this tree's inputs (fresh) unless
    ``changes`` say otherwise; its path and its contents."""
    record = {"kind": freshness.RECORD_KIND, "verdict": "PASS", "tier": "gpu", "complete": True,
              "inputs": freshness.inputs(), "provenance": {"gpu": "NVIDIA H100 80GB HBM3", "commit": "ad3ddbd" * 6},
              "score": {"total": EVIDENCE_TOTAL}, "refresh": EVIDENCE_REFRESH, "survivors": [], "failures": [],
              "finished": "2026-12-01T10:00:00Z", **changes}
    path = folder / freshness.EVIDENCE.name
    path.write_text(json.dumps(record))
    return path, record


def section_text(path, section):
    """The text of section ``section`` of the page at ``path``, its tags dropped, entities read, spaces collapsed."""
    body = re.search(rf'<section id="{section}">(.*?)</section>', Path(path).read_text(), re.S).group(1)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


@pytest.fixture(scope="module")
def index_page(tmp_path_factory):
    """The index from every recorded result (no run of this machine), one verdict file and a stated evidence
    record."""
    root = tmp_path_factory.mktemp("report")
    reports = root / "reports"
    reports.mkdir()
    (reports / "verdict-user_kernel.json").write_text(json.dumps(VERDICT))
    record, _ = evidence(root)
    html = root / "index.html"
    assert report_main(["--reports", str(reports), "--out", str(html), "--mutants", str(record)]) == 0
    return html


def test_the_index_holds_every_section_with_its_figures_and_live_links(index_page):
    page = assert_whole(index_page)
    assert {name for name, _, _ in index.SECTIONS} <= page.ids
    text = " ".join(page.text)
    assert "No results yet" not in text, "every section has a result to show"
    for source in (freshness.EVIDENCE.name, "harness-mutants.json", "bench.json", "soak-h200-3e9-3e2a673.json"):
        assert source in text


def test_the_harness_kill_matrix_holds_a_row_per_mutant(index_page):
    text = " ".join(Page(index_page).text)
    for mutant in json.loads((sources.RESULTS / "harness-mutants.json").read_text())["mutants"]:
        assert mutant["mutant"] in text, mutant["mutant"]


def test_a_stated_evidence_record_shows_its_verdict_counts_refresh_and_freshness(index_page):
    text = section_text(index_page, "mutants")
    assert "PASS the kernel's evidence record: 788/788 non-equivalent mutants detected; 917 generated mutants at " \
           "516 sites, tiers gpu; made on NVIDIA H100 80GB HBM3 at ad3ddbdad3dd" in text
    for verdict in ("killed", "not_viable", "crashed", "equivalent", "survived", "not_run"):
        assert f"{verdict} {EVIDENCE_TOTAL[verdict]}" in text, verdict
    assert "The refresh that made it: 167.5 s wall, from evidence.json." in text
    for count in ("confirmed by case 855", "confirmed by tier 26", "reprobed 36", "recompiled 41",
                  "variants compiled 412", "equivalent by digest 7", "by its tier 26"):
        assert count in text, count
    fresh, line = freshness.status(json.loads((index_page.parent / freshness.EVIDENCE.name).read_text()),
                                   freshness.inputs())
    assert fresh and f"fresh for this tree: {line}" in text


def test_a_stale_evidence_record_shows_which_inputs_differ(tmp_path):
    now = freshness.inputs()
    path, _ = evidence(tmp_path, inputs={**now, "kernel/routing.py": "0" * 64}, refresh=None)
    html = tmp_path / "index.html"
    assert report_main(["--reports", str(tmp_path / "reports"), "--out", str(html), "--mutants", str(path)]) == 0
    text = section_text(html, "mutants")
    assert "not fresh for this tree: STALE: 1 of its inputs differ from this tree's: kernel/routing.py changed" in text
    assert "This record holds no refresh counts." in text


def test_without_an_evidence_record_the_section_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(freshness, "EVIDENCE", tmp_path / "nothing" / freshness.EVIDENCE.name)
    html = tmp_path / "index.html"
    assert report_main(["--reports", str(tmp_path / "reports"), "--out", str(html)]) == 0
    assert section_text(html, "mutants") == ("Kernel mutants No results yet: run make evidence on a GPU to write the "
                                             "kernel's evidence record, properties/results/evidence.json.")


def test_a_verdict_files_ulp_distributions_are_drawn_and_listed(index_page):
    page = Page(index_page)
    assert any("ulp-user-kernel" in src for src in page.images)
    assert "families / all_equal / weights" in " ".join(page.text)


def test_the_verdict_hook_finds_every_distribution_under_an_ulp_key():
    found = sections.ulp_distributions(VERDICT)
    assert found == [("families / all_equal / weights", {0: 70, 1: 8, 3: 2}),
                     ("families / plain / weights", {0: 80})]
    assert sections.ulp_distributions({"ulp": {"x": 1}, "rows": 3}) == []


def test_an_index_without_results_says_which_command_fills_each_section(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "RESULTS", tmp_path / "nothing")
    monkeypatch.setattr(sources, "RECORDED_BENCH", tmp_path / "nothing" / "bench.json")
    monkeypatch.setattr(sources, "HARNESS_RESULTS", tmp_path / "nothing" / "harness.json")
    monkeypatch.setattr(freshness, "EVIDENCE", tmp_path / "nothing" / freshness.EVIDENCE.name)
    html = tmp_path / "index.html"
    assert report_main(["--reports", str(tmp_path / "reports"), "--out", str(html)]) == 0
    page = Page(html)
    assert {name for name, _, _ in index.SECTIONS} <= page.ids
    text = " ".join(page.text)
    for command in ("make verify", "make bench", "make evidence", "make harness-mutants", "make soak"):
        assert f"run {command}" in text


def test_a_bad_results_file_is_one_line_and_exit_2_before_anything_is_written(tmp_path, capsys):
    bad = tmp_path / "verify.json"
    bad.write_text(json.dumps({"verdict": "PASS"}))
    html = tmp_path / "out" / "index.html"
    assert report_main(["--verify", str(bad), "--out", str(html)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"report: error: {bad}: reasons missing (not a verify file)"]
    assert not html.parent.exists()


def test_without_matplotlib_the_report_says_so_in_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    html = tmp_path / "index.html"
    assert report_main(["--out", str(html)]) == 1
    assert capsys.readouterr().out.splitlines() == ["report not written: matplotlib missing"]
    assert not html.exists()


@pytest.mark.parametrize("path", VIEWED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_viewer_opens_every_example_and_mutant_case(path, tmp_path):
    html = tmp_path / "case.html"
    assert view_main([str(path), "--out", str(html)]) == 0
    page = assert_whole(html)
    record = casefile.read(path)
    assert {"case", *(f"row{r}" for r in range(record.case.b))} <= page.ids
    assert ("metadata" in page.ids) == record.case.has_metadata
    assert page.count("td", "picked") == 8 * record.case.b


def test_the_case_page_marks_exactly_the_elements_that_differ(tmp_path):
    for path in (METADATA_CASE, WEIGHTS_CASE):
        record = casefile.read(path)
        context = case.context(record, path, tmp_path / f"{path.stem}.html")
        outputs, reference = case.outputs_with_reference(record)
        found = {d["field"]: d["count"] for d in disagreements(outputs, reference, record.case.tile_n)}
        marked_meta = sum(cell["differs"] for f in context["metadata"] for line in f["lines"]
                          for row in line["rows"] for cell in row["cells"])
        marked_ids = sum(c["id_differs"] for row in context["rows"] for p in row["picks"] for c in p["cells"])
        marked_weights = sum(len(row["bits"]) for row in context["rows"])
        assert (marked_meta, marked_ids, marked_weights) == \
            (found.get("metadata", 0), found.get("ids", 0), found.get("weights", 0))


def test_differing_bits_are_marked_where_the_patterns_differ():
    got, want = np.float32(0.18070751), np.float32(0.1807075)
    groups = case.bit_groups(got, want)
    assert [len(g) for g in groups] == [1, 8, 23]
    bits = [b for g in groups for b in g]
    assert int("".join(str(b["bit"]) for b in bits), 2) == int(f32_bits(got))
    xor = int(f32_bits(got)) ^ int(f32_bits(want))
    assert [b["differs"] for b in bits] == [bool(xor >> i & 1) for i in range(31, -1, -1)]


def test_the_256_experts_show_the_models_keys_and_shade_equal_ones(tmp_path):
    record = casefile.read(METADATA_CASE)
    row = case.context(record, METADATA_CASE, tmp_path / "c.html")["rows"][0]
    experts = [e for lane in row["lanes"] for e in lane]
    assert [e["expert"] for e in experts] == list(range(EXPERTS))
    keys = [np.float32(e["key"]) for e in experts]
    shaded = {e["expert"] for e in experts if e["shade"] is not None}
    assert shaded == {i for i, k in enumerate(keys) if keys.count(k) > 1}
    assert {e["expert"] for e in experts if e["by_reference"]} == set(record.outputs["model"].ids[0].tolist())


def test_the_viewers_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for argv in ([str(bad)], [str(tmp_path / "missing.json")], [str(WEIGHTS_CASE), "--out", str(tmp_path / "x.txt")],
                 []):
        with pytest.raises(SystemExit) as exit_:
            view_main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("view: error: "), err
    assert list(tmp_path.iterdir()) == [bad]


def test_replay_names_metadata_fields_and_ends_with_the_counts(capsys):
    assert replay.main([str(CORPORA / "examples")]) == replay.DIFFER
    out = capsys.readouterr().out.splitlines()
    n = len(list((CORPORA / "examples").glob("*.json")))  # every example is a caught fault: each differs
    assert n >= 2 and out[-2:] == [f"replay: {n} case file(s): 0 agree, {n} differ, 0 unreadable",
                                   "replay: DIFFER (exit 1)"]
    tile = casefile.read(METADATA_CASE).case.tile_n
    assert f"{metadata_field(66, tile)}: 51 instead of 48" in "\n".join(out)
    assert "[66]" not in "\n".join(out)


def test_replay_counts_every_unreadable_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert replay.main([str(bad), str(WEIGHTS_CASE), str(tmp_path / "missing.json")]) == replay.UNREADABLE
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 2
    assert captured.out.splitlines()[-2].startswith("replay: 3 case file(s): 0 agree, 0 differ, 2 unreadable")


def test_the_report_reads_where_the_commands_write():
    from properties.bench.cli import DEFAULT_OUT
    from properties.soak.__main__ import DEFAULT_SUMMARY

    assert sources.REPORTS / sources.BENCH == DEFAULT_OUT
    assert sources.SOAK == DEFAULT_SUMMARY.name and DEFAULT_SUMMARY.parent.name == sources.REPORTS.name


@pytest.fixture(scope="module")
def browser():
    if screenshot.browser() is None:
        pytest.skip(f"{screenshot.NOT_RUN}: none of {', '.join(screenshot.BROWSERS)} on PATH")


def _not_blank(png):
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
    background = np.all(pixels > 245, axis=1)
    return background.mean() < 0.95 and len(np.unique(pixels, axis=0)) > 50


def test_the_index_is_not_blank_in_chromium(browser, index_page, tmp_path):
    assert _not_blank(screenshot.capture(index_page, tmp_path / "index.png", height=1600))


def test_a_case_page_is_not_blank_in_chromium(browser, tmp_path):
    html = tmp_path / "case.html"
    assert view_main([str(METADATA_CASE), "--out", str(html)]) == 0
    assert _not_blank(screenshot.capture(html, tmp_path / "case.png", height=1600))


def test_the_chromium_skip_is_one_the_gate_accepts():
    from properties.tools import gate

    assert gate.named_skip(f"{screenshot.NOT_RUN}: none of chromium on PATH") == screenshot.NOT_RUN
    assert gate.named_skip(screenshot.NOT_RUN) is None
