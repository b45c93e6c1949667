"""The references an implementation may be compared against, in one place: each a pure model of
oracles/numpy_model with routing.route_rows's signature (logits [n, 256], bias [256] or [n, 256], scale [] or
[n], renormalize; NumPy arrays or torch tensors of one device) and its metadata from routing.metadata_rows
(FlashInfer's dyn-block metadata of its ids). Each is also a built-in implementation of the same name
(properties/engine/builtins.py), which the per-case engine runs beside the implementations that declare it.

- "model": the Muse Spark model (oracles/numpy_model/routing.py), every implementation's default.
- "flashinfer_fused": FlashInfer's fused routing as its SASS computes it (oracles/numpy_model/flashinfer_fused.py).
"""

from oracles.numpy_model import flashinfer_fused, routing

DEFAULT = "model"

REFERENCES = {
    DEFAULT: routing.route_rows,
    "flashinfer_fused": flashinfer_fused.route_rows,
}
