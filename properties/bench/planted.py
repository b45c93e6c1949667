"""A planted slower kernel that keeps every bit: the routing kernel, subclassed by its declared seam
(``Routing.kernel``), whose every thread spins SPIN_CYCLES clock cycles after the kernel's own work (after its
``griddepcontrol.launch_dependents``, so the next launch's wait waits for the spin too). It writes nothing more, so
its outputs are the kernel's bit for bit; a speed check must fail on it. A module like kernel/routing.py for the
bench's tools (``route``, ``prepare``): ``python -m properties.tools.speed --kernel properties/bench/planted.py``.
"""

import types

import cutlass.cute as cute
from cutlass import Float32

from kernel import routing

SPIN_CYCLES = 4000  # about 2 µs at the H100's and H200's 1.98 GHz: more than the kernel's own time


def _inlined(fn):
    """A fresh function object of ``fn``'s source code (as written: the DSL keeps it as ``_original_code`` once it
    has rewritten ``fn``), decorated with ``cute.jit`` so that a kernel calling it inlines it; ``fn`` keeps its own
    decoration."""
    code = getattr(fn, "_original_code", fn.__code__)
    return cute.jit(types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__))


_KERNEL_BODY = _inlined(routing.Routing.kernel.__wrapped__)


class Slowed(routing.Routing):
    """``Routing`` whose kernel is the real kernel's body followed by a spin of SPIN_CYCLES cycles."""

    @cute.kernel
    def kernel(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor, mWeights: cute.Tensor,
               scale: Float32, mMeta, local_offset, num_local, tile_n, cta_table):
        _KERNEL_BODY(self, mLogits, mBias, mIds, mWeights, scale, mMeta, local_offset, num_local, tile_n, cta_table)
        start = cute.arch.clock()
        while cute.arch.clock() - start < SPIN_CYCLES:
            pass


_compiled = {}


def compiled(metadata, renormalize, tokens):
    """The planted variant's TVM-FFI function, compiled once per process."""
    key = (bool(metadata), bool(renormalize), int(tokens))
    if key not in _compiled:
        _compiled[key] = routing.ffi_function(routing.compile_variant(Slowed(*key)))
    return _compiled[key]


def prepare(renormalize=True):
    """Compile every variant ``route`` launches (kernel/routing.py's KERNELS)."""
    for metadata, tokens in routing.KERNELS:
        compiled(metadata, renormalize, tokens)


def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0):
    """kernel/routing.py's ``route`` on the planted kernel, for arguments its contract accepts (not checked here:
    the bench's tools pass the bench's own)."""
    with_metadata = metadata is not None
    tokens = routing.kernel_tokens(with_metadata, logits.shape[0], int(tile_n))
    scalars = (int(local_expert_offset), int(num_local_experts), int(tile_n),
               routing.cta_table(int(tile_n))) if with_metadata else ()
    fn = compiled(with_metadata, renormalize, tokens)
    fn(*routing.launch_arguments(logits, bias, ids, weights, routing.scale_f32(scale), metadata, *scalars),
       routing.current_stream(logits.device.index))
