"""The one bitwise comparison: every implementation's outputs against its reference's (the Muse Spark model's
unless it declares another, properties/engine/references.py), element by element, weights as their bit
patterns."""

import numpy as np

from kernel.layout import metadata_field
from properties.engine.cases import FIELDS
from properties.engine.references import DEFAULT as REFERENCE
from properties.engine.references import REFERENCES

MAX_LISTED = 5


def field_bits(outputs, field):
    """The field's values as integers (weights as their uint32 bit patterns), or None if not produced."""
    value = getattr(outputs, field)
    if value is None or field != "weights":
        return value
    return value.view(np.uint32)


def _shown(field, value):
    return f"0x{int(value):08x}" if field == "weights" else str(int(value))


def _element(field, index, tile_n):
    entry = {"index": [int(i) for i in index]}
    if field == "metadata" and tile_n is not None:
        entry["element"] = metadata_field(int(index[0]), tile_n)
    return entry


def _compare(field, got, want, tile_n):
    """None when equal, else a description of where ``got`` differs from ``want``."""
    if want is None:
        return {"count": None, "first": [], "note": "the reference produced no such output"}
    if got.shape != want.shape:
        return {"count": None, "first": [], "note": f"shape {list(got.shape)} instead of {list(want.shape)}"}
    where = np.argwhere(got != want)
    if where.size == 0:
        return None
    first = [{**_element(field, index, tile_n), "got": _shown(field, got[tuple(index)]),
              "want": _shown(field, want[tuple(index)])} for index in where[:MAX_LISTED]]
    return {"count": int(len(where)), "first": first}


_counted = {"cases": 0}


def compared_cases():
    """How many calls of ``disagreements`` in this process compared at least one output with its reference's:
    the cases compared, which the test session reports per test (conftest.py, the gate's "cases" column)."""
    return _counted["cases"]


def disagreements(outputs, reference=REFERENCE, tile_n=None, references=None):
    """One dict per (implementation, field) whose bits differ from its reference's: ``references[name]`` where
    given, else ``reference``; the references' own outputs are not compared; a field an implementation does
    not produce is not compared. With ``tile_n``, metadata elements carry their names. Counted by
    ``compared_cases`` when it compared anything."""
    references = references or {}
    found, compared = [], False
    for name, got in outputs.items():
        against = references.get(name, reference)
        if name == against or name in REFERENCES:
            continue
        want = outputs.get(against)
        for field in FIELDS:
            got_bits = field_bits(got, field)
            if got_bits is None:
                continue
            if want is None:
                difference = {"count": None, "first": [], "note": f"the reference {against} was not run"}
            else:
                difference, compared = _compare(field, got_bits, field_bits(want, field), tile_n), True
            if difference is not None:
                found.append({"implementation": name, "reference": against, "field": field, **difference})
    _counted["cases"] += compared
    return found


def _where(disagreement, entry, tile_n):
    """An element's place: a metadata element by its field (kernel/layout.py), from the name saved with it or,
    for one saved without, from ``tile_n``; any other element by its index."""
    if "element" in entry:
        return entry["element"]
    if disagreement["field"] == "metadata" and tile_n is not None:
        return metadata_field(int(entry["index"][0]), tile_n)
    return str(entry["index"])


def describe(disagreement, tile_n=None):
    """One line naming who differs from whom, where (metadata by field) and how."""
    d = disagreement
    where = "; ".join(f"{_where(d, e, tile_n)}: {e['got']} instead of {e['want']}" for e in d["first"])
    count = d.get("note") or f"{d['count']} element(s) differ, first {where}"
    return f"{d['implementation']} {d['field']} vs {d['reference']}: {count}"
