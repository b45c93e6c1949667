"""Deterministic work: batch i of seed s is a pure function of (s, i), the Space and the device type.

A plan fixes what a CUDA graph of launches bakes in: b, tile_n and, per problem (one routing call of b rows),
its family, scale, renormalize and local expert range. Plan k serves batches k * plan_batches ..
(k + 1) * plan_batches - 1; each batch draws fresh logits and biases on the device from its own seed.
"""

import functools
from dataclasses import dataclass

import numpy as np
import torch

from properties.soak import bulk
from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, metadata_size
from properties.inputs.draws import FLT_MAX, RANK_SPLITS, SPECIAL_SCALES, SPECIAL_TILES

PLAIN_SHARE = 0.25  # of a batch's problems are plain rows; the edge-case families share the rest
NO_METADATA_SHARE = 0.25  # of plans (metadata "mixed") ask for no metadata
SCALES_PER_PLAN = 4
WEIGHT_OVERFLOW_SCALE = (1e37, FLT_MAX)
METADATA_CHOICES = ("mixed", "on", "off")
_PLAN, _BATCH = 0, 1  # seed-sequence words telling plan and batch streams apart


def metadata_stride(tile_n):
    """Elements per problem in a batch's metadata buffer: metadata_size(tile_n) rounded up to 16 bytes."""
    return (metadata_size(tile_n) + 3) // 4 * 4


def stream(seed, kind, index):
    """A 63-bit seed for stream ``kind`` (plan or batch) number ``index`` of ``seed``."""
    return int(np.random.SeedSequence([seed, kind, index]).generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclass(frozen=True)
class Space:
    """What plans draw from: token counts b, renormalize values, metadata ("mixed", "on", "off"), tiles
    (None: the catalog's special tiles or any in 1..256), families, problems per batch, batches per plan."""

    b: tuple = tuple(range(1, MAX_TOKENS + 1))
    renormalize: tuple = (False, True)
    metadata: str = "mixed"
    tiles: tuple | None = None
    families: tuple = bulk.FAMILIES
    problems: int = 8192
    plan_batches: int = 128

    def __post_init__(self):
        def fail(name, contract, got):
            raise ValueError(f"{name} must be {contract}, got {got!r}")
        if not self.b or any(not 1 <= b <= MAX_TOKENS for b in self.b):
            fail("b", f"one or more of 1..{MAX_TOKENS}", self.b)
        if not self.renormalize or any(not isinstance(r, bool) for r in self.renormalize):
            fail("renormalize", "one or more bools", self.renormalize)
        if self.metadata not in METADATA_CHOICES:
            fail("metadata", f"one of {METADATA_CHOICES}", self.metadata)
        if self.tiles is not None and (not self.tiles or any(not 1 <= t <= MAX_TILE for t in self.tiles)):
            fail("tiles", f"one or more of 1..{MAX_TILE}", self.tiles)
        unknown = sorted(set(self.families) - set(bulk.FAMILIES))
        if not self.families or unknown:
            fail("families", f"one or more of {bulk.FAMILIES}", unknown or self.families)
        if self.problems < 1:
            fail("problems", "at least 1", self.problems)
        if self.plan_batches < 1:
            fail("plan_batches", "at least 1", self.plan_batches)


@dataclass(frozen=True, eq=False)
class Plan:
    """Per-problem parameters of plan ``index`` of ``seed``; problems of one family are contiguous, in
    ``runs`` order ((family, start, end), empty runs left out)."""

    seed: int
    index: int
    b: int
    tile_n: int | None
    runs: tuple
    scale: np.ndarray  # float32 [P]
    renormalize: np.ndarray  # bool [P]
    offset: np.ndarray  # int64 [P]
    count: np.ndarray  # int64 [P]

    @property
    def problems(self):
        return len(self.scale)

    @property
    def rows(self):
        return self.problems * self.b

    def family_of(self, problem):
        return next(name for name, start, end in self.runs if start <= problem < end)


def _finite_bits(rng, n):
    """n random finite float32 values (bit patterns with an exponent below 255)."""
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    return np.where((bits & 0x7F800000) == 0x7F800000, bits & 0x807FFFFF, bits).view(np.float32)


def _scales(rng):
    """SCALES_PER_PLAN scales: each a special scale, a routed scaling factor in 0.5 .. 4, or any finite."""
    kind = rng.integers(0, 3, SCALES_PER_PLAN)
    special = np.array(SPECIAL_SCALES, np.float32)[rng.integers(0, len(SPECIAL_SCALES), SCALES_PER_PLAN)]
    factor = rng.uniform(0.5, 4.0, SCALES_PER_PLAN).astype(np.float32)
    return np.select([kind == 0, kind == 1], [special, factor], _finite_bits(rng, SCALES_PER_PLAN))


def local_ranges(rng, n):
    """(offset, count) int64 [n]: every expert, none, one, a prefix, a suffix, one rank of an even split into
    2 .. 32 ranks, or any range, as the catalog's local_ranges draws them."""
    kind = rng.integers(0, 7, n)
    anywhere = rng.integers(0, EXPERTS + 1, n)
    ranks = np.array(RANK_SPLITS)[rng.integers(0, len(RANK_SPLITS), n)]
    width = EXPERTS // ranks
    below = rng.integers(0, EXPERTS, n)
    offset = np.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4, kind == 5],
                       [0, anywhere, below, 0, below, rng.integers(0, ranks) * width], anywhere)
    spare = EXPERTS - offset
    count = np.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4, kind == 5],
                      [EXPERTS, 0, 1, rng.integers(1, EXPERTS + 1, n), spare, width],
                      (rng.random(n) * (spare + 1)).astype(np.int64))
    return offset.astype(np.int64), count.astype(np.int64)


def _runs(space, index):
    """(family, start, end) per family: plain rows take PLAIN_SHARE, the others split the rest evenly, the
    remainder going to families in turn from plan to plan."""
    families = list(space.families)
    plain = round(space.problems * PLAIN_SHARE) if bulk.PLAIN in families and len(families) > 1 else 0
    edge = [f for f in families if f != bulk.PLAIN] or families
    share, extra = divmod(space.problems - plain, len(edge))
    sizes = {f: share + ((i - index) % len(edge) < extra) for i, f in enumerate(edge)}
    if plain:
        sizes[bulk.PLAIN] = plain
    runs, start = [], 0
    for family in families:
        if sizes.get(family):
            runs.append((family, start, start + sizes[family]))
            start += sizes[family]
    return tuple(runs)


def make_plan(space, seed, index):
    """Plan ``index`` of ``seed``, drawn from ``space`` on the host (same on every machine)."""
    rng = np.random.default_rng(stream(seed, _PLAN, index))
    b = int(rng.choice(space.b))
    metadata = space.metadata == "on" or (space.metadata == "mixed" and rng.random() >= NO_METADATA_SHARE)
    tiles = space.tiles or (SPECIAL_TILES if rng.random() < 0.5 else tuple(range(1, MAX_TILE + 1)))
    tile_n = int(rng.choice(tiles)) if metadata else None
    runs = _runs(space, index)
    n = space.problems
    scale = _scales(rng)[rng.integers(0, SCALES_PER_PLAN, n)]
    renormalize = np.array(space.renormalize)[rng.integers(0, len(space.renormalize), n)]
    for family, start, end in runs:
        if family == bulk.WEIGHT_OVERFLOW:  # scale / total must overflow: renormalized, scale >= 1e37
            low, high = np.array(WEIGHT_OVERFLOW_SCALE, np.float32).view(np.int32)
            scale[start:end] = rng.integers(low, high, end - start, endpoint=True).astype(np.int32).view(np.float32)
            renormalize[start:end] = True
    offset, count = local_ranges(rng, n) if metadata else (np.zeros(n, np.int64), np.zeros(n, np.int64))
    return Plan(seed, index, b, tile_n, runs, scale.astype(np.float32), renormalize.astype(bool), offset, count)


class Plans:
    """The plans of ``seed`` over ``space``, each drawn once when its first batch comes (the current one
    kept)."""

    def __init__(self, space, seed):
        self.space, self.seed, self.plan = space, seed, None

    def for_batch(self, index):
        k = index // self.space.plan_batches
        if self.plan is None or self.plan.index != k:
            self.plan = make_plan(self.space, self.seed, k)
        return self.plan


@dataclass(frozen=True, eq=False)
class Batch:
    """Batch ``index`` of ``plan``: logits float32 [P, b, 256], bias float32 [P, 256] and the plan's
    per-problem parameters as tensors on the same device."""

    plan: Plan
    index: int
    logits: torch.Tensor
    bias: torch.Tensor
    scale: torch.Tensor
    renormalize: torch.Tensor
    offset: torch.Tensor
    count: torch.Tensor


@functools.lru_cache(maxsize=4)
def parameters(plan, device):
    """(scale, renormalize, offset, count) of ``plan`` on ``device``, copied there once per plan: a copy from
    the host at every batch would make the host wait for the device's queue."""
    return tuple(torch.from_numpy(x).to(device) for x in (plan.scale, plan.renormalize, plan.offset, plan.count))


def batch_seed(plan, index):
    """The seed of batch ``index``'s generator."""
    return stream(plan.seed, _BATCH, index)


def draw(plan, generator, device):
    """(logits, bias) of one batch of ``plan`` drawn from ``generator`` on ``device``, on the current stream."""
    logits = torch.empty((plan.problems, plan.b, EXPERTS), dtype=torch.float32, device=device)
    bias = torch.empty((plan.problems, EXPERTS), dtype=torch.float32, device=device)
    for family, start, end in plan.runs:
        logits[start:end], bias[start:end] = bulk.generate(family, generator, end - start, plan.b, device)
    return logits, bias


def make_batch(plan, index, device):
    """Batch ``index`` of ``plan`` drawn on ``device`` from a generator seeded by (plan.seed, index), on the
    current stream."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(batch_seed(plan, index))
    return Batch(plan, index, *draw(plan, generator, device), *parameters(plan, device))
