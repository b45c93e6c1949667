"""The contract property in one run, for the contract tiers of the mutant catalog (properties/mutants/probe.py):
on a GPU prepare() and the launches it readies (launches), the targeted calls of every group, the cache's twins
(the signature's on the CPU, the cache's on a GPU) and ``examples`` drawn calls (derandomized), against whatever
``kernel`` is imported; on the CPU last, the targeted calls through route's torch op on fake CUDA tensors
(properties/contract/fake.py: last, since the fake tensors' mode imports torch._dynamo, seconds). The tests
(tests/test_contract_property_*.py) run the same parts under the session's Hypothesis profile.
"""

import torch
from hypothesis import HealthCheck, Phase, given, settings

from kernel import routing
from properties.contract import cache, fake, launches
from properties.contract.check import breaches
from properties.contract.edges import targeted
from properties.contract.strategies import calls

MAX_LINES = 12


def device_of(cuda):
    return torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")


def synchronizer(cuda):
    return torch.cuda.synchronize if cuda else (lambda: None)


def targeted_breaches(cuda, group=None):
    """Lines for every targeted call (of ``group``, default all) that route does not treat as the contract says."""
    device, sync = device_of(cuda), synchronizer(cuda)
    lines = []
    for name, cases in targeted(cuda).items():
        if group is None or name == group:
            for label, call in cases.items():
                lines += [f"{name} / {label}: {line}" for line in breaches(call, device, routing.route,
                                                                           synchronize=sync)]
    return lines


def fake_breaches(group=None):
    """Lines for every targeted call of the CPU (of ``group``, default all) that route's torch op on fake CUDA
    tensors does not treat as the contract says, each call then made of CPU tensors for route itself: the fake
    must leave route's own checks, those of addresses included, as they were."""
    lines = []
    for name, cases in targeted(False).items():
        if group is None or name == group:
            for label, call in cases.items():
                if fake.fakeable(call):
                    found = fake.breaches(call) + breaches(call, device_of(False), routing.route)
                    lines += [f"fake / {name} / {label}: {line}" for line in found]
    return lines


def drawn_breaches(cuda, examples):
    """The lines of the last (smallest) drawn call route did not treat as the contract says, else []."""
    device, sync = device_of(cuda), synchronizer(cuda)
    found = []

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              phases=(Phase.explicit, Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck))
    @given(calls(cuda))
    def honoured(call):
        lines = breaches(call, device, routing.route, synchronize=sync)
        if lines:
            found[:] = [f"drawn: {call.describe()}"] + lines
            raise AssertionError(lines[0])

    try:
        honoured()
    except AssertionError:
        pass
    return found


def prepare_breaches():
    """Lines for each of routing.prepare's warm-up calls (valid calls: one row, every expert local, tile 1) that
    route refuses."""
    lines = []
    for renormalize in (True, False):
        try:
            routing.prepare(renormalize)
        except ValueError as refusal:
            lines.append(f"prepare(renormalize={renormalize}): refused a valid call: {refusal}")
    return lines


def parts(cuda, examples):
    """The contract property's parts, cheap first: (name, function giving its breach lines). A part's name is a
    contract case: ``run(cuda, examples, only=name)`` runs that part alone. The targeted calls are one part each,
    named "targeted / <group> / <label>"."""
    device, sync = device_of(cuda), synchronizer(cuda)
    found = [("prepare", prepare_breaches)] if cuda else []
    if cuda:
        found.append(("launches", lambda: launches.breaches(True) + launches.breaches(False) + launches.device_breaches()))
    for group, cases in targeted(cuda).items():
        for label, call in cases.items():
            found.append((f"targeted / {group} / {label}", lambda group=group, label=label, call=call: [
                f"{group} / {label}: {line}" for line in breaches(call, device, routing.route, synchronize=sync)]))
    found.append(("cache", (lambda: cache.cache_breaches(device, sync)) if cuda else cache.signature_breaches))
    found.append(("capacity", cache.capacity_breaches))
    found.append(("drawn", lambda: drawn_breaches(cuda, examples)))
    if not cuda:
        found.append(("fake", fake_breaches))
    return found


def run(cuda, examples, only=None):
    """(the part that breached first, its first lines), or (None, []) when the imported kernel honours the contract;
    ``only``: a part's name (a saved contract case), run alone."""
    for name, breached in parts(cuda, examples):
        lines = breached() if only is None or name == only else []
        if lines:
            return name, lines[:MAX_LINES]
    return None, []
