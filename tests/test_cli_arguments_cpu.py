"""Every command line refuses a bad argument the same way, before any work: exit 2, exactly one line on stderr
naming the argument, no traceback, no usage dump, nothing written (issue 20, item 2).

One table of bad arguments drives every CLI (the gate has its own: tests/test_gate_cpu.py). Most rows call the
command's ``main(argv)`` in this process (argparse and the checks after it run exactly as under ``python -m``);
the rows marked PROCESS run as ``python -m MODULE ...`` from the repository root with CUDA hidden, one or more
per command (a command whose refusal depends on the machine, such as a GPU command on a CPU, runs only so: in
this process a GPU would let it start its work)."""

import concurrent.futures
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.provenance import REPO_ROOT

CASE = REPO_ROOT / "corpora" / "regression" / "all_equal-000.json"
ROUTING = REPO_ROOT / "kernel" / "routing.py"  # a variant that is the kernel itself
BENCH = REPO_ROOT / "properties" / "results" / "bench.json"  # a bench record with the speed check's rounds
PROCESS_TIMEOUT_S = 120
PROCESS_JOBS = 4
# The function a command line runs: ``python -m MODULE`` is ``MAIN[MODULE](argv)``.
MAIN = {
    "properties.replay": "properties.replay:main",
    "properties.view": "properties.view:main",
    "properties.report": "properties.report.__main__:main",
    "properties.soak": "properties.soak.__main__:main",
    "properties.soak.table": "properties.soak.table:main",
    "properties.report.records": "properties.report.records:main",
    "properties.report.summary": "properties.report.summary:main",
    "properties.tools.depths": "properties.tools.depths:main",
    "properties.bench": "properties.bench.cli:main",
    "properties.bench.breakdown": "properties.bench.breakdown:main",
    "properties.bench.variants": "properties.bench.variants:main",
    "properties.bench.speed": "properties.bench.speed:main",
    "properties.tools.speed": "properties.tools.speed:main",
    "properties.mutants": "properties.mutants.__main__:main",
    "properties.mutants.harness_run": "properties.mutants.harness_run:main",
    "properties.corpus": "properties.corpus:main",
    "properties.tools.smoke": "properties.tools.smoke:main",
    "properties.tools.bundle": "properties.tools.bundle:main",
    "oracles.mufu": "oracles.mufu.__main__:main",
    "oracles.numpy_model.bench": "oracles.numpy_model.bench:main",
    "oracles.flashinfer_routing": "oracles.flashinfer_routing.build:main",
}
PROCESS = "process"
SOAK_CPU = ("--device", "cpu", "--no-progress")

# (module, argv with {F} for the fixture folder, what the one line must contain[, PROCESS])
ROWS = [
    # ---- replay
    ("properties.replay", [], "cases", PROCESS),
    ("properties.replay", ["--bogus", str(CASE)], "--bogus"),
    ("properties.replay", ["{F}/missing.json"], "missing.json"),
    ("properties.replay", ["{F}/not-json.json"], "not-json.json"),
    ("properties.replay", ["{F}/empty"], "empty"),
    ("properties.replay", [str(CASE), "--impl", "garbage"], "--impl"),
    ("properties.replay", [str(CASE), "--impl", "bad=module_without_attr"], "--impl"),
    ("properties.replay", [str(CASE), "--impl"], "--impl"),
    ("properties.replay", ["--impl", str(CASE)], "--impl"),
    # ---- a case as a page, the report page: their pages and figure folders checked before the work
    ("properties.view", [str(CASE), "--out", "{F}/file.txt/p.html"], "--out", PROCESS),
    ("properties.view", [str(CASE), "--out", "/dev/full/p.html"], "--out"),
    ("properties.report", ["--out", "{F}/file.txt/p.html"], "--out", PROCESS),
    ("properties.report", ["--reports", "{F}/file.txt/r"], "--reports"),
    # ---- soak's rate table
    ("properties.soak.table", ["--bogus"], "--bogus", PROCESS),
    ("properties.soak.table", ["--update-readme", "extra"], "extra"),
    # ---- the results index
    ("properties.report.records", ["--bogus"], "--bogus", PROCESS),
    ("properties.report.records", ["--update-readme", "extra"], "extra"),
    # ---- the gate's job summary
    ("properties.report.summary", ["--bogus"], "--bogus", PROCESS),
    ("properties.report.summary", ["{F}/missing.json"], "missing.json"),
    ("properties.report.summary", ["{F}/not-json.json"], "not-json.json"),
    ("properties.report.summary", ["{F}/object.json"], "verdict"),
    # ---- the deep tests' table
    ("properties.tools.depths", ["--bogus"], "--bogus", PROCESS),
    # ---- soak
    ("properties.soak", [*SOAK_CPU, "--rows", "0"], "--rows", PROCESS),
    ("properties.soak", [*SOAK_CPU, "--rows", "-5"], "--rows"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--depth", "0"], "--depth"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--depth", "17"], "--depth"),
    ("properties.soak", [*SOAK_CPU, "--rows", "1.5"], "--rows"),
    ("properties.soak", [*SOAK_CPU, "--rows", "many"], "--rows"),
    ("properties.soak", [*SOAK_CPU, "--rows", "nan"], "--rows"),
    ("properties.soak", [*SOAK_CPU, "--seconds", "-1"], "--seconds"),
    ("properties.soak", [*SOAK_CPU, "--seconds", "nan"], "--seconds"),
    ("properties.soak", [*SOAK_CPU, "--seconds", "inf"], "--seconds"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--crosscheck", "-1"], "--crosscheck"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--seed", "-1"], "--seed"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--seed", "2e3"], "--seed"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--offset", "-3"], "--offset"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--b", "0"], "--b"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--b", "9"], "--b"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--tile", "0"], "--tile"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--tile", "257"], "--tile"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--problems", "0"], "--problems"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--plan-batches", "0"], "--plan-batches"),
    ("properties.soak", [*SOAK_CPU, "--bench", "--bench-batches", "0"], "--bench-batches"),
    ("properties.soak", [*SOAK_CPU, "--bench", "--impl", "model"], "--bench"),
    ("properties.soak", ["--no-progress", "--rows", "10", "--device", "gpu0"], "--device"),
    ("properties.soak", ["--no-progress", "--rows", "10", "--impl", "model", "--device", "cuda:3"], "--device", PROCESS),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--checkpoint-seconds", "0"],
     "--checkpoint-seconds"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--backend", "mpi"], "--backend"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "nope"], "--impl"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl"], "--impl"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "triton"], "triton"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--fault", "nope"], "--fault"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--families", "nope"], "--families"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--metadata", "sometimes"], "--metadata"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--out", "{F}/folder"], "--out"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--out", "{F}/file.txt/s.json"],
     "--out"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--failures-dir", "{F}/file.txt"],
     "--failures-dir"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--out", "/dev/full"], "--out"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--out", "{F}/fifo"], "--out"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--failures-dir", "/dev/full"],
     "--failures-dir"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--fault", "writes_the_guard", "--metadata", "off"],
     "--metadata", PROCESS),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--fault", "ties_to_highest_index", "--families", "plain"],
     "--families"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--resume", "{F}/list.json"], "--resume"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--resume", "{F}/not-json.json"], "--resume"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--resume", "{F}/object.json"], "--resume"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--resume", "{F}/folder"], "--resume"),
    ("properties.soak", [*SOAK_CPU], "--rows"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10"], "--impl"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "cute"], "--impl"),
    ("properties.soak", [*SOAK_CPU, "--rows", "10", "--impl", "model", "--crosscheck", "0"], "--crosscheck"),
    # ---- bench
    ("properties.bench", ["--readme-table", "{F}/missing.json"], "--readme-table", PROCESS),
    ("properties.bench", ["--readme-table", "{F}/not-json.json"], "--readme-table"),
    ("properties.bench", ["--readme-table", "{F}/list.json"], "--readme-table"),
    ("properties.bench", ["--readme-table", "{F}/object.json"], "--readme-table"),
    ("properties.bench", ["--readme-table", "{F}/folder"], "--readme-table"),
    ("properties.bench", ["--update-readme"], "--update-readme"),
    ("properties.bench", ["--time-verify", "--readme-table", "{F}/object.json"], "--readme-table"),
    ("properties.bench", ["--b", "0"], "--b"),
    ("properties.bench", ["--ncu-b", "9"], "--ncu-b"),
    ("properties.bench", ["--iterations", "0"], "--iterations"),
    ("properties.bench", ["--repeats", "-1"], "--repeats"),
    ("properties.bench", ["--eager-calls", "x"], "--eager-calls"),
    ("properties.bench", ["--tile", "0"], "--tile"),
    ("properties.bench", ["--local-expert-offset", "300"], "--local-expert-offset"),
    ("properties.bench", ["--num-local-experts", "-1"], "--num-local-experts"),
    ("properties.bench", ["--local-expert-offset", "200", "--num-local-experts", "100"], "--local-expert-offset"),
    ("properties.bench", ["--harness-seconds", "nan"], "--harness-seconds"),
    ("properties.bench", ["--harness-seconds", "0"], "--harness-seconds"),
    ("properties.bench", ["--out", "{F}/folder"], "--out"),
    ("properties.bench", ["--out", "/dev/full"], "--out"),
    ("properties.bench", ["--time-verify", "--out", "{F}/folder"], "--out"),
    ("properties.bench", ["--verify-record", "{F}/object.json"], "--verify-record"),
    ("properties.bench", ["--verify-record", "{F}/missing.json"], "--verify-record"),
    ("properties.bench", ["--speed-rounds", "1"], "--speed-rounds"),
    ("properties.bench", ["--speed-rounds", "-1"], "--speed-rounds"),
    # ---- the speed check: one round's figures, and the check
    ("properties.bench.speed", [], "--out"),
    ("properties.bench.speed", ["--out", "{F}/folder"], "--out"),
    ("properties.bench.speed", ["--out", "{F}/r.json", "--kernel", "{F}/missing.py"], "--kernel"),
    ("properties.bench.speed", ["--out", "{F}/r.json", "--kernel", "{F}/file.txt"], "--kernel"),
    ("properties.bench.speed", ["--out", "{F}/r.json"], "CUDA", PROCESS),
    ("properties.tools.speed", ["--bogus"], "--bogus"),
    ("properties.tools.speed", ["--kernel", "{F}/missing.py"], "--kernel"),
    ("properties.tools.speed", ["--kernel", "{F}/file.txt"], "--kernel"),
    ("properties.tools.speed", ["--kernel", str(ROUTING), "--mutants"], "--mutants"),
    ("properties.tools.speed", ["--mutants", "routing.no_such_mutant"], "--mutants"),
    ("properties.tools.speed", ["--mutants", "routing.cta_table.compare_boundary.0"], "--mutants"),
    ("properties.tools.speed", ["--record", "{F}/missing.json"], "--record"),
    ("properties.tools.speed", ["--json", "{F}/folder"], "--json"),
    ("properties.tools.speed", [], "GPU", PROCESS),
    ("properties.tools.speed", ["--floor", "{F}/missing.json"], "--floor"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt"], "--spread"),
    ("properties.tools.speed", ["--spread", "{F}/missing.log", "--record", "{F}/file.txt", "--out", "{F}/s.json"],
     "--spread"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--record", "{F}/file.txt", "--out", "{F}/folder"],
     "--out"),
    ("properties.tools.speed", ["--planted", "{F}/file.txt"], "--planted"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--record", "{F}/file.txt", "--out", "{F}/s.json"],
     "--record"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--record", "{F}/list.json", "--out", "{F}/s.json"],
     "--record"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--record", "{F}/object.json", "--out", "{F}/s.json"],
     "--record"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--record", str(BENCH), "--out", "{F}/s.json"], "--spread"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--record", str(BENCH), "--planted", "{F}/file.txt",
                                "--out", "{F}/s.json"], "--spread"),
    ("properties.tools.speed", ["--spread", "{F}/file.txt", "--kernel", str(ROUTING)], "--kernel"),
    # ---- the phase breakdown
    ("properties.bench.breakdown", ["--table", "{F}/missing.json"], "--table", PROCESS),
    ("properties.bench.breakdown", ["--table", "{F}/object.json"], "--table"),
    ("properties.bench.breakdown", ["--table", "{F}/list.json"], "--table"),
    ("properties.bench.breakdown", ["--table", "{F}/binary.json"], "--table"),
    ("properties.bench.breakdown", ["--table", "{F}/breakdown-without-provenance.json"], "provenance"),
    ("properties.bench.breakdown", [], "--out"),
    ("properties.bench.breakdown", ["--out", "{F}/folder"], "--out"),
    ("properties.bench.breakdown", ["--out", "{F}/b.json", "--b", "9"], "--b"),
    ("properties.bench.breakdown", ["--out", "{F}/b.json", "--iterations", "0"], "--iterations"),
    # ---- kernel variants
    ("properties.bench.variants", [], "--out"),
    ("properties.bench.variants", ["--out", "{F}/v.json"], "--variant"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", "v"], "--variant"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", f"committed={ROUTING}"], "--variant"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", "v={F}/missing.py"], "--variant"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", "v={F}/file.txt"], "--variant"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", "v={F}/no-prepare.py"], "prepare"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", f"v={ROUTING}", "--variant", f"v={ROUTING}"],
     "--variant"),
    ("properties.bench.variants", ["--out", "{F}/folder", "--variant", f"v={ROUTING}"], "--out"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", f"v={ROUTING}", "--rounds", "0"], "--rounds"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", f"v={ROUTING}", "--b", "9"], "--b"),
    ("properties.bench.variants", ["--table", "{F}/object.json"], "--table"),
    ("properties.bench.variants", ["--table", "{F}/list.json"], "--table"),
    ("properties.bench.variants", ["--table", "{F}/truncated.json"], "--table"),
    ("properties.bench.variants", ["--out", "{F}/v.json", "--variant", f"v={ROUTING}"], "CUDA", PROCESS),
    # ---- the kernel mutants
    ("properties.mutants", [], "command", PROCESS),
    ("properties.mutants", ["--tier", "cpu"], "command"),
    ("properties.mutants", ["table"], "command"),
    ("properties.mutants", ["generated", "--tier", "fpga"], "--tier"),
    ("properties.mutants", ["generated", "--out", "/dev/full"], "--out"),
    ("properties.mutants", ["generated", "--out", "{F}/file.txt/m.json"], "--out"),
    ("properties.mutants", ["replay", "{F}/missing.json"], "paths"),
    ("properties.mutants", ["generated", "--only", "no_such_mutant"], "--only"),
    ("properties.mutants", ["generated", "--jobs", "0"], "--jobs"),
    ("properties.mutants", ["generated", "--out", "{F}/folder"], "--out"),
    ("properties.mutants", ["generated", "--resume", "{F}/missing.json"], "--resume"),
    ("properties.mutants", ["generated", "--resume", "{F}/object.json"], "--resume"),
    ("properties.mutants", ["generated", "--resume", "{F}/list.json"], "--resume"),
    ("properties.mutants", ["generated", "--resume", "{F}/mutants-of-another-kind.json"], "--resume"),
    ("properties.mutants", ["generated", "--resume", "{F}/truncated.json"], "--resume"),
    ("properties.mutants", ["generated", "--out", "{F}/file.txt/g.json"], "--out"),
    ("properties.mutants", ["generated", "--tier", "gpu"], "--tier", PROCESS),
    # ---- the harness mutants
    ("properties.mutants.harness_run", ["--only", "no_such_mutant"], "--only", PROCESS),
    ("properties.mutants.harness_run", ["--only"], "--only"),
    ("properties.mutants.harness_run", ["--jobs", "0"], "--jobs"),
    ("properties.mutants.harness_run", ["--jobs", "99"], "--jobs"),
    ("properties.mutants.harness_run", ["--out", "{F}/folder"], "--out"),
    # ---- the corpus
    ("properties.corpus", [], "command", PROCESS),
    ("properties.corpus", ["bogus"], "command"),
    ("properties.corpus", ["generate", "--per-generator", "0"], "--per-generator"),
    ("properties.corpus", ["generate", "--folder", "{F}/file.txt"], "--folder"),
    ("properties.corpus", ["generate", "--folder", "{F}/cases"], "--force"),
    ("properties.corpus", ["generate", "--folder", "/dev/full"], "--folder"),
    ("properties.corpus", ["record", "{F}/missing.json"], "paths"),
    ("properties.corpus", ["record", "{F}/empty"], "empty"),
    # ---- the smoke run
    ("properties.tools.smoke", ["--bogus"], "--bogus"),
    ("properties.tools.smoke", [], "CUDA", PROCESS),
    # ---- the offline bundle
    ("properties.tools.bundle", [], "command", PROCESS),
    ("properties.tools.bundle", ["build", "--part-mb", "0"], "--part-mb"),
    ("properties.tools.bundle", ["build", "--out", "{F}/file.txt"], "--out"),
    ("properties.tools.bundle", ["build", "--out", "{F}/cases"], "--out"),
    ("properties.tools.bundle", ["install", "{F}/missing"], "stage"),
    ("properties.tools.bundle", ["install", "{F}/folder", "--repo", "{F}/file.txt"], "--repo"),
    ("properties.tools.bundle", ["install", "{F}/folder"], "MANIFEST.json"),
    # ---- the MUFU tables
    ("oracles.mufu", [], "command", PROCESS),
    ("oracles.mufu", ["bogus"], "command"),
    ("oracles.mufu", ["fit", "--bogus"], "--bogus"),
    ("oracles.mufu", ["measure", "--bogus"], "--bogus"),
    ("oracles.mufu", ["measure"], "measure", PROCESS),
    ("oracles.mufu", ["certify"], "directory"),
    ("oracles.mufu", ["certify", "{F}/file.txt"], "directory"),
    ("oracles.mufu", ["certify", "{F}/new"], "certify", PROCESS),
    ("oracles.mufu", ["survey", "{F}/file.txt/survey"], "directory"),
    ("oracles.mufu", ["fit-survey", "{F}/bad-survey"], "bad-survey/survey.json: chunks"),
    ("oracles.mufu", ["survey-record", "{F}/binary-survey"], "not JSON"),
    ("oracles.mufu", ["certify-card", "--bogus"], "--bogus"),
    ("oracles.mufu", ["certify-card", "--out"], "--out"),
    ("oracles.mufu", ["certify-card", "--out", "{F}/cases"], "--out"),
    ("oracles.mufu", ["certify-card", "--out", "{F}/file.txt/record.json"], "--out"),
    ("oracles.mufu", ["certify-card"], "certify-card", PROCESS),
    # ---- the NumPy model's speed
    ("oracles.numpy_model.bench", ["--rows", "-1"], "--rows", PROCESS),
    ("oracles.numpy_model.bench", ["--elements", "nan"], "--elements"),
    ("oracles.numpy_model.bench", ["--repeats", "0"], "--repeats"),
    ("oracles.numpy_model.bench", ["--bogus"], "--bogus"),
    # ---- the FlashInfer oracle's build
    ("oracles.flashinfer_routing", ["--arch", "sm_xx"], "--arch", PROCESS),
    ("oracles.flashinfer_routing", ["--arch"], "--arch"),
    ("oracles.flashinfer_routing", ["--bogus"], "--bogus"),
]


def _id(row):
    return f"{row[0]} {' '.join(row[1])}".strip()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """The folder {F}: files of the wrong kind for every argument that takes a path."""
    folder = tmp_path_factory.mktemp("cli-arguments")
    (folder / "folder").mkdir()
    (folder / "empty").mkdir()
    (folder / "cases").mkdir()
    shutil.copy(CASE, folder / "cases" / CASE.name)
    (folder / "file.txt").write_text("a file\n")
    (folder / "no-prepare.py").write_text("def route(*args):\n    pass\n")
    (folder / "not-json.json").write_text("not JSON\n")
    (folder / "list.json").write_text("[1, 2]\n")
    (folder / "binary.json").write_bytes(b"\x00\xff\x01binary")
    (folder / "truncated.json").write_text('{"schema": "kernel.variants/1", "config": {"bs": [1, ')
    (folder / "breakdown-without-provenance.json").write_text(json.dumps({"schema": "kernel.breakdown/1"}))
    os.mkfifo(folder / "fifo")
    (folder / "bad-survey").mkdir()
    survey = json.loads((REPO_ROOT / "oracles" / "mufu" / "data" / "mufu-survey.json").read_text())
    (folder / "bad-survey" / "survey.json").write_text(json.dumps({**survey, "chunks": {"not": "a list"}}))
    (folder / "binary-survey").mkdir()
    (folder / "binary-survey" / "survey.json").write_bytes(b"\x00\xff")
    (folder / "object.json").write_text(json.dumps({"format": "something else"}) + "\n")
    # a record that lists mutants but is not a generated-mutants run
    (folder / "mutants-of-another-kind.json").write_text(json.dumps({"verdict": "PASS", "mutants": []}) + "\n")
    return folder


# What the gate running this suite writes under reports/ meanwhile: its scratch folder (progress, pytest's
# report) and the kernel mutant probes' cases (on a GPU). No row of the table writes them.
GATE_WRITES = (".gate-", "mutants")


def _written_by_the_running_gate(relative):
    return relative.parts[0].startswith(GATE_WRITES[0]) or relative.parts[0] in GATE_WRITES[1:]


def _snapshot(folder):
    """What a command could have written: the repository's git status (tracked changes and untracked files),
    every file under reports/ and the fixture folder, with sizes and modification times."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT, check=True,
                            capture_output=True, text=True).stdout
    files = {str(p): (p.stat().st_size, p.stat().st_mtime_ns)
             for root in (REPO_ROOT / "reports", folder) if root.exists() for p in sorted(root.rglob("*"))
             if not _written_by_the_running_gate(p.relative_to(root))}
    return status, files


def _argv(row, folder):
    return [arg.replace("{F}", str(folder)) for arg in row[1]]


def _check(row, code, out, err):
    lines = err.splitlines()
    assert code == 2, f"{_id(row)}: exit {code}, not 2; stderr: {err[-2000:]}"
    assert len(lines) == 1, f"{_id(row)}: {len(lines)} lines on stderr, not one:\n{err[-2000:]}"
    assert "Traceback" not in err + out and not lines[0].startswith("usage:"), err
    assert row[2] in lines[0], f"{_id(row)}: the line does not name {row[2]!r}: {lines[0]}"


def _main(module):
    name, function = MAIN[module].split(":")
    return getattr(importlib.import_module(name), function)


IN_PROCESS = [row for row in ROWS if row[3:] != (PROCESS,)]
IN_PROCESSES = [row for row in ROWS if row[3:] == (PROCESS,)]


def test_the_table_covers_every_command_line():
    assert len(ROWS) >= 60 and {row[0] for row in ROWS} == set(MAIN)
    assert {row[0] for row in IN_PROCESSES} == set(MAIN), "every command runs at least once as python -m"


@pytest.mark.parametrize("row", IN_PROCESS, ids=_id)
def test_a_bad_argument_is_one_line_and_exit_2_before_any_work(row, fixtures, capsys):
    main = _main(row[0])
    before = _snapshot(fixtures)
    try:
        code = main(_argv(row, fixtures))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    _check(row, code, out, err)
    assert _snapshot(fixtures) == before, f"{_id(row)} wrote something"


@pytest.fixture(scope="module")
def processes(fixtures):
    """row id -> CompletedProcess of every PROCESS row (python -m, CUDA hidden), run a few at a time; and
    whether the runs together left everything as it was."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(row):
        return subprocess.run([sys.executable, "-m", row[0], *_argv(row, fixtures)], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)

    before = _snapshot(fixtures)
    with concurrent.futures.ThreadPoolExecutor(PROCESS_JOBS) as pool:
        done = dict(zip(map(_id, IN_PROCESSES), pool.map(run, IN_PROCESSES)))
    after = _snapshot(fixtures)
    changed = sorted(set(before[1].items()) ^ set(after[1].items())) + ([after[0]] if after[0] != before[0] else [])
    return done, changed


@pytest.mark.parametrize("row", IN_PROCESSES, ids=_id)
def test_a_bad_argument_to_python_m_is_one_line_and_exit_2_before_any_work(row, processes):
    done, changed = processes
    result = done[_id(row)]
    _check(row, result.returncode, result.stdout, result.stderr)
    assert not changed, f"the python -m runs of the table wrote something: {changed[:4]}"


def test_paths_in_the_table_exist_where_they_should(fixtures):
    """The rows' wrong-kind paths are what they claim: a guard against a row passing for another reason."""
    assert (fixtures / "folder").is_dir() and not any((fixtures / "empty").iterdir())
    assert not (fixtures / "missing.json").exists() and (fixtures / "file.txt").is_file()
    assert Path(CASE).is_file()
