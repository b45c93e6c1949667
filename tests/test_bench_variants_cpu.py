"""The kernel-variants tool's parts without a GPU: a variant loads as the kernel's declaration with its own route,
the check counts every call whose bits differ from the model's (and one that raises), the checked cases cover
the corpus and every request, and the table's arithmetic. Its CLI refusals are rows of
tests/test_cli_arguments_cpu.py."""

import json
import shutil
from dataclasses import replace

import pytest
import torch

from kernel import routing
from properties.bench import variants
from properties.engine import casefile
from properties.engine.builtins import ALL_FIELDS, route_model
from properties.engine.interface import Declaration, Implementation
from properties.engine.plugins import NotRun

ON_CPU = Declaration(writes=ALL_FIELDS, device="cpu", capturable=False)


def _flip_first_weight(*args):
    """The model, then the lowest bit of weight [0, 0] flipped: one ulp."""
    route_model(*args)
    args[3].view(torch.int32)[0, 0] ^= 1


def _raise(*args):
    raise RuntimeError("launch failed\nsecond line")


def test_a_variant_loads_with_the_kernels_declaration_and_its_own_route(tmp_path):
    path = tmp_path / "routing_copy.py"
    shutil.copy(routing.__file__, path)
    impl = variants.load("copy", path)
    assert impl.route is not routing.route and impl.route.__module__ != routing.__name__
    assert impl.declaration.writes == ALL_FIELDS and impl.declaration.device == "cuda"
    assert impl.declaration.prepare.__module__ == impl.route.__module__


def test_a_variant_without_prepare_is_refused_in_one_line(tmp_path):
    path = tmp_path / "bare.py"
    path.write_text("def route(*args):\n    pass\n")
    with pytest.raises(NotRun, match="defines no callable prepare") as refusal:
        variants.load("bare", path)
    assert "\n" not in str(refusal.value)


def _few_cases():
    cases = variants.check_cases()
    plain = next(c for c in cases if c.generator == "bench inputs b=1" and not c.has_metadata)
    tiled = next(c for c in cases if c.generator == "bench inputs b=5" and c.tile_n == 3)
    return [cases[0], plain, tiled]


def test_the_check_counts_every_differing_call_and_every_raise():
    cases = _few_cases()
    impls = [Implementation(name, route, ON_CPU) for name, route in
             (("model_again", route_model), ("one_ulp", _flip_first_weight), ("raises", _raise))]
    found = variants.check(impls, cases)
    assert found["model_again"] == {"calls": 3, "differ": 0, "first": []}
    assert found["one_ulp"]["calls"] == 3 and found["one_ulp"]["differ"] == 3
    assert "weights" in found["one_ulp"]["first"][0]
    assert found["raises"]["differ"] == 3 and found["raises"]["first"][0].endswith("RuntimeError: launch failed")


def test_the_checked_cases_are_the_corpus_then_every_request_of_the_bench_inputs():
    cases = variants.check_cases()
    files = casefile.case_files([variants.CHECK_CORPUS])
    assert len(files) > 100 and [c.generator for c in cases[:len(files)]] == \
        [casefile.read(f).case.generator for f in files]
    bench = cases[len(files):]
    assert len(bench) == len(variants.CHECK_BS) * 2 * (1 + len(variants.CHECK_REQUESTS))
    requests = {(c.tile_n, c.local_expert_offset, c.num_local_experts) for c in bench if c.has_metadata}
    assert requests == set(variants.CHECK_REQUESTS)
    assert {c.b for c in bench} == set(variants.CHECK_BS) and {c.renormalize for c in bench} == {True, False}
    assert min(t for t, _, _ in requests) < routing.TOP_K <= max(t for t, _, _ in requests)


def _record():
    timed = {"committed": {"metadata": {"1": [1.5, 1.7, 1.6]}, "plain": {"1": [1.0, 1.2, 1.1]}},
             "singles": {"metadata": {"1": [1.4, 1.45, 1.35]}, "plain": {"1": [1.0, {"error": "x"}, 1.0]}}}
    check = {"committed": {"calls": 4, "differ": 0, "first": []}, "singles": {"calls": 4, "differ": 1, "first": []}}
    return {"schema": variants.SCHEMA, "config": {"bs": [1], "rounds": 3, "iterations": 10, "repetitions": 5,
                                                  "tile_n": 8},
            "provenance": {"gpu": "G", "driver": "D", "commit": "C", "date": "T"}, "check": check, "graph": timed}


def test_the_table_gives_the_median_over_rounds_and_the_difference_to_the_committed_kernel():
    lines = variants.table(_record()).splitlines()
    assert "| committed | metadata | 0 of 4 | 1.600 |" in lines
    assert "| singles | metadata | 1 of 4 | 1.400 (-0.200) |" in lines
    assert "| singles | plain | 1 of 4 | error |" in lines  # a round that failed leaves no median


def test_table_prints_a_records_table(tmp_path, capsys):
    path = tmp_path / "variants.json"
    path.write_text(json.dumps(_record()))
    assert variants.main(["--table", str(path)]) == 0
    assert capsys.readouterr().out == variants.table(_record())


@pytest.fixture
def stub(tmp_path, monkeypatch):
    """A variant file whose route and prepare do nothing, with run()'s GPU parts replaced: no CUDA check, a
    committed kernel that prepares nothing, fixed provenance."""
    path = tmp_path / "stub.py"
    path.write_text("def route(*args):\n    pass\n\n\ndef prepare(renormalize):\n    pass\n")
    cute = variants.REGISTRY["cute"]
    monkeypatch.setitem(variants.REGISTRY, "cute", replace(cute, declaration=replace(cute.declaration,
                                                                                       prepare=lambda r: None)))
    monkeypatch.setattr(variants.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(variants, "provenance", lambda: {"gpu": "G", "driver": "D", "commit": "C", "date": "T"})
    return path


def test_a_run_times_every_implementation_in_every_round_and_fails_on_a_failed_measurement(stub, tmp_path,
                                                                                           monkeypatch):
    """run() with the GPU's parts replaced: every (round, b, mode, implementation) is timed once, in rounds, the
    committed kernel first; a measurement that raises is recorded and makes the exit status 1."""
    monkeypatch.setattr(variants, "check_cases", lambda: ["a case"])
    monkeypatch.setattr(variants, "check", lambda impls, cases: {
        i.name: {"calls": len(cases), "differ": 0, "first": []} for i in impls})
    order = []

    def time_once(route, b, mode, iterations, repetitions):
        order.append((route.__module__.startswith("routing_plugin_"), b, mode))
        if (b, mode) == (2, "plain") and len(order) > 8:
            raise RuntimeError("capture failed")
        return {"median_us": float(len(order))}

    monkeypatch.setattr(variants, "time_once", time_once)
    out = tmp_path / "v.json"
    code = variants.main(["--out", str(out), "--variant", f"stub={stub}", "--b", "1", "2", "--rounds", "2"])
    record = json.loads(out.read_text())
    assert code == 1 and len(order) == 2 * 2 * 2 * 2
    assert [o[0] for o in order[:2]] == [False, True] and order[:4] == [(False, 1, "metadata"), (True, 1, "metadata"),
                                                                        (False, 1, "plain"), (True, 1, "plain")]
    assert record["graph"]["committed"]["metadata"]["1"] == [1.0, 9.0]
    assert record["graph"]["stub"]["plain"]["2"][1] == {"error": "RuntimeError: capture failed"}
    assert record["implementations"]["stub"]["path"] == str(stub) and record["check"]["stub"]["calls"] == 1


def test_a_run_whose_check_compared_nothing_fails(stub, tmp_path, monkeypatch):
    """No checked case (a corpus and bench inputs that made no call) is a failure, not a pass."""
    monkeypatch.setattr(variants, "check_cases", lambda: [])
    monkeypatch.setattr(variants, "time_once", lambda *args: {"median_us": 1.0})
    out = tmp_path / "v.json"
    assert variants.main(["--out", str(out), "--variant", f"stub={stub}", "--b", "1", "--rounds", "1"]) == 1
    assert json.loads(out.read_text())["check"]["stub"] == {"calls": 0, "differ": 0, "first": []}
