"""Storage of the measured MUFU tables: corrections against the baselines, lzma-compressed, with provenance.

Files in ``data/``:
- ``mufu-tables.bin``: for each table in TABLE_NAMES order, its corrections (hardware bits - baseline bits)
  packed 2 bits each (values -2..1, stored + 2) or, when one falls outside, 1 signed byte each; all of it
  one xz stream. Written only by ``encode``; the same measurements always give the same bytes.
- ``mufu-tables.json``: provenance (GPU, compute capability, driver, CUDA, packages, commit, date), the
  encoding and sha256 of each table, the sha256 of the data file, and the special values as measured.
"""

import functools
import hashlib
import json
import lzma
from pathlib import Path

import numpy as np

from oracles.mufu.baseline import BASELINES, TABLE_SIZE

DATA_DIR = Path(__file__).resolve().parent / "data"
DATA_FILE = DATA_DIR / "mufu-tables.bin"
PROVENANCE_FILE = DATA_DIR / "mufu-tables.json"
TABLE_NAMES = ("ex2_pos", "ex2_neg", "rcp")
# Each table's PTX instruction (oracles/mufu/hardware.py) and the hardware unit that answers it.
INSTRUCTIONS = {"ex2_pos": "ex2_approx_ftz_f32", "ex2_neg": "ex2_approx_ftz_f32", "rcp": "rcp_approx_ftz_f32"}
UNITS = {"ex2_pos": "MUFU.EX2", "ex2_neg": "MUFU.EX2", "rcp": "MUFU.RCP"}
_XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
_TWO_BIT_MIN, _TWO_BIT_MAX = -2, 1


def sha256(data):
    """Hex sha256 of bytes or of an array's raw bytes."""
    return hashlib.sha256(data if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes()).hexdigest()


def _corrections(name, table_bits):
    delta = table_bits.astype(np.int64) - BASELINES[name]().view(np.uint32).astype(np.int64)
    if delta.min() < -128 or delta.max() > 127:
        raise ValueError(f"table {name}: a correction exceeds one signed byte ({delta.min()}..{delta.max()}); "
                         "the hardware is far from the baseline, refusing to store it")
    return delta.astype(np.int8)


def _pack(delta):
    if delta.min() >= _TWO_BIT_MIN and delta.max() <= _TWO_BIT_MAX:
        q = (delta - _TWO_BIT_MIN).astype(np.uint8).reshape(-1, 4)
        return "2bit", (q[:, 0] | q[:, 1] << 2 | q[:, 2] << 4 | q[:, 3] << 6).astype(np.uint8).tobytes()
    return "int8", delta.tobytes()


def _unpack(encoding, raw):
    if encoding == "2bit":
        packed = np.frombuffer(raw, np.uint8)
        q = np.stack([(packed >> s) & 3 for s in (0, 2, 4, 6)], axis=1).reshape(-1)
        return q.astype(np.int64) + _TWO_BIT_MIN
    if encoding == "int8":
        return np.frombuffer(raw, np.int8).astype(np.int64)
    raise ValueError(f"unknown table encoding {encoding!r}")


def encode(tables):
    """(data bytes, per-table metadata) for {name: uint32 bits [2^23]} in TABLE_NAMES order."""
    parts, meta = [], {}
    for name in TABLE_NAMES:
        bits = np.asarray(tables[name], np.uint32)
        if bits.shape != (TABLE_SIZE,):
            raise ValueError(f"table {name} must have {TABLE_SIZE} entries, got {bits.shape}")
        encoding, raw = _pack(_corrections(name, bits))
        meta[name] = {"encoding": encoding, "bytes": len(raw), "sha256": sha256(bits)}
        parts.append(raw)
    return lzma.compress(b"".join(parts), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                         filters=_XZ_FILTERS), meta


def decode(data, meta):
    """{name: uint32 bits [2^23]} from the data bytes and per-table metadata; checks every sha256."""
    raw, offset, tables = lzma.decompress(data), 0, {}
    for name in TABLE_NAMES:
        entry = meta[name]
        delta = _unpack(entry["encoding"], raw[offset:offset + entry["bytes"]])
        offset += entry["bytes"]
        bits = (BASELINES[name]().view(np.uint32).astype(np.int64) + delta).astype(np.uint32)
        if sha256(bits) != entry["sha256"]:
            raise ValueError(f"table {name} does not decode to its recorded sha256: data or baseline changed")
        tables[name] = bits
    if offset != len(raw):
        raise ValueError("mufu table data is longer than its metadata says")
    return tables


def inputs():
    """{name: uint32 float32 bits}: the inputs whose MUFU outputs each table holds, entry f at index f."""
    f = np.arange(TABLE_SIZE, dtype=np.uint32)
    fraction = (f.astype(np.float64) / TABLE_SIZE).astype(np.float32)  # exact: f < 2^23
    return {"ex2_pos": fraction.view(np.uint32), "ex2_neg": (-fraction).view(np.uint32),
            "rcp": f | np.uint32(0x3F800000)}


def read_provenance():
    """The provenance record, or FileNotFoundError with how to make it."""
    if not PROVENANCE_FILE.exists():
        raise FileNotFoundError(f"{PROVENANCE_FILE} is missing: run `python -m oracles.mufu measure` on a GPU")
    return json.loads(PROVENANCE_FILE.read_text())


@functools.lru_cache(maxsize=1)
def load():
    """(tables {name: uint32 [2^23]}, special values {name: int bits}) as measured; read once per process."""
    prov = read_provenance()
    data = DATA_FILE.read_bytes()
    if sha256(data) != prov["data_sha256"]:
        raise ValueError(f"{DATA_FILE} does not match the sha256 in {PROVENANCE_FILE.name}")
    specials = {name: int(value, 16) for name, value in prov["model_constants"].items()}
    return decode(data, prov["tables"]), specials
