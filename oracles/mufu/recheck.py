"""Whether the MUFU tables hold on the GPU here. They were measured on one GPU model (their provenance in
data/mufu-tables.json: name and compute capability); on any other model a random sample of every table is
measured again (oracles/mufu/hardware.py, a few seconds) before anything trusts the model there.

``check(device, measure)`` takes the GPU's description and the measuring function as arguments, so a CPU
test can stand in for both.
"""

import json

import numpy as np

from oracles.mufu import tables

SAMPLE_PER_TABLE = 4096
MEASURE_COMMAND = "`python -m oracles.mufu measure` records this GPU's tables"


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


def _name(device):
    return f"{device['gpu']} (compute capability {device['compute_capability']})"


def check(device=None, measure=None, per_table=SAMPLE_PER_TABLE, seed=None):
    """(holds, one line): the tables' GPU model against ``device`` (default: this_gpu()); on another model,
    ``per_table`` random entries of every table through ``measure(table, input_bits) -> output bits`` (default:
    measure_on_gpu) against the recorded ones, the differences counted per unit. ``seed`` (default: fresh)
    is named in the line."""
    device = device or this_gpu()
    recorded = tables.read_provenance()["provenance"]
    recorded = {"gpu": recorded["gpu"], "compute_capability": recorded["compute_capability"]}
    if device == recorded:
        return True, f"MUFU tables measured on {_name(recorded)}, the GPU here: used as measured"
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
    where = f"MUFU tables measured on {_name(recorded)}, this GPU is {_name(device)}"
    if any(differ.values()):
        counts = ", ".join(f"{unit} in {n:,} of {sampled[unit]:,} sampled entries"
                           for unit, n in differ.items() if n)
        return False, f"{where}: they differ here ({counts}, seed {seed}); {MEASURE_COMMAND}"
    return True, (f"{where}: {per_table:,} random entries of each of {', '.join(tables.TABLE_NAMES)} (seed {seed}) "
                  "equal this GPU's")


def approx_trust(record=None, device=None, source_sha256=None):
    """{op: (trusted, one line)} for every op of oracles.numpy_model.approx: trusted only where the proof
    record's "approximate_ops" section (default: data/exhaustive-proof.json) swept all its inputs with 0
    mismatches, for the model sources as they are now (``source_sha256``, default: their hash here), on the
    GPU model ``device`` (default: this_gpu())."""
    from oracles.mufu.__main__ import APPROX_16, APPROX_F32, APPROX_SOURCES, PROOF_FILE, model_source_sha256

    record = json.loads(PROOF_FILE.read_text()) if record is None else record
    section = record.get("approximate_ops")
    proved_on = {k: record.get("provenance", {}).get(k) for k in ("gpu", "compute_capability")}
    out = {}
    for op, inputs in [(op, 1 << 32) for op in APPROX_F32] + [(op, 1 << 16) for op in APPROX_16]:
        result = (section or {}).get("results", {}).get(op)
        if result is None:
            out[op] = (False, f"{op}: no exhaustive proof recorded; `python -m oracles.mufu prove` on a GPU records one")
            continue
        if section["model_source_sha256"] != (source_sha256 or model_source_sha256(APPROX_SOURCES)):
            out[op] = (False, f"{op}: the model changed since its proof; `python -m oracles.mufu prove` again")
            continue
        if result["inputs"] != inputs or result["mismatches"] != 0:
            out[op] = (False, f"{op}: its proof compared {result['inputs']:,} inputs with {result['mismatches']:,} "
                              "mismatches")
            continue
        device = device or this_gpu()
        if device != proved_on:
            out[op] = (False, f"{op}: proved on {_name(proved_on)}, this GPU is {_name(device)}")
            continue
        out[op] = (True, f"{op}: proved on all {inputs:,} inputs on {_name(proved_on)}")
    return out
