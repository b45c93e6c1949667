"""route's contract as a property on the GPU (properties/contract/): CUDA tensors at every clause's edge, a
tensor put on the CPU for the device clause. route raises ValueError exactly when the predicate says a call is
invalid, naming the argument and the clause, with no byte changed; a valid call writes the NumPy model's ids,
weights and metadata bit for bit and not one byte beside them (the guard element and the slack past the
metadata, every gap between the tensors, keep their poison). The checked-call cache cannot be fooled: a twin
differing from a cached valid call in one thing the predicate reads is checked again and fares as the
predicate says.
"""

import pytest
import torch
from hypothesis import given

from kernel import routing
from properties.contract import cache, launches, predicate
from properties.contract.calls import make
from properties.contract.check import breaches
from properties.contract.edges import targeted
from properties.contract.strategies import calls
from properties.contract.sweep import device_of, targeted_breaches

pytestmark = pytest.mark.gpu

GROUPS = tuple(targeted(cuda=True))


@pytest.fixture(scope="module", autouse=True)
def prepared():
    for renormalize in (True, False):
        routing.prepare(renormalize)


def test_a_call_while_another_device_is_current_launches_from_the_logits_device():
    lines = launches.device_breaches()
    assert not lines, "\n".join(lines)


@pytest.mark.parametrize("group", GROUPS)
def test_route_refuses_exactly_what_the_contract_refuses_and_computes_the_rest(group):
    lines = targeted_breaches(True, group)
    assert not lines, "\n".join(lines[:12])


def test_the_targeted_calls_launch_valid_calls():
    device = device_of(True)
    valid = [call for cases in targeted(cuda=True).values() for call in cases.values()
             if predicate.judge(**make(call, device).arguments).valid]
    assert len(valid) >= 100, f"only {len(valid)} targeted calls are valid on the GPU"


@given(calls(cuda=True))
def test_drawn_calls_are_refused_exactly_as_the_contract_says_and_the_rest_are_bit_exact(call):
    lines = breaches(call, device_of(True), routing.route, synchronize=torch.cuda.synchronize)
    assert not lines, "\n".join([call.describe()] + lines)


def test_the_cache_of_checked_calls_cannot_be_fooled():
    assert cache.coverage_gaps() == []
    lines = cache.cache_breaches(device_of(True), torch.cuda.synchronize)
    assert not lines, "\n".join(lines)
