"""The speed check without a GPU: its decision on stated records and figures (faster, slower within the margin,
slower beyond it, a shape not measured, another card, a malformed record), the margin from rounds, the gate's
part, the planted slower kernel's code and the time-only mutants it is run on."""

import tempfile

import pytest

from kernel import routing
from properties.bench import planted, results_file, speed_record
from properties.bench.speed_record import FAIL, NOT_CHECKED, PASS, SHAPES, VARIANTS
from properties.tools import gate, speed

GPU, OTHER = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
PATH = "properties/results/bench.json"


def figures(us=1.0, **changed):
    """{name: {b: µs}} of every shape at ``us``, with ``changed`` ("cute_meta_3": µs) instead."""
    return {n: {str(b): changed.get(f"{n}_{b}", us) for m, b in SHAPES if m == n} for n in VARIANTS}


def record(gpu=GPU, date="2026-12-06T00:00:00Z", margin=0.1, reference=None):
    reference = reference or figures(1.0)
    return {"provenance": {"gpu": gpu, "date": date},
            speed_record.SECTION: {"margin": margin, "reference_us": reference}}


def never_measured():
    raise AssertionError("measured although the outcome was decided without a measurement")


# ---------------------------------------------------------------------------------------------- the decision

def test_faster_and_slower_within_the_margin_pass_with_a_line_per_shape():
    out = speed_record.decide([(PATH, record())], GPU, lambda: figures(0.9, cute_meta_3=1.09))
    assert out.status == PASS and out.record == PATH and len(out.lines) == len(SHAPES)
    assert all(line.startswith("ok ") for line in out.lines)
    assert "ok cute_meta b=3: 1.090 µs now, 1.000 µs in properties/results/bench.json (+9.0%; margin 10.0%)" \
        in out.lines


def test_a_shape_slower_beyond_the_margin_fails_naming_it_and_both_figures():
    out = speed_record.decide([(PATH, record())], GPU, lambda: figures(1.0, cute_5=1.25))
    assert out.status == FAIL
    assert [line for line in out.lines if line.startswith("FAIL")] == [
        "FAIL cute b=5: 1.250 µs now, 1.000 µs in properties/results/bench.json (+25.0%; margin 10.0%)"]


def test_a_shape_not_measured_fails_naming_it():
    measured = figures(1.0)
    measured["cute_meta"]["8"] = {"error": "RuntimeError: boom"}
    del measured["cute"]["1"]
    out = speed_record.decide([(PATH, record())], GPU, lambda: measured)
    assert out.status == FAIL
    failed = [line for line in out.lines if line.startswith("FAIL")]
    assert len(failed) == 2 and failed[0].startswith("FAIL cute b=1: not measured")
    assert failed[1].startswith("FAIL cute_meta b=8: not measured")


def test_another_card_is_named_and_not_checked():
    out = speed_record.decide([(PATH, record(gpu=OTHER)), ("old.json", {"provenance": {"gpu": GPU}})], GPU,
                              never_measured)
    assert out.status == NOT_CHECKED and out.record is None
    assert GPU in out.lines[0] and "not checked" in out.lines[0] and PATH in out.lines[0]


@pytest.mark.parametrize("broken, field", [
    (lambda r: r[speed_record.SECTION].pop("margin"), "speed_check.margin"),
    (lambda r: r[speed_record.SECTION].update(margin=-0.1), "speed_check.margin"),
    (lambda r: r[speed_record.SECTION].update(margin=float("nan")), "speed_check.margin"),
    (lambda r: r[speed_record.SECTION]["reference_us"]["cute_meta"].pop("4"), "speed_check.reference_us.cute_meta.4"),
    (lambda r: r[speed_record.SECTION]["reference_us"]["cute"].update({"2": 0}), "speed_check.reference_us.cute.2"),
    (lambda r: r[speed_record.SECTION].pop("reference_us"), "speed_check.reference_us"),
    (lambda r: r.update({speed_record.SECTION: {"error": "speed round 1 of 5 exited 1"}}), "speed_check.margin"),
    (lambda r: r.update({speed_record.SECTION: [1]}), "speed_check"),
    (lambda r: r["provenance"].pop("gpu"), "provenance.gpu"),
    (lambda r: r["provenance"].pop("date"), "provenance.date"),
])
def test_a_malformed_record_fails_in_one_line_naming_the_file_and_the_field(broken, field):
    made = record()
    broken(made)
    out = speed_record.decide([(PATH, made)], GPU, never_measured)
    assert out.status == FAIL and len(out.lines) == 1
    assert out.lines[0].startswith(f"{PATH}: field {field}: ") and "\n" not in out.lines[0]


def test_an_unreadable_file_is_a_malformed_record(tmp_path):
    bad = tmp_path / "bench-x.json"
    bad.write_text("not JSON")
    out = speed_record.decide(speed.read_records([bad]), GPU, never_measured)
    assert out.status == FAIL and out.lines[0].startswith(f"{bad}: field (top level): ")


def test_the_newest_record_of_the_card_counts():
    old = record(date="2026-01-01T00:00:00Z", reference=figures(2.0))
    new = record(date="2026-12-01T00:00:00Z", reference=figures(1.0))
    out = speed_record.decide([("new.json", new), ("old.json", old), ("h200.json", record(gpu=OTHER))], GPU,
                              lambda: figures(1.5))
    assert out.status == FAIL and out.record == "new.json"


# ---------------------------------------------------------------------------------------------- the margin

def test_the_section_takes_the_median_as_reference_and_twice_the_widest_spread_as_margin():
    rounds = [figures(1.0, cute_meta_3=1.6), figures(1.02, cute_meta_3=1.7), figures(1.01, cute_meta_3=1.65)]
    made = speed_record.section(rounds, "stated")
    assert made["reference_us"]["cute"]["1"] == 1.01 and made["reference_us"]["cute_meta"]["3"] == 1.65
    widest = (1.7 - 1.6) / 1.65  # (max - min) / median of cute_meta b=3, as float64 computes it
    assert made["spread"] == {"relative": widest, "shape": "cute_meta b=3"}
    assert made["margin"] == speed_record.MARGIN_FACTOR * widest and made["rounds"] == 3
    assert made["rounds_us"]["cute_meta"]["3"] == [1.6, 1.7, 1.65]
    reference, margin = speed_record.reference_and_margin({speed_record.SECTION: made}, PATH)
    assert reference["cute_meta", 3] == 1.65 and margin == made["margin"]


def test_a_section_needs_two_rounds_and_every_figure():
    with pytest.raises(ValueError, match="at least 2 rounds"):
        speed_record.section([figures()], "stated")
    missing = figures()
    missing["cute"]["7"] = {"error": "x"}
    with pytest.raises(ValueError, match="cute b=7"):
        speed_record.section([figures(), missing], "stated")


def test_the_readme_states_the_margin_of_a_record_that_has_one():
    made = speed_record.section([figures(1.0), figures(1.01)], "the fastest replay")
    lines = results_file.speed_lines({speed_record.SECTION: made})
    assert "2.0%" in lines[1] and "the fastest replay" in lines[1]
    assert results_file.speed_lines({}) == []


# ---------------------------------------------------------------------------------------------- the gate's part

def test_the_gate_fails_on_a_slower_shape_and_names_a_card_without_a_record():
    failed = {"ran": True, "failed": True, "why": "FAIL cute b=5: 1.250 µs now", "seconds": 1.0, "lines": []}
    named = {"ran": False, "failed": False, "why": "not run: no bench record names X", "seconds": 1.0, "lines": []}
    summary = {"groups": {"x": {"passed": 1, "failed": 0, "skipped": 0}}, "ran": 1, "unnamed_skips": [],
               "gpu_checks_not_run": 0, "gpu_checks_passed": 1}
    built = {"ran": True, "failed": False, "why": "", "seconds": 0.0}
    assert gate.verdict(0, summary, built, {}, False, speed=failed) == ["speed check: FAIL cute b=5: 1.250 µs now"]
    assert gate.verdict(0, summary, built, {}, False, speed=named) == []
    assert "not run: no bench record names X" in gate.table(None, built, {}, speed=named)


def test_the_gates_part_without_a_gpu_is_not_run_and_not_failed():
    part = gate.check_speed("no CUDA device on this machine", None)
    assert part["ran"] is False and part["failed"] is False and "no CUDA device" in part["why"]


# ---------------------------------------------------------------------------------------------- what it runs on

def test_the_planted_kernel_is_the_kernel_with_a_spin_in_every_variant():
    """Compiled for sm_90a without a GPU: each variant route launches spins (reads %clock), the kernel does not."""
    for metadata, tokens in routing.KERNELS:
        options = f"--keep-ptx --dump-dir={tempfile.mkdtemp()} --gpu-arch=sm_90a"
        slowed = routing.compile_variant(planted.Slowed(metadata, True, tokens), options).__ptx__
        options = f"--keep-ptx --dump-dir={tempfile.mkdtemp()} --gpu-arch=sm_90a"
        real = routing.compile_variant(routing.Routing(metadata, True, tokens), options).__ptx__
        assert "%clock" in slowed and "%clock" not in real, (metadata, tokens)
        assert slowed.count("griddepcontrol") == real.count("griddepcontrol") == 2


def test_the_time_only_mutants_are_routing_edits_listed_equivalent_for_their_time():
    chosen = speed.time_only_mutants()
    reasons = speed.time_only()
    assert len(chosen) >= 15 and all(why in reasons for _, why in chosen)
    assert all(m.target == "routing.py" for m, _ in chosen)
    assert {why for _, why in chosen} == set(reasons)  # every reason names a mutant
    first = chosen[0][0].name
    assert [m.name for m, _ in speed.time_only_mutants([first])] == [first]
    with pytest.raises(ValueError, match="no_such"):
        speed.time_only_mutants(["routing.no_such"])
