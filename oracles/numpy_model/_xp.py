"""One implementation of the model for two array libraries.

The model is written against the operations NumPy arrays and torch tensors share (operators, ``view``,
``where``, indexing), so the exhaustive sweep on the GPU runs this very code on torch tensors instead of
a port of it. The public functions take and return NumPy arrays.
"""

import numpy as np


def namespace(x):
    """The array module of ``x``: numpy for ndarrays and NumPy scalars, torch for tensors."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np
    import torch

    if isinstance(x, torch.Tensor):
        return torch
    raise ValueError(f"expected a float32 NumPy array or torch tensor, got {type(x).__name__}")


def require_f32(name, x):
    """Return ``x`` as a float32 array of its own library, or raise ValueError naming ``name``."""
    xp = namespace(x)
    if x.dtype != xp.float32:
        raise ValueError(f"{name} must be float32, got {x.dtype}")
    return np.asarray(x) if xp is np else x


def bits(x):
    """The int32 bit patterns of float32 ``x``."""
    return x.view(namespace(x).int32)


def floats(i):
    """The float32 values of int32 bit patterns ``i``."""
    return i.view(namespace(i).float32)


def i32(xp, like, value):
    """An int32 array of ``value`` shaped and placed like ``like``."""
    if xp is np:
        return np.full(np.shape(like), value, np.int32)
    return xp.full(like.shape, value, dtype=xp.int32, device=like.device)
