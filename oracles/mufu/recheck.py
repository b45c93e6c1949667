"""Whether the MUFU tables hold on the GPU here. They were measured on one GPU model (their provenance in
data/mufu-tables.json: name and compute capability); another model with a committed certification record
(oracles/mufu/certification.py) that certifies it is trusted the same way; on any other a random sample of
every table is measured again (oracles/mufu/hardware.py, a few seconds) before anything trusts the model there.

``check(device, measure)`` takes the GPU's description and the measuring function as arguments, so a CPU
test can stand in for both.
"""

import json

import numpy as np

from common import provenance
from oracles.mufu import certification, tables
from oracles.mufu.certification import card_name as _name
from oracles.mufu.proof import APPROX_16, APPROX_F32, APPROX_SOURCES, PROOF_FILE, model_source_sha256

SAMPLE_PER_TABLE = 4096
MEASURE_COMMAND = f"{certification.COMMAND} on this GPU measures every entry and records what differs"


def this_gpu():
    """{"gpu", "compute_capability"} of CUDA device 0, as the tables' provenance names them."""
    import torch

    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "compute_capability": f"{props.major}.{props.minor}"}


def measure_on_gpu(table, input_bits):
    """The hardware's output bits for ``input_bits`` (uint32) through ``table``'s instruction, on device 0."""
    import torch

    from oracles.mufu import hardware

    x = torch.from_numpy(np.ascontiguousarray(input_bits, np.uint32).view(np.int32)).cuda().view(torch.float32)
    return hardware.unary(tables.INSTRUCTIONS[table], x).view(torch.int32).cpu().numpy().view(np.uint32)


def check(device=None, measure=None, per_table=SAMPLE_PER_TABLE, seed=None):
    """(holds, one line): the tables' GPU model against ``device`` (default: this_gpu()); on another model, its
    certification record (certification.standing) where one certifies it or shows a difference; else
    ``per_table`` random entries of every table through ``measure(table, input_bits) -> output bits`` (default:
    measure_on_gpu) against the recorded ones, the differences counted per unit. ``seed`` (default: fresh)
    is named in the line. A malformed record raises ValueError."""
    device = device or this_gpu()
    recorded = certification.card_of(tables.read_provenance())
    if device == recorded:
        return True, f"MUFU tables measured on {_name(recorded)}, the GPU here: used as measured"
    path, record = certification.for_device(device)
    unused = ""
    if record is not None:
        status, line = certification.standing(record, path, device)
        if status == certification.CERTIFIED:
            return True, f"MUFU tables measured on this GPU model, {_name(device)}: {line}"
        if status == certification.DIFFERS:
            return False, f"MUFU tables measured on {_name(recorded)}, this GPU is {_name(device)}: {line}"
        unused = f" ({line}: sampled instead)"
    measure = measure or measure_on_gpu
    seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else seed
    rng = np.random.default_rng(seed)
    measured, inputs = tables.load()[0], tables.inputs()
    differ, sampled = {}, {}
    for table in tables.TABLE_NAMES:
        index = rng.choice(len(inputs[table]), per_table, replace=False)
        got = np.asarray(measure(table, inputs[table][index]), np.uint32)
        unit = tables.UNITS[table]
        differ[unit] = differ.get(unit, 0) + int(np.count_nonzero(got != measured[table][index]))
        sampled[unit] = sampled.get(unit, 0) + per_table
    where = f"MUFU tables measured on {_name(recorded)}, this GPU is {_name(device)}{unused}"
    if any(differ.values()):
        counts = ", ".join(f"{unit} in {n:,} of {sampled[unit]:,} sampled entries"
                           for unit, n in differ.items() if n)
        return False, f"{where}: they differ here ({counts}, seed {seed}); {MEASURE_COMMAND}"
    return True, (f"{where}: {per_table:,} random entries of each of {', '.join(tables.TABLE_NAMES)} (seed {seed}) "
                  "equal this GPU's")


def approx_trust(record=None, device=None, source_sha256=None):
    """{op: (trusted, one line)} for every op of oracles.numpy_model.approx: trusted only where a proof's
    "approximate_ops" section swept all its inputs with 0 mismatches, for the model sources as they are now
    (``source_sha256``, default: their hash here), on the GPU model ``device`` (default: this_gpu()): the proof
    ``record`` (default: data/exhaustive-proof.json) on its own GPU model, the committed certification record
    of ``device`` where it certifies that card (certification.standing)."""
    record = json.loads(PROOF_FILE.read_text()) if record is None else record
    device = device or this_gpu()
    proved_on, section, refused = _name(certification.card_of(record)), record.get("approximate_ops"), None
    if certification.card_of(record) != device:
        path, certified = certification.for_device(device)
        status, line = (certification.standing(certified, path, device) if certified is not None
                        else (None, f"no certification record {provenance.shown(path)}"))
        if status == certification.CERTIFIED:
            proved_on, section = f"{_name(device)} ({path.name})", certified["proof"]["approximate_ops"]
        else:
            refused = f"proved on {proved_on}, this GPU is {_name(device)} ({line})"
    out = {}
    for op, inputs in [(op, 1 << 32) for op in APPROX_F32] + [(op, 1 << 16) for op in APPROX_16]:
        result = (section or {}).get("results", {}).get(op)
        if refused is not None:
            out[op] = (False, f"{op}: {refused}")
        elif result is None:
            out[op] = (False, f"{op}: no exhaustive proof recorded; `python -m oracles.mufu prove` on a GPU records one")
        elif section["model_source_sha256"] != (source_sha256 or model_source_sha256(APPROX_SOURCES)):
            out[op] = (False, f"{op}: the model changed since its proof; `python -m oracles.mufu prove` again")
        elif result["inputs"] != inputs or result["mismatches"] != 0:
            out[op] = (False, f"{op}: its proof compared {result['inputs']:,} inputs with {result['mismatches']:,} "
                              "mismatches")
        else:
            out[op] = (True, f"{op}: proved on all {inputs:,} inputs on {proved_on}")
    return out
