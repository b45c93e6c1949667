"""The benchmark end to end on a GPU, small: every variant captured, verified after replay and timed, for
b = 1 and 8, without Nsight Compute. About half a minute on an H200 (most of it compiling)."""

import json

import pytest

from properties.bench import cli
from properties.bench import results_file
from properties.bench.results_file import VARIANT_NAMES

pytestmark = pytest.mark.gpu


@pytest.mark.long
def test_a_small_run_times_every_variant_with_verified_outputs(tmp_path):
    out = tmp_path / "bench.json"
    rc = cli.main(["--out", str(out), "--b", "1", "8", "--iterations", "20", "--repeats", "3", "--no-ncu",
                     "--harness-seconds", "0.2"])
    results = results_file.check_schema(json.loads(out.read_text()))
    assert results["errors"] == [] and rc == 0, json.dumps(results["errors"], indent=1)[:4000]
    for name in VARIANT_NAMES:
        for b in ("1", "8"):
            assert results["verify"][name][b] == {"graph": "ok", "pdl_chain": "ok"}, (name, b)
            assert results["graph"][name][b]["median_us"] > 0 and len(results["graph"][name][b]["samples_us"]) == 3
            assert "chain" in results["pdl_chain"][name][b]
    # The eager parts per b, with metadata and without (the lookup, a difference of medians, may come out <= 0).
    for name in results_file.EAGER_VARIANTS:
        for b in ("1", "8"):
            parts = results["eager_parts"][name][b]
            assert all(parts[k] > 0 for k in ("signature_us", "current_device_us", "current_stream_us",
                                              "compiled_call_us")), (name, b, parts)
    # Route's eager call and the torch op's on the same arguments, per b.
    for name in results_file.EAGER_VARIANTS + results_file.EAGER_OP_VARIANTS:
        for b in ("1", "8"):
            assert results["eager"][name][b]["mean_us"] > 0, (name, b, results["eager"][name][b])
    assert all("error" not in r for r in results["resources"].values())
    assert all(r["cases_per_s"] > 0 for r in results["harness"]["gpu_differential"].values())
