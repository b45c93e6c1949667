"""Plug-ins on the CPU (properties/engine/plugins.py): each way a plug-in can fail to run is one line naming
it; a CPU plug-in (examples/plugins/torch_eager.py, PyTorch eager as a user writes it) runs through the soak
and replay on a machine without a GPU; an installed entry point and VERIFY_IMPL register one with no flag;
the verdict counts every differing row and weight of a plug-in whose error is known exactly. With VERIFY_IMPL
set (``make verify VERIFY_IMPL=...``), every configured plug-in is also checked on every generator."""

import json
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from properties.engine import implementations, plugins
from properties.engine.check import check_case
from properties.engine.plugins import NotRun
from properties.replay import main as replay_main
from properties.soak.__main__ import main as soak_main, parser as soak_parser
from properties.inputs.strategies import GENERATORS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_EAGER = os.path.join(REPO, "examples", "plugins", "torch_eager.py")
HEADER = "import torch\nimport numpy as np\nimport oracles.numpy_model as model\n\n\n"
MODEL_ROUTE = '''def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0):
    got_ids, got_weights = model.route(logits, bias, scale, renormalize)
{extra}    ids.copy_(got_ids)
    weights.copy_(got_weights)
{after}'''


@pytest.fixture
def registry():
    """The registry as it was after the test (plug-ins it added removed)."""
    before = dict(implementations.REGISTRY)
    yield implementations.REGISTRY
    implementations.REGISTRY.clear()
    implementations.REGISTRY.update(before)


def _module(tmp_path, source, name="plug"):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + source)
    return path


def _model_like(extra="", after=""):
    """The model through the interface, ``extra`` run before it writes, ``after`` after."""
    return MODEL_ROUTE.format(extra=extra, after=after)


REFUSALS = {
    "bad path": (None, "no file"),
    "import error": ("import no_such_package_for_routing\n", "importing .* raised ModuleNotFoundError"),
    "missing attribute": ("other = 1\n", "has no attribute route"),
    "not callable": ("route = 3\n", "is int, not callable"),
    "wrong shape": (_model_like(after="    ids.resize_(ids.shape[0], 9)\n"), r"ids is int32 \[8, 9\] on (cpu|cuda:0) after the call"),
    "wrong dtype": (_model_like(after="    ids.data = ids.data.to(torch.int64)\n"), "ids is int64 .* not the int32"),
    # A tensor cannot move to another device in place: a plug-in computing elsewhere fails in its copy, or
    # hands back what it should have written.
    "wrong device": (_model_like("    got_weights = torch.as_tensor(got_weights).to('meta')\n"),
                     "raised NotImplementedError: Cannot copy out of meta tensor"),
    "returns on a device": ("def route(logits, bias, ids, weights, *rest):\n    return ids.to('meta')\n",
                            r"returned int32 \[8, 8\] on meta instead of writing"),
    # Without CUDA it cannot run; with CUDA it runs and writes nothing: refused either way.
    "cuda only": ("def route(*args):\n    pass\nroute.declaration = {'device': 'cuda'}\n", "CUDA|wrote nothing into ids"),
    "raises": ("def route(*args, **kwargs):\n    raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
    "returns": ("def route(logits, bias, ids, weights, *rest):\n    return torch.zeros(2), None\n",
                r"returned a tuple \(float32 \[2\] on cpu, NoneType\) instead of writing"),
    "writes nothing": ("def route(*args):\n    pass\n", "wrote nothing into ids"),
    "bad declaration": ("def route(*args):\n    pass\nroute.declaration = {'b': (0, 8)}\n",
                        r"declaration: b must be \(low, high\)"),
    "unknown field": ("def route(*args):\n    pass\nroute.declaration = {'rows': 8}\n",
                      "declaration: unknown field"),
    "unavailable": ("def route(*args):\n    pass\nroute.declaration = {'unavailable': 'needs a TPU'}\n", "needs a TPU"),
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_a_plugin_that_cannot_run_is_refused_in_one_line_naming_it(kind, tmp_path, registry):
    source, reason = REFUSALS[kind]
    path = tmp_path / "absent.py" if source is None else _module(tmp_path, source)
    with pytest.raises(NotRun) as refusal:
        implementations.add([f"bad={path}:route"])
    message = str(refusal.value)
    assert message.startswith("implementation bad not run: ") and "\n" not in message, message
    assert re.search(reason, message), message
    assert "bad" not in registry


def test_a_plugin_module_by_dotted_name_runs_and_a_malformed_spec_is_refused(tmp_path, registry, monkeypatch):
    _module(tmp_path, _model_like(), name="routing_plugin_by_name")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert implementations.add(["mine=routing_plugin_by_name:route"]) == ["mine"]
    assert registry["mine"].writes == ("ids", "weights") and registry["mine"].source == "routing_plugin_by_name:route"
    for spec in ("mine", "=x:y", "two=x", "1x=a:b", "mine=a:b"):
        with pytest.raises(ValueError, match="--impl|already taken"):
            implementations.add([spec])


def test_soak_and_replay_refuse_a_plugin_that_cannot_run_with_one_line(tmp_path, capsys, registry):
    path = _module(tmp_path, "def route(*args):\n    raise RuntimeError('boom')\n")
    with pytest.raises(SystemExit) as exit_info:
        soak_main(["--device", "cpu", "--rows", "10", "--no-progress", "--impl", f"bad={path}:route"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.splitlines()[-1].endswith("implementation bad not run: raised "
                                                                          "RuntimeError: boom")
    case = os.path.join(REPO, "corpora", "regression", "all_equal-000.json")
    assert replay_main([case, "--impl", f"bad={path}:route"]) == 4
    assert "implementation bad not run: raised RuntimeError: boom" in capsys.readouterr().err


def test_a_positional_after_impl_is_read_as_a_case_and_impl_repeats(tmp_path, capsys, registry):
    """``--impl`` takes one implementation and is repeated for more: the case after it is a case, never a third
    implementation (``python -m properties.replay --impl mine=PLUGIN.py:route CASE.json``). Live besides the
    two: the implementations that run on this machine (the model; on a GPU also Triton, the kernel, FlashInfer)."""
    path = _module(tmp_path, _model_like())
    case = os.path.join(REPO, "corpora", "regression", "all_equal-000.json")
    here = implementations.available()
    assert replay_main(["--impl", f"mine={path}:route", "--impl", f"also={path}:route", case]) == 0
    out = capsys.readouterr().out
    live = f"  live here: {', '.join([*here, 'mine', 'also'])}"
    assert f"{case}: all_equal" in out and live in out.splitlines() and here[0] == "model", out
    assert soak_parser().parse_args(["--impl", "model", "--impl", f"mine={path}:route"]).impl == [
        "model", f"mine={path}:route"]


def _soak(tmp_path, spec, *extra):
    summary = tmp_path / "soak.json"
    rc = soak_main(["--device", "cpu", "--no-progress", "--seed", "3", "--problems", "24", "--plan-batches", "2",
                    "--failures-dir", str(tmp_path / "failures"), "--out", str(summary), "--impl", spec, *extra])
    return rc, json.loads(summary.read_text())


def test_a_cpu_plugin_soaks_and_its_case_file_replays_against_it_by_name(tmp_path, capsys, registry):
    spec = f"torch_eager={TORCH_EAGER}:route"
    rc, summary = _soak(tmp_path, spec, "--rows", "3000", "--families", "plain", "tie_within_lane",
                        "--metadata", "off")
    out = capsys.readouterr().out
    verdict = json.loads((tmp_path / "verdict-torch_eager.json").read_text())
    assert summary["implementations"] == ["torch_eager"] and verdict["implementation"] == "torch_eager"
    assert set(verdict["families"]) == {"plain", "tie_within_lane"}
    assert "verdict of torch_eager against the model" in out
    differing = sum(f[field]["differing"] for f in verdict["families"].values() for field in ("ids", "weights"))
    assert rc == (1 if differing else 0) and bool(summary["case_files"]) == bool(differing)
    if differing:  # torch.sigmoid is not the H200's MUFU sigmoid: some weight differs
        first = next(f["first_case_file"] for f in verdict["families"].values() if f["first_case_file"])
        assert replay_main([first, "--impl", spec]) == 1
        replay_out = capsys.readouterr().out
        assert "torch_eager (recorded)" in replay_out and "\n    torch_eager " in replay_out


def test_the_verdict_counts_every_differing_row_and_weight(tmp_path, registry):
    """A plug-in whose error is known exactly: the model with each call's first weight one ulp off (its lowest
    bit flipped; an infinite weight one step down, to FLT_MAX). Every call is one differing row of weights and
    one weight one ulp off; no id differs."""
    path = _module(tmp_path, _model_like("    got_weights = got_weights.clone()\n"
                                         "    first = got_weights.view(torch.int32)[0, 0]\n"
                                         "    first.copy_(first - 1 if torch.isinf(got_weights[0, 0]) else first ^ 1)\n"))
    rc, summary = _soak(tmp_path, f"one_ulp={path}:route", "--rows", "2000", "--families", "plain",
                        "tie_within_lane", "--metadata", "off", "--b", "3")
    verdict = json.loads((tmp_path / "verdict-one_ulp.json").read_text())
    assert rc == 1 and set(verdict["families"]) == {"plain", "tie_within_lane"}
    total = 0
    for family, entry in verdict["families"].items():
        rows, calls = entry["weights"]["rows"], entry["weights"]["differing"]
        assert entry["ids"] == {"rows": rows, "differing": 0}, family
        assert calls > 0 and rows == 3 * calls, family
        assert entry["weights"]["ulp"] == {"equal": rows * 8 - calls, "1": calls}, family
        assert entry["first_case_file"] and "metadata" not in entry, family
        total += rows
    assert total == summary["tally"]["rows"]


def test_an_entry_point_registers_a_plugin_with_no_flag(tmp_path, monkeypatch):
    _module(tmp_path, _model_like(), name="routing_entry_plugin")
    _module(tmp_path, "raise ImportError('missing CUDA toolkit')\n", name="routing_entry_broken")
    info = tmp_path / "routing_entry_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: routing-entry-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{plugins.GROUP}]\nfrom_entry = routing_entry_plugin:route\n"
                                           "broken_entry = routing_entry_broken:route\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {getattr(item, "name", None): item for item in plugins.entry_points()}
    assert found["from_entry"].source == "entry point routing_entry_plugin:route"
    assert str(found["broken_entry"]).startswith("implementation broken_entry not run: loading entry point")


def test_verify_impl_configures_plugins_and_keeps_the_refused(tmp_path, monkeypatch, registry):
    good = _module(tmp_path, _model_like(), name="good")
    bad = _module(tmp_path, "def route(*args):\n    pass\n", name="bad")
    monkeypatch.setattr(implementations, "_configured", {"loaded": False, "names": [], "refused": {}, "specs": []})
    implementations.configure([f"good={good}:route", f"bad={bad}:route"])
    assert "good" in implementations.available() and implementations.configured() == ["good"]
    assert implementations.refused() == {"bad": "wrote nothing into ids (declare the fields it writes: "
                                                 "route.declaration = {'writes': (...)})"}


# ------------------------------------- the plug-ins of VERIFY_IMPL (the gate hands them over as --verify-impl)

CONFIGURED = implementations.configured() + sorted(implementations.refused())

if CONFIGURED:
    @pytest.mark.parametrize("generator", sorted(GENERATORS))
    @pytest.mark.parametrize("name", CONFIGURED)
    def test_a_configured_plugin_agrees_with_the_model(name, generator, cases):
        refused = implementations.refused()
        assert name not in refused, f"implementation {name} not run: {refused.get(name)}"
        checked = []

        @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(GENERATORS[generator])
        def agrees(case):
            check_case(case, f"plug-in {name} agrees ({generator})", names=["model", name])
            checked.append(case)

        agrees()
        cases(len(checked))
        assert checked, f"{name}: no case compared"


def test_the_ulp_buckets_of_hand_made_weights():
    import torch

    from properties.soak.verdict import ULP_LABELS, ulp_buckets

    one_bits = int(np.float32(1.0).view(np.int32))
    above_one = lambda n: np.int32(one_bits + n).view(np.float32)  # noqa: E731  n ulps above 1.0
    pairs = [(np.nan, np.nan), (-0.0, 0.0), (above_one(1), 1.0), (above_one(3), 1.0), (above_one(4), 1.0),
             (np.nan, 1.0), (-1.0, 1.0), (np.inf, np.finfo(np.float32).max)]
    got, want = (torch.tensor(np.array(side, np.float32)) for side in zip(*pairs))
    labels = [ULP_LABELS[i] for i in ulp_buckets(got, want).tolist()]
    # -1 and +1 lie 2 * 0x3f800000 ulps apart
    assert labels == ["equal", "±0", "1", "3", "4..7", "NaN", f"{2**30}..{2**31 - 1}", "1"]


def test_the_gate_gives_each_plugin_a_row_and_fails_on_a_refused_one(tmp_path, monkeypatch, registry):
    from properties.tools import gate

    good = _module(tmp_path, _model_like(), name="good")
    bad = _module(tmp_path, "def route(*args):\n    raise RuntimeError('boom')\n", name="bad")
    monkeypatch.setattr(implementations, "_configured", {"loaded": False, "names": [], "refused": {}, "specs": []})
    status = gate.plugins_status([f"good={good}:route", f"bad={bad}:route"])
    assert status == {"good": None, "bad": "raised RuntimeError: boom"}
    summary = {"groups": {}, "ran": 1, "unnamed_skips": [], "gpu_checks_not_run": 0, "gpu_checks_passed": 0}
    built = {"ran": True, "failed": False, "why": "", "seconds": 1.0}
    assert gate.verdict(0, summary, built, {}, False, plugins=status) == [
        "implementation bad not run: raised RuntimeError: boom"]
    rows = {line.split()[1]: line for line in gate.table(summary, built, {}, plugins=status).splitlines()
            if line.startswith("plugin ")}
    assert set(rows) == {"good", "bad"} and "not run: raised RuntimeError: boom" in rows["bad"]


def test_flashinfers_fused_routing_declares_what_its_runner_takes(registry):
    """examples/plugins/fi_fused.py, the H200 verdict's plug-in: renormalized calls, power-of-two tiles, one
    local expert at least; without a GPU it is refused in one line, never run."""
    from common.provenance import cuda_reason
    from properties.engine.interface import Declaration

    spec = f"fi_fused={os.path.join(REPO, 'examples', 'plugins', 'fi_fused.py')}:route"
    module = plugins.import_target("fi_fused", spec.split("=", 1)[1].rsplit(":", 1)[0])
    declaration = Declaration.of(module.route.declaration)
    assert declaration.refusal(8, True, 16, 256) is None
    assert declaration.refusal(8, False, 16, 256) and declaration.refusal(8, True, 12, 256)
    assert declaration.refusal(8, True, 16, 0) and declaration.refusal(8, True, None, 0) is None
    if cuda_reason() is not None:
        with pytest.raises(NotRun, match=f"^implementation fi_fused not run: {re.escape(cuda_reason())}$"):
            implementations.add([spec])


def test_a_metadata_only_implementation_is_not_called_on_a_case_without_metadata():
    """FlashInfer's dyn-block oracle writes metadata only: on a case with no tile it has nothing to write and
    must not be called (the H200 gate found it called with tile_n 0 after the interface landed)."""
    from properties.engine.cases import RoutingCase
    from properties.engine.interface import Declaration, Implementation

    def route(*args, **kwargs):
        raise AssertionError("called on a case without metadata")

    impl = Implementation("metadata_only", route, Declaration(writes=("metadata",), device="cpu"))
    case = RoutingCase(np.zeros((1, 256), np.float32), np.zeros(256, np.float32), np.float32(1.0), True, None, 0, 0,
                       "all_equal")
    out = impl.run(case)
    assert (out.ids, out.weights, out.metadata) == (None, None, None)
