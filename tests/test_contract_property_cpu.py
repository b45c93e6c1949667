"""route's contract as a property on the CPU (properties/contract/): route raises ValueError exactly when the
independent predicate says a call is invalid, names the argument it names for the clause it names, and
changes no byte; a call valid in all but the device is refused naming the logits' device. The checked-call
cache's key tells apart every twin that differs from a valid call in one thing the predicate reads.

Route's torch op on fake CUDA tensors (properties/contract/fake.py) is held to the same predicate without its
address clauses, and a fake that accepts a bad call, refuses a good one or leaves route's own address checks off
is caught.

The GPU tier's own logic runs here too, with the CPU standing in for a GPU (the device clauses satisfied by
it, the model as the compiled kernel): a valid call's bytes are compared with the model's outputs and
caught when one byte beside them or one bit in them is wrong, and the cache's twins pass a right cache and
catch a key without the sign of a zero scale.
"""

import ast
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given

import oracles.numpy_model as model
from kernel import contract, routing
from kernel.layout import metadata_size
from properties.contract import cache, check, fake, predicate
from properties.contract.calls import make, valid_call
from properties.contract.check import breaches
from properties.contract.edges import targeted
from properties.contract.strategies import calls
from properties.contract import sweep
from properties.contract.sweep import targeted_breaches
from properties.engine.poison import METADATA_POISON
from helpers import launched_tensors

CPU = "cpu"
TARGETED = targeted()


def test_the_predicate_imports_nothing_of_the_kernel_but_its_layout():
    source = Path(predicate.__file__).read_text()
    imported = {alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert {name for name in imported if name.split(".")[0] == "kernel"} <= \
        {f"kernel.layout.{n}" for n in ("EXPERTS", "MAX_TILE", "MAX_TOKENS", "TOP_K", "metadata_size")}


# From the contract's text (predicate.py's docstring): what it says of a few calls, one clause each.
KNOWN = {
    "valid but on the CPU": (valid_call(3, 8, 16, 32), ("logits", "device")),
    "b = 9": (valid_call(9), ("logits", "rows")),
    "b = 0": (valid_call(0), ("logits", "rows")),
    "tile 257": (TARGETED["tile"]["tile_n=257"], ("tile_n", "range")),
    "a NumPy int tile": (TARGETED["tile"]["tile_n=np.int64(8)"], ("logits", "device")),
    "a tile without metadata": (TARGETED["metadata"]["no metadata, tile_n=1"], ("tile_n", "without metadata")),
    "0.0 for a tile without metadata": (TARGETED["metadata"]["no metadata, tile_n=0.0"], ("logits", "device")),
    "scale at the float32 overflow": (TARGETED["scale"]["scale float(3.4028235677973366e+38)"], ("scale", "finite")),
    "scale just below it": (TARGETED["scale"]["scale float(3.4028235677973362e+38)"], ("logits", "device")),
    "row stride 260": (TARGETED["strides"]["logits row stride 260"], ("logits", "device")),
    "row stride 258": (TARGETED["strides"]["logits row stride 258"], ("logits", "strides")),
    "ids b=1 row stride 3": (TARGETED["strides"]["ids b=1 row stride 3"], ("logits", "device")),
    "ids touching weights": (TARGETED["overlap"]["ids touching before weights"], ("logits", "device")),
    "ids one element into weights": (TARGETED["overlap"]["ids one element before weights"], ("ids", "overlap")),
    "ids +4 bytes": (TARGETED["alignment"]["ids +4 bytes"], ("logits", "device")),
    "ids +2 bytes": (TARGETED["alignment"]["ids +2 bytes"], ("ids", "alignment")),
    "logits +4 bytes": (TARGETED["alignment"]["logits +4 bytes"], ("logits", "alignment")),
    "local range to the end": (TARGETED["local range"]["local range (200, 56)"], ("logits", "device")),
    "local range past the end": (TARGETED["local range"]["local range (200, 57)"], ("num_local_experts", "range")),
}


@pytest.mark.parametrize("label", KNOWN)
def test_the_predicate_says_what_the_contracts_text_says(label):
    call, (name, clause) = KNOWN[label]
    verdict = predicate.judge(**make(call, CPU).arguments)
    assert (verdict.valid, verdict.name, verdict.clause) == (False, name, clause)


@pytest.mark.long
def test_the_targeted_calls_reach_every_clause_and_accept_calls_at_the_edges():
    verdicts = [predicate.judge(**make(call, CPU).arguments) for cases in TARGETED.values() for call in cases.values()]
    assert {v.clause for v in verdicts} >= set(check.CLAUSE_WORDS)
    assert sum(v.on_device for v in verdicts) >= 100, "valid calls (but for the CPU device) at the edges"


@pytest.mark.parametrize("group", TARGETED)
def test_route_refuses_exactly_what_the_contract_refuses(group):
    lines = targeted_breaches(False, group)
    assert not lines, "\n".join(lines[:12])


@given(calls())
def test_drawn_calls_are_refused_exactly_as_the_contract_says(call):
    lines = breaches(call, CPU, routing.route)
    assert not lines, "\n".join([call.describe()] + lines)


def test_no_twin_of_a_valid_call_shares_its_signature():
    assert cache.coverage_gaps() == [], "every attribute the predicate reads is changed by a twin"
    lines = cache.signature_breaches()
    assert not lines, "\n".join(lines)


def test_the_checked_call_cache_keeps_its_limit_of_signatures_then_starts_afresh(monkeypatch):
    assert cache.capacity_breaches() == []
    monkeypatch.setattr(contract.CheckedCalls, "add", lambda self, key, value: None)
    assert cache.capacity_breaches(), "a cache that keeps nothing must be reported"


def test_the_check_catches_a_wrong_name_a_wrong_clause_a_written_byte_and_another_exception():
    call = TARGETED["alignment"]["bias +4 bytes"]

    def names_logits(**arguments):
        raise ValueError("route: logits must be on a CUDA device, got cpu")

    def writes_then_refuses(**arguments):
        arguments["ids"].view(-1)[0] = 7
        raise ValueError("route: bias must be 16-byte aligned")

    def wrong_clause(**arguments):
        raise ValueError("route: bias must be contiguous")

    def type_error(**arguments):
        raise TypeError("no")

    for route, want in ((names_logits, "refused as"), (writes_then_refuses, "bytes of the cpu arena changed"),
                        (wrong_clause, "refused as"), (type_error, "not ValueError"),
                        (lambda **arguments: None, "accepted a call")):
        lines = breaches(call, CPU, route)
        assert any(want in line for line in lines), (route.__name__, lines)
    assert breaches(call, CPU, lambda **arguments: routing.route(**arguments)) == []


# ---------------------------------------------------------------------------------------------- the op's fake

FAKEABLE = [call for cases in TARGETED.values() for call in cases.values() if fake.fakeable(call)]


def test_the_fake_tier_reaches_every_clause_the_ops_schema_lets_through_and_both_address_clauses():
    """Every clause but those the op's schema answers before route (a scale, a renormalize or a tensor of
    another type) and the layout (no sparse or nested fake without CUDA); the address clauses, which the fake
    must accept, and valid calls among them."""
    verdicts = [predicate.judge(**make(call, CPU).arguments) for call in FAKEABLE]
    assert {v.clause for v in verdicts} == set(check.CLAUSE_WORDS) - {"real", "bool", "layout"}
    assert {v.clause for v in verdicts if v.name == "logits"} >= {"tensor", "rows", "dtype", "shape", "strides"}
    assert len(FAKEABLE) >= 250 and sum(fake.expected(call) is None for call in FAKEABLE) >= 150


@pytest.mark.parametrize("group", TARGETED)
def test_the_ops_fake_refuses_what_the_contract_refuses_but_the_address_clauses(group):
    lines = sweep.fake_breaches(group)
    assert not lines, "\n".join(lines[:12])


def _refuses_all(*arguments):
    raise ValueError("route: bias must be contiguous")


@pytest.mark.filterwarnings("ignore:Accessing the data pointer of FakeTensor")  # the fault planted that reads them
@pytest.mark.parametrize("planted,group,want", [
    (lambda *arguments: None, "rows", "the op's fake accepted a call the contract refuses (logits: rows)"),
    (contract.check_arguments, "alignment", "alignment / logits +4 bytes: the op's fake "),  # refused, or data_ptr raised
    (_refuses_all, "valid", "the op's fake refused a call it must accept: route: bias must be contiguous"),
    (lambda logits, bias, *rest, check=contract.check_abstract: check(bias, logits, *rest), "valid",
     "the op's fake refused a call it must accept: route: logits must be a 2-D torch.Tensor"),
], ids=["accepts all", "reads addresses", "refuses all", "arguments swapped"])
def test_a_fake_that_accepts_a_bad_call_or_refuses_a_good_one_is_caught(monkeypatch, planted, group, want):
    """The op's fake calls contract.check_abstract: each fault planted in its place is a breach of the fake part.
    (A check_abstract that leaves route's address checks off is kernel/contract.py's own generated mutant; the
    contract-cpu probe kills it in the fake part, where route sees each call after the fake.)"""
    monkeypatch.setattr(contract, "check_abstract", planted)
    lines = sweep.fake_breaches(group)
    assert any(want in line for line in lines), lines[:4]


# ---------------------------------------------------------------------------------------------- the GPU's comparison

def _model_kernel(fault):
    """A kernel stand-in on CPU tensors: the NumPy model's outputs written into the outputs, then ``fault``."""
    def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
              num_local_experts=0, tile_n=0):
        got_ids, got_weights = model.route(np.ascontiguousarray(logits.numpy()), np.ascontiguousarray(bias.numpy()),
                                           np.float32(scale), renormalize)
        ids.copy_(torch.from_numpy(got_ids))
        weights.copy_(torch.from_numpy(got_weights))
        if metadata is not None:
            meta = model.routing_metadata(got_ids, int(local_expert_offset), int(num_local_experts), int(tile_n),
                                          fill=METADATA_POISON)
            metadata[:meta.size] = torch.from_numpy(meta)
        fault(ids, weights, metadata, int(tile_n) if metadata is not None else None)

    return route


def _exact(ids, weights, metadata, tile):
    pass


def _guard_written(ids, weights, metadata, tile):
    if metadata is not None:
        metadata[metadata_size(tile) - 1] = -1


def _past_the_ids(ids, weights, metadata, tile):
    torch.as_strided(ids, (ids.numel() + 1,), (1,))[-1] = 0x5A5A5A5A  # no model output: not even a neighbour's


def _one_weight_bit(ids, weights, metadata, tile):
    weights.view(torch.int32)[0, 0] ^= 1


@pytest.fixture
def cpu_as_a_device(monkeypatch):
    """The predicate's device clause satisfied by the CPU, so valid calls reach the kernel stand-in."""
    monkeypatch.setattr(predicate, "_devices", lambda tensors: None)
    return [call for cases in TARGETED.values() for call in cases.values()
            if predicate.judge(**make(call, CPU).arguments).valid]


@pytest.mark.parametrize("fault,caught", [(_exact, 0), (_guard_written, 1), (_past_the_ids, 1), (_one_weight_bit, 1)],
                         ids=lambda f: getattr(f, "__name__", f))
def test_a_valid_call_is_compared_bit_for_bit_with_the_model_and_every_byte_beside_its_outputs(cpu_as_a_device,
                                                                                                 fault, caught):
    calls_with_metadata = [c for c in cpu_as_a_device if c.metadata is not None]
    assert len(cpu_as_a_device) >= 100 and calls_with_metadata
    lines = {i: breaches(call, CPU, _model_kernel(fault)) for i, call in enumerate(cpu_as_a_device)}
    failing = [i for i, found in lines.items() if found]
    if not caught:
        assert not failing, lines[failing[0]]
    else:
        affected = calls_with_metadata if fault is _guard_written else cpu_as_a_device
        assert len(failing) == len(affected), [lines[i] for i in failing[:2]]
        assert all("arena changed" in lines[i][0] for i in failing)


def _model_launch(renormalize):
    """A compiled variant's stand-in: the model's outputs written into the memory at the addresses it is
    launched with."""
    def launch(*args):
        logits, bias, ids, weights, scale32, *request = launched_tensors(args)
        metadata, offset, count, tile = request[:4] if request else (None, 0, 0, 0)
        _model_kernel(_exact)(logits, bias, ids, weights, np.float32(scale32), renormalize, metadata, offset, count,
                              tile)

    return launch


@pytest.fixture
def cpu_kernel(monkeypatch):
    """route on the CPU as on a GPU: the device clauses (the predicate's and the contract's) satisfied by the
    CPU, each compiled variant the model, so calls are checked, launched and cached as on a GPU."""
    monkeypatch.setattr(predicate, "_devices", lambda tensors: None)
    monkeypatch.setattr(contract, "_check_devices", lambda tensors: None)
    monkeypatch.setattr(routing, "compiled_routing",
                        lambda metadata, renormalize, tokens: _model_launch(renormalize))
    monkeypatch.setattr(routing, "current_device", lambda: None)
    monkeypatch.setattr(routing, "current_stream", lambda device: None)


def test_the_gpu_tiers_cache_twins_pass_a_right_cache_and_catch_a_key_without_the_sign_of_zero(cpu_kernel,
                                                                                               monkeypatch):
    one_device = [t for t in cache.twins() if t.attribute != "device"]  # the CPU is one device: no device twin
    assert cache.cache_breaches(torch.device(CPU), lambda: None, one_device) == []
    signature = contract.signature

    def unsigned(logits, bias, ids, weights, scale, *rest):
        return signature(logits, bias, ids, weights, abs(scale) if isinstance(scale, float) else scale, *rest)

    monkeypatch.setattr(contract, "signature", unsigned)
    lines = cache.cache_breaches(torch.device(CPU), lambda: None, one_device)
    assert lines and all(line.startswith("scale sign of zero: ") for line in lines), lines


def test_route_standing_on_the_cpu_for_a_gpu_honours_every_targeted_call_and_computes_the_valid_ones(cpu_kernel):
    lines = targeted_breaches(False)
    assert not lines, "\n".join(lines[:12])



def test_a_kernel_refusing_its_own_warm_up_calls_is_a_breach_per_variant_not_a_crash(monkeypatch):
    """The GPU tier starts with routing.prepare's calls, valid ones: a contract that refuses them is a breach
    (one line per variant refused); any other exception still ends the probe."""
    def prepare(renormalize):
        if not renormalize:
            contract.check_arguments(*([None] * 10))

    monkeypatch.setattr(routing, "prepare", prepare)
    lines = sweep.prepare_breaches()
    assert len(lines) == 1 and lines[0].startswith("prepare(renormalize=False): refused a valid call: route: logits ")
    monkeypatch.setattr(routing, "prepare", lambda renormalize: None)
    assert sweep.prepare_breaches() == []
    monkeypatch.setattr(routing, "prepare", lambda renormalize: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        sweep.prepare_breaches()
