"""The model certified on a GPU model other than the one its MUFU tables were measured on: one record per card.

``python -m oracles.mufu certify-card`` (GPU) measures every entry of each table and the special values on the
GPU here, compares them entry by entry with the committed tables (data/mufu-tables.{bin,json}) and proves the
model against this GPU over every input (the sweeps of ``prove``); it writes certified/certified-<card>.json
(``path_for``), of the form certification.schema.json fixes. Where a table differs, this card's measured tables
are kept beside the record (the same name, .bin, in data/mufu-tables.bin's format), ready for a model that
keeps one table set per card; the model keeps one set today, so that card is not certified.

``standing`` says whether a record certifies a card: it is that card's, it compared every entry of each
committed table with none differing, it saw the committed special values, and its proof swept every input of
the current model sources with 0 mismatches. recheck trusts the model on a certified card as on the tables'
own GPU. A malformed record is refused (ValueError, one line naming the file and the field).
"""

import json
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import numpy as np

from common.provenance import shown
from oracles.mufu import tables
from oracles.mufu.baseline import TABLE_SIZE
from oracles.mufu.proof import PROOF_INPUTS, model_source_sha256

# Beside the tables, not among them: the evidence record's inputs hold data/ (what the model and its probes read),
# and a card certified later changes no model.
FOLDER = Path(__file__).resolve().parent / "certified"
PREFIX = "certified-"
SCHEMA_FILE = Path(__file__).with_name("certification.schema.json")
COMMAND = "`python -m oracles.mufu certify-card`"
CERTIFIED, DIFFERS, NOT_USED = "certified", "differs", "not used"  # what ``standing`` finds
FIRST_LISTED = 16


def card_name(device):
    """How a line names a GPU model ({"gpu", "compute_capability"})."""
    return f"{device['gpu']} (compute capability {device['compute_capability']})"


def card_of(record):
    """The GPU model a record (a certification or the tables' provenance) was made on."""
    return {k: record["provenance"][k] for k in ("gpu", "compute_capability")}


def path_for(device, folder=None):
    """Where the record of GPU model ``device`` is: certified/certified-<its name, lower case, runs of other
    characters as one dash>.json."""
    slug = re.sub(r"[^a-z0-9]+", "-", device["gpu"].lower()).strip("-")
    return (FOLDER if folder is None else Path(folder)) / f"{PREFIX}{slug}.json"


@lru_cache(maxsize=1)
def _validator():
    """The schema's validator; JSON integers only (jsonschema would take 8.0 for an integer)."""
    base = jsonschema.Draft202012Validator
    strict = base.TYPE_CHECKER.redefine("integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool))
    schema = json.loads(SCHEMA_FILE.read_text())
    base.check_schema(schema)
    return jsonschema.validators.extend(base, type_checker=strict)(schema)


def validate(record, path):
    """``record`` unchanged when it has the schema's form, names every table and lists the first differing
    entries of each that differs; ValueError naming ``path`` and the field otherwise."""
    error = jsonschema.exceptions.best_match(_validator().iter_errors(record))
    if error is not None:
        field = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise ValueError(f"{shown(path)}: {field}: {error.message}")
    if sorted(record["tables"]) != sorted(tables.TABLE_NAMES):
        raise ValueError(f"{shown(path)}: tables: names {sorted(record['tables'])}, not {list(tables.TABLE_NAMES)}")
    for name, entry in record["tables"].items():
        if bool(entry["differing"]) != bool(entry["first_differing"]):
            raise ValueError(f"{shown(path)}: tables.{name}.first_differing: {len(entry['first_differing'])} entries "
                             f"listed, {entry['differing']} differing")
    return record


def read(path):
    """The certification record at ``path``; ValueError (one line naming the file, and the field) when it is
    not JSON or not of the schema's form."""
    try:
        record = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise ValueError(f"{shown(path)}: not JSON: {str(exc).splitlines()[0]}") from exc
    return validate(record, path)


def for_device(device, folder=None):
    """(path, record) of GPU model ``device``'s committed record, or (path, None) when there is none."""
    path = path_for(device, folder)
    return path, (read(path) if path.is_file() else None)


def _hex(bits):
    return f"0x{int(bits):08x}"


def compare_tables(measured, committed):
    """{table: its entry of the record} for ``measured`` against ``committed`` ({name: uint32 [2^23]}), entry
    by entry: sha256 of each, entries compared, how many differ and the first FIRST_LISTED that do."""
    inputs, out = tables.inputs(), {}
    for name in tables.TABLE_NAMES:
        got, want = np.asarray(measured[name], np.uint32), np.asarray(committed[name], np.uint32)
        differ = np.flatnonzero(got != want)
        out[name] = {"unit": tables.UNITS[name], "sha256": tables.sha256(got), "committed_sha256": tables.sha256(want),
                     "entries": int(got.size), "differing": int(differ.size),
                     "first_differing": [{"index": int(i), "input": _hex(inputs[name][i]), "measured": _hex(got[i]),
                                          "committed": _hex(want[i])} for i in differ[:FIRST_LISTED]]}
    return out


def _leaves(tree, path=""):
    if not isinstance(tree, dict):
        return {path: tree}
    return {k: v for key, sub in tree.items() for k, v in _leaves(sub, f"{path}.{key}" if path else key).items()}


def compare_specials(seen, constants, committed):
    """The special values' entry of the record: ``seen`` and ``constants`` (as measure writes them) against
    the committed tables' provenance ``committed``; "differing" names each value that is not the same."""
    now = _leaves({"model_constants": constants, "special_inputs": seen})
    before = _leaves({k: committed[k] for k in ("model_constants", "special_inputs")})
    differing = sorted(k for k in set(now) | set(before) if now.get(k, "absent") != before.get(k, "absent"))
    return {"equal": not differing, "differing": differing, "model_constants": constants, "special_inputs": seen}


def standing(record, path, device, source_sha256=None):
    """(CERTIFIED, DIFFERS or NOT_USED, one line) for ``record`` (read from ``path``) on GPU model ``device``:
    NOT_USED where it does not speak for the card and the model here (another card, other committed tables,
    not every entry, a stale or partial proof), DIFFERS where it shows the model wrong here (a table entry or
    special value differs, the proof has mismatches). ``source_sha256``: the primitives' model sources now
    (default: their hash here)."""
    name = shown(path)
    if card_of(record) != device:
        return NOT_USED, f"{name} is the record of {card_name(card_of(record))}, this GPU is {card_name(device)}"
    committed = tables.read_provenance()
    for table, entry in record["tables"].items():
        if entry["committed_sha256"] != committed["tables"][table]["sha256"]:
            return NOT_USED, f"{name} compared table {table} with other tables than the committed ones; {COMMAND} again"
        if entry["entries"] != TABLE_SIZE:
            return NOT_USED, f"{name} compared {entry['entries']:,} of the {TABLE_SIZE:,} entries of table {table}"
    differ = [f"{e['unit']} in {e['differing']:,} of {e['entries']:,} entries of table {t} (first: input "
              f"{e['first_differing'][0]['input']}, measured {e['first_differing'][0]['measured']}, committed "
              f"{e['first_differing'][0]['committed']})" for t, e in record["tables"].items() if e["differing"]]
    if differ:
        return DIFFERS, f"{name}: this GPU's MUFU tables differ from the committed ones: {'; '.join(differ)}"
    if not record["special_values"]["equal"]:
        return DIFFERS, (f"{name}: this GPU's special values differ from the committed ones: "
                         f"{', '.join(record['special_values']['differing'])}")
    proof = record["proof"]
    if proof["model_source_sha256"] != (source_sha256 or model_source_sha256()):
        return NOT_USED, f"{name}: the model changed since its proof; {COMMAND} again"
    swept = {sweep: result["inputs"] for sweep, result in proof["results"].items()}
    if swept != PROOF_INPUTS:
        return NOT_USED, f"{name}: its proof swept {swept}, not {PROOF_INPUTS}"
    wrong = {sweep: r["mismatches"] for sweep, r in proof["results"].items() if r["mismatches"]}
    if wrong:
        return DIFFERS, (f"{name}: the model's proof on this GPU found mismatches: "
                         + ", ".join(f"{sweep} {n:,}" for sweep, n in wrong.items()))
    return CERTIFIED, (f"all {TABLE_SIZE:,} entries of each of {', '.join(tables.TABLE_NAMES)} equal the committed "
                       f"ones and the model proved on every input ({name})")


def cards(folder=None):
    """The GPU models the model is certified on, one line each: the tables' own, then every committed record
    that certifies its card under its card's name (``path_for``); a malformed record raises ValueError."""
    home = card_of(tables.read_provenance())
    out = [f"{card_name(home)}: measured ({tables.PROVENANCE_FILE.name})"]
    for path in sorted((FOLDER if folder is None else Path(folder)).glob(f"{PREFIX}*.json")):
        record = read(path)
        card = card_of(record)
        if path == path_for(card, path.parent) and standing(record, path, card)[0] == CERTIFIED:
            out.append(f"{card_name(card)}: certified ({path.name})")
    return out
