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
    """An int32 scalar of ``value`` that broadcasts against ``like`` (on its device for torch)."""
    if xp is np:
        return np.int32(value)
    return xp.tensor(value, dtype=xp.int32, device=like.device)


def truncate_to_i32(x):
    """``x`` converted to int32: float32 toward zero, int64 as is (finite inputs within int32 range)."""
    xp = namespace(x)
    return x.astype(np.int32) if xp is np else x.to(xp.int32)


def i64(i):
    """int32 ``i`` widened to int64 (NumPy's gathers index with int64 without converting it again)."""
    return i.astype(np.int64) if namespace(i) is np else i.to(namespace(i).int64)


def nowhere(cond):
    """True for a NumPy boolean array that is false everywhere; False for torch, so the GPU runs every branch.

    The model uses it to skip work on the common path of a NumPy block: special inputs are rare.
    """
    return isinstance(cond, np.ndarray) and not cond.any()


def select(cond, a, b):
    """where(cond, a, b), returning ``b`` itself where ``nowhere(cond)``; ``b`` has the result's shape and dtype."""
    return b if nowhere(cond) else namespace(b).where(cond, a, b)


def take(table, index):
    """table[index] for a 1-D table and an int32 index array of the same library, every index in range
    (NumPy's bounds-checking mode costs more than the gather)."""
    return np.take(table, index, mode="clip") if isinstance(table, np.ndarray) else table[index]
