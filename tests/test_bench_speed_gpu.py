"""The speed check on a GPU: the planted slower kernel keeps every bit, and the check fails on it and passes on the
real kernel; the bench's rounds make a section the check reads, with the committed spread records' floor. The
gate's speed step runs alone on an idle card; this test may share the card with other tests, so the check here
judges against the real kernel measured in the same process, with TEST_MARGIN (the figures are the fastest
replays, which other work cannot make faster), and the planted spin (properties/bench/planted.py) adds more than
the kernel's own time."""

from dataclasses import replace

import numpy as np
import pytest

from kernel import routing
from kernel.layout import EXPERTS, MAX_TOKENS
from properties.bench import planted, speed, speed_record
from properties.bench.cli import speed_rounds
from properties.bench.problem import SCALE, inputs
from properties.bench.speed_record import FAIL, PASS, SHAPES
from properties.bench.variants import TILE_N, check
from properties.engine.cases import RoutingCase
from properties.engine.implementations import REGISTRY
from properties.engine.interface import Implementation

pytestmark = pytest.mark.gpu

TEST_MARGIN = 0.3


def _bench_cases():
    """The bench inputs of every b, without metadata and with the timed request (tile 8, every expert local)."""
    cases = []
    for b in range(1, MAX_TOKENS + 1):
        logits, bias = inputs(b)
        plain = RoutingCase(logits, bias, np.float32(SCALE), True, None, 0, 0, f"bench inputs b={b}")
        cases += [plain, RoutingCase(logits, bias, np.float32(SCALE), True, TILE_N, 0, EXPERTS, plain.generator)]
    return cases


@pytest.mark.long
def test_the_planted_kernel_keeps_every_bit_and_the_speed_check_fails_on_it_and_passes_on_the_real_kernel():
    routing.prepare(True)
    planted.prepare(True)
    declaration = replace(REGISTRY["cute"].declaration, prepare=planted.prepare)
    impl = Implementation("planted", planted.route, declaration, planted.__file__)
    found = check([impl], _bench_cases())["planted"]
    assert found["calls"] == 2 * MAX_TOKENS and found["differ"] == 0, found["first"]

    before = speed.measure(routing.route)
    slowed = speed.measure(planted.route)
    after = speed.measure(routing.route)
    reference = {(n, b): before[n][str(b)] for n, b in SHAPES}
    real = speed_record.compare(reference, TEST_MARGIN, after, "the kernel measured first")
    assert real.status == PASS, "\n".join(real.lines)
    caught = speed_record.compare(reference, TEST_MARGIN, slowed, "the kernel measured first")
    assert caught.status == FAIL and all(line.startswith("FAIL ") for line in caught.lines), "\n".join(caught.lines)


@pytest.mark.long
def test_two_bench_rounds_make_a_section_the_check_reads():
    gpu = speed.gpu_name()
    made = speed_rounds(2, gpu)
    assert made["rounds"] == 2 and all(len(made["rounds_us"][n][str(b)]) == 2 for n, b in SHAPES)
    floor = speed_record.floor_of(speed_record.read_records(speed_record.spread_paths()), gpu)
    assert made["floor"] == floor.as_json()  # the committed spread records' floor for this card
    reference, margin = speed_record.reference_and_margin({speed_record.SECTION: made}, "rounds", floor)
    assert made["rounds_margin"] == speed_record.MARGIN_FACTOR * made["spread"]["relative"] >= 0
    assert margin.value == made["margin"] == max(made["rounds_margin"], floor.margin)
    assert all(0.3 < reference[shape] < 50 for shape in SHAPES), reference  # µs per launch, plausibly
