"""Case files: one self-contained JSON file per routing case.

    {"format": "musespark-routing-case/1", "generator": ...,
     "inputs": {"logits": [row, ...], "bias": row, "scale": "3f800000", "renormalize": true,
                "tile_n": 8 | null, "local_expert_offset": 0, "num_local_experts": 256,
                "metadata_fill": -1515870811},
     "outputs": {"ids": [{"by": ["model", "cute", ...], "value": [[...], ...]}, ...],
                 "weights": [{"by": [...], "value": [row, ...]}, ...], "metadata": [{"by": [...], "value": ints}]},
     "recorded": {"by": [...], "environment": {"gpu": ..., "driver": ..., "packages": {...}, "commit": ...},
                  "references": {"fi_fused": "flashinfer_fused"}},
     "origin": {...}, "disagreements": [...]}

``recorded.references`` names the reference (properties/engine/references.py) of each recorded implementation
compared against another than the Muse Spark model; a file without it, or an implementation it does not name,
means the Muse Spark model ("model").

Floats are their bit patterns, 8 hex digits a word; integers are decimal; a word followed by ``*n`` stands
for n copies (``ff800000*248``). Each output field lists its distinct values, each with the implementations
that wrote it, so a disagreement shows as two entries.

Reading is strict: a file over MAX_FILE_BYTES is not read; the file must be exactly one JSON object in UTF-8
(no byte-order mark, no invalid byte, no key given twice in any object, no NaN or Infinity, nothing after the
object, no string holding a lone surrogate); the JSON Schema ``case.schema.json`` beside this
module (checked with ``jsonschema``) fixes every field's type and word syntax, every nested object included
(recorded, its environment, origin, each disagreement); the reader then checks the word counts (b x 256 logits,
256 bias, b rows of 8 ids and weights, metadata_size(tile_n) metadata) before it expands any run, that every
decimal word is an int32, and that no implementation is listed twice. Anything else raises CaseFileError, one
line naming the file and the field or the fault. Writing runs the reader over its own text first, so nothing
is written that the reader would refuse.
"""

import codecs
import hashlib
import json
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema
import numpy as np

from kernel.layout import EXPERTS, TOP_K, metadata_size
from common import provenance
from properties.engine.cases import FIELDS, Outputs, RoutingCase
from properties.engine.poison import METADATA_POISON
from properties.engine.floats import f32, f32_bits
from properties.engine.references import DEFAULT as DEFAULT_REFERENCE

FORMAT = "musespark-routing-case/1"
REPO_ROOT = provenance.REPO_ROOT
CORPORA = REPO_ROOT / "corpora"
REGRESSION_DIR = CORPORA / "regression"
FAILURES_ENV = "ROUTING_FAILURES_DIR"
SCHEMA_PATH = Path(__file__).with_name("case.schema.json")
_SHORT = 40  # characters of a refused value quoted in an error
# The largest case file (b = 8, tile_n = 256, several distinct metadata values) is about 1 MB: a bigger file is
# refused before it is read, so no JSON array of it is allocated.
MAX_FILE_BYTES = 16 << 20


def encode_words(words, fmt):
    """Space-separated words of a 1-D array, runs of equal words as ``word*count``."""
    words = np.asarray(words).reshape(-1)
    starts = np.flatnonzero(np.concatenate([[True], words[1:] != words[:-1]]))
    counts = np.diff(np.concatenate([starts, [words.size]]))
    return " ".join(fmt(words[s]) + (f"*{n}" if n > 1 else "") for s, n in zip(starts, counts))


class CaseFileError(ValueError):
    """A file that is not a valid case file; the message is one line naming the field."""


def _short(value):
    text = repr(value)
    return text if len(text) <= _SHORT else text[:_SHORT] + "..."


def _run_counts(tokens, size, field):
    """Each token's run count, refused (CaseFileError naming ``field``) unless they add up to exactly ``size``:
    counted before any run is expanded, so no count allocates more than its field holds."""
    counts = []
    for token in tokens:
        count = token.partition("*")[2] or "1"
        if len(count) > len(str(size)):  # more digits than the field's size: too long, whatever the rest says
            raise CaseFileError(f"{field}: a run of {_short(count)} words, more than the {size} it holds")
        counts.append(int(count))
    if sum(counts) != size:
        raise CaseFileError(f"{field}: expected {size} words, got {sum(counts)}")
    return counts


def decode_words(text, parse, dtype, size, field="words"):
    """The array ``encode_words`` wrote; CaseFileError (naming ``field``) unless it holds exactly ``size`` words,
    each within ``dtype``'s range."""
    tokens = text.split()
    counts = _run_counts(tokens, size, field)
    words = [parse(token.partition("*")[0]) for token in tokens]
    bounds = np.iinfo(dtype)
    for word in words:
        if not bounds.min <= word <= bounds.max:
            raise CaseFileError(f"{field}: word {word} is outside {bounds.dtype} [{bounds.min}, {bounds.max}]")
    return np.repeat(np.array(words, dtype), counts)


def encode_floats(x):
    return encode_words(f32_bits(x), lambda w: f"{int(w):08x}")


def decode_floats(text, size, field="words"):
    return f32(decode_words(text, lambda w: int(w, 16), np.uint32, size, field))


def encode_ints(x):
    return encode_words(np.asarray(x, np.int32), lambda w: str(int(w)))


def decode_ints(text, size, field="words"):
    return decode_words(text, int, np.int32, size, field)


def _inputs(case):
    return {"logits": [encode_floats(row) for row in case.logits], "bias": encode_floats(case.bias),
            "scale": f"{int(f32_bits(case.scale)):08x}", "renormalize": case.renormalize, "tile_n": case.tile_n,
            "local_expert_offset": case.local_expert_offset, "num_local_experts": case.num_local_experts,
            "metadata_fill": METADATA_POISON}


def _case(generator, inputs):
    if inputs["metadata_fill"] != METADATA_POISON:
        raise CaseFileError(f"inputs.metadata_fill: {inputs['metadata_fill']} is not this harness's poison "
                            f"{METADATA_POISON}")
    logits = np.stack([decode_floats(row, EXPERTS, f"inputs.logits.{i}") for i, row in enumerate(inputs["logits"])])
    bias = decode_floats(inputs["bias"], EXPERTS, "inputs.bias")
    try:
        return RoutingCase(
            logits=logits, bias=bias,
            scale=f32(int(inputs["scale"], 16))[()], renormalize=inputs["renormalize"], tile_n=inputs["tile_n"],
            local_expert_offset=inputs["local_expert_offset"], num_local_experts=inputs["num_local_experts"],
            generator=generator)
    except ValueError as exc:  # RoutingCase's own contract: finite scale, no NaN, the local range
        raise CaseFileError(f"inputs: {exc}") from exc


def _encode_field(field, value):
    if field == "ids":
        return value.tolist()
    if field == "weights":
        return [encode_floats(row) for row in value]
    return encode_ints(value)


def _decode_field(field, value, case, where):
    if field == "metadata":
        if not case.has_metadata:
            raise CaseFileError(f"{where}: metadata recorded for a case without tile_n")
        return decode_ints(value, metadata_size(case.tile_n), where)
    if len(value) != case.b:
        raise CaseFileError(f"{where}: expected {case.b} rows (b), got {len(value)}")
    if field == "ids":
        return np.array(value, np.int32)
    return np.stack([decode_floats(row, TOP_K, f"{where}.{i}") for i, row in enumerate(value)])


def _bits_key(field, value):
    return value.view(np.uint32).tobytes() if field == "weights" else value.tobytes()


def _grouped(outputs):
    """field -> [{"by": names, "value": encoded}] with one entry per distinct value."""
    grouped = {}
    for field in FIELDS:
        groups = {}
        for name, out in outputs.items():
            value = getattr(out, field)
            if value is not None:
                groups.setdefault(_bits_key(field, value), ([], value))[0].append(name)
        grouped[field] = [{"by": names, "value": _encode_field(field, value)} for names, value in groups.values()]
    return grouped


def _ungrouped(grouped, case):
    fields = {}
    for field in FIELDS:
        for i, entry in enumerate(grouped[field]):
            where = f"outputs.{field}.{i}.value"
            value = _decode_field(field, entry["value"], case, where)
            for name in entry["by"]:
                if field in fields.setdefault(name, {}):
                    raise CaseFileError(f"outputs.{field}.{i}.by: {name!r} is listed in two entries")
                fields[name][field] = value
    return {name: Outputs(*(values.get(f) for f in FIELDS)) for name, values in fields.items()}


def environment():
    """Where outputs were recorded: the GPU (name, compute capability, driver, CUDA) or None, the packages,
    the commit (GIT_COMMIT, else git), the date."""
    return provenance.record()


@dataclass(frozen=True)
class CaseFile:
    """A case file's contents: outputs maps each recorded implementation to its Outputs."""

    case: RoutingCase
    outputs: dict
    recorded: dict
    origin: dict
    disagreements: list


def to_json(record):
    return {"format": FORMAT, "generator": record.case.generator, "inputs": _inputs(record.case),
            "outputs": _grouped(record.outputs), "recorded": record.recorded, "origin": record.origin,
            "disagreements": record.disagreements}


def write(path, record):
    """Write ``record`` (a CaseFile) to ``path``, creating its folder; CaseFileError, with nothing written, when
    the strict reader would refuse the text (``parse``)."""
    path = Path(path)
    try:
        text = json.dumps(to_json(record), indent=1, allow_nan=False) + "\n"
        parse(text.encode())
    except ValueError as exc:  # the reader's refusal (CaseFileError), or a float json.dumps will not write as JSON
        raise CaseFileError(f"{path}: not written: {exc}") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class _Fraction(float):
    """A JSON number written with a fraction or an exponent, shown as written (``1e3`` stays ``1e3``): the
    schema's integers are JSON integers only, so 1.0 and 1e3 are refused where it wants one."""

    def __new__(cls, text):
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __repr__(self):
        return self.text


def _unique_keys(pairs):
    """json's object_pairs_hook: the object as a dict; CaseFileError when a key is given twice."""
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise CaseFileError(f"not one JSON object: key {_short(key)} given twice in one object")
        obj[key] = value
    return obj


def _no_constant(name):
    """json's parse_constant: NaN, Infinity and -Infinity are not JSON."""
    raise CaseFileError(f"not JSON: {name} is not a JSON number")


_JSON_TYPES = {list: "an array", str: "a string", int: "a number", _Fraction: "a number", bool: "true or false",
               type(None): "null"}


def _json_object(raw):
    """The one JSON object that the bytes ``raw`` hold; CaseFileError (one line naming the fault) otherwise."""
    if raw.startswith(codecs.BOM_UTF8):
        raise CaseFileError("not JSON: starts with a UTF-8 byte-order mark (a case file is UTF-8 without one)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaseFileError(f"not UTF-8: byte {raw[exc.start]:#04x} at offset {exc.start}: {exc.reason}") from exc
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_Fraction)
    except CaseFileError:
        raise
    except json.JSONDecodeError as exc:
        fault = "trailing data after the JSON value" if exc.msg == "Extra data" else exc.msg
        raise CaseFileError(f"not JSON: {fault}: line {exc.lineno} column {exc.colno} (char {exc.pos})") from exc
    except (ValueError, RecursionError) as exc:  # an integer of more than 4300 digits, absurd nesting
        raise CaseFileError(f"not JSON: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    if not isinstance(data, dict):
        raise CaseFileError(f"(top level): {_JSON_TYPES[type(data)]}, not one JSON object")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:  # "\ud800" escaped in a string: JSON's syntax, not Unicode text
        surrogate = exc.object[exc.start:exc.end].encode("unicode_escape").decode()
        raise CaseFileError(f"not UTF-8: a string holds the lone surrogate {surrogate}") from exc
    return data


@lru_cache(maxsize=None)
def _validator():
    """The schema's validator; JSON integers only (jsonschema would take 8.0 for an integer)."""
    base = jsonschema.Draft202012Validator
    strict = base.TYPE_CHECKER.redefine("integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool))
    cls = jsonschema.validators.extend(base, type_checker=strict)
    schema = json.loads(SCHEMA_PATH.read_text())
    base.check_schema(schema)
    return cls(schema)


def _schema_error(data):
    """One line for the first schema violation of ``data`` (the deepest, most relevant one), or None."""
    error = jsonschema.exceptions.best_match(_validator().iter_errors(data))
    if error is None:
        return None
    field = ".".join(map(str, error.absolute_path)) or "(top level)"
    if error.validator == "required":
        return f"{field}: missing {', '.join(k for k in error.validator_value if k not in error.instance)}"
    if error.validator == "additionalProperties":
        return f"{field}: {error.message}"
    if error.validator == "type" and isinstance(error.instance, float) and "integer" in error.validator_value:
        return f"{field}: {error.instance!r} is not an integer (a JSON number with a fraction or an exponent)"
    return f"{field}: {_short(error.instance)} fails {error.validator} {_short(error.validator_value)}"


def from_json(data):
    """The CaseFile ``to_json`` wrote; CaseFileError (one line naming the field) when ``data`` is not one."""
    problem = _schema_error(data)
    if problem:
        raise CaseFileError(problem)
    case = _case(data["generator"], data["inputs"])
    return CaseFile(case, _ungrouped(data["outputs"], case), data["recorded"], data["origin"], data["disagreements"])


def read(path):
    """The CaseFile at ``path``; CaseFileError (one line: the file, the field, what is wrong) when it is not
    one, OSError when it cannot be opened."""
    size = Path(path).stat().st_size
    if size > MAX_FILE_BYTES:
        raise CaseFileError(f"{path}: (file): {size} bytes, more than a case file's {MAX_FILE_BYTES}")
    try:
        return parse(Path(path).read_bytes())
    except CaseFileError as exc:
        raise CaseFileError(f"{path}: {exc}") from exc


def parse(raw):
    """The CaseFile held by the bytes ``raw``; CaseFileError (one line: the field or the fault) when they are
    not exactly one JSON object as the schema says, or not a case."""
    return from_json(_json_object(raw))


def missing_fields(record, writes):
    """"<implementation> <field>" for every field an implementation named in ``record.recorded["by"]`` writes
    (``writes``: name -> fields, the registry's; metadata only when a tile is set) but the file does not hold:
    a recording that lost an output must not pass as one that agrees."""
    missing = []
    for name in record.recorded.get("by", []):
        out = record.outputs.get(name)
        for field in writes.get(name, ()):
            if (field != "metadata" or record.case.has_metadata) and (out is None or getattr(out, field) is None):
                missing.append(f"{name} {field}")
    return missing


def recording(outputs, references=None):
    """The ``recorded`` entry for outputs produced here now; ``references``: name -> its reference, of which
    those other than the Muse Spark model are kept."""
    kept = {name: ref for name, ref in (references or {}).items() if name in outputs and ref != DEFAULT_REFERENCE
            and name != ref}
    return {"by": list(outputs), "environment": environment(), **({"references": kept} if kept else {})}


def references(record):
    """name -> the reference each recorded implementation of ``record`` is compared against."""
    named = record.recorded.get("references", {})
    return {name: named.get(name, DEFAULT_REFERENCE) for name in record.outputs}


def failures_dir():
    return Path(os.environ.get(FAILURES_ENV) or CORPORA / "failures")


def write_failure(case, outputs, disagreements, origin, references=None):
    """Save a disagreement as failures_dir()/<UTC time>-<hash of the inputs>.json (``references``: as for
    ``recording``); returns the path."""
    digest = hashlib.sha256(json.dumps(_inputs(case), sort_keys=True).encode()).hexdigest()[:12]
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{case.generator}-{digest}.json"
    return write(failures_dir() / name, CaseFile(case, outputs, recording(outputs, references), origin, disagreements))


def case_files(paths):
    """The case files named by ``paths``: files as given, folders searched for *.json, sorted."""
    found = []
    for path in map(Path, paths):
        found.extend(sorted(path.rglob("*.json")) if path.is_dir() else [path])
    return found
