"""The structure survey of the MUFU units not yet modelled (GPU): what the fits of their models are derived from.

    python -m oracles.mufu survey DIR      writes DIR/survey.json and DIR/survey-N.xz (nothing else)

For each instruction of hardware.UNARY it records, over all 2^32 inputs, per input binade (sign, exponent):
how many outputs are normal, subnormal, zero, infinite or NaN (by sign); for pairs of instructions the
binades where the .ftz and plain forms differ; the sign symmetry f(-x) against f(x); for rsqrt and sqrt,
per binade, how many outputs follow from the two base binades [1, 4) by an exponent shift. Whole binades of
outputs (CHUNKS) are kept as second differences of their bit patterns (int8, larger ones escaped), each
chunk its own xz stream, in priority order until the size budget is spent. The 16-bit instructions of
hardware.HALF are kept whole (every input).

How the structures were found (the survey of data/mufu-survey.json). LG2: for x >= 1 the outputs are
RZ(e + lg2(m)), for x < 1 not; V is known only to an interval from its two binades ([1, 2): V toward zero;
[0.5, 1): 2^36 - V - 1 toward zero), and with plain negation instead of the one's complement the two contradict
each other at 36 fraction bits; the interval fitter then finds exactly one (C1, C2) in each of the 64 segments.
SIN and COS: their .ftz and plain forms are equal on all 2^32 inputs (one SASS), so both get one function; S
fits the same way (64 segments). TANH: every binade's outputs are constant on aligned runs of 2^(23 - q) inputs
(q the fraction bits kept); the error against tanh of the quantised input is a cubic-like wave per segment of
2^17 quanta, with jumps at the segment ends, so R, in units of the segment's lowest output, is bounded to
[y, y + ulp(y)) and the interval fitter with the family's squarer (2^19) finds one (C1, C2) in each of the 51
segments at shift 17. Least-squares quadratics over the float outputs cannot see the truncated squarer's bands
(period-4 patterns in the first differences). Against the correctly rounded value on [1, 4), RSQ and SQRT are
within one ulp but for 8 RSQ outputs of [1, 2) at -2 ulp.
"""

import hashlib
import json
import lzma
import re
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from oracles.mufu import hardware

DEVICE = "cuda"
BINADE = 1 << 23
SWEEP_STEP = 1 << 28
FILE_BUDGET = 15 << 20
FILES = 5
_ESCAPE = -128
_XZ = [{"id": lzma.FILTER_LZMA2, "preset": 3}]


def _chunks():
    """[(instruction, sign, exponent)] of the binades kept whole, most valuable first."""
    out = []
    for op in ("rsqrt_approx_ftz_f32", "sqrt_approx_ftz_f32"):
        out += [(op, 0, 127), (op, 0, 128)]
    for op in ("rsqrt_approx_f32", "sqrt_approx_f32", "lg2_approx_f32"):
        out += [(op, 0, 0)]
    out += [("lg2_approx_ftz_f32", 0, e) for e in (127, 126, 128, 125, 129)]
    out += [("tanh_approx_f32", 0, e) for e in range(127, 100, -1)] + [("tanh_approx_f32", 0, e)
                                                                        for e in range(128, 134)]
    out += [(op, 0, e) for e in range(124, 131) for op in ("sin_approx_f32", "cos_approx_f32")]
    out += [("lg2_approx_ftz_f32", 0, e) for e in list(range(130, 158)) + list(range(124, 96, -1))]
    out += [(op, 0, e) for e in list(range(123, 112, -1)) + [131, 132, 133, 135, 140]
            for op in ("sin_approx_f32", "cos_approx_f32")]
    out += [("tanh_approx_f32", 0, e) for e in list(range(100, 0, -1)) + list(range(134, 255))]
    out += [("lg2_approx_ftz_f32", 0, e) for e in (1, 2, 27, 64, 190, 227, 253, 254)]
    out += [(op, 0, e) for e in (1, 60, 100, 110) for op in ("sin_approx_f32", "cos_approx_f32")]
    return out


PAIRS = (("rcp_approx_ftz_f32", "rcp_approx_f32"), ("rsqrt_approx_ftz_f32", "rsqrt_approx_f32"),
         ("sqrt_approx_ftz_f32", "sqrt_approx_f32"), ("lg2_approx_ftz_f32", "lg2_approx_f32"),
         ("sin_approx_ftz_f32", "sin_approx_f32"), ("cos_approx_ftz_f32", "cos_approx_f32"))
_CLASSES = ("normal", "subnormal", "zero", "inf", "nan")


def _binade_bits(sign, exponent):
    base = (sign << 31) | (exponent << 23)
    return hardware.bit_range(base, BINADE, DEVICE)


def _out_class(y):
    b = y.view(torch.int32)
    e = (b >> 23) & 0xFF
    f = b & 0x7FFFFF
    cls = torch.where(e == 255, torch.where(f == 0, 3, 4), torch.where(e == 0, torch.where(f == 0, 2, 1), 0))
    return cls + 5 * (b < 0).to(torch.int64)


def _summaries():
    """{op: [[counts of the 10 output classes] per input binade 0..511]}, the ftz pairs and symmetries."""
    classes = {op: torch.zeros(512 * 10, dtype=torch.int64, device=DEVICE) for op in hardware.UNARY}
    odd = {op: torch.zeros(256, dtype=torch.int64, device=DEVICE) for op in hardware.UNARY}
    even = {op: torch.zeros(256, dtype=torch.int64, device=DEVICE) for op in hardware.UNARY}
    pair_diff = {a: torch.zeros(512, dtype=torch.int64, device=DEVICE) for a, _ in PAIRS}
    step = SWEEP_STEP
    for start in range(0, 1 << 31, step):
        x = hardware.bit_range(start, step, DEVICE)
        binade = (x.view(torch.int32) >> 23).to(torch.int64) & 0xFF
        outs = {}
        for op in hardware.UNARY:
            yp = hardware.unary(op, x)
            yn = hardware.unary(op, -x)
            outs[op] = (yp, yn)
            classes[op] += torch.bincount(binade * 10 + _out_class(yp), minlength=5120)
            classes[op] += torch.bincount((binade + 256) * 10 + _out_class(yn), minlength=5120)
            bp, bn = yp.view(torch.int32), yn.view(torch.int32)
            odd[op] += torch.bincount(binade[bn == (bp ^ -0x80000000)], minlength=256)
            even[op] += torch.bincount(binade[bn == bp], minlength=256)
        for a, b in PAIRS:
            for k in range(2):
                differ = outs[a][k].view(torch.int32) != outs[b][k].view(torch.int32)
                pair_diff[a] += torch.bincount(binade[differ] + 256 * k, minlength=512)
        del outs
    as_list = lambda t: t.cpu().tolist()
    return ({op: [as_list(c)[i * 10:(i + 1) * 10] for i in range(512)] for op, c in classes.items()},
            {op: {"odd": as_list(odd[op]), "even": as_list(even[op])} for op in hardware.UNARY},
            {f"{a} vs {b}": as_list(pair_diff[a]) for a, b in PAIRS})


def _separability():
    """{op: [outputs per positive binade equal to the base binade's shifted by -(e - base)/2 (rsqrt) or
    +(e - base)/2 (sqrt) exponents]}, base 127 or 128 of the same parity."""
    out = {}
    for op, direction in (("rsqrt_approx_ftz_f32", -1), ("sqrt_approx_ftz_f32", 1)):
        base = {p: hardware.unary(op, _binade_bits(0, p)).view(torch.int32) for p in (127, 128)}
        counts = []
        for e in range(256):
            p = 127 + (e - 127) % 2
            y = hardware.unary(op, _binade_bits(0, e)).view(torch.int32)
            counts.append(int((y == base[p] + direction * ((e - p) // 2) * (1 << 23)).sum()))
        out[op] = counts
    return out


def _encode(y):
    """(raw bytes before xz, first two output bits, escapes) of an int64 CUDA tensor of output bits."""
    d = y[2:] - 2 * y[1:-1] + y[:-2]
    big = (d < -127) | (d > 127)
    q = torch.where(big, _ESCAPE, d).to(torch.int8)
    where = torch.nonzero(big).flatten()
    raw = (q.cpu().numpy().tobytes() + where.to(torch.int32).cpu().numpy().tobytes()
           + d[where].cpu().numpy().astype(np.int64).tobytes())
    return raw, [int(y[0]), int(y[1])], int(where.numel())


def decode(raw, first, escapes, count):
    """uint32 output bits of one chunk from its decompressed bytes (the inverse of ``_encode``)."""
    n = count - 2
    d = np.frombuffer(raw[:n], np.int8).astype(np.int64)
    where = np.frombuffer(raw[n:n + 4 * escapes], np.int32)
    d[where] = np.frombuffer(raw[n + 4 * escapes:n + 12 * escapes], np.int64)
    y = np.empty(count, np.int64)
    y[0], y[1] = first
    # y[i+2] = d[i] + 2 y[i+1] - y[i]: the first differences are a prefix sum of d.
    first_diff = np.concatenate([[first[1] - first[0]], first[1] - first[0] + np.cumsum(d)])
    y[1:] = first[0] + np.cumsum(first_diff)
    return (y & 0xFFFFFFFF).astype(np.uint32)


def _halves():
    x = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32, device=DEVICE).to(torch.int16)
    return {op: hardware.half(op, x).cpu().numpy().view(np.uint16) for op in hardware.HALF}, x.cpu().numpy()


def run(out_dir):
    """Measure and write the survey into ``out_dir``; returns the index record."""
    from common import provenance

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    index = {"provenance": provenance.record(),
             "classes_order": [f"{s}{c}" for s in "+-" for c in _CLASSES]}
    def phase(name, fn):
        try:
            fn()
        except Exception as exc:  # a failed phase is recorded and the others still run: one GPU call each
            index.setdefault("failed_phases", {})[name] = traceback.format_exc()
            print("phase", name, "failed:", exc, flush=True)
        (out_dir / "survey.json").write_text(json.dumps(index) + "\n")
        print(name, "done", round(time.perf_counter() - t0, 1), flush=True)

    def halves():
        measured, inputs = _halves()
        np.savez_compressed(out_dir / "survey-half.npz", inputs=inputs.view(np.uint16), **measured)

    def separability():
        index["separability"] = _separability()

    def summaries():
        index["classes"], index["symmetry"], index["ftz_pairs"] = _summaries()

    phase("halves", halves)
    phase("separability", separability)
    phase("summaries", summaries)
    phase("chunks", lambda: _write_chunks(out_dir, index, t0))
    index["seconds"] = round(time.perf_counter() - t0, 1)
    (out_dir / "survey.json").write_text(json.dumps(index) + "\n")
    return index


def _write_chunks(out_dir, index, t0):
    chunks, files, used = [], [], 0
    pool = ThreadPoolExecutor(16)
    pending = []
    for op, sign, exponent in _chunks():
        y = hardware.unary(op, _binade_bits(sign, exponent)).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        digest = hashlib.sha256(y.to(torch.int32).cpu().numpy().view(np.uint32).tobytes()).hexdigest()
        raw, first, escapes = _encode(y)
        pending.append(({"op": op, "sign": sign, "exponent": exponent, "count": int(y.numel()), "first": first,
                         "escapes": escapes,
                         "sha256": digest}, pool.submit(lzma.compress, raw, format=lzma.FORMAT_XZ, filters=_XZ)))
    print("chunks measured", len(pending), round(time.perf_counter() - t0, 1), flush=True)
    current, current_bytes = None, 0
    for entry, future in pending:
        data = future.result()
        if current is None or current_bytes + len(data) > FILE_BUDGET:
            if len(files) == FILES:
                entry["skipped"] = len(data)
                chunks.append(entry)
                continue
            if current is not None:
                current.close()
            files.append(f"survey-{len(files)}.xz")
            current, current_bytes = open(out_dir / files[-1], "wb"), 0
        entry.update(file=files[-1], offset=current_bytes, bytes=len(data))
        current.write(data)
        current_bytes += len(data)
        used += len(data)
        chunks.append(entry)
    current.close()
    index["chunks"] = chunks
    print("survey written", used, "bytes in", len(files), "files,",
          sum("skipped" in c for c in chunks), "chunks skipped", flush=True)


def read_chunk(directory, entry):
    """The uint32 outputs of one chunk of a survey written by ``run``."""
    with open(Path(directory) / entry["file"], "rb") as f:
        f.seek(entry["offset"])
        raw = lzma.decompress(f.read(entry["bytes"]))
    y = decode(raw, entry["first"], entry["escapes"], entry["count"])
    if hashlib.sha256(y.tobytes()).hexdigest() != entry["sha256"]:
        raise ValueError(f"chunk {entry['op']} {entry['sign']} {entry['exponent']} does not decode to its sha256")
    return y


RECORD_FILE = Path(__file__).resolve().parent / "data" / "mufu-survey.json"
HALF_FILE = Path(__file__).resolve().parent / "data" / "mufu-survey-half.bin"


def read_halves(record):
    """{name: uint16 [2^16]} of data/mufu-survey-half.bin, named by the survey record's "half_arrays"."""
    raw = np.frombuffer(lzma.decompress(HALF_FILE.read_bytes()), "<u2").reshape(len(record["half_arrays"]), -1)
    return {name: raw[i].astype(np.uint16) for i, name in enumerate(record["half_arrays"])}


def write_record(directory):
    """The committed evidence of a survey folder: data/mufu-survey.json (its index without the chunk data:
    each chunk's sha256, the summaries, the provenance) and data/mufu-survey-half.bin (every 16-bit output:
    the arrays named in the record's "half_arrays", uint16 little-endian, one after the other, xz)."""
    index = json.loads((Path(directory) / "survey.json").read_text())
    keep = ("op", "sign", "exponent", "count", "sha256")
    record = {key: index[key] for key in ("provenance", "classes_order", "separability", "symmetry", "ftz_pairs",
                                          "classes")}
    record["chunks"] = [{k: c[k] for k in keep} for c in index["chunks"]]
    halves = np.load(Path(directory) / "survey-half.npz")
    record["half_arrays"] = ["inputs", *hardware.HALF]
    text = json.dumps(record, indent=0)
    text = re.sub(r"\[\s+([-\d,\s]+?)\s+\]", lambda m: "[" + ",".join(m.group(1).replace(",", " ").split()) + "]",
                  text)
    RECORD_FILE.write_text(text + "\n")
    HALF_FILE.write_bytes(lzma.compress(b"".join(halves[name].astype("<u2").tobytes() for name in record["half_arrays"]),
                                        format=lzma.FORMAT_XZ, filters=_XZ))
    print(f"wrote {RECORD_FILE} ({RECORD_FILE.stat().st_size} bytes) and {HALF_FILE} ({HALF_FILE.stat().st_size} bytes)")
    return 0
