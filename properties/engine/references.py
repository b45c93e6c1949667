"""The references an implementation may be compared against, in one place: each a pure model of
oracles/numpy_model with routing.route_rows's signature (logits [n, 256], bias [256] or [n, 256], scale [] or
[n], renormalize; NumPy arrays or torch tensors of one device) and its metadata from routing.metadata_rows
(FlashInfer's dyn-block metadata of its ids). Each is also a built-in implementation of the same name
(properties/engine/builtins.py), which the per-case engine runs beside the implementations that declare it.

- "model": the Muse Spark model (oracles/numpy_model/routing.py), every implementation's default.
- "flashinfer_fused": FlashInfer's fused routing as its SASS computes it (oracles/numpy_model/flashinfer_fused.py).
"""

from dataclasses import dataclass
from typing import Callable

from oracles.numpy_model import flashinfer_fused, routing

DEFAULT = "model"


@dataclass(frozen=True)
class Reference:
    """A reference: its name, its model's route_rows and public route, and what it models."""

    name: str
    route_rows: Callable
    route: Callable
    models: str


REFERENCES = {
    DEFAULT: Reference(DEFAULT, routing.route_rows, routing.route, "the Muse Spark model"),
    "flashinfer_fused": Reference("flashinfer_fused", flashinfer_fused.route_rows,
                                  flashinfer_fused.route_flashinfer_fused,
                                  "FlashInfer's fused routing as its SASS computes it"),
}


def check(name):
    """``name`` when it names a reference; ValueError (one line) naming the references otherwise."""
    if not isinstance(name, str) or name not in REFERENCES:
        raise ValueError(f"reference must be one of {', '.join(REFERENCES)}, got {name!r}")
    return name
