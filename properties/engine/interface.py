"""The one interface every routing implementation implements, built-in or plug-in alike.

An implementation is a callable with the kernel's signature (kernel/routing.py ``route``):

    route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0) -> None

on torch tensors of one device: logits float32 [b, 256], bias float32 [256]; it writes ids int32 [b, 8],
weights float32 [b, 8] and, when ``metadata`` (int32 [metadata_size(tile_n)]) is given, the metadata of local
experts [local_expert_offset, +num_local_experts) for tile ``tile_n``, into the tensors it is given, which
start poisoned; ``scale`` is a Python float. It may carry a ``declaration`` attribute: a dict of
Declaration's fields (or a Declaration); one that declares nothing writes ids and weights for b = 1..8 and is
handed tensors on a CUDA device where there is one, else on the CPU.
"""

from dataclasses import dataclass, fields
from typing import Callable

from kernel.layout import MAX_TILE, MAX_TOKENS
from common.interrupts import raised_by_the_code
from common.provenance import cuda_reason
from properties.engine.cases import FIELDS
from properties.engine.references import DEFAULT as DEFAULT_REFERENCE
from properties.engine.references import REFERENCES

DEVICES = ("auto", "cuda", "cpu")


def _always():
    return None


def _fail(field, contract, got):
    raise ValueError(f"declaration: {field} must be {contract}, got {got!r}")


@dataclass(frozen=True)
class Declaration:
    """What an implementation writes and where it runs.

    writes: the fields it writes (metadata only when a call passes a metadata tensor); b: the token counts
    (low, high) it takes; renormalize: the values of renormalize it takes; tiles: the tile_n it takes (None:
    1..256); min_local_experts: the fewest local experts a metadata call may ask for; reads_ids: ``ids``
    holds the reference's ids on entry (it writes metadata from them and leaves them); device: "auto", "cuda"
    or "cpu"; capturable: its calls may be captured into a CUDA graph once each variant has run eagerly;
    unavailable: () -> why it cannot run on this machine, or None (a str is a fixed reason); prepare:
    (renormalize) -> None, run before a capture; on_request: it runs only where named (a planted fault),
    never among "every available implementation"; reference: the name of the model its outputs are
    compared against (properties/engine/references.py; default the Muse Spark model).
    """

    writes: tuple = ("ids", "weights")
    b: tuple = (1, MAX_TOKENS)
    renormalize: tuple = (False, True)
    tiles: tuple | None = None
    min_local_experts: int = 0
    reads_ids: bool = False
    device: str = "auto"
    capturable: bool = True
    unavailable: Callable = _always
    prepare: Callable | None = None
    on_request: bool = False
    reference: str = DEFAULT_REFERENCE

    def __post_init__(self):
        writes = tuple(self.writes) if isinstance(self.writes, (list, tuple)) else self.writes
        if not isinstance(writes, tuple) or not writes or len(set(writes)) != len(writes) \
                or not set(writes) <= set(FIELDS):
            _fail("writes", f"distinct fields of {FIELDS}", self.writes)
        object.__setattr__(self, "writes", writes)
        b = tuple(self.b) if isinstance(self.b, (list, tuple)) else self.b
        if not isinstance(b, tuple) or len(b) != 2 or not all(isinstance(x, int) for x in b) \
                or not 1 <= b[0] <= b[1] <= MAX_TOKENS:
            _fail("b", f"(low, high) with 1 <= low <= high <= {MAX_TOKENS}", self.b)
        object.__setattr__(self, "b", b)
        renormalize = tuple(self.renormalize) if isinstance(self.renormalize, (list, tuple)) else ()
        if not renormalize or not all(isinstance(r, bool) for r in renormalize):
            _fail("renormalize", "one or both of False, True", self.renormalize)
        object.__setattr__(self, "renormalize", renormalize)
        if self.tiles is not None:
            tiles = tuple(self.tiles) if isinstance(self.tiles, (list, tuple)) else None
            if not tiles or not all(isinstance(t, int) and 1 <= t <= MAX_TILE for t in tiles):
                _fail("tiles", f"None or tiles in 1..{MAX_TILE}", self.tiles)
            object.__setattr__(self, "tiles", tiles)
        if not isinstance(self.min_local_experts, int) or self.min_local_experts < 0:
            _fail("min_local_experts", "an int >= 0", self.min_local_experts)
        for name in ("reads_ids", "capturable", "on_request"):
            if not isinstance(getattr(self, name), bool):
                _fail(name, "a bool", getattr(self, name))
        if self.device not in DEVICES:
            _fail("device", f"one of {DEVICES}", self.device)
        if isinstance(self.unavailable, str):
            reason = self.unavailable
            object.__setattr__(self, "unavailable", lambda: reason)
        if not callable(self.unavailable):
            _fail("unavailable", "a str or a callable returning the reason or None", self.unavailable)
        if self.prepare is not None and not callable(self.prepare):
            _fail("prepare", "None or a callable", self.prepare)
        if self.reference not in REFERENCES:
            _fail("reference", f"one of {', '.join(REFERENCES)}", self.reference)

    @classmethod
    def of(cls, value):
        """The Declaration of a ``declaration`` attribute: None (the defaults), a dict of fields or a
        Declaration; ValueError naming an unknown field."""
        if value is None or isinstance(value, cls):
            return value or cls()
        if not isinstance(value, dict):
            _fail("(itself)", "a dict of Declaration's fields", type(value).__name__)
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"declaration: unknown field(s) {', '.join(unknown)}")
        return cls(**value)

    def compared(self, has_metadata):
        """The fields a call compares: those it writes, metadata only when the call asks for it."""
        return tuple(f for f in self.writes if f != "metadata" or has_metadata)

    def refusal(self, b, renormalize, tile_n, num_local_experts):
        """Why a call of ``b`` rows (``tile_n`` None: no metadata) is outside what it takes, or None."""
        if not self.b[0] <= b <= self.b[1]:
            return f"b={b} outside {self.b[0]}..{self.b[1]}"
        if renormalize not in self.renormalize:
            return f"renormalize={renormalize} not taken"
        if tile_n is None or "metadata" not in self.writes:
            return None
        if self.tiles is not None and tile_n not in self.tiles:
            return f"tile_n={tile_n} not among its tiles"
        if num_local_experts < self.min_local_experts:
            return f"fewer than {self.min_local_experts} local experts"
        return None

    def device_type(self):
        """"cuda" or "cpu": where its tensors live on this machine ("auto": CUDA where there is one)."""
        if self.device == "auto":
            return "cpu" if cuda_reason() else "cuda"
        return self.device


@dataclass(frozen=True)
class Implementation:
    """A routing implementation: ``route`` (the interface above), its Declaration and where it came from."""

    name: str
    route: Callable
    declaration: Declaration = Declaration()
    source: str = "built-in"

    @property
    def writes(self):
        return self.declaration.writes

    @property
    def reference(self):
        """The name of the reference it is compared against (itself for a reference)."""
        return self.name if self.name in REFERENCES else self.declaration.reference

    def unavailable(self):
        """Why it cannot run on this machine, or None."""
        if self.declaration.device == "cuda" and cuda_reason() is not None:
            return cuda_reason()
        try:
            return self.declaration.unavailable()
        except BaseException as exc:  # a probe that fails (or exits) makes it unavailable, with the reason
            if not raised_by_the_code(exc):
                raise
            return f"{type(exc).__name__}: {exc}"

    def run(self, case):
        """Its Outputs on a RoutingCase (properties/engine/buffers.py: poisoned tensors on its device), or
        None when the case is outside what it declares."""
        from properties.engine.buffers import run

        return run(self, case)
