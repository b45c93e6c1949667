"""Measure the MUFU tables, fit the model's coefficients, record the hardware sample, prove the model (GPU).

    python -m oracles.mufu measure [--check]   tables + special values -> data/mufu-tables.{bin,json}
    python -m oracles.mufu fit [--check]       (CPU) coefficients from the tables -> data/mufu-coefficients.json
    python -m oracles.mufu record-sample        hardware outputs of oracles.mufu.sample -> data/hardware-sample.json
    python -m oracles.mufu prove                 model vs hardware over all 2^32 inputs, and the model's GPU
                                                 sigmoid throughput; the approximate ops of
                                                 oracles.numpy_model.approx too -> data/exhaustive-proof.json
    python -m oracles.mufu fit-survey DIR [--check]  (CPU) coefficients of the survey-fitted units (RSQ, SQRT)
                                                 -> data/mufu-survey-coefficients.json
    python -m oracles.mufu survey-record DIR     (CPU) a survey folder's committed evidence -> data/mufu-survey.json,
                                                 data/mufu-survey-half.bin
    python -m oracles.mufu survey DIR            the other MUFU units' structure survey -> DIR (oracles.mufu.survey)
    python -m oracles.mufu prove-numpy-path     (CPU) NumPy's common-path sigmoid vs the generic path the proof
                                                 ran, over all 2^32 inputs -> data/numpy-path-proof.json
    python -m oracles.mufu certify DIR           every step above that a new GPU needs, in order (CERTIFY_STEPS):
                                                 measure, fit, survey DIR, fit-survey DIR, survey-record DIR,
                                                 record-sample, prove; stops at the first that fails
    python -m oracles.mufu certify-card [--out FILE]  this GPU against the committed model, the tables kept:
                                                 every table entry and special value measured and compared, the
                                                 proof's sweeps -> certified/certified-<this GPU>.json (or FILE), and
                                                 where a table differs this GPU's tables beside it (.bin)
                                                 (oracles/mufu/certification.py); exit 1 unless it certifies the card

Each command's purpose is its record: the command line that names it (measure, fit, record-sample, prove,
prove-numpy-path, certify-card; certify, all of its steps') replaces that committed file under oracles/mufu/data/,
and nothing else; the --check forms write nothing, certify-card --out FILE writes FILE (and its .bin) instead.
Set GIT_COMMIT to the commit being measured (the GPU machine gets a copy of the tree without .git). Misuse (an
unknown command or option, a GPU command without CUDA) gives one line and exit 2.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m oracles.mufu")

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from common import interrupts
from common import provenance
from common import args as types
from common import records
from common.args import OneLineParser
from oracles.mufu import certification, fit, hardware, interpolator, recheck, sample, segments, tables
from oracles.mufu.proof import (APPROX_16, APPROX_F32, APPROX_SOURCES, DIV_PAIRS, DIV_RECIPROCAL, MODEL_SOURCES,
                                PAIR_DRAWS, PROOF_FILE, UNARY_PROVED, model_source_sha256)

DATA = tables.DATA_DIR
SAMPLE_FILE = DATA / "hardware-sample.json"
NUMPY_PATH_FILE = DATA / "numpy-path-proof.json"
SURVEY_SCHEMA = Path(__file__).with_name("survey.schema.json")  # what fit-survey and survey-record read
_SIGN = 0x80000000
_MAX_LISTED = 8
DEVICE = "cuda"


def _synchronize():
    if torch.cuda.is_available():
        torch.cuda.synchronize()




def _cuda_bits(bits):
    return torch.from_numpy(np.asarray(bits, np.uint32).view(np.int32)).to(DEVICE).view(torch.float32)


def _host_bits(x):
    return x.view(torch.int32).cpu().numpy().view(np.uint32)


def _unary_hw(name, bits):
    return _host_bits(hardware.unary(name, _cuda_bits(bits)))


def _half_hw(name, bits16):
    x = torch.from_numpy(np.asarray(bits16, np.uint16).view(np.int16)).to(DEVICE)
    return hardware.half(name, x).cpu().numpy().view(np.uint16)


def _measure_tables():
    return {name: _unary_hw(tables.INSTRUCTIONS[name], bits) for name, bits in tables.inputs().items()}


def _classes():
    fractions = np.arange(1, 1 << 23, dtype=np.uint32)
    both = lambda m: np.concatenate([m, m | np.uint32(_SIGN)])
    return {
        "zeros": np.array([0, _SIGN], np.uint32),
        "subnormals": both(fractions),
        "infinities": np.array([0x7F800000, 0xFF800000], np.uint32),
        "nans": both(fractions | np.uint32(0x7F800000)),
    }


def _distinct(bits):
    values = np.unique(bits)
    return {"distinct": int(values.size), "outputs": [f"0x{v:08x}" for v in values[:_MAX_LISTED]]}


def _measure_specials():
    """What MUFU.EX2, MUFU.RCP and FADD/FMUL write for every zero, subnormal, infinity and NaN input."""
    seen = {name: {cls: _distinct(_unary_hw(name, x)) for cls, x in _classes().items()}
            for name in ("ex2_approx_ftz_f32", "rcp_approx_ftz_f32")}
    inf, one, nan = (np.array([v], np.uint32) for v in (0x7F800000, 0x3F800000, 0x7FC00000))
    made = {
        "add_rn(inf, -inf)": hardware.binary("add_rn", _cuda_bits(inf), _cuda_bits(inf | _SIGN)),
        "mul_rn(0, inf)": hardware.binary("mul_rn", _cuda_bits(inf * 0), _cuda_bits(inf)),
        "add_rn(nan, 1)": hardware.binary("add_rn", _cuda_bits(nan), _cuda_bits(one)),
    }
    seen["fadd_fmul"] = {k: f"0x{_host_bits(v)[0]:08x}" for k, v in made.items()}
    nan_outputs = ({seen[n]["nans"]["outputs"][0] for n in ("ex2_approx_ftz_f32", "rcp_approx_ftz_f32")
                    if seen[n]["nans"]["distinct"] == 1} | set(seen["fadd_fmul"].values()))
    if len(nan_outputs) != 1 or any(seen[n]["nans"]["distinct"] != 1
                                    for n in ("ex2_approx_ftz_f32", "rcp_approx_ftz_f32")):
        raise SystemExit(f"NaN results are not one canonical pattern: {seen}")
    return seen, {"nan": nan_outputs.pop()}


def measure(check):
    measured = _measure_tables()
    data, meta = tables.encode(measured)
    if check:
        same = tables.DATA_FILE.exists() and tables.DATA_FILE.read_bytes() == data
        print(f"re-measured tables {'equal' if same else 'DIFFER from'} {tables.DATA_FILE} byte for byte "
              f"({len(data)} bytes, sha256 {tables.sha256(data)})")
        return 0 if same else 1
    seen, constants = _measure_specials()
    tables.DATA_FILE.write_bytes(data)
    record = {"provenance": provenance.record(), "data_file": tables.DATA_FILE.name, "data_sha256": tables.sha256(data),
              "data_bytes": len(data), "tables": meta, "model_constants": constants, "special_inputs": seen}
    tables.PROVENANCE_FILE.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "special_inputs"}, indent=1))
    print(json.dumps(seen, indent=1))
    return 0


def _hw_outputs(name, arity, inputs):
    if arity == 1:
        return _unary_hw(name, inputs)
    a, b = inputs
    return _host_bits(hardware.binary(name, _cuda_bits(a), _cuda_bits(b)))


# The hardware sample's primitives; the approximate ops of oracles.mufu.proof with them, float32 ones sampled like
# the unary primitives, 16-bit ones over all 2^16 inputs (stratum "all").
SAMPLED = {"ex2_approx_ftz_f32": 1, "ex2_approx_f32": 1, "rcp_approx_ftz_f32": 1, "sigmoid_f32": 1,
           "add_rn": 2, "mul_rn": 2, "div_full_f32": 2}
HALF_STRATA = {"all": lambda: np.arange(1 << 16, dtype=np.uint16)}


def record_sample():
    out = {"provenance": provenance.record(), "digest_chunk": sample.DIGEST_CHUNK, "primitives": {}}
    for name, arity in list(SAMPLED.items()) + [(name, 1) for name in APPROX_F32]:
        strata = sample.UNARY_STRATA if arity == 1 else sample.BINARY_STRATA
        entry = {}
        for stratum, make in strata.items():
            outputs = _hw_outputs(name, arity, make())
            entry[stratum] = {"count": int(outputs.size), "digests": sample.chunk_digests(outputs)}
            if stratum == "specials":
                entry[stratum]["outputs"] = outputs.astype(">u4").tobytes().hex()
        out["primitives"][name] = {"arity": arity, "strata": entry}
        print(name, {k: v["count"] for k, v in entry.items()})
    for name in APPROX_16:
        outputs = _half_hw(name, HALF_STRATA["all"]())
        out["primitives"][name] = {"arity": "16-bit", "strata": {"all": {
            "count": int(outputs.size), "digests": sample.chunk_digests(outputs.astype(np.uint32))}}}
        print(name, outputs.size)
    SAMPLE_FILE.write_text(json.dumps(out, indent=1) + "\n")
    return 0


_SWEEP_CHUNK = 1 << 28
_PAIR_EXPONENTS_PER_CHUNK = 16
_EDGE_SIGNIFICANDS = (0, 1, 0x400000, 0x7FFFFF)


class _Tally:
    """Mismatches between hardware and model; NaN inputs count as equal when both give any NaN."""

    def __init__(self):
        self.inputs = self.mismatches = self.nan_input_bit_differences = 0
        self.first = []
        self.start = time.perf_counter()

    def add(self, inputs, hw, model):
        input_nan = torch.zeros_like(hw, dtype=torch.bool)
        for x in inputs:
            input_nan |= torch.isnan(x)
        differ = hw.view(torch.int32) != model.view(torch.int32)
        bad = differ & ~(input_nan & torch.isnan(hw) & torch.isnan(model))
        self.inputs += hw.numel()
        self.mismatches += int(bad.sum())
        self.nan_input_bit_differences += int((differ & input_nan).sum())
        if len(self.first) < 16 and bool(bad.any()):
            where = torch.nonzero(bad).flatten()[:16 - len(self.first)]
            for i in where.tolist():
                row = [f"0x{int(x.view(torch.int32)[i]) & 0xFFFFFFFF:08x}" for x in inputs]
                self.first.append({"inputs": row, "hardware": f"0x{int(hw.view(torch.int32)[i]) & 0xFFFFFFFF:08x}",
                                   "model": f"0x{int(model.view(torch.int32)[i]) & 0xFFFFFFFF:08x}"})

    def result(self):
        _synchronize()
        return {"inputs": self.inputs, "mismatches": self.mismatches,
                "nan_input_bit_differences": self.nan_input_bit_differences,
                "first_mismatches": self.first, "seconds": round(time.perf_counter() - self.start, 2)}


def _sweep_unary(model_fn, hw_fn):
    tally = _Tally()
    for start in range(0, 1 << 32, _SWEEP_CHUNK):
        x = hardware.bit_range(start, _SWEEP_CHUNK, DEVICE)
        tally.add([x], hw_fn(x), model_fn(x))
    return tally.result()


def _pair_chunk(first_exponent, generator):
    shape = (_PAIR_EXPONENTS_PER_CHUNK, 256, PAIR_DRAWS)
    exp_a = torch.arange(first_exponent, first_exponent + shape[0], device=DEVICE).view(-1, 1, 1)
    exp_b = torch.arange(256, device=DEVICE).view(1, -1, 1)
    rand = torch.randint(0, 1 << 25, (2,) + shape, device=DEVICE, generator=generator, dtype=torch.int32)
    edges = torch.tensor(_EDGE_SIGNIFICANDS, device=DEVICE, dtype=torch.int32)
    k = len(_EDGE_SIGNIFICANDS)
    significands = rand & 0x7FFFFF
    significands[0, :, :, :k * k] = edges.repeat_interleave(k)  # every pair of edge significands
    significands[1, :, :, :k * k] = edges.repeat(k)
    signs = (rand >> 23) & 1

    def make(i, exponent):
        return ((signs[i] << 31) | (exponent.to(torch.int32) << 23) | significands[i]).view(torch.float32).flatten()

    return make(0, exp_a.expand(shape)), make(1, exp_b.expand(shape))


_THROUGHPUT_ELEMENTS = 1 << 28
_THROUGHPUT_RUNS = 5


def sigmoid_throughput(model):
    """The model's sigmoid_f32 on this GPU through torch: best of several CUDA-synchronised runs."""
    generator = torch.Generator(device=DEVICE).manual_seed(20261201)
    x = torch.randn(_THROUGHPUT_ELEMENTS, device=DEVICE, generator=generator) * 10
    model.sigmoid_f32(x[:1024])  # moves the coefficients to the device
    best = float("inf")
    for _ in range(_THROUGHPUT_RUNS):
        _synchronize()
        start = time.perf_counter()
        model.sigmoid_f32(x)
        _synchronize()
        best = min(best, time.perf_counter() - start)
    return {"elements": _THROUGHPUT_ELEMENTS, "runs": _THROUGHPUT_RUNS, "best_seconds": round(best, 4),
            "elements_per_second": round(_THROUGHPUT_ELEMENTS / best), "input": "float32 normal(0, 10)"}


def prove_primitives(model):
    """{sweep: tally result} of the model's primitives against this GPU, each sweep of PROOF_INPUTS."""
    results = {}
    for name in UNARY_PROVED:
        results[name] = _sweep_unary(getattr(model, name), lambda x, name=name: hardware.unary(name, x))
        print(name, results[name], flush=True)

    def one_like(y):
        return torch.ones_like(y)

    results[DIV_RECIPROCAL] = _sweep_unary(
        lambda y: model.div_full_f32(one_like(y), y), lambda y: hardware.binary("div_full_f32", one_like(y), y))
    print(DIV_RECIPROCAL, results[DIV_RECIPROCAL], flush=True)
    generator = torch.Generator(device=DEVICE).manual_seed(20261129)
    tally = _Tally()
    for first in range(0, 256, _PAIR_EXPONENTS_PER_CHUNK):
        x, y = _pair_chunk(first, generator)
        tally.add([x, y], hardware.binary("div_full_f32", x, y), model.div_full_f32(x, y))
    results[DIV_PAIRS] = tally.result()
    print("div_full_f32 pairs", results[DIV_PAIRS], flush=True)
    return results


def proof_section(results, approx_results):
    """The proof's results tied to the model sources they proved (the form exhaustive-proof.json and a card's
    certification record share)."""
    return {"model_sources": list(MODEL_SOURCES), "model_source_sha256": model_source_sha256(),
            "nan_rule": "an input NaN matches when hardware and model both give a NaN; every other output "
                        "is compared bit for bit", "results": results,
            "approximate_ops": {"model_sources": list(APPROX_SOURCES),
                                "model_source_sha256": model_source_sha256(APPROX_SOURCES),
                                "survey_coefficients": segments.COEFFICIENT_FILE.name,
                                "nan_rule": "as above for float32; 16-bit outputs compared bit for bit, every one",
                                "results": approx_results}}


def prove():
    from oracles import numpy_model as model

    throughput = sigmoid_throughput(model)
    print(f"sigmoid_f32 model on the GPU: {throughput['elements_per_second']:,} elements/s "
          f"(best of {throughput['runs']} runs over {throughput['elements']:,})", flush=True)
    record = {"provenance": provenance.record(), "table_data_sha256": tables.read_provenance()["data_sha256"],
              "coefficients_tables_sha256": interpolator.read()["tables_sha256"],
              **proof_section(prove_primitives(model), prove_approx()), "sigmoid_f32_model_throughput": throughput}
    PROOF_FILE.write_text(json.dumps(record, indent=1) + "\n")
    every = list(record["results"].values()) + list(record["approximate_ops"]["results"].values())
    return 0 if all(r["mismatches"] == 0 for r in every) else 1


def _sweep_half(model_fn, hw_fn):
    start = time.perf_counter()
    x = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32, device=DEVICE).to(torch.int16)
    hw, model = hw_fn(x), model_fn(x)
    bad = torch.nonzero(hw != model).flatten()
    first = [{"inputs": [f"0x{int(x[i]) & 0xFFFF:04x}"], "hardware": f"0x{int(hw[i]) & 0xFFFF:04x}",
              "model": f"0x{int(model[i]) & 0xFFFF:04x}"} for i in bad[:16].tolist()]
    _synchronize()
    return {"inputs": int(x.numel()), "mismatches": int(bad.numel()), "nan_input_bit_differences": 0,
            "first_mismatches": first, "seconds": round(time.perf_counter() - start, 2)}


def prove_approx():
    """Every modelled instruction of oracles.numpy_model.approx against the hardware, over all its inputs."""
    from oracles.numpy_model import approx

    results = {}
    for name in APPROX_F32:
        results[name] = _sweep_unary(getattr(approx, name), lambda x, name=name: hardware.unary(name, x))
        print(name, results[name], flush=True)
    for name in APPROX_16:
        results[name] = _sweep_half(getattr(approx, name), lambda x, name=name: hardware.half(name, x))
        print(name, results[name], flush=True)
    return results


_NUMPY_PATH_CHUNK = 1 << 24


def prove_numpy_path():
    """(CPU) sigmoid_f32 on NumPy arrays, which takes its common path for |x| below about 87.3, against the
    same model on torch tensors, the generic path the exhaustive proof ran against the hardware: every input,
    bit for bit (a NaN input's output too)."""
    from oracles import numpy_model as model

    tally = _Tally()
    for start in range(0, 1 << 32, _NUMPY_PATH_CHUNK):
        x = hardware.bit_range(start, _NUMPY_PATH_CHUNK, "cpu")
        tally.add([x], model.sigmoid_f32(x), torch.from_numpy(model.sigmoid_f32(x.numpy())))
    result = tally.result()
    record = {"provenance": {**provenance.record(), "host": provenance.host()},
              "model_sources": list(MODEL_SOURCES), "model_source_sha256": model_source_sha256(),
              "compared": "sigmoid_f32 on NumPy (common path) vs on torch CPU tensors (generic path)",
              "result": result}
    NUMPY_PATH_FILE.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(result), flush=True)
    return 0 if result["mismatches"] == result["nan_input_bit_differences"] == 0 else 1


def _survey(directory):
    from oracles.mufu import survey

    index = survey.run(directory)
    return 1 if index.get("failed_phases") else 0


def _survey_record(directory):
    from oracles.mufu import survey

    return survey.write_record(directory)


# The GPU and CPU steps that make this GPU's records, in dependency order: each (name, function of the survey folder).
CERTIFY_STEPS = (
    ("measure", lambda directory: measure(False)),
    ("fit", lambda directory: fit.main(False)),
    ("survey", _survey),
    ("fit-survey", lambda directory: segments.main(directory, False)),
    ("survey-record", _survey_record),
    ("record-sample", lambda directory: record_sample()),
    ("prove", lambda directory: prove()),
)


def certify(directory):
    """Every record of this GPU, step by step (CERTIFY_STEPS); exit status of the first step that fails, else 0."""
    start = time.perf_counter()
    for name, step in CERTIFY_STEPS:
        print(f"certify: {name}", flush=True)
        status = step(directory)
        if status:
            print(f"certify: FAILED at {name} (exit {status}); the records before it are written", flush=True)
            return status
    print(f"certify: every step passed in {time.perf_counter() - start:.0f} s; commit oracles/mufu/data/", flush=True)
    return 0


def _keep_tables(measured, out):
    """This GPU's measured tables beside the record ``out`` (.bin, data/mufu-tables.bin's format): the record's
    measured_tables_file entry."""
    try:
        data, meta = tables.encode(measured)
    except ValueError as exc:
        return {"not_stored": str(exc)}
    out.with_suffix(".bin").write_bytes(data)
    return {"file": out.with_suffix(".bin").name, "sha256": tables.sha256(data), "tables": meta}


def certify_card(out):
    """This GPU against the committed model (oracles/mufu/certification.py) -> ``out``, and where a table
    differs this GPU's measured tables beside it (``out`` with .bin); 0 (the record's verdict CERTIFIED) when
    the record certifies this GPU and every approximate op's proof is clean, else 1 (FAIL) with one line saying
    what differs. The trust readers give a record is certification.standing's, not this verdict."""
    from oracles import numpy_model as model

    start = time.perf_counter()
    device = recheck.this_gpu()
    committed = tables.read_provenance()
    print(f"certify-card: {certification.card_name(device)} -> {provenance.shown(out)}", flush=True)
    measured = _measure_tables()
    seen, constants = _measure_specials()
    compared = certification.compare_tables(measured, tables.load()[0])
    for name, entry in compared.items():
        print(f"table {name}: {entry['differing']:,} of {entry['entries']:,} entries differ", flush=True)
    differ = any(entry["differing"] for entry in compared.values())
    proof = proof_section(prove_primitives(model), prove_approx())
    record = {"provenance": provenance.record(),
              "committed_tables": {"file": tables.DATA_FILE.name, "data_sha256": committed["data_sha256"],
                                   "measured_on": certification.card_name(certification.card_of(committed))},
              "tables": compared, "measured_tables_file": _keep_tables(measured, out) if differ else None,
              "special_values": certification.compare_specials(seen, constants, committed),
              "proof": proof}
    status, line = certification.standing(record, out, device)
    wrong = [op for op, r in record["proof"]["approximate_ops"]["results"].items() if r["mismatches"]]
    if wrong:
        line += f"; approximate ops with mismatches, not trusted here: {', '.join(wrong)}"
    if differ:
        kept = record["measured_tables_file"]
        line += (f"; this GPU's tables kept in {kept['file']}" if "file" in kept else
                 f"; this GPU's tables not kept: {kept['not_stored']}") + " (the model keeps one table set)"
    passed = status == certification.CERTIFIED and not wrong
    record.update(verdict="CERTIFIED" if passed else "FAIL", why=line, seconds=round(time.perf_counter() - start, 1))
    out.write_text(json.dumps(certification.validate(record, out), indent=1) + "\n")
    print(f"certify-card: {'CERTIFIED' if passed else 'FAILED'}: {line}", flush=True)
    return 0 if passed else 1


def main(argv=None):
    parser = OneLineParser(prog="python -m oracles.mufu", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("measure", help="measure the tables on this GPU")
    p.add_argument("--check", action="store_true", help="re-measure and compare with the stored data byte for byte")
    p = sub.add_parser("fit", help="derive the model's coefficients from the measured tables (CPU)")
    p.add_argument("--check", action="store_true", help="re-derive and compare with the stored file byte for byte")
    sub.add_parser("record-sample", help="record the hardware outputs of the stratified sample")
    sub.add_parser("prove", help="compare the model with the hardware over every input; time its GPU sigmoid")
    p = sub.add_parser("fit-survey", help="fit the survey-fitted units' coefficients from a survey folder (CPU)")
    p.add_argument("directory", help="a folder written by `survey`")
    p.add_argument("--check", action="store_true", help="re-fit and compare with the stored file byte for byte")
    p = sub.add_parser("survey-record", help="commit a survey folder's evidence into data/ (CPU)")
    p.add_argument("directory", help="a folder written by `survey`")
    p = sub.add_parser("survey", help="survey the units not yet modelled into a folder (GPU)")
    p.add_argument("directory", type=types.output_dir, help="folder for survey.json and its data files (created)")
    sub.add_parser("prove-numpy-path", help="(CPU) NumPy's common-path sigmoid vs the generic path, every input")
    p = sub.add_parser("certify", help="every step a new GPU needs, from measure to prove (GPU)")
    p.add_argument("directory", type=types.output_dir, help="folder for the survey (created)")
    p = sub.add_parser("certify-card", help="this GPU against the committed tables and model, kept as they are (GPU)")
    p.add_argument("--out", type=types.output_file, metavar="FILE",
                   help="the record (default: oracles/mufu/certified/<this GPU>.json, committed)")
    args = parser.parse_args(argv)
    if args.command in ("fit-survey", "survey-record"):
        if not (Path(args.directory) / "survey.json").is_file():
            parser.error(f"directory: {args.directory} holds no survey.json (write one with `survey DIR` on a GPU)")
        try:
            records.read(Path(args.directory) / "survey.json", SURVEY_SCHEMA)
        except records.RecordError as exc:
            parser.error(f"directory: {exc}")
    if args.command == "fit":
        return fit.main(args.check)
    if args.command == "fit-survey":
        return segments.main(args.directory, args.check)
    if args.command == "survey-record":
        return _survey_record(args.directory)
    if args.command == "prove-numpy-path":
        return prove_numpy_path()
    if not torch.cuda.is_available():
        parser.error(f"{args.command} needs a CUDA device")
    DATA.mkdir(parents=True, exist_ok=True)
    if args.command == "measure":
        return measure(args.check)
    if args.command == "survey":
        return _survey(args.directory)
    if args.command == "certify":
        return certify(args.directory)
    if args.command == "certify-card":
        out = args.out or certification.path_for(recheck.this_gpu())
        out.parent.mkdir(parents=True, exist_ok=True)
        return certify_card(out)
    if args.command == "record-sample":
        return record_sample()
    return prove()


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m oracles.mufu", main))
