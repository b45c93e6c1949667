"""GPU tier of the property harness: the model, the Triton oracle, the CuTe kernel and FlashInfer on every
generator's cases, bit for bit (ids, weight bits, every metadata element, untouched ones included); each row
routed as if alone and in any position; the regression corpus replayed live; the planted tie fault
caught, saved and replayed on the GPU.

Examples per property and generator: the Hypothesis profile's max_examples (HYPOTHESIS_PROFILE=gpu: 3,000;
nightly: 100,000). A disagreement is saved to corpora/failures/ before the test fails.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties.engine import casefile
from properties.engine.check import check_case
from properties.engine.implementations import PLANTED_TIE_FAULT, REAL, available, unavailable
from properties.replay import replay
from properties.inputs.strategies import GENERATORS

pytestmark = pytest.mark.gpu


def test_every_implementation_runs_here():
    missing = {name: why for name, why in unavailable().items() if name in REAL}
    assert not missing, f"not running: {missing}"


@pytest.mark.long
@pytest.mark.parametrize("generator", sorted(GENERATORS))
@given(data=st.data())
def test_implementations_agree(generator, data):
    check_case(data.draw(GENERATORS[generator], label="case"), f"implementations agree ({generator})")


def _row_fields(outputs):
    return outputs.ids, outputs.weights.view(np.uint32)


@pytest.mark.long
@pytest.mark.parametrize("generator", sorted(GENERATORS))
@given(data=st.data())
def test_each_row_routes_as_if_alone_and_anywhere(generator, data):
    """Every implementation gives a row the same bits alone, in its batch, and with the rows permuted."""
    case = data.draw(GENERATORS[generator], label="case")
    row = data.draw(st.integers(0, case.b - 1), label="row")
    order = data.draw(st.permutations(range(case.b)), label="row order")
    whole = check_case(case, f"implementations agree ({generator})")
    alone = check_case(case.with_rows([row], f"{generator}, row {row} alone"), "row alone")
    permuted = check_case(case.with_rows(order, f"{generator}, rows {order}"), "rows permuted")
    for name, outputs in whole.items():
        if outputs.ids is None:
            continue
        for got, again, want in zip(_row_fields(alone[name]), _row_fields(permuted[name]), _row_fields(outputs)):
            assert np.array_equal(got[0], want[row]), f"{name}: row {row} alone differs from it in the batch"
            assert np.array_equal(again, want[order]), f"{name}: the permuted batch differs row by row"


@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_regression_corpus_replays_live(generator):
    paths = [p for p in casefile.case_files([casefile.REGRESSION_DIR]) if p.name.rsplit("-", 1)[0] == generator]
    assert paths, f"no regression cases of {generator}"
    for path in paths:
        live, found = replay(casefile.read(path))
        assert set(REAL) <= set(live) and found == [], f"{path}: {found[:3]}"


@pytest.mark.long
def test_the_planted_fault_is_saved_once_and_replays_on_the_gpu(capture_fault, replay_process):
    saved = capture_fault(available())
    record = casefile.read(saved)
    assert set(REAL) | {PLANTED_TIE_FAULT} <= set(record.recorded["by"])
    assert record.recorded["environment"]["gpu"] is not None
    recorded = replay_process(saved, planted=False)
    assert recorded.returncode == 1, recorded.stdout + recorded.stderr
    assert "live here: model, triton, cute, flashinfer\n" in recorded.stdout
    assert "REPRODUCED" in recorded.stdout and f"{PLANTED_TIE_FAULT} (recorded) ids vs model" in recorded.stdout
    live = replay_process(saved, planted=True)
    assert live.returncode == 1 and f"\n    {PLANTED_TIE_FAULT} ids vs model" in live.stdout
