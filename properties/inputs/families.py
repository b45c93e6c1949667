"""Deterministic adversarial routing rows shared by the GPU tests, the smoke run and the mutant sweep.

Each family is one bias [256] and a few logits rows [n, 256], chosen so that the routing rules are
exercised at their edges; each is named for its edge case in properties/inputs/edge_cases.py: exact ties within
and across threads, ties at the 8th/9th place, all 256 equal, +0.0/-0.0, subnormals, -inf bias on most or
all experts, +-inf logits, sigmoid saturation (g < -88.7), large positive g, random bit patterns without
NaN, bias dominating the scores.
"""

import dataclasses

import numpy as np

from kernel.layout import EXPERTS, TOP_K
from properties.engine.floats import MIN_SUBNORMAL, f32, random_non_nan
from properties.inputs.edge_cases import require

INF = np.float32(np.inf)


@dataclasses.dataclass(frozen=True)
class Family:
    """One bias shared by every row of a batch, and the rows."""
    name: str
    bias: np.ndarray
    rows: np.ndarray


def random_subnormals(rng, shape):
    """Random subnormals of both signs (and zeros of both signs)."""
    magnitude = rng.integers(0, 0x00800000, size=shape, dtype=np.uint32)
    sign = rng.integers(0, 2, size=shape, dtype=np.uint32) << 31
    return f32(magnitude | sign)


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def all_equal(rng):
    values = _f32([0.0, -0.0, 1.5, -3.0, 88.0, -88.0, -90.0, -104.0, 1e30, -1e30, INF, -INF, f32(MIN_SUBNORMAL),
                   -f32(MIN_SUBNORMAL)])
    return np.zeros(EXPERTS, np.float32), np.repeat(values[:, None], EXPERTS, axis=1)


def tie_at_eighth_place(rng):
    """w distinct winners, then an equal group straddling ranks 8 and 9, spread over threads."""
    rows = []
    for _ in range(16):
        row = rng.uniform(-4.0, -2.0, EXPERTS).astype(np.float32)
        winners = int(rng.integers(0, TOP_K))
        group = int(rng.integers(TOP_K + 1 - winners, TOP_K + 6 - winners))
        experts = rng.permutation(EXPERTS)[: winners + group]
        row[experts[:winners]] = rng.uniform(1.0, 3.0, winners).astype(np.float32)
        row[experts[winners:]] = np.float32(rng.uniform(-1.0, 1.0))
        rows.append(row)
    return np.zeros(EXPERTS, np.float32), np.stack(rows)


def tie_across_lanes(rng):
    """Tie groups at experts spread across threads and within one thread's experts."""
    rows = [rng.choice(_f32([-1.0, 0.0, 1.0, 2.0]), EXPERTS) for _ in range(8)]
    experts = np.arange(EXPERTS)
    for modulus in (4, 8, 32, 128):
        row = rng.uniform(-2.0, 0.0, EXPERTS).astype(np.float32)
        row[experts % modulus == int(rng.integers(0, modulus))] = 3.0
        rows.append(row)
    return np.zeros(EXPERTS, np.float32), np.stack(rows)


def signed_zeros(rng):
    """Scores of +0.0 from different sources: 0.5 - 0.5, 1 - 1, 0 + -0.0, 0 + +0.0; logits of both zeros."""
    bias = rng.choice(_f32([0.0, -0.0, -0.5, -1.0, 0.5, -2.0]), EXPERTS)
    rows = [rng.choice(_f32([0.0, -0.0, -INF, INF, 30.0, -200.0]), EXPERTS) for _ in range(12)]
    return bias, np.stack(rows)


def subnormal_values(rng):
    """Subnormal logits (sigmoid 0.5, absorbing a subnormal bias) and scores that are subnormal."""
    bias = random_subnormals(rng, EXPERTS)
    rows = [random_subnormals(rng, EXPERTS) for _ in range(6)]
    rows += [np.full(EXPERTS, -INF, np.float32) for _ in range(2)]
    for _ in range(4):
        row = random_subnormals(rng, EXPERTS)
        row[rng.random(EXPERTS) < 0.5] = -INF
        rows.append(row)
    return bias, np.stack(rows)


def minus_inf_bias(rng):
    bias = np.full(EXPERTS, -INF, np.float32)
    bias[[17, 130, 255]] = rng.normal(0.0, 1.0, 3).astype(np.float32)
    rows = [rng.normal(0.0, 3.0, EXPERTS).astype(np.float32) for _ in range(8)]
    rows += [rng.choice(_f32([INF, -INF, 0.0]), EXPERTS) for _ in range(4)]
    return bias, np.stack(rows)


def minus_inf_bias_on_all(rng):
    """Every score is -inf: chosen experts must still never be chosen again."""
    rows = [rng.normal(0.0, 3.0, EXPERTS).astype(np.float32) for _ in range(4)]
    rows += [random_non_nan(rng, EXPERTS) for _ in range(2)]
    rows += [np.full(EXPERTS, INF, np.float32), np.full(EXPERTS, -INF, np.float32)]
    return np.full(EXPERTS, -INF, np.float32), np.stack(rows)


def infinite_logits(rng):
    bias = rng.normal(0.0, 0.1, EXPERTS).astype(np.float32)
    rows = []
    for _ in range(12):
        row = rng.normal(0.0, 3.0, EXPERTS).astype(np.float32)
        pick = rng.random(EXPERTS)
        row[pick < 0.3] = INF
        row[pick > 0.7] = -INF
        rows.append(row)
    return bias, np.stack(rows)


def negative_saturation(rng):
    """g < -87.3 (div.full's 0.25 branch), g < -88.7 (exp overflows, s = 0), whole rows with s = 0."""
    rows = [rng.uniform(-105.0, -80.0, EXPERTS).astype(np.float32) for _ in range(6)]
    rows += [rng.uniform(-300.0, -89.0, EXPERTS).astype(np.float32) for _ in range(4)]
    rows += [np.linspace(-104.0, -86.0, EXPERTS, dtype=np.float32), np.linspace(-89.0, -88.0, EXPERTS,
                                                                                  dtype=np.float32)]
    return np.zeros(EXPERTS, np.float32), np.stack(rows)


def saturated_score(rng):
    """Sigmoid 1.0 or just below (ex2's subnormal branch for g > 87.3), ties everywhere."""
    rows = [rng.uniform(10.0, 100.0, EXPERTS).astype(np.float32) for _ in range(6)]
    rows += [np.exp(rng.uniform(0.0, 87.0, EXPERTS)).astype(np.float32) for _ in range(4)]
    rows += [np.linspace(14.0, 18.0, EXPERTS, dtype=np.float32), np.full(EXPERTS, INF, np.float32)]
    return np.zeros(EXPERTS, np.float32), np.stack(rows)


def random_bits(rng):
    return random_non_nan(rng, EXPERTS), np.stack([random_non_nan(rng, EXPERTS) for _ in range(16)])


def bias_dominates(rng):
    """|bias| up to 1e6 swamps the sigmoid; four experts at +inf tie."""
    bias = (rng.choice(_f32([-1.0, 1.0]), EXPERTS) * 10.0 ** rng.uniform(2.0, 6.0, EXPERTS)).astype(np.float32)
    bias[rng.permutation(EXPERTS)[:4]] = INF
    return bias, np.stack([rng.normal(0.0, 3.0, EXPERTS).astype(np.float32) for _ in range(12)])


def near_ties(rng):
    """Logits a few ulps apart: equal or adjacent sigmoids."""
    rows = []
    for _ in range(12):
        base = f32(np.full(EXPERTS, np.float32(rng.uniform(-6.0, 6.0)).view(np.uint32)))
        ulps = rng.integers(-3, 4, EXPERTS).astype(np.int64)
        rows.append(f32((base.view(np.uint32).astype(np.int64) + ulps).astype(np.uint32)))
    return np.zeros(EXPERTS, np.float32), np.stack(rows)


def typical(rng):
    bias = rng.normal(0.0, 0.05, EXPERTS).astype(np.float32)
    return bias, np.stack([rng.normal(0.0, 2.0, EXPERTS).astype(np.float32) for _ in range(16)])


_BUILDERS = (all_equal, tie_at_eighth_place, tie_across_lanes, signed_zeros, subnormal_values, minus_inf_bias,
             minus_inf_bias_on_all, infinite_logits, negative_saturation, saturated_score, random_bits, bias_dominates,
             near_ties, typical)
require([build.__name__ for build in _BUILDERS], "properties/inputs/families.py")


def families():
    """Every family, each from its own fixed seed (adding a family changes no other)."""
    out = []
    for seed, build in enumerate(_BUILDERS):
        bias, rows = build(np.random.default_rng(seed))
        assert not np.isnan(bias).any() and not np.isnan(rows).any(), build.__name__
        out.append(Family(build.__name__, np.ascontiguousarray(bias, np.float32),
                          np.ascontiguousarray(rows, np.float32)))
    return out


def batches(rows, b):
    """Consecutive batches of b rows covering every row once; the last one wraps to the start."""
    n = len(rows)
    return [rows[np.arange(start, start + b) % n] for start in range(0, n, b)]


def pooled_rows(all_families, n, seed):
    """n rows: every family's rows, repeated and shuffled, with random rows mixed in."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate([f.rows for f in all_families] + [random_non_nan(rng, (64, EXPERTS))])
    return np.ascontiguousarray(pool[rng.permutation(max(n, len(pool)))[:n] % len(pool)])


def unpicked_range(ids):
    """The widest run of experts [offset, offset + count) holding none of ``ids`` (count >= 1)."""
    edges = np.concatenate([[-1], np.unique(ids), [EXPERTS]])
    gap = int(np.argmax(np.diff(edges)))
    return int(edges[gap] + 1), int(edges[gap + 1] - edges[gap] - 1)
