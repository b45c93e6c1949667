"""The phase breakdown's parts without a GPU: its whole-kernel stages are the kernel (the same PTX but for the
entry's name), every stage compiles, the table's arithmetic, the CLI's one-line refusals, and each committed
H200 record's table in the results README."""

import json
import re
import tempfile
from pathlib import Path

import pytest

from kernel import routing
from properties.bench import breakdown
from properties.codegen import checks

_ENTRY = re.compile(r"\.entry\s+(\w+)\(")
ROOT = Path(routing.__file__).resolve().parents[1]
BUILD = ROOT / "build"
BENCH_RECORD = ROOT / "properties" / "results" / "bench.json"
BREAKDOWN_RECORDS = sorted((ROOT / "properties" / "results").glob("breakdown-*.json"))


def _stage_ptx(name, metadata):
    BUILD.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="breakdown-", dir=BUILD) as d:
        options = f"--keep-ptx --keep-cubin --dump-dir={d} --gpu-arch=sm_90a"
        return routing.compile_variant(breakdown._Stage(name, metadata), options).__ptx__


def _nameless(ptx):
    return ptx.replace(_ENTRY.search(ptx).group(1), "ENTRY")


@pytest.mark.parametrize("name,metadata", [("cute", False), ("cute_meta", True)])
def test_the_whole_kernel_stages_are_the_kernel(name, metadata):
    assert _nameless(_stage_ptx(name, metadata)) == _nameless(checks.artifacts(metadata, True)[0])


def test_every_cut_stage_compiles_with_its_wait_and_trigger():
    for name, metadata, _ in breakdown.STAGES:
        ptx = _stage_ptx(name, metadata)
        assert ptx.count("griddepcontrol.wait;") == 1 and ptx.count("griddepcontrol.launch_dependents;") == 1, name


def _record(medians):
    """A breakdown record whose stage ``name`` takes ``medians[name]`` µs at b = 1 and fails at b = 8."""
    graph = {name: {"1": {"median_us": t, "min_us": t, "samples_us": [t]}, "8": {"error": "RuntimeError: x"}}
             for name, t in medians.items()}
    return {"schema": breakdown.SCHEMA, "provenance": {"gpu": "G", "driver": "1", "commit": "c", "date": "d"},
            "config": {"bs": [1, 8], "iterations": 10, "repetitions": 2, "tile_n": 8},
            "stages": {name: f"does {name}" for name in medians}, "graph": graph}


def test_the_table_gives_each_stage_less_the_one_above_and_errors_as_such():
    text = breakdown.table(_record({"floor": 0.5, "loads": 0.75, "cute, no trigger warp": 1.0, "routes": 1.5}))
    assert "| floor | does floor | 0.50 | error |" in text
    assert "| loads | does loads | 0.75 (+0.25) | error |" in text
    assert "| cute, no trigger warp | does cute, no trigger warp | 1.00 (+0.25) | error |" in text
    # A "no trigger warp" stage is a sibling of the stage above it, not a step: the next stage counts from that one.
    assert "| routes | does routes | 1.50 (+0.75) | error |" in text


def test_the_table_cli_refuses_a_file_that_is_not_a_breakdown_record(tmp_path, capsys):
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"schema": "kernel.bench/1"}))
    with pytest.raises(SystemExit) as exit_info:
        breakdown.main(["--table", str(other)])
    assert exit_info.value.code == 2
    assert "argument --table" in capsys.readouterr().err
    record = tmp_path / "breakdown.json"
    record.write_text(json.dumps(_record({"floor": 0.5})))
    assert breakdown.main(["--table", str(record)]) == 0
    assert "| floor | does floor | 0.50 | error |" in capsys.readouterr().out


def test_the_committed_bench_record_has_its_breakdown_on_the_same_gpu_at_the_same_commit():
    bench = json.loads(BENCH_RECORD.read_text())["provenance"]
    made = {(record["provenance"]["gpu"], record["provenance"]["commit"])
            for record in (json.loads(path.read_text()) for path in BREAKDOWN_RECORDS)}
    assert (bench["gpu"], bench["commit"]) in made, ((bench["gpu"], bench["commit"]), sorted(made))


@pytest.mark.parametrize("path", BREAKDOWN_RECORDS, ids=lambda path: path.name)
def test_the_results_readme_holds_each_breakdown_records_table(path):
    record = json.loads(path.read_text())
    assert record["schema"] == breakdown.SCHEMA
    assert breakdown.table(record) in (ROOT / "properties" / "results" / "README.md").read_text(), \
        f"the results README's breakdown table is stale: python -m properties.bench.breakdown --table {path.name}"
