"""The speed check's record and decision (pure Python: no GPU, no torch).

A shape is the routing kernel without metadata (``cute``) or with it (``cute_meta``, tile 8, every expert local) at
b = 1..MAX_TOKENS. Its figure is the graphed per-launch time: the fastest of the timed replays of a CUDA graph of
back-to-back launches (properties/bench/speed.py). A bench record's ``speed_check`` section (written by
``make bench``) holds the figures of each of its rounds (each round a process of its own, on an idle card), the
reference per shape (their median) and the margin: MARGIN_FACTOR times the widest relative spread
((max - min) / median) any shape showed across the rounds. A shape measured now fails when it is slower than its
reference by more than the margin.

The record a card is checked against is the newest (provenance date) of the given bench records that hold a
``speed_check`` section and name this GPU model (provenance ``gpu``); a card that none names is not checked, and
says so. A section that is malformed, or a record without provenance, is one line naming the file and the field.
"""

import math
import statistics
from dataclasses import dataclass

from kernel.layout import MAX_TOKENS

SECTION = "speed_check"
VARIANTS = ("cute", "cute_meta")  # properties/bench/results_file.py's names of the kernel without and with metadata
SHAPES = tuple((name, b) for name in VARIANTS for b in range(1, MAX_TOKENS + 1))
MARGIN_FACTOR = 2.0
PASS, FAIL, NOT_CHECKED = "pass", "fail", "not checked"


def shape_label(name, b):
    return f"{name} b={b}"


class RecordError(ValueError):
    """A record the check cannot read: one line naming the file and the field."""

    def __init__(self, path, field, problem):
        super().__init__(f"{path}: field {field}: {problem}")


def _time(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def section(rounds, method):
    """The ``speed_check`` section of a bench record from ``rounds`` (a list, one per round, of {name: {b: µs}} over
    SHAPES) and ``method`` (how a round measured, in words); ValueError with fewer than 2 rounds or a missing
    figure (no spread exists)."""
    if len(rounds) < 2:
        raise ValueError(f"a margin needs at least 2 rounds, got {len(rounds)}")
    per_shape = {}
    for name, b in SHAPES:
        figures = [r.get(name, {}).get(str(b)) for r in rounds]
        if not all(_time(f) for f in figures):
            raise ValueError(f"{shape_label(name, b)}: a round lacks its figure ({figures})")
        per_shape[name, b] = figures
    reference = {key: statistics.median(f) for key, f in per_shape.items()}
    spread = {key: (max(f) - min(f)) / reference[key] for key, f in per_shape.items()}
    widest = max(spread, key=spread.get)
    return {"method": method, "rounds": len(rounds),
            "rounds_us": {name: {str(b): per_shape[name, b] for b in range(1, MAX_TOKENS + 1)} for name in VARIANTS},
            "reference_us": {name: {str(b): reference[name, b] for b in range(1, MAX_TOKENS + 1)} for name in VARIANTS},
            "spread": {"relative": spread[widest], "shape": shape_label(*widest)},
            "margin_factor": MARGIN_FACTOR, "margin": MARGIN_FACTOR * spread[widest],
            "how": f"margin = {MARGIN_FACTOR:g} x the widest relative spread ((max - min) / median) of any shape's "
                   f"figures over {len(rounds)} rounds, each a process of its own on this card, idle otherwise"}


def reference_and_margin(record, path):
    """({(name, b): reference µs}, margin) of a record's section; RecordError naming the first bad field."""
    part = record.get(SECTION)
    if not isinstance(part, dict):
        raise RecordError(path, SECTION, f"must be an object, got {type(part).__name__}")
    margin = part.get("margin")
    if not (isinstance(margin, (int, float)) and not isinstance(margin, bool) and math.isfinite(margin)
            and margin >= 0):
        raise RecordError(path, f"{SECTION}.margin", f"must be a finite number >= 0, got {margin!r}")
    table = part.get("reference_us")
    if not isinstance(table, dict):
        raise RecordError(path, f"{SECTION}.reference_us", f"must be an object, got {type(table).__name__}")
    reference = {}
    for name, b in SHAPES:
        value = table.get(name, {}).get(str(b)) if isinstance(table.get(name), dict) else None
        if not _time(value):
            raise RecordError(path, f"{SECTION}.reference_us.{name}.{b}", f"must be a time > 0 in µs, got {value!r}")
        reference[name, b] = value
    return reference, margin


def _gpu_and_date(record, path):
    prov = record.get("provenance")
    if not isinstance(prov, dict) or not isinstance(prov.get("gpu"), str):
        raise RecordError(path, "provenance.gpu", "a speed record must name its GPU model")
    if not isinstance(prov.get("date"), str):
        raise RecordError(path, "provenance.date", "a speed record must hold its date")
    return prov["gpu"], prov["date"]


def pick(records, gpu):
    """(path, record) of the newest of ``records`` ([(path, dict)]) with a speed section that names ``gpu``, or
    None; RecordError for a speed record without provenance."""
    mine = []
    for path, record in records:
        if not isinstance(record, dict):
            raise RecordError(path, "(top level)", f"must be a JSON object, got {type(record).__name__}")
        if SECTION in record:
            made_on, date = _gpu_and_date(record, path)
            if made_on == gpu:
                mine.append((date, str(path), record))
    if not mine:
        return None
    date, path, record = max(mine)
    return path, record


@dataclass(frozen=True)
class Outcome:
    """``status``: PASS, FAIL or NOT_CHECKED; ``lines``: what decided it, one per shape or problem; ``record``: the
    file checked against (None when none was)."""

    status: str
    lines: tuple
    record: object = None


def compare(reference, margin, measured, path):
    """The outcome of figures ``measured`` ({name: {b: µs}}) against a record's reference and margin: a line per
    shape (its figure now, the record's, the ratio); FAIL when any shape is slower by more than the margin or has
    no figure."""
    lines, failed = [], False
    for name, b in SHAPES:
        now, then = measured.get(name, {}).get(str(b)), reference[name, b]
        label = shape_label(name, b)
        if not _time(now):
            failed = True
            lines.append(f"FAIL {label}: not measured ({now!r}); {then:.3f} µs in {path}")
            continue
        slower = now / then - 1
        over = slower > margin
        failed |= over
        lines.append(f"{'FAIL' if over else 'ok'} {label}: {now:.3f} µs now, {then:.3f} µs in {path} "
                     f"({slower:+.1%}; margin {margin:.1%})")
    return Outcome(FAIL if failed else PASS, tuple(lines), path)


def decide(records, gpu, measure):
    """The speed check: the record of ``gpu`` among ``records`` ([(path, dict)]), then ``measure()`` (called only
    when there is one: {name: {b: µs}}) compared with it. NOT_CHECKED naming the card when no record names it;
    FAIL with one line naming the file and field when the record is malformed."""
    try:
        found = pick(records, gpu)
        if found is None:
            return Outcome(NOT_CHECKED, (f"no bench record with a {SECTION} section names {gpu} (among "
                                         f"{', '.join(str(p) for p, _ in records) or 'no files'}): this card's "
                                         "speed is not checked",))
        path, record = found
        reference, margin = reference_and_margin(record, path)
    except RecordError as exc:
        return Outcome(FAIL, (str(exc),))
    return compare(reference, margin, measure(), path)
