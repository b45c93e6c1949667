"""The one bitwise comparison: every implementation's outputs against a reference's (the model's), element by
element, weights as their bit patterns. ``check_case`` saves a disagreement as a replayable case file
(corpora/failures/) before it fails."""

import os

import hypothesis
import hypothesis.core
import numpy as np

from kernel.layout import metadata_field
from properties.engine.casefile import write_failure
from properties.engine.cases import FIELDS
from properties.engine.implementations import REFERENCE, run_all

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


def disagreements(outputs, reference=REFERENCE, tile_n=None):
    """One dict per (implementation, field) whose bits differ from ``reference``'s; a field an
    implementation does not produce is not compared. With ``tile_n``, metadata elements carry their names."""
    want = outputs[reference]
    found = []
    for name, got in outputs.items():
        if name == reference:
            continue
        for field in FIELDS:
            got_bits = field_bits(got, field)
            if got_bits is None:
                continue
            difference = _compare(field, got_bits, field_bits(want, field), tile_n)
            if difference is not None:
                found.append({"implementation": name, "reference": reference, "field": field, **difference})
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


def _reproduction(context):
    """Hypothesis's ``@reproduce_failure`` line for the running example; None where this Hypothesis version
    lacks the (internal) API."""
    try:
        from hypothesis.core import reproduction_decorator
        return reproduction_decorator(context.data.choices)
    except (ImportError, AttributeError):
        return None


def _hypothesis_run():
    """(whether this is the run to save, where the case came from). Inside a Hypothesis test only the final
    replay of the minimal failing example is saved, not every step of the shrinking."""
    origin = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] or None,
              "hypothesis_version": hypothesis.__version__}
    if not hypothesis.currently_in_test_context():
        return True, origin
    from hypothesis.control import current_build_context

    context = current_build_context()
    profile = getattr(hypothesis.settings, "get_current_profile_name", lambda: None)()
    origin.update(hypothesis_seed=getattr(hypothesis.core, "global_force_seed", None), hypothesis_profile=profile,
                  reproduce_failure=_reproduction(context))
    return context.is_final, origin


def check_case(case, property_name, names=None):
    """Run the implementations (default: every available one) on ``case``; return their outputs when all
    agree with the model bit for bit, else save the case with every output and raise AssertionError."""
    outputs = run_all(case, names)
    found = disagreements(outputs, tile_n=case.tile_n)
    if not found:
        return outputs
    save, origin = _hypothesis_run()
    saved = write_failure(case, outputs, found, {"property": property_name, **origin}) if save else None
    lines = "\n".join(describe(d) for d in found)
    raise AssertionError(f"{property_name}: implementations disagree on a {case.generator} case"
                         f"{f', saved to {saved}' if saved else ''}:\n{lines}")
