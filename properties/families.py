"""Deterministic adversarial routing rows shared by the GPU tests, the kernel smoke run and the mutant sweep.

Each family is one bias [256] and a few logits rows [n, 256], chosen so that the routing rules are
exercised at their edges: exact ties within and across threads, ties at the 8th/9th place, all 256
equal, +0.0/-0.0, subnormals, -inf bias on most or all experts, +-inf logits, sigmoid saturation
(g < -88.7), large positive g, random bit patterns without NaN, bias dominating the scores.
"""

import dataclasses

import numpy as np

N_EXPERTS = 256
TOP_K = 8
INF = np.float32(np.inf)


@dataclasses.dataclass(frozen=True)
class Family:
    """One bias shared by every row of a batch, and the rows."""
    name: str
    bias: np.ndarray
    rows: np.ndarray


def from_bits(bits):
    """float32 values with the given bit patterns."""
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


MIN_SUBNORMAL = from_bits(0x00000001)
MAX_SUBNORMAL = from_bits(0x007FFFFF)


def random_floats(rng, shape):
    """Random float32 bit patterns, NaN redrawn."""
    bits = rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    while np.isnan(values).any():
        nan = np.isnan(values)
        values[nan] = rng.integers(0, 2**32, size=int(nan.sum()), dtype=np.uint64).astype(np.uint32).view(np.float32)
    return values


def random_subnormals(rng, shape):
    """Random subnormals of both signs (and zeros of both signs)."""
    magnitude = rng.integers(0, 0x00800000, size=shape, dtype=np.uint32)
    sign = rng.integers(0, 2, size=shape, dtype=np.uint32) << 31
    return from_bits(magnitude | sign)


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def all_equal(rng):
    values = _f32([0.0, -0.0, 1.5, -3.0, 88.0, -88.0, -90.0, -104.0, 1e30, -1e30, INF, -INF, MIN_SUBNORMAL,
                   -MIN_SUBNORMAL])
    return np.zeros(N_EXPERTS, np.float32), np.repeat(values[:, None], N_EXPERTS, axis=1)


def ties_at_the_eighth_place(rng):
    """w distinct winners, then an equal group straddling ranks 8 and 9, spread over threads."""
    rows = []
    for _ in range(16):
        row = rng.uniform(-4.0, -2.0, N_EXPERTS).astype(np.float32)
        winners = int(rng.integers(0, TOP_K))
        group = int(rng.integers(TOP_K + 1 - winners, TOP_K + 6 - winners))
        experts = rng.permutation(N_EXPERTS)[: winners + group]
        row[experts[:winners]] = rng.uniform(1.0, 3.0, winners).astype(np.float32)
        row[experts[winners:]] = np.float32(rng.uniform(-1.0, 1.0))
        rows.append(row)
    return np.zeros(N_EXPERTS, np.float32), np.stack(rows)


def ties_across_lanes(rng):
    """Tie groups at experts spread across threads and within one thread's experts."""
    rows = [rng.choice(_f32([-1.0, 0.0, 1.0, 2.0]), N_EXPERTS) for _ in range(8)]
    experts = np.arange(N_EXPERTS)
    for modulus in (4, 8, 32, 128):
        row = rng.uniform(-2.0, 0.0, N_EXPERTS).astype(np.float32)
        row[experts % modulus == int(rng.integers(0, modulus))] = 3.0
        rows.append(row)
    return np.zeros(N_EXPERTS, np.float32), np.stack(rows)


def signed_zero(rng):
    """Scores of +0.0 from different sources: 0.5 - 0.5, 1 - 1, 0 + -0.0, 0 + +0.0; logits of both zeros."""
    bias = rng.choice(_f32([0.0, -0.0, -0.5, -1.0, 0.5, -2.0]), N_EXPERTS)
    rows = [rng.choice(_f32([0.0, -0.0, -INF, INF, 30.0, -200.0]), N_EXPERTS) for _ in range(12)]
    return bias, np.stack(rows)


def subnormal(rng):
    """Subnormal logits (sigmoid 0.5, absorbing a subnormal bias) and scores that are subnormal."""
    bias = random_subnormals(rng, N_EXPERTS)
    rows = [random_subnormals(rng, N_EXPERTS) for _ in range(6)]
    rows += [np.full(N_EXPERTS, -INF, np.float32) for _ in range(2)]
    for _ in range(4):
        row = random_subnormals(rng, N_EXPERTS)
        row[rng.random(N_EXPERTS) < 0.5] = -INF
        rows.append(row)
    return bias, np.stack(rows)


def neg_inf_bias_on_most(rng):
    bias = np.full(N_EXPERTS, -INF, np.float32)
    bias[[17, 130, 255]] = rng.normal(0.0, 1.0, 3).astype(np.float32)
    rows = [rng.normal(0.0, 3.0, N_EXPERTS).astype(np.float32) for _ in range(8)]
    rows += [rng.choice(_f32([INF, -INF, 0.0]), N_EXPERTS) for _ in range(4)]
    return bias, np.stack(rows)


def neg_inf_bias_on_all(rng):
    """Every score is -inf: chosen experts must still never be chosen again."""
    rows = [rng.normal(0.0, 3.0, N_EXPERTS).astype(np.float32) for _ in range(4)]
    rows += [random_floats(rng, N_EXPERTS) for _ in range(2)]
    rows += [np.full(N_EXPERTS, INF, np.float32), np.full(N_EXPERTS, -INF, np.float32)]
    return np.full(N_EXPERTS, -INF, np.float32), np.stack(rows)


def infinite_logits(rng):
    bias = rng.normal(0.0, 0.1, N_EXPERTS).astype(np.float32)
    rows = []
    for _ in range(12):
        row = rng.normal(0.0, 3.0, N_EXPERTS).astype(np.float32)
        pick = rng.random(N_EXPERTS)
        row[pick < 0.3] = INF
        row[pick > 0.7] = -INF
        rows.append(row)
    return bias, np.stack(rows)


def saturation(rng):
    """g < -87.3 (div.full's 0.25 branch), g < -88.7 (exp overflows, s = 0), whole rows with s = 0."""
    rows = [rng.uniform(-105.0, -80.0, N_EXPERTS).astype(np.float32) for _ in range(6)]
    rows += [rng.uniform(-300.0, -89.0, N_EXPERTS).astype(np.float32) for _ in range(4)]
    rows += [np.linspace(-104.0, -86.0, N_EXPERTS, dtype=np.float32), np.linspace(-89.0, -88.0, N_EXPERTS,
                                                                                  dtype=np.float32)]
    return np.zeros(N_EXPERTS, np.float32), np.stack(rows)


def large_positive(rng):
    """Sigmoid 1.0 or just below (ex2's subnormal branch for g > 87.3), ties everywhere."""
    rows = [rng.uniform(10.0, 100.0, N_EXPERTS).astype(np.float32) for _ in range(6)]
    rows += [np.exp(rng.uniform(0.0, 87.0, N_EXPERTS)).astype(np.float32) for _ in range(4)]
    rows += [np.linspace(14.0, 18.0, N_EXPERTS, dtype=np.float32), np.full(N_EXPERTS, INF, np.float32)]
    return np.zeros(N_EXPERTS, np.float32), np.stack(rows)


def random_bits(rng):
    return random_floats(rng, N_EXPERTS), np.stack([random_floats(rng, N_EXPERTS) for _ in range(16)])


def bias_dominating(rng):
    """|bias| up to 1e6 swamps the sigmoid; four experts at +inf tie."""
    bias = (rng.choice(_f32([-1.0, 1.0]), N_EXPERTS) * 10.0 ** rng.uniform(2.0, 6.0, N_EXPERTS)).astype(np.float32)
    bias[rng.permutation(N_EXPERTS)[:4]] = INF
    return bias, np.stack([rng.normal(0.0, 3.0, N_EXPERTS).astype(np.float32) for _ in range(12)])


def near_ties(rng):
    """Logits a few ulps apart: equal or adjacent sigmoids."""
    rows = []
    for _ in range(12):
        base = from_bits(np.full(N_EXPERTS, np.float32(rng.uniform(-6.0, 6.0)).view(np.uint32)))
        ulps = rng.integers(-3, 4, N_EXPERTS).astype(np.int64)
        rows.append(from_bits((base.view(np.uint32).astype(np.int64) + ulps).astype(np.uint32)))
    return np.zeros(N_EXPERTS, np.float32), np.stack(rows)


def typical(rng):
    bias = rng.normal(0.0, 0.05, N_EXPERTS).astype(np.float32)
    return bias, np.stack([rng.normal(0.0, 2.0, N_EXPERTS).astype(np.float32) for _ in range(16)])


_BUILDERS = (all_equal, ties_at_the_eighth_place, ties_across_lanes, signed_zero, subnormal, neg_inf_bias_on_most,
             neg_inf_bias_on_all, infinite_logits, saturation, large_positive, random_bits, bias_dominating,
             near_ties, typical)


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
    pool = np.concatenate([f.rows for f in all_families] + [random_floats(rng, (64, N_EXPERTS))])
    return np.ascontiguousarray(pool[rng.permutation(max(n, len(pool)))[:n] % len(pool)])
