"""The speed check without a GPU: its decision on stated records and figures (faster, slower within the margin,
slower beyond it, a shape not measured, another card, a malformed record), the margin from rounds and its floor
from the spread records (this card's, another card's, none), the spread record made from speed checks' output,
the committed spread record and bench figures decided by the rule (the unchanged kernel's runs pass, the planted
kernel's fail), the gate's part, the planted slower kernel's code and the time-only mutants it is run on."""

import json
import tempfile

import pytest

from common.provenance import REPO_ROOT
from kernel import routing
from properties.bench import planted, results_file, speed_record
from properties.bench.speed_record import FAIL, NOT_CHECKED, PASS, SHAPES, VARIANTS, Outcome
from properties.tools import gate, speed

GPU, OTHER = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
PATH = "properties/results/bench.json"
SPREAD = "properties/results/speed-spread-h100-6583eb8.json"  # the committed spread record of the H100
NONE_LINE = ("floor 0.00%: no spread record (speed-spread-*.json): no floor, the rounds' spread alone)")


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
    assert out.status == PASS and out.record == PATH and len(out.lines) == 1 + len(SHAPES)
    assert out.lines[0] == ("margin 10.00% = max(10.00% from the rounds of properties/results/bench.json "
                            "(speed_check.margin, written before the floor), " + NONE_LINE)
    assert all(line.startswith("ok ") for line in out.lines[1:])
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


@pytest.mark.parametrize("broken, line", [  # the schemas' refusals (jsonschema's words), then the code's
    (lambda r: r[speed_record.SECTION].pop("margin"), "speed_check: 'margin' is a required property"),
    (lambda r: r[speed_record.SECTION].update(margin=-0.1), "speed_check.margin: -0.1 is less than the minimum of 0"),
    (lambda r: r[speed_record.SECTION].update(margin=True), "speed_check.margin: True is not of type 'number'"),
    (lambda r: r[speed_record.SECTION]["reference_us"]["cute"].update({"2": 0}),
     "speed_check.reference_us.cute.2: 0 is less than or equal to the minimum of 0"),
    (lambda r: r[speed_record.SECTION].pop("reference_us"), "speed_check: 'reference_us' is a required property"),
    (lambda r: r.update({speed_record.SECTION: {"error": "speed round 1 of 5 exited 1"}}),
     "speed_check: 'margin' is a required property"),
    (lambda r: r.update({speed_record.SECTION: [1]}), "speed_check: [1] is not of type 'object'"),
    (lambda r: r["provenance"].pop("gpu"), "provenance: 'gpu' is a required property"),
    (lambda r: r["provenance"].pop("date"), "provenance: 'date' is a required property"),
    (lambda r: r["provenance"].update(gpu=None), "provenance.gpu: None is not of type 'string'"),
    (lambda r: r.pop("provenance"), "(the record itself): 'provenance' is a required property"),
    (lambda r: r[speed_record.SECTION].update(margin=float("nan")), "speed_check.margin: must be a finite number, "
                                                                     "got nan"),
    (lambda r: r[speed_record.SECTION].update(rounds_margin=float("inf")),
     "speed_check.rounds_margin: must be a finite number, got inf"),
    (lambda r: r[speed_record.SECTION]["reference_us"]["cute_meta"].pop("4"),
     "speed_check.reference_us.cute_meta.4: must be a finite number, got None"),
])
def test_a_malformed_record_fails_in_one_line_naming_the_file_and_the_field(broken, line):
    made = record()
    broken(made)
    assert speed_record.decide([(PATH, made)], GPU, never_measured) == Outcome(FAIL, (f"{PATH}: {line}",))


def test_an_unreadable_file_is_a_malformed_record(tmp_path):
    bad = tmp_path / "bench-x.json"
    bad.write_text("not JSON")
    out = speed_record.decide(speed_record.read_records([bad]), GPU, never_measured)
    assert out.status == FAIL and out.lines == (f"{bad}: (the record itself): 'unreadable: Expecting value: line 1 "
                                                "column 1 (char 0)' is not of type 'object'",)


def test_the_newest_record_of_the_card_counts():
    old = record(date="2026-01-01T00:00:00Z", reference=figures(2.0))
    new = record(date="2026-12-01T00:00:00Z", reference=figures(1.0))
    out = speed_record.decide([("new.json", new), ("old.json", old), ("h200.json", record(gpu=OTHER))], GPU,
                              lambda: figures(1.5))
    assert out.status == FAIL and out.record == "new.json"


# ---------------------------------------------------------------------------------------------- the margin

def spread_record(gpu=GPU, date="2026-12-07T00:00:00Z", meta_3=(1.0, 1.1, 1.05), other=1.0):
    """A spread record of 3 processes, every shape at ``other`` µs in each but cute_meta b=3 at ``meta_3``."""
    table = figures(other)
    per_process = {n: {b: [v] * 3 for b, v in row.items()} for n, row in table.items()}
    per_process["cute_meta"]["3"] = list(meta_3)
    relative = (max(meta_3) - min(meta_3)) / sorted(meta_3)[1]
    return {"schema": speed_record.SPREAD_SCHEMA, "provenance": {"gpu": gpu, "date": date},
            "processes": [{"source": f"p{i}", "kind": speed_record.SPEED_CHECK} for i in range(3)],
            "figures_us": per_process, "widest": {"relative": relative, "shape": "cute_meta b=3"}}


WIDE = (1.1 - 1.0) / 1.05  # spread_record()'s widest spread, cute_meta b=3, as float64 computes it


def test_the_section_takes_the_median_as_reference_and_twice_the_widest_spread_as_margin_without_a_floor():
    rounds = [figures(1.0, cute_meta_3=1.6), figures(1.02, cute_meta_3=1.7), figures(1.01, cute_meta_3=1.65)]
    made = speed_record.section(rounds, "stated")
    assert made["reference_us"]["cute"]["1"] == 1.01 and made["reference_us"]["cute_meta"]["3"] == 1.65
    widest = (1.7 - 1.6) / 1.65  # (max - min) / median of cute_meta b=3, as float64 computes it
    assert made["spread"] == {"relative": widest, "shape": "cute_meta b=3"}
    assert made["rounds_margin"] == made["margin"] == 2 * widest and made["rounds"] == 3
    assert made["floor"] == {"margin": 0.0, "spread": None, "shape": None, "record": None, "gpu": None,
                             "why": "no spread record (speed-spread-*.json): no floor, the rounds' spread alone"}
    assert made["rounds_us"]["cute_meta"]["3"] == [1.6, 1.7, 1.65]
    reference, margin = speed_record.reference_and_margin({speed_record.SECTION: made}, PATH)
    assert reference["cute_meta", 3] == 1.65 and margin.value == made["margin"] == margin.rounds
    assert margin.rounds_from == "speed_check.rounds_margin"


def test_the_floor_is_twice_the_widest_spread_of_this_cards_newest_spread_record():
    old = spread_record(date="2026-01-01T00:00:00Z", meta_3=(1.0, 1.5, 1.2))
    other = spread_record(gpu=OTHER, meta_3=(1.0, 2.0, 1.5))
    floor = speed_record.floor_of([("old.json", old), ("new.json", spread_record()), ("h200.json", other)], GPU)
    assert (floor.margin, floor.relative, floor.shape, floor.record, floor.gpu) == (2 * WIDE, WIDE, "cute_meta b=3",
                                                                                   "new.json", GPU)
    assert floor.why == ("2 x the widest process-to-process spread 9.52% (cute_meta b=3) in new.json, this GPU "
                         "model's newest spread record")


def test_a_card_without_a_spread_record_takes_the_widest_of_any_cards_and_says_so():
    narrow = spread_record(gpu="NVIDIA B200", meta_3=(1.0, 1.01, 1.005))
    floor = speed_record.floor_of([("b200.json", narrow), ("h100.json", spread_record())], OTHER)
    assert (floor.margin, floor.record, floor.gpu) == (2 * WIDE, "h100.json", GPU)
    assert floor.why == ("no spread record names NVIDIA H200, so 2 x the widest process-to-process spread of any "
                         "card's: 9.52% (cute_meta b=3) in h100.json, made on NVIDIA H100 80GB HBM3 (this card's "
                         "spread between processes is not measured)")
    assert speed_record.floor_of([], GPU) == speed_record.NO_FLOOR and speed_record.NO_FLOOR.margin == 0.0


def test_the_margin_is_the_larger_of_the_rounds_part_and_the_floor_each_stated():
    rounds = [figures(1.0), figures(1.01)]
    rounds_part = 2 * (1.01 - 1.0) / 1.005
    floor = speed_record.floor_of([("s.json", spread_record())], GPU)
    made = speed_record.section(rounds, "stated", floor)
    assert (made["rounds_margin"], made["margin"]) == (rounds_part, 2 * WIDE)
    assert made["floor"] == {"margin": 2 * WIDE, "spread": WIDE, "shape": "cute_meta b=3", "record": "s.json",
                             "gpu": GPU, "why": floor.why}
    assert made["how"] == ("margin = max(2 x the widest relative spread ((max - min) / median) of any shape's figures "
                           "over 2 rounds, each a process of its own on this card, idle otherwise; the floor: "
                           + floor.why + ")")
    # the check takes the floor of the spread records at hand, the rounds' part from the record
    held = {"provenance": {"gpu": GPU, "date": "2026-12-08T00:00:00Z"}, speed_record.SECTION: made}
    narrow = spread_record(meta_3=(1.0, 1.001, 1.0005))
    out = speed_record.decide([(PATH, held)], GPU, lambda: figures(1.0), [("n.json", narrow)])
    narrow_floor = 2 * (1.001 - 1.0) / 1.0005
    assert out.margin.value == rounds_part > narrow_floor == out.margin.floor.margin
    assert out.lines[0] == (f"margin 1.99% = max(1.99% from the rounds of {PATH} (speed_check.rounds_margin), floor "
                            "0.20%: 2 x the widest process-to-process spread 0.10% (cute_meta b=3) in n.json, this "
                            "GPU model's newest spread record)")
    slower = speed_record.decide([(PATH, held)], GPU, lambda: figures(1.0, cute_3=1.15),
                                 [("s.json", spread_record())])
    assert slower.status == PASS and slower.margin.value == 2 * WIDE  # +14.4 % is within 19.05 %
    assert "ok cute b=3: 1.150 µs now, 1.005 µs in properties/results/bench.json (+14.4%; margin 19.0%)" \
        in slower.lines
    assert speed_record.decide([(PATH, held)], GPU, lambda: figures(1.0, cute_3=1.15)).status == FAIL


@pytest.mark.parametrize("broken, line", [  # the schema's refusals (jsonschema's words), then the code's
    (lambda r: r.update(schema="kernel.bench/1"), "schema: 'kernel.speed-spread/1' was expected"),
    (lambda r: r["provenance"].pop("gpu"), "provenance: 'gpu' is a required property"),
    (lambda r: r["provenance"].pop("date"), "provenance: 'date' is a required property"),
    (lambda r: r.update(processes=[{}]), "processes: [{}] is too short"),
    (lambda r: r["figures_us"]["cute"]["2"].__setitem__(0, -1.0),
     "figures_us.cute.2.0: -1.0 is less than or equal to the minimum of 0"),
    (lambda r: r["figures_us"]["cute"].update({"2": 1.0}), "figures_us.cute.2: 1.0 is not of type 'array'"),
    (lambda r: r["widest"].update(relative=-0.1), "widest.relative: -0.1 is less than the minimum of 0"),
    (lambda r: r.pop("widest"), "(the record itself): 'widest' is a required property"),
    (lambda r: r["figures_us"]["cute"].pop("1"), "figures_us.cute.1: must list 3 times in µs, one per process, got "
                                                 "None"),
    (lambda r: r["figures_us"]["cute_meta"]["8"].append(1.0),
     "figures_us.cute_meta.8: must list 3 times in µs, one per process, got [1.0, 1.0, 1.0, 1.0]"),
    (lambda r: r["figures_us"]["cute"]["2"].__setitem__(1, float("nan")),
     "figures_us.cute.2.1: must be a finite number, got nan"),
    (lambda r: r["widest"].update(relative=0.01),  # not what its figures give
     f"widest: {{'relative': 0.01, 'shape': 'cute_meta b=3'}} is not the widest spread of figures_us (cute_meta b=3, "
     f"{WIDE!r})"),
    (lambda r: r["widest"].update(shape="cute b=1"),
     f"widest: {{'relative': {WIDE!r}, 'shape': 'cute b=1'}} is not the widest spread of figures_us (cute_meta b=3, "
     f"{WIDE!r})"),
])
def test_a_malformed_spread_record_fails_the_check_in_one_line_naming_the_file_and_the_field(broken, line):
    made = spread_record()
    broken(made)
    out = speed_record.decide([(PATH, record())], GPU, never_measured, [("s.json", made)])
    assert out == Outcome(FAIL, (f"s.json: {line}",))


def test_a_record_without_its_rounds_part_field_takes_its_margin_as_the_rounds_part():
    made = record(margin=0.02)
    made[speed_record.SECTION]["rounds_margin"] = "x"
    out = speed_record.decide([(PATH, made)], GPU, never_measured)
    assert out.status == FAIL and out.lines == (f"{PATH}: speed_check.rounds_margin: 'x' is not of type 'number'",)
    _, margin = speed_record.reference_and_margin(record(margin=0.02), PATH, speed_record.NO_FLOOR)
    assert (margin.value, margin.rounds, margin.rounds_from) == (0.02, 0.02, "speed_check.margin, written before "
                                                                             "the floor")


# ---------------------------------------------------------------------------------------------- the spread record

def log(now, then=1.0, gpu=GPU, kernel="kernel", record_path="/root/out/bench.json"):
    """A speed check's printed output: every shape at ``now`` µs against ``then`` µs."""
    lines = [f"  {'ok' if now <= then else 'FAIL'} {n} b={b}: {now:.3f} µs now, {then:.3f} µs in {record_path} "
             f"({now / then - 1:+.1%}; margin 0.5%)" for n, b in SHAPES]
    return "\n".join(lines + [f"speed check: PASS ({gpu}, {kernel})"]) + "\n"


def bench_record(rounds):
    made = speed_record.section(rounds, "the fastest replay")
    return {"provenance": {"gpu": GPU, "commit": "abc", "date": "2026-12-07T00:00:00Z", "driver": "580",
                           "torch": "x"}, speed_record.SECTION: made}


def test_the_spread_record_holds_every_process_figure_and_the_widest_spread():
    bench = bench_record([figures(1.0), figures(1.002)])
    made = speed_record.spread_record(bench, "b.json", [("a.log", log(1.004, 1.001)), ("c.log", log(0.99, 1.001))],
                                      ("p.log", log(2.5, 1.001, kernel="properties/bench/planted.py")), "cmd")
    assert made["provenance"] == {"gpu": GPU, "commit": "abc", "date": "2026-12-07T00:00:00Z", "driver": "580",
                                  "bench_record": "b.json", "logs": ["a.log", "c.log"], "planted_log": "p.log"}
    assert made["processes"] == [{"source": "b.json speed_check.rounds_us[0]", "kind": "bench round"},
                                 {"source": "b.json speed_check.rounds_us[1]", "kind": "bench round"},
                                 {"source": "a.log", "kind": "speed check"}, {"source": "c.log", "kind": "speed check"}]
    assert made["figures_us"]["cute_meta"]["5"] == [1.0, 1.002, 1.004, 0.99]
    relative = (1.004 - 0.99) / ((1.0 + 1.002) / 2)  # (max - min) / median, as float64 computes it
    assert made["spread"]["cute"]["1"] == relative and made["widest"] == {"relative": relative, "shape": "cute b=1"}
    assert made["planted"] == {"log": "p.log", "kernel": "properties/bench/planted.py", "figures_us": figures(2.5)}
    assert made["made_by"] == "cmd" and made["schema"] == speed_record.SPREAD_SCHEMA
    assert speed_record.read_spread(json.loads(json.dumps(made)), "s.json") == (GPU, "2026-12-07T00:00:00Z",
                                                                                 relative, "cute b=1")


@pytest.mark.parametrize("text, problem", [
    (log(1.0, 1.001, gpu=OTHER), "checked kernel on NVIDIA H200"),
    (log(1.0, 1.001, kernel="planted.py"), "checked planted.py on"),
    (log(1.0, 1.2), "cute b=1 was checked against 1.200 µs, not b.json's reference 1.001 µs"),
    (log(1.0, 1.001).replace("  ok cute_meta b=4:", "  ok other b=4:"), "no figure of cute_meta b=4"),
    (log(1.0, 1.001).rsplit("speed check:", 1)[0], "no last line"),
    (log(1.0, 1.001).replace("cute b=2:", "cute b=1:"), "cute b=1 is printed twice"),
])
def test_a_log_of_another_card_kernel_or_record_or_cut_short_is_refused_naming_it(text, problem):
    bench = bench_record([figures(1.0), figures(1.002)])
    with pytest.raises(ValueError, match="^x.log: .*" + problem.replace("(", r"\(").replace(".", r"\.")):
        speed_record.spread_record(bench, "b.json", [("x.log", text)])


def test_the_committed_spread_record_is_the_h100_logs_and_gives_the_h100_its_floor():
    """The figures measured on an H100 at 6583eb8: the bench's 2 rounds and 5 later speed checks of the unchanged
    kernel against that bench record (its margin 0.54 % from the 2 rounds); the widest spread between processes,
    cute_meta b=3, is 4.97 % (1.601 to 1.684 µs, median 1.670), so the H100's floor is 9.95 %."""
    (path, spread), = speed_record.read_records([REPO_ROOT / SPREAD])
    assert path == SPREAD and speed_record.spread_paths() == [REPO_ROOT / SPREAD]
    assert [p["kind"] for p in spread["processes"]] == [speed_record.BENCH_ROUND] * 2 + [speed_record.SPEED_CHECK] * 5
    assert spread["provenance"]["logs"] == ["bench/speed.log"] + [f"speed/speed{i}.log" for i in range(1, 5)]
    assert spread["figures_us"]["cute_meta"]["3"][2:] == [1.67, 1.671, 1.605, 1.601, 1.603]
    row = spread["figures_us"]["cute_meta"]["3"]  # the rounds' figures unrounded, the logs' as printed
    assert spread["widest"] == {"relative": (max(row) - min(row)) / sorted(row)[3], "shape": "cute_meta b=3"}
    assert f"{max(row):.3f} {min(row):.3f} {sorted(row)[3]:.3f} {spread['widest']['relative']:.2%}" == \
        "1.684 1.601 1.670 4.97%"
    floor = speed_record.floor_of([(path, spread)], GPU)
    assert floor.margin == 2 * spread["widest"]["relative"] and f"{floor.margin:.2%}" == "9.95%"
    assert floor.record == SPREAD and floor.gpu == GPU
    assert speed_record.floor_of([(path, spread)], OTHER).margin == floor.margin  # no H200 record: the widest known


def _process(spread, i):
    return {n: {b: row[i] for b, row in table.items()} for n, table in spread["figures_us"].items()}


def test_the_rule_passes_the_unchanged_kernels_logged_runs_and_fails_the_planted_kernel_on_every_shape():
    """The bench record of the H100 at 6583eb8 made again from its 2 rounds (the spread record keeps them), with the
    floor of the committed spread record: each of the 5 later speed checks of the unchanged kernel passes (it
    failed every one of them with the rounds' 0.54 % alone), and the planted slower kernel's figures fail on every
    shape."""
    (path, spread), = speed_record.read_records([REPO_ROOT / SPREAD])
    processes = [_process(spread, i) for i in range(len(spread["processes"]))]
    rounds = [p for p, what in zip(processes, spread["processes"]) if what["kind"] == speed_record.BENCH_ROUND]
    checks = [p for p, what in zip(processes, spread["processes"]) if what["kind"] == speed_record.SPEED_CHECK]
    floor = speed_record.floor_of([(path, spread)], GPU)
    made = speed_record.section(rounds, spread["method"], floor)
    assert f"{made['rounds_margin']:.2%}" == "0.54%" and made["margin"] == floor.margin
    bench = {"provenance": {"gpu": GPU, "date": spread["provenance"]["date"]}, speed_record.SECTION: made}
    old = {"provenance": bench["provenance"], speed_record.SECTION: {**made, "margin": made["rounds_margin"]}}
    del old[speed_record.SECTION]["rounds_margin"]  # the section as make bench wrote it before the floor
    for figures_now in checks:
        for held in (bench, old):
            out = speed_record.decide([("bench.json", held)], GPU, lambda: figures_now, [(path, spread)])
            assert out.status == PASS and out.margin.value == floor.margin, "\n".join(out.lines)
        assert speed_record.decide([("bench.json", old)], GPU, lambda: figures_now).status == FAIL  # rounds alone
    planted_out = speed_record.decide([("bench.json", bench)], GPU, lambda: spread["planted"]["figures_us"],
                                      [(path, spread)])
    assert planted_out.status == FAIL and all(line.startswith("FAIL ") for line in planted_out.lines[1:])
    assert len(planted_out.lines) == 1 + len(SHAPES)


def test_a_section_needs_two_rounds_and_every_figure():
    with pytest.raises(ValueError, match="at least 2 rounds"):
        speed_record.section([figures()], "stated")
    missing = figures()
    missing["cute"]["7"] = {"error": "x"}
    with pytest.raises(ValueError, match="cute b=7"):
        speed_record.section([figures(), missing], "stated")


@pytest.mark.parametrize("gpu", ("NVIDIA H100 80GB HBM3", "a card with no spread record"))
def test_the_readme_states_the_margin_the_check_uses(gpu):
    """The rounds' part (2 x 0.995% here) and the floor of the committed spread records, the larger the margin."""
    made = speed_record.section([figures(1.0), figures(1.01)], "the fastest replay")
    lines = results_file.speed_lines({speed_record.SECTION: made, "provenance": {"gpu": gpu}})
    committed = speed_record.spread_paths()
    assert len(committed) == 1, "one spread record is committed: this card's newest and the widest of any card's"
    widest = json.loads(committed[0].read_text())["widest"]["relative"]
    floor = 2 * widest
    rounds = 2 * (1.01 - 1.0) / 1.005  # 2 x (max - min) / median of the two rounds
    assert f"margin {max(floor, rounds):.2%} = max({rounds:.2%} from the rounds of this record" in lines[1]
    mine = f"2 x the widest process-to-process spread {widest:.2%}" if gpu.startswith("NVIDIA") else \
        f"no spread record names {gpu}"
    assert f"floor {floor:.2%}: {mine}" in lines[1]
    assert "the fastest replay" in lines[1] and results_file.speed_lines({}) == []


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
