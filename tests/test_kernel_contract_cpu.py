"""route's ValueError contract, for every check that needs no GPU: each bad argument is named.

The tensors live on the CPU; every structural check runs before the device check, so a call whose only
fault is the CPU device fails on the device, and every other call fails on the argument under test.
"""

import pytest
import torch

from kernel import contract, routing

B, TILE = 3, 8


def valid(**override):
    """Keyword arguments of a route call that is valid in every way but the (CPU) device."""
    args = dict(logits=torch.zeros(B, routing.EXPERTS), bias=torch.zeros(routing.EXPERTS),
                ids=torch.zeros(B, routing.TOP_K, dtype=torch.int32), weights=torch.zeros(B, routing.TOP_K),
                scale=2.5, renormalize=True,
                metadata=torch.zeros(routing.metadata_size(TILE), dtype=torch.int32),
                local_expert_offset=16, num_local_experts=32, tile_n=TILE)
    args.update(override)
    return args


def plain(**override):
    """Like ``valid`` without metadata."""
    args = valid(metadata=None, local_expert_offset=0, num_local_experts=0, tile_n=0)
    args.update(override)
    return args


def misaligned(shape, dtype=torch.float32):
    """A contiguous tensor of ``shape`` starting 4 bytes past a 16-byte boundary."""
    n = 1
    for d in shape:
        n *= d
    return torch.zeros(n + 4, dtype=dtype)[1:n + 1].view(shape)


def rejects(name, args, why=""):
    """route raises a ValueError whose subject is argument ``name``."""
    with pytest.raises(ValueError, match=rf"^route: {name} .*{why}"):
        routing.route(**args)


@pytest.mark.parametrize("make", [valid, plain], ids=["metadata", "plain"])
def test_a_valid_call_on_the_cpu_fails_on_the_device(make):
    rejects("logits", make(), "CUDA device")


LOGITS_CASES = {
    "not a tensor": [[0.0] * routing.EXPERTS] * B,
    "1-D": torch.zeros(routing.EXPERTS),
    "no rows": torch.zeros(0, routing.EXPERTS),
    "too many rows": torch.zeros(routing.MAX_TOKENS + 1, routing.EXPERTS),
    "float64": torch.zeros(B, routing.EXPERTS, dtype=torch.float64),
    "bfloat16": torch.zeros(B, routing.EXPERTS, dtype=torch.bfloat16),
    "255 experts": torch.zeros(B, routing.EXPERTS - 1),
    "column stride 2": torch.zeros(B, 2 * routing.EXPERTS)[:, ::2],
    "transposed": torch.zeros(routing.EXPERTS, B).t(),
    "row stride 257": torch.zeros(B, routing.EXPERTS + 1)[:, :routing.EXPERTS],
    "misaligned": misaligned((B, routing.EXPERTS)),
}


@pytest.mark.parametrize("logits", LOGITS_CASES.values(), ids=LOGITS_CASES.keys())
def test_bad_logits(logits):
    rejects("logits", valid(logits=logits))


BIAS_CASES = {
    "float64": torch.zeros(routing.EXPERTS, dtype=torch.float64),
    "2-D": torch.zeros(1, routing.EXPERTS),
    "255": torch.zeros(routing.EXPERTS - 1),
    "strided": torch.zeros(2 * routing.EXPERTS)[::2],
    "misaligned": misaligned((routing.EXPERTS,)),
    "not a tensor": [0.0] * routing.EXPERTS,
}


@pytest.mark.parametrize("bias", BIAS_CASES.values(), ids=BIAS_CASES.keys())
def test_bad_bias(bias):
    rejects("bias", valid(bias=bias))


def output_cases(dtype):
    return {
        "wrong dtype": torch.zeros(B, routing.TOP_K, dtype=torch.int64),
        "other row count": torch.zeros(B + 1, routing.TOP_K, dtype=dtype),
        "7 columns": torch.zeros(B, routing.TOP_K - 1, dtype=dtype),
        "transposed": torch.zeros(routing.TOP_K, B, dtype=dtype).t(),
        "row stride 9": torch.zeros(B, routing.TOP_K + 1, dtype=dtype)[:, :routing.TOP_K],
    }


@pytest.mark.parametrize("case", output_cases(torch.int32).keys())
def test_bad_ids(case):
    rejects("ids", valid(ids=output_cases(torch.int32)[case]))


@pytest.mark.parametrize("case", output_cases(torch.float32).keys())
def test_bad_weights(case):
    rejects("weights", valid(weights=output_cases(torch.float32)[case]))


@pytest.mark.parametrize("scale", ["2.0", None, True, 1e39, -1e39, float("inf"), float("nan")])
def test_bad_scale(scale):
    rejects("scale", valid(scale=scale))


@pytest.mark.parametrize("renormalize", [1, 0, None, "yes"])
def test_bad_renormalize(renormalize):
    rejects("renormalize", valid(renormalize=renormalize))


@pytest.mark.parametrize("name,value", [("tile_n", 8), ("local_expert_offset", 3), ("num_local_experts", 256),
                                        ("tile_n", False)])
def test_metadata_arguments_without_metadata(name, value):
    rejects(name, plain(**{name: value}))


@pytest.mark.parametrize("tile_n", [0, routing.MAX_TILE + 1, -1, 2.0, True, None])
def test_bad_tile(tile_n):
    rejects("tile_n", valid(tile_n=tile_n))


@pytest.mark.parametrize("offset,count,name", [
    (-1, 8, "local_expert_offset"), (routing.EXPERTS + 1, 0, "local_expert_offset"),
    (1.0, 8, "local_expert_offset"), (0, routing.EXPERTS + 1, "num_local_experts"),
    (200, 57, "num_local_experts"), (0, -1, "num_local_experts"), (False, 8, "local_expert_offset"),
])
def test_bad_local_range(offset, count, name):
    rejects(name, valid(local_expert_offset=offset, num_local_experts=count))


METADATA_CASES = {
    "int64": torch.zeros(routing.metadata_size(TILE), dtype=torch.int64),
    "2-D": torch.zeros(1, routing.metadata_size(TILE), dtype=torch.int32),
    "one short": torch.zeros(routing.metadata_size(TILE) - 1, dtype=torch.int32),
    "strided": torch.zeros(2 * routing.metadata_size(TILE), dtype=torch.int32)[::2],
    "misaligned": misaligned((routing.metadata_size(TILE),), torch.int32),
    "not a tensor": [0] * routing.metadata_size(TILE),
}


@pytest.mark.parametrize("metadata", METADATA_CASES.values(), ids=METADATA_CASES.keys())
def test_bad_metadata(metadata):
    rejects("metadata", valid(metadata=metadata))


def test_a_longer_metadata_vector_is_accepted():
    rejects("logits", valid(metadata=torch.zeros(routing.metadata_size(TILE) + 5, dtype=torch.int32)),
            "CUDA device")


def test_metadata_must_not_alias_ids_or_weights():
    storage = torch.zeros(routing.metadata_size(TILE) + 2 * B * routing.TOP_K, dtype=torch.int32)
    metadata = storage[:routing.metadata_size(TILE)]
    rejects("metadata", valid(metadata=storage, ids=storage[:B * routing.TOP_K].view(B, routing.TOP_K)), "alias ids")
    tail = storage[routing.metadata_size(TILE) - 4:][:B * routing.TOP_K].view(B, routing.TOP_K)
    rejects("metadata", valid(metadata=metadata, weights=tail.view(torch.float32)), "alias weights")


def test_outputs_must_not_alias_each_other_or_the_inputs():
    ids = torch.zeros(B, routing.TOP_K, dtype=torch.int32)
    rejects("ids", valid(ids=ids, weights=ids.view(torch.float32)), "alias weights")
    logits = torch.zeros(B, routing.EXPERTS)
    rejects("ids", valid(logits=logits, ids=logits[0, :B * routing.TOP_K].view(torch.int32).view(B, routing.TOP_K)),
            "alias logits")
    bias = torch.zeros(routing.EXPERTS)
    rejects("weights", valid(bias=bias, weights=bias[:B * routing.TOP_K].view(B, routing.TOP_K)), "alias bias")


def test_disjoint_views_of_one_buffer_are_accepted():
    storage = torch.zeros(2 * B * routing.TOP_K, dtype=torch.int32)
    ids = storage[:B * routing.TOP_K].view(B, routing.TOP_K)
    weights = storage[B * routing.TOP_K:].view(torch.float32).view(B, routing.TOP_K)
    rejects("logits", valid(ids=ids, weights=weights), "CUDA device")


class TensorLookalike:
    """Answers every question the signature asks as ``tensor`` does, and is no tensor."""

    def __init__(self, tensor):
        self.data_ptr, self.stride = tensor.data_ptr, tensor.stride
        self.shape, self.dtype, self.device = tensor.shape, tensor.dtype, tensor.device


def test_a_signature_tells_apart_everything_the_checks_read():
    """The cache of checked calls (kernel/contract.py) keys on every argument property the checks read: a call
    that differs in any of them gets another signature, and must pass the checks again."""
    base = valid()
    key = contract.signature(**base)
    assert key is not None and key == contract.signature(**valid(**{k: base[k] for k in base}))
    buffer = torch.zeros(2 * B * routing.EXPERTS)
    variants = {
        "scale -0.0 vs 0.0": (dict(scale=0.0), dict(scale=-0.0)),
        "scale type": (dict(scale=2.0), dict(scale=2)),
        "renormalize type": (dict(renormalize=True), dict(renormalize=1)),
        "tile type": (dict(tile_n=1), dict(tile_n=True)),
        "address": (dict(logits=buffer[:B * routing.EXPERTS].view(B, -1)),
                    dict(logits=buffer[4:4 + B * routing.EXPERTS].view(B, -1))),
        "strides": (dict(logits=buffer.view(B, -1)[:, :routing.EXPERTS]),
                    dict(logits=buffer[:B * routing.EXPERTS].view(B, -1))),
        "dtype": (dict(ids=torch.zeros(B, routing.TOP_K, dtype=torch.int32)),
                  dict(ids=torch.zeros(B, routing.TOP_K, dtype=torch.float32))),
        "metadata or not": (plain(), valid()),
        "a tensor or an object answering like it": (dict(ids=base["ids"]), dict(ids=TensorLookalike(base["ids"]))),
    }
    for what, (one, other) in variants.items():
        assert contract.signature(**{**base, **one}) != contract.signature(**{**base, **other}), what


def test_a_scale_beyond_every_float_is_named():
    rejects("scale", valid(scale=10**400), "finite")


def test_the_cache_of_checked_calls_holds_no_tensor_and_a_hit_launches_the_callers(monkeypatch):
    """route with the checks passed and the launch recorded: the cached entry keeps no tensor (it would keep the
    caller's buffers alive), a call launches its own addresses, extents and scalars with the current stream of
    its device, and a repeated call (views of the same buffers: the same signature) launches them again unchecked."""
    launched, checked = [], []
    monkeypatch.setattr(routing, "checked_calls", contract.CheckedCalls())
    monkeypatch.setattr(routing.contract, "check_arguments", lambda *args: checked.append(args))
    monkeypatch.setattr(routing, "compiled_routing", lambda metadata, renormalize, tokens: lambda *a: launched.append(a))
    monkeypatch.setattr(routing, "current_device", lambda: None)
    monkeypatch.setattr(routing, "current_stream", lambda device: ("stream of", device))
    args = valid()
    routing.route(**args)
    entries = list(routing.checked_calls._entries.values())
    assert len(entries) == 1 and not any(isinstance(x, torch.Tensor) for x in torch.utils._pytree.tree_leaves(entries))
    again = {**args, "metadata": args["metadata"][:], "ids": args["ids"][:]}
    routing.route(**again)
    assert len(routing.checked_calls._entries) == 1 and len(launched) == 2 and len(checked) == 1
    want = (again["logits"].data_ptr(), again["bias"].data_ptr(), again["ids"].data_ptr(), again["weights"].data_ptr(),
            B, routing.EXPERTS, routing.scale_f32(args["scale"]), again["metadata"].data_ptr(),
            routing.metadata_size(TILE), args["local_expert_offset"], args["num_local_experts"], args["tile_n"],
            routing.cta_table(TILE), ("stream of", None))
    assert launched[0] == launched[1] == want
    other = torch.zeros(B, routing.TOP_K, dtype=torch.int32)
    routing.route(**{**args, "ids": other})
    assert len(checked) == 2 and launched[2][2] == other.data_ptr() and len(routing.checked_calls._entries) == 2


def test_the_cache_compares_the_last_key_found_first_and_still_finds_only_what_was_added():
    """The last key found answers a repeated call; any other key goes to the entries, so alternating calls, a key
    one element off the last, None and an unhashable key each find exactly what was added for them."""
    checked = contract.CheckedCalls()
    first, second = contract.signature(**valid()), contract.signature(**plain())
    assert checked.get(None) is None and checked.get(first) is None
    checked.add(first, "first")
    checked.add(second, "second")
    for key, want in ((first, "first"), (first, "first"), (second, "second"), (first, "first"), (second, "second")):
        assert checked.get(tuple(key)) == want  # an equal key, not the same object
    assert checked.get(second[:-1] + (object(),)) is None and checked.get(None) is None
    assert checked.get(second) == "second" and checked.get((*second[:-1], [])) is None
    checked.add(None, "none")
    assert checked.get(None) is None
