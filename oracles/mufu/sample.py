"""The stratified input sample recorded on the H200 and replayed against the model on every CPU run.

Inputs are float32 bit patterns made by a counter-based generator (splitmix64 in NumPy integer arithmetic),
so every machine and NumPy version makes the same ones. Strata: every binade of both signs with random
significands, and the special values and branch points of the primitives in dense neighbourhoods.
"""

import numpy as np

BINADE_DRAWS = 1960  # 2 signs x 256 exponents x 1960 = 1,003,520 unary inputs
PAIR_DRAWS = 4  # 4 sign pairs x 256 x 256 exponent pairs x 4 = 1,048,576 binary inputs
NEIGHBOURS = 64  # ulps on either side of each branch point

# Bit patterns (hex, TestFloat style) of the points where some primitive changes its path.
BRANCH_POINTS = (
    0x00000000, 0x00000001, 0x007FFFFF, 0x00800000,  # zero, subnormal edges, 2^-126
    0x3F800000, 0x3F000000, 0x3E800000,  # 1, 0.5, 0.25
    0x42FC0000, 0x43000000, 0x42FE0000,  # 126, 128, 127: ex2 overflow edge, the -126 halving point
    0x43150000, 0x43160000, 0x43140000,  # 149, 150, 148: ex2's subnormal results end
    0x42AEAC50, 0x42B17218, 0x42AE0000,  # 87.34 (div.full's 0.25 branch in sigmoid), 88.72 (ex2 overflow)
    0x41855555, 0x41800000, 0x41200000,  # about 16.67, 16, 10: where the sigmoid reaches 1.0
    0x7E800000, 0x7F000000, 0x7F7FFFFF,  # 2^126, 2^127, the largest float
    0x4B800000, 0x33800000,  # 2^24, 2^-24
    0x7F800000,  # infinity
)
NAN_PATTERNS = (0x7FC00000, 0x7FFFFFFF, 0x7F800001, 0x7FA00000)


def splitmix64(counter):
    """splitmix64 of uint64 counters: well-mixed uint64, identical on every platform."""
    with np.errstate(over="ignore"):
        z = counter.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _random_bits(stream, count):
    counter = np.arange(count, dtype=np.uint64) + (np.uint64(stream) << np.uint64(40))
    return splitmix64(counter)


def _neighbourhoods():
    points = np.array(BRANCH_POINTS, np.int64)
    offsets = np.arange(-NEIGHBOURS, NEIGHBOURS + 1, dtype=np.int64)
    near = (points[:, None] + offsets[None, :]).reshape(-1)
    near = near[(near >= 0) & (near <= 0x7F800000)]
    magnitudes = np.concatenate([near, np.array(NAN_PATTERNS, np.int64)])
    return np.unique(np.concatenate([magnitudes, magnitudes | 0x80000000])).astype(np.uint32)


def unary_specials():
    """uint32 bit patterns of the branch-point stratum (both signs, dense neighbourhoods, NaNs)."""
    return _neighbourhoods()


def unary_binades():
    """uint32 bit patterns: BINADE_DRAWS random significands in every (sign, exponent)."""
    r = _random_bits(1, 2 * 256 * BINADE_DRAWS)
    head = np.repeat(np.arange(2 * 256, dtype=np.uint64), BINADE_DRAWS) << np.uint64(23)
    return (head | (r & np.uint64(0x7FFFFF))).astype(np.uint32)


def binary_specials():
    """(a, b) uint32 patterns: every pair of a short list of special values, NaN, infinities and edges."""
    values = np.array(BRANCH_POINTS + NAN_PATTERNS[:1], np.uint32)
    values = np.concatenate([values, values | np.uint32(0x80000000)])
    a, b = np.meshgrid(values, values, indexing="ij")
    return a.reshape(-1), b.reshape(-1)


def binary_exponent_pairs():
    """(a, b) uint32 patterns: PAIR_DRAWS random significands for every sign pair and exponent pair."""
    n = 4 * 256 * 256 * PAIR_DRAWS
    head = np.repeat(np.arange(4 * 256 * 256, dtype=np.uint64), PAIR_DRAWS)
    sign_a, sign_b = (head >> np.uint64(17)) & np.uint64(1), (head >> np.uint64(16)) & np.uint64(1)
    exp_a, exp_b = (head >> np.uint64(8)) & np.uint64(0xFF), head & np.uint64(0xFF)
    r = _random_bits(2, n)
    a = (sign_a << np.uint64(31)) | (exp_a << np.uint64(23)) | (r & np.uint64(0x7FFFFF))
    b = (sign_b << np.uint64(31)) | (exp_b << np.uint64(23)) | ((r >> np.uint64(32)) & np.uint64(0x7FFFFF))
    return a.astype(np.uint32), b.astype(np.uint32)


UNARY_STRATA = {"specials": unary_specials, "binades": unary_binades}
BINARY_STRATA = {"specials": binary_specials, "exponent_pairs": binary_exponent_pairs}

DIGEST_CHUNK = 4096


def chunk_digests(output_bits):
    """blake2b-128 hex digest of each DIGEST_CHUNK consecutive uint32 outputs (the last chunk may be short)."""
    import hashlib

    out = np.ascontiguousarray(output_bits, dtype=np.uint32)
    return [hashlib.blake2b(out[i:i + DIGEST_CHUNK].tobytes(), digest_size=16).hexdigest()
            for i in range(0, out.size, DIGEST_CHUNK)]
