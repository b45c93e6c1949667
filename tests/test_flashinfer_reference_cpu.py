"""A declared reference on the CPU: a plug-in declaring FlashInfer's model (properties/engine/references.py)
is compared with it, in the soak (summary, verdict and case files naming it) and per case (check_case, replay),
while the same outputs declared against the Muse Spark model differ from it; case files without a reference
still mean the Muse Spark model, and the schema names exactly the registry's references."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from properties.engine import casefile, implementations
from properties.engine.check import check_case
from properties.engine.interface import Declaration
from properties.engine.references import REFERENCES
from properties.soak import dist
from properties.soak.loop import Config, run
from properties.soak.plan import Space
from properties.soak.verdict import of_summary
from tests.helpers import case_of

PLUGIN = str(Path(__file__).parent / "plugins" / "fi_model_plugin.py")
CPU = dist.Context(0, 1, torch.device("cpu"), None)
SPACE = Space(b=(1, 5), metadata="off", families=("plain", "saturated_score"), problems=16, plan_batches=1)


@pytest.fixture(scope="module")
def plugins():
    """The two plug-ins, registered for this module's tests alone: a later test in the same worker (the GPU
    properties run every registered implementation) must not meet them."""
    before = dict(implementations.REGISTRY)
    yield implementations.add([f"fi_own={PLUGIN}:route", f"fi_vs_model={PLUGIN}:route_against_the_model"])
    implementations.REGISTRY.clear()
    implementations.REGISTRY.update(before)


def _soak(name, tmp_path):
    config = Config(rows=96, space=SPACE, implementations=(name,), failures_dir=tmp_path, progress=False,
                    crosscheck=2)
    return run(config, CPU)


def test_the_soak_compares_a_plugin_with_its_declared_reference(plugins, tmp_path):
    summary = _soak("fi_own", tmp_path)
    assert summary["references"] == {"fi_own": "flashinfer_fused"}
    assert summary["tally"]["disagreements"]["fi_own"] == 0 and summary["tally"]["rows"] >= 96
    verdict = of_summary(summary, "fi_own")
    assert verdict["reference"] == "flashinfer_fused"
    assert all(entry["weights"]["differing"] == 0 for entry in verdict["families"].values())


def test_the_same_outputs_against_the_muse_spark_model_differ_and_their_case_files_say_so(plugins, tmp_path):
    summary = _soak("fi_vs_model", tmp_path)
    assert summary["tally"]["disagreements"]["fi_vs_model"] > 0
    assert of_summary(summary, "fi_vs_model")["reference"] == "model"
    record = casefile.read(summary["case_files"][0])
    assert "references" not in record.recorded  # the default reference is not written
    assert {d["reference"] for d in record.disagreements} == {"model"}


def test_check_case_and_case_files_name_the_declared_reference(plugins, tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    case = case_of("plain", rng.standard_normal((2, 256)).astype(np.float32), np.zeros(256, np.float32), 1.0, True)
    outputs = check_case(case, "own reference", names=["fi_own"])
    assert set(outputs) == {"fi_own", "flashinfer_fused"}
    monkeypatch.setenv(casefile.FAILURES_ENV, str(tmp_path))
    with pytest.raises(AssertionError, match="fi_vs_model weights vs model"):
        check_case(case, "against the model", names=["fi_vs_model"])


def test_a_case_file_records_its_reference_and_replay_compares_with_it(plugins, tmp_path):
    from properties.replay import check

    rng = np.random.default_rng(6)
    case = case_of("plain", rng.standard_normal((1, 256)).astype(np.float32), np.zeros(256, np.float32), 2.0, True)
    outputs = implementations.run_all(case, ["fi_own"])
    path = casefile.write(tmp_path / "own.json", casefile.CaseFile(
        case, {"fi_own": outputs["fi_own"]}, casefile.recording({"fi_own": outputs["fi_own"]},
                                                                {"fi_own": "flashinfer_fused"}), {}, []))
    record = casefile.read(path)
    assert record.recorded["references"] == {"fi_own": "flashinfer_fused"}
    live, checked, found = check(record, ["model"])
    assert "flashinfer_fused" in live and "fi_own (recorded) weights" in checked and found == []
    old = json.loads(Path(path).read_text())
    del old["recorded"]["references"]  # a file without references: the Muse Spark model
    Path(path).write_text(json.dumps(old))
    _, _, found = check(casefile.read(path), ["model"])
    assert {d["reference"] for d in found} == {"model"} and found


def test_the_schema_names_exactly_the_registered_references():
    schema = json.loads(Path(casefile.__file__).with_name("case.schema.json").read_text())
    named = schema["properties"]["recorded"]["properties"]["references"]["additionalProperties"]["enum"]
    assert named == list(REFERENCES)


def test_an_unknown_reference_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^declaration: reference must be one of model, flashinfer_fused, got 'x'$"):
        Declaration(reference="x")
