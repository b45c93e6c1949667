"""The evidence record's incremental refresh (properties/mutants/refresh.py) on the CPU, its prefilter workers and
probes stubbed: after a kernel edit elsewhere, a mutant whose saved case still kills is confirmed by that case
alone (no prefilter compile, no other tier); one whose case stopped killing goes through the prefilter and every
tier again; a listed equivalent whose site changed fails the refresh by name until it is reviewed; and the record
counts what the refresh did."""

import functools
import json
import shutil

import pytest

from properties.mutants import equivalents, freshness, generate, generated, probe, refresh, runner
from properties.mutants.catalog import DIFFERENTIAL, KERNEL_DIR


@functools.cache
def _device_mutants():
    """Two mutants of device code in two functions of routing.py (equivalence decidable, one variant each)."""
    chosen, functions = [], set()
    for m in generate.generate(KERNEL_DIR):
        if m.target == "routing.py" and m.function not in functions and m.function != generate.MODULE \
                and m.name not in equivalents.LISTED and m.operator == "compare_flip":
            chosen.append(m)
            functions.add(m.function)
        if len(chosen) == 2:
            return chosen
    raise AssertionError("fewer than two device-code mutants to refresh")


class Stubs:
    """The prefilter workers and the probes, stubbed: ``case_kills[name]`` says whether the mutant's saved case
    still kills it, ``sweep_kills[name]`` whether its differential sweep does."""

    def __init__(self, tmp_path, monkeypatch):
        self.saved, self.compiled, self.probes = tmp_path / "saved", [], []
        self.saved.mkdir()
        self.case_kills, self.sweep_kills = {}, {}
        keys = generated._variant_keys()
        self.variant = probe.variant_name(*keys[0])
        self.real_ptx = {probe.variant_name(*k): "real" for k in keys}
        monkeypatch.setattr(generated.Run, "_worker", lambda run, plan: self.worker(plan))
        monkeypatch.setattr(runner, "_pool_run", lambda work, jobs, log: {
            ("real", tier): runner.Outcome(tier, killed=False, seconds=1.0) for _, tier, _ in work})
        monkeypatch.setattr(runner, "run_probe", self.probe)
        monkeypatch.setattr(generated, "cuda_reason", lambda: None)

    def coverage(self):
        lines = {}
        for m in _device_mutants():
            lines.setdefault(m.target, []).append(m.start[0])
        return {"import": {}, "launches": {},
                "variants": {v: {"device": lines if v == self.variant else {}, "host": {}} for v in self.real_ptx}}

    def worker(self, plan):
        out = [{"coverage": self.coverage()}] if plan.get("coverage") else []
        for job in plan["mutants"]:
            real = job["name"] == "real"
            if not real:
                self.compiled.append(job["name"])
            ptx = {probe.variant_name(*k): "real" if real else "mutated" for k in job["variants"]}
            out.append({"name": job["name"], "killed": False, "evidence": [], "raised": [], "ptx_sha256": ptx,
                        "launches_sha256": "launches", "case": None})
        return out

    def probe(self, mutant, tier, extra=(), make_copy=None):
        if mutant is None:
            return runner.Outcome(tier, killed=False, seconds=1.0)
        self.probes.append((mutant.name, tier, tuple(extra)))
        if tier == "replay":
            return runner.Outcome(tier, killed=self.case_kills[mutant.name], evidence=["its case mismatches"])
        if tier == DIFFERENTIAL and self.sweep_kills[mutant.name]:
            case = self.saved / f"{mutant.name}.json"
            case.write_text(json.dumps({"mutant": mutant.name}))
            return runner.Outcome(tier, killed=True, evidence=["case 3 mismatches"], case=str(case), seconds=2.0)
        return runner.Outcome(tier, killed=False, evidence=["every case bit-exact"], seconds=2.0)


def _edited_kernel(tmp_path, monkeypatch):
    """A copy of the kernel with an edit outside both mutants' functions (every mutant's package digest changes)."""
    copy = tmp_path / "kernel"
    shutil.copytree(KERNEL_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "routing.py").write_text((copy / "routing.py").read_text() + "\n\ndef added_after_the_record():\n"
                                     "    return 1\n")
    monkeypatch.setattr(generated, "KERNEL_DIR", copy)


def _run(record, resume=None, reviewed=()):
    names = [m.name for m in _device_mutants()]
    return generated.run(names, "gpu", 2, record, resume, log=lambda line: None, reviewed=reviewed)


def test_a_case_that_still_kills_confirms_its_mutant_alone_and_one_that_stopped_is_probed_again(tmp_path, monkeypatch):
    stubs = Stubs(tmp_path, monkeypatch)
    kept, stopped = (m.name for m in _device_mutants())
    stubs.sweep_kills = {kept: True, stopped: True}
    first = _run(tmp_path / "first.json")
    assert [r["verdict"] for r in first["mutants"]] == ["killed", "killed"]
    assert sorted(stubs.compiled) == sorted([kept, stopped])
    cases = {r["mutant"]: r["case"] for r in first["mutants"]}
    assert all(c["tier"] == DIFFERENTIAL and c["case"].startswith(str(freshness.cases_dir(tmp_path / "first.json")))
               for c in cases.values())

    _edited_kernel(tmp_path, monkeypatch)
    stubs.compiled, stubs.probes = [], []
    stubs.case_kills = {kept: True, stopped: False}
    stubs.sweep_kills = {kept: True, stopped: False}
    second = _run(tmp_path / "second.json", tmp_path / "first.json")
    rows = {r["mutant"]: r for r in second["mutants"]}
    assert [p for p in stubs.probes if p[0] == kept] == [(kept, "replay", ("--case", cases[kept]["case"]))]
    assert kept not in stubs.compiled and rows[kept]["verdict"] == "killed"
    assert rows[kept]["refresh"] == {"action": refresh.CONFIRM, "result": "by case"}
    assert stopped in stubs.compiled
    assert [p[:2] for p in stubs.probes if p[0] == stopped] == [(stopped, "replay"), (stopped, DIFFERENTIAL)]
    assert rows[stopped]["verdict"] == "survived" and rows[stopped]["refresh"]["result"] == "reprobed"
    counts = second["refresh"]
    assert (counts["confirmed_by_case"], counts["reprobed"], counts["recompiled"]) == (1, 1, 1)
    assert counts["seed"]["record"] == str(tmp_path / "first.json") and counts["seconds"] >= 0


def test_a_mutant_without_a_saved_case_reruns_the_tier_that_killed_it_alone(tmp_path, monkeypatch):
    stubs = Stubs(tmp_path, monkeypatch)
    names = [m.name for m in _device_mutants()]
    stubs.sweep_kills = dict.fromkeys(names, True)
    first = _run(tmp_path / "first.json")
    for row in first["mutants"]:
        row["case"] = None
        row["tiers"][DIFFERENTIAL]["case"] = None
    (tmp_path / "first.json").write_text(json.dumps(first))
    _edited_kernel(tmp_path, monkeypatch)
    stubs.compiled, stubs.probes = [], []
    second = _run(tmp_path / "second.json", tmp_path / "first.json")
    assert stubs.compiled == [] and sorted(p[:2] for p in stubs.probes) == [(n, DIFFERENTIAL) for n in sorted(names)]
    assert [r["refresh"]["result"] for r in second["mutants"]] == ["by its tier"] * 2
    assert all(r["case"]["case"] for r in second["mutants"]), "the tier's rerun saves a case for the next refresh"


def test_an_unchanged_tree_and_harness_keep_every_outcome_without_a_probe(tmp_path, monkeypatch):
    stubs = Stubs(tmp_path, monkeypatch)
    stubs.sweep_kills = {m.name: True for m in _device_mutants()}
    _run(tmp_path / "first.json")
    stubs.compiled, stubs.probes = [], []
    second = _run(tmp_path / "second.json", tmp_path / "first.json")
    assert stubs.compiled == [] and stubs.probes == []
    assert [(r["verdict"], r["refresh"]["result"]) for r in second["mutants"]] == [("killed", "kept")] * 2


def test_a_refresh_stopped_at_its_budget_goes_on_as_one_refresh_on_the_same_tree(tmp_path, monkeypatch):
    stubs = Stubs(tmp_path, monkeypatch)
    names = [m.name for m in _device_mutants()]
    stubs.sweep_kills = dict.fromkeys(names, True)
    _run(tmp_path / "first.json")
    _edited_kernel(tmp_path, monkeypatch)
    stubs.case_kills = dict.fromkeys(names, True)
    stopped = _run(tmp_path / "stopped.json", tmp_path / "first.json")
    stopped["stopped_at_time_budget"] = True
    stopped["refresh"]["seconds"] = 100.0
    (tmp_path / "stopped.json").write_text(json.dumps(stopped))
    stubs.probes = []
    resumed = _run(tmp_path / "resumed.json", tmp_path / "stopped.json")
    assert stubs.probes == [], "the same tree: what the earlier call decided stands"
    counts = resumed["refresh"]
    assert counts["seed"]["record"] == str(tmp_path / "first.json"), "the refresh began from the record before it"
    assert (counts["calls"], counts["confirmed_by_case"]) == (2, 2)
    assert counts["seconds"] == round(100.0 + counts["call_seconds"], 1)

    again = _run(tmp_path / "again.json", tmp_path / "resumed.json")
    assert again["refresh"]["calls"] == 1 and again["refresh"]["results"] == {"kept": 2}, \
        "a finished record seeds a new refresh"


@pytest.mark.parametrize("same_site, reviewed, want", [
    (True, (), refresh.LISTED), (False, (), refresh.REVIEW), (False, ("x",), refresh.LISTED)])
def test_a_listed_equivalent_whose_site_changed_needs_a_review(same_site, reviewed, want):
    previous = {"mutant": "x", "digest": "d0", "site_sha": "s" if same_site else "old", "verdict": "equivalent"}
    assert refresh.decide(previous, {"mutant": "x", "digest": "d1", "site_sha": "s"}, True, True, reviewed) == want


def test_a_refresh_with_a_listed_equivalent_to_review_fails_naming_it_before_any_probe(tmp_path, monkeypatch):
    stubs = Stubs(tmp_path, monkeypatch)
    listed = next(m for m in generate.generate(KERNEL_DIR) if m.name in equivalents.LISTED)
    seed = {"kind": freshness.RECORD_KIND, "mutants": [{"mutant": listed.name, "digest": "other", "site_sha": "old",
                                                         "verdict": "equivalent"}]}
    (tmp_path / "seed.json").write_text(json.dumps(seed))
    data = generated.run([listed.name], "gpu", 1, tmp_path / "out.json", tmp_path / "seed.json", log=lambda line: None)
    assert data["verdict"] == "FAIL" and not data["complete"] and stubs.compiled == [] and stubs.probes == []
    assert any(f.startswith(f"{listed.name}: listed equivalent, but its site changed") and "--reviewed" in f
               for f in data["failures"])


@pytest.mark.parametrize("previous, want", [
    (None, refresh.FULL),
    ({"digest": "d1", "site_sha": "s", "verdict": "killed", "killed_by": "static"}, refresh.KEPT),
    ({"digest": "d0", "site_sha": "s", "verdict": "killed", "killed_by": "differential"}, refresh.CONFIRM),
    ({"digest": "d0", "site_sha": "other", "verdict": "killed", "killed_by": "differential"}, refresh.FULL),
    ({"digest": "d0", "site_sha": "s", "verdict": "equivalent", "equivalence": refresh.DIGEST_EQUIVALENCE},
     refresh.DIGEST),
    ({"digest": "d0", "site_sha": "s", "verdict": "survived", "killed_by": None}, refresh.FULL),
    ({"digest": "d1", "verdict": "killed", "killed_by": "differential"}, refresh.KEPT),
    ({"digest": "d0", "verdict": "killed", "killed_by": "differential"}, refresh.FULL),
], ids=["new", "unchanged", "detected", "site changed", "equivalent by digest", "survived", "seed without site, same",
        "seed without site, other kernel"])
def test_each_seed_row_gets_its_action(previous, want):
    now = {"mutant": "m", "digest": "d1", "site_sha": "s"}
    assert refresh.decide(previous and {"mutant": "m", **previous}, now, False, True) == want


def test_a_site_is_its_function_and_its_edit_not_the_rest_of_the_file():
    m = _device_mutants()[0]
    text = (KERNEL_DIR / m.target).read_text()
    assert refresh.site_sha(m, text) == refresh.site_sha(m, text + "\n\ndef elsewhere():\n    return 1\n")
    line = text.splitlines(keepends=True)[m.start[0] - 1]
    edited = text.replace(line, line + " " * (len(line) - len(line.lstrip())) + "pass\n", 1)
    assert refresh.site_sha(m, edited) != refresh.site_sha(m, text)


def test_a_kernel_that_fails_a_tier_itself_stops_the_run_before_any_mutant_compiles(tmp_path, monkeypatch):
    """The real kernel runs every tier that calls route before the prefilter: one it fails ends the run, named,
    without a mutant's compile or probe (on a GPU the prefilter alone is minutes)."""
    stubs = Stubs(tmp_path, monkeypatch)
    monkeypatch.setattr(runner, "_pool_run", lambda work, jobs, log: {
        ("real", tier): runner.Outcome(tier, killed=tier == DIFFERENTIAL, evidence=["case 1 mismatches"], seconds=1.0)
        for _, tier, _ in work})
    data = _run(tmp_path / "out.json")
    assert stubs.compiled == [] and stubs.probes == [] and data["verdict"] == "FAIL"
    assert [f for f in data["failures"] if f.startswith("the real kernel fails")] == \
        [f"the real kernel fails the {DIFFERENTIAL} tier: ['case 1 mismatches']"]
