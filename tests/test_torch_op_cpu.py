"""route as a torch op (kernel/op.py), for what a CPU can check: the op's registration and schema, and its fake
implementation under FakeTensorMode (fake CUDA tensors, as torch.compile traces), which must accept route's valid
calls and refuse every other one with the ValueError route's own checks give (kernel/contract.py)."""

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

from kernel import contract, op, routing
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size

ROOT = Path(op.__file__).resolve().parents[1]
B, TILE = 3, 8


def test_the_op_is_registered_when_kernel_op_is_imported_and_not_before():
    """A fresh process: importing kernel.routing leaves the op unregistered; importing kernel.op registers it."""
    code = ("import torch\nimport kernel.routing\nbefore = hasattr(torch.ops.musespark, 'route')\n"
            "import kernel.op\nprint(before, torch.ops.musespark.route.default._schema)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"False {op.NAMESPACE}::{op.NAME}{op.SCHEMA}"


def test_the_schema_is_routes_signature_with_the_outputs_written():
    schema = torch.ops.musespark.route.default._schema
    route = inspect.signature(routing.route).parameters
    assert [a.name for a in schema.arguments] == list(route)
    assert {a.name: a.default_value for a in schema.arguments if a.has_default_value()} == \
        {name: p.default for name, p in route.items() if p.default is not inspect.Parameter.empty}
    assert tuple(a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write) == op.OUTPUTS
    assert not schema.returns and torch.Tag.needs_exact_strides in torch.ops.musespark.route.default.tags


def test_no_python_kernel_bumps_the_outputs_versions():
    """The written outputs' version bump is the dispatcher's own: a Python ADInplaceOrView kernel (what
    torch.library.custom_op registers for a mutable schema) indexes the arguments as given on torch 2.11, so a
    call that leaves metadata to its default raised IndexError there."""
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(f"{op.NAMESPACE}::{op.NAME}", "ADInplaceOrView")


def test_the_op_on_tensors_with_memory_is_route():
    """The real implementation is route: CPU tensors get route's device refusal through the dispatcher."""
    tensors = (torch.zeros(B, EXPERTS), torch.zeros(EXPERTS), torch.zeros(B, TOP_K, dtype=torch.int32),
               torch.zeros(B, TOP_K))
    with pytest.raises(ValueError, match=r"^route: logits must be on a CUDA device, got cpu$"):
        torch.ops.musespark.route(*tensors, 2.5)


def call(device, b=B, with_metadata=True, **override):
    """Keyword arguments of a valid route call on ``device`` (every tensor made by torch.empty, so that the same
    call can be made of fake CUDA tensors on a machine without CUDA), updated by ``override``: each value a
    tensor's (shape, dtype) or (shape, dtype, strides), or a scalar."""
    spec = dict(logits=((b, EXPERTS), torch.float32), bias=((EXPERTS,), torch.float32),
                ids=((b, TOP_K), torch.int32), weights=((b, TOP_K), torch.float32), scale=2.5, renormalize=True,
                metadata=((metadata_size(TILE),), torch.int32) if with_metadata else None,
                local_expert_offset=16 if with_metadata else 0, num_local_experts=32 if with_metadata else 0,
                tile_n=TILE if with_metadata else 0)
    spec.update(override)

    def make(value):
        if not isinstance(value, tuple):
            return value
        shape, dtype, *strides = value
        if strides:
            return torch.empty_strided(shape, strides[0], dtype=dtype, device=device)
        return torch.empty(shape, dtype=dtype, device=device)

    return {name: make(value) for name, value in spec.items()}


def fake_call(**kwargs):
    """The op called on fake CUDA tensors; the ValueError's message, or None when it passed."""
    with FakeTensorMode():
        try:
            assert torch.ops.musespark.route(**call("cuda", **kwargs)) is None
        except ValueError as refusal:
            return str(refusal)
    return None


@pytest.mark.parametrize("b", range(1, MAX_TOKENS + 1))
def test_the_fake_accepts_every_valid_call(b):
    assert fake_call(b=b, with_metadata=False) is None
    for tile in (1, 2, TOP_K, TOP_K + 1, MAX_TILE):
        assert fake_call(b=b, tile_n=tile, metadata=((metadata_size(tile),), torch.int32)) is None


BAD = {
    "logits 1-D": dict(logits=((EXPERTS,), torch.float32)),
    "logits 9 rows": dict(logits=((MAX_TOKENS + 1, EXPERTS), torch.float32)),
    "logits float64": dict(logits=((B, EXPERTS), torch.float64)),
    "logits 255 experts": dict(logits=((B, EXPERTS - 1), torch.float32)),
    "logits column stride 2": dict(logits=((B, EXPERTS), torch.float32, (2 * EXPERTS, 2))),
    "logits row stride 258": dict(logits=((B, EXPERTS), torch.float32, (EXPERTS + 2, 1))),
    "bias 2-D": dict(bias=((1, EXPERTS), torch.float32)),
    "bias bfloat16": dict(bias=((EXPERTS,), torch.bfloat16)),
    "bias strided": dict(bias=((EXPERTS,), torch.float32, (2,))),
    "ids int64": dict(ids=((B, TOP_K), torch.int64)),
    "ids of another b": dict(ids=((B + 1, TOP_K), torch.int32)),
    "ids column-major": dict(ids=((B, TOP_K), torch.int32, (1, B))),
    "weights float16": dict(weights=((B, TOP_K), torch.float16)),
    "weights top 9": dict(weights=((B, TOP_K + 1), torch.float32)),
    "scale infinite": dict(scale=float("inf")),
    "scale beyond float32": dict(scale=1e39),
    "tile 0 with metadata": dict(tile_n=0),
    "tile past the largest": dict(tile_n=MAX_TILE + 1, metadata=((metadata_size(MAX_TILE) + 80,), torch.int32)),
    "local range past 256": dict(local_expert_offset=200, num_local_experts=57),
    "metadata 2-D": dict(metadata=((2, metadata_size(TILE)), torch.int32)),
    "metadata int64": dict(metadata=((metadata_size(TILE),), torch.int64)),
    "metadata one short": dict(metadata=((metadata_size(TILE) - 1,), torch.int32)),
    "metadata strided": dict(metadata=((metadata_size(TILE),), torch.int32, (2,))),
    "tile without metadata": dict(metadata=None, local_expert_offset=0, num_local_experts=0),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_fake_refuses_a_bad_call_with_the_contracts_own_message(name):
    """The fake's message equals check_arguments' on the same call of CPU tensors, which fails on anything before
    the device."""
    with pytest.raises(ValueError) as on_the_cpu:
        contract.check_arguments(**call("cpu", **BAD[name]))
    assert "device" not in str(on_the_cpu.value)
    assert fake_call(**BAD[name]) == str(on_the_cpu.value)


def test_the_fake_checks_the_devices_as_route_does():
    """Fake tensors keep their devices: a CPU fake tensor, an output on another device, and a meta tensor (which
    stands for no CUDA device) are refused as route refuses them."""
    with FakeTensorMode():
        on_the_cpu = call("cpu")
        mixed = {**call("cuda"), "weights": torch.empty((B, TOP_K), device="cpu")}
        for kwargs, message in ((on_the_cpu, "logits must be on a CUDA device, got cpu"),
                                (mixed, "weights must be on the logits' device cuda:0, got cpu")):
            with pytest.raises(ValueError, match=rf"^route: {message}$"):
                torch.ops.musespark.route(**kwargs)
    with pytest.raises(ValueError, match=r"^route: logits must be on a CUDA device, got meta$"):
        torch.ops.musespark.route(**call("meta"))


def test_the_fake_reads_no_address_and_the_real_checks_still_do():
    """The checks that read addresses (an alignment, an overlap) are skipped inside check_abstract alone:
    check_arguments after it still refuses a misaligned input and an output that aliases an input."""
    logits = torch.zeros(B * EXPERTS + 1)
    misaligned = dict(call("cpu", with_metadata=False), logits=logits[1:].view(B, EXPERTS))
    aliased = dict(call("cpu", with_metadata=False), logits=logits[:-1].view(B, EXPERTS),
                   weights=logits[:B * TOP_K].view(B, TOP_K))
    for kwargs, message in ((misaligned, "logits must be 16-byte aligned"), (aliased, "weights must not alias logits")):
        with pytest.raises(ValueError, match=r"^route: logits must be on a CUDA device, got cpu$"):
            contract.check_abstract(**kwargs)
        with pytest.raises(ValueError, match=rf"^route: {message}"):
            contract.check_arguments(**kwargs)


def test_the_fake_traces_a_symbolic_batch_with_guards_on_its_range():
    """Under a shape environment (torch.compile with a dynamic batch), the fake runs on a symbolic b and a
    symbolic metadata length, and its guards narrow them to route's range without fixing them to one value."""
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    dynamic = lambda t: mode.from_tensor(t, symbolic_context=StatelessSymbolicContext(  # noqa: E731
        dynamic_sizes=[DimDynamic.DYNAMIC] + [DimDynamic.STATIC] * (t.dim() - 1)))
    rows, length = dynamic(torch.empty(B, EXPERTS)), dynamic(torch.empty(metadata_size(TILE), dtype=torch.int32))
    b, size = rows.shape[0], length.shape[0]
    with mode:
        torch.ops.musespark.route(**call("cuda", b=b, metadata=((size,), torch.int32)))
    b_range, size_range = env.var_to_range[b.node.expr], env.var_to_range[size.node.expr]
    assert not b.node.expr.is_number and not size.node.expr.is_number, "the sizes were not symbolic"
    assert b_range.upper == MAX_TOKENS and b_range.lower < MAX_TOKENS, b_range
    assert size_range.lower == metadata_size(TILE) and size_range.upper > metadata_size(TILE), size_range
