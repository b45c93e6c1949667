"""The speed check's record and decision (pure Python: no GPU, no torch).

A shape is the routing kernel without metadata (``cute``) or with it (``cute_meta``, tile 8, every expert local) at
b = 1..MAX_TOKENS. Its figure is the graphed per-launch time: the fastest of the timed replays of a CUDA graph of
back-to-back launches (properties/bench/speed.py). A bench record's ``speed_check`` section (written by
``make bench``) holds the figures of each of its rounds (each round a process of its own, on an idle card), the
reference per shape (their median) and the margin. A shape measured now fails when it is slower than its reference
by more than the margin.

The margin is max(the rounds' part, the floor). The rounds' part is MARGIN_FACTOR times the widest relative spread
((max - min) / median) any shape showed across the record's rounds. Back-to-back rounds do not see all of the
spread between processes: on an H100 the per-process figure of some shapes is bimodal (cute_meta b=3 and b=8 moved
by 4-5 % between processes, the two rounds by 0.27 %), so the unchanged kernel failed a margin made of the rounds
alone. The floor is MARGIN_FACTOR times the widest process-to-process spread of a committed spread record
(properties/results/speed-spread-*.json, schema SPREAD_SCHEMA: every shape's figure in each of several processes,
the bench's rounds and later speed-check runs, ``python -m properties.tools.speed --spread``): the newest such
record of this GPU model; where none names the model, the widest of any card's record (a card's spread is unknown
until measured, and the widest measured is the one known not to fail a card that shows it); where there is no
spread record, no floor. The speed check takes the floor from the spread records at hand when it runs, the rounds'
part from the bench record (``rounds_margin``; a section written before the floor holds it as its ``margin``), and
states both and where each came from; the bench's section states the same as it was when written.

The record a card is checked against is the newest (provenance date) of the given bench records that hold a
``speed_check`` section and name this GPU model (provenance ``gpu``); a card that none names is not checked, and
says so. A section or spread record that is malformed, or a record without provenance, is one line naming the file
and the field (common/records.py's RecordError). The JSON schemas beside this module fix each record's form
(SECTION_SCHEMA_FILE, PROVENANCE_SCHEMA_FILE, SPREAD_SCHEMA_FILE); the rest is checked here: every shape of SHAPES
present (the shapes are defined here, once), every figure and margin finite (Python's json reads "NaN" and
"1e999", which are not JSON, and NaN passes any bound a schema sets), a spread record's one figure per process and
its widest spread the one its figures give.
"""

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from kernel.layout import MAX_TOKENS
from common.provenance import REPO_ROOT, shown
from common.records import RecordError, check

SECTION = "speed_check"
VARIANTS = ("cute", "cute_meta")  # properties/bench/results_file.py's names of the kernel without and with metadata
SHAPES = tuple((name, b) for name in VARIANTS for b in range(1, MAX_TOKENS + 1))
MARGIN_FACTOR = 2.0
PASS, FAIL, NOT_CHECKED = "pass", "fail", "not checked"
RESULTS_DIR = REPO_ROOT / "properties" / "results"
SPREAD_GLOB = "speed-spread-*.json"
SPREAD_SCHEMA = "kernel.speed-spread/1"
SPREAD_SCHEMA_FILE = Path(__file__).with_name("speed-spread.schema.json")  # what the check reads of a spread record
SECTION_SCHEMA_FILE = Path(__file__).with_name("speed-section.schema.json")  # ... of a bench record's section
PROVENANCE_SCHEMA_FILE = Path(__file__).with_name("speed-provenance.schema.json")  # ... of each bench record given
BENCH_ROUND, SPEED_CHECK = "bench round", "speed check"  # the kinds of process a spread record holds


def shape_label(name, b):
    return f"{name} b={b}"


def _time(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def spread(per_shape):
    """({shape: (max - min) / median}, the shape of the widest) of ``per_shape`` ({(name, b): [µs, ...]})."""
    relative = {key: (max(f) - min(f)) / statistics.median(f) for key, f in per_shape.items()}
    return relative, max(relative, key=relative.get)


@dataclass(frozen=True)
class Floor:
    """The margin's floor: ``margin`` (MARGIN_FACTOR x ``relative``, the widest process-to-process spread, of
    ``shape``, in spread record ``record`` made on ``gpu``), and ``why`` this one, in words. No spread record:
    margin 0, the other fields None."""

    margin: float
    why: str
    relative: object = None
    shape: object = None
    record: object = None
    gpu: object = None

    def as_json(self):
        return {"margin": self.margin, "spread": self.relative, "shape": self.shape, "record": self.record,
                "gpu": self.gpu, "why": self.why}


NO_FLOOR = Floor(0.0, f"no spread record ({SPREAD_GLOB}): no floor, the rounds' spread alone")


def section(rounds, method, floor=NO_FLOOR):
    """The ``speed_check`` section of a bench record from ``rounds`` (a list, one per round, of {name: {b: µs}} over
    SHAPES), ``method`` (how a round measured, in words) and ``floor`` (``floor_of`` the spread records); ValueError
    with fewer than 2 rounds or a missing figure (no spread exists)."""
    if len(rounds) < 2:
        raise ValueError(f"a margin needs at least 2 rounds, got {len(rounds)}")
    per_shape = {}
    for name, b in SHAPES:
        figures = [r.get(name, {}).get(str(b)) for r in rounds]
        if not all(_time(f) for f in figures):
            raise ValueError(f"{shape_label(name, b)}: a round lacks its figure ({figures})")
        per_shape[name, b] = figures
    reference = {key: statistics.median(f) for key, f in per_shape.items()}
    relative, widest = spread(per_shape)
    rounds_margin = MARGIN_FACTOR * relative[widest]
    return {"method": method, "rounds": len(rounds),
            "rounds_us": {name: {str(b): per_shape[name, b] for b in range(1, MAX_TOKENS + 1)} for name in VARIANTS},
            "reference_us": {name: {str(b): reference[name, b] for b in range(1, MAX_TOKENS + 1)} for name in VARIANTS},
            "spread": {"relative": relative[widest], "shape": shape_label(*widest)},
            "margin_factor": MARGIN_FACTOR, "rounds_margin": rounds_margin, "floor": floor.as_json(),
            "margin": max(rounds_margin, floor.margin),
            "how": f"margin = max({MARGIN_FACTOR:g} x the widest relative spread ((max - min) / median) of any shape's "
                   f"figures over {len(rounds)} rounds, each a process of its own on this card, idle otherwise; "
                   f"the floor: {floor.why})"}


def _finite(value, path, field):
    """``value`` (a number its schema let through, or None where it is missing); RecordError naming ``field`` when
    it is missing, NaN or infinite."""
    if value is None or not math.isfinite(value):
        raise RecordError(f"{path}: {field}: must be a finite number, got {value!r}")
    return value


def _figures_per_process(record, path):
    """{(name, b): [µs per process]} of a spread record that matches its schema: every shape lists one finite figure
    per process; RecordError naming the first that does not."""
    table, processes = record["figures_us"], len(record["processes"])
    per_shape = {}
    for name, b in SHAPES:
        row = table.get(name, {}).get(str(b))
        if row is None or len(row) != processes:
            raise RecordError(f"{path}: figures_us.{name}.{b}: must list {processes} times in µs, one per process, "
                              f"got {row!r}")
        per_shape[name, b] = [_finite(f, path, f"figures_us.{name}.{b}.{i}") for i, f in enumerate(row)]
    return per_shape


def read_spread(record, path):
    """(gpu, date, relative, shape) of a spread record: its widest process-to-process spread, which must be the one
    its figures give; RecordError naming the first bad field (SPREAD_SCHEMA_FILE's rules first)."""
    check(record, SPREAD_SCHEMA_FILE, path)
    relative, shape = spread(_figures_per_process(record, path))
    widest = record["widest"]
    if (widest["relative"], widest["shape"]) != (relative[shape], shape_label(*shape)):
        raise RecordError(f"{path}: widest: {widest!r} is not the widest spread of figures_us "
                          f"({shape_label(*shape)}, {relative[shape]!r})")
    return record["provenance"]["gpu"], record["provenance"]["date"], widest["relative"], widest["shape"]


def floor_of(spreads, gpu):
    """The Floor for ``gpu`` from spread records ``spreads`` ([(path, record)]): the newest of this GPU model, else
    the widest of any card's, else NO_FLOOR; RecordError for a malformed one."""
    read = [(str(path), *read_spread(record, path)) for path, record in spreads]
    mine = [r for r in read if r[1] == gpu]
    if mine:
        path, made_on, _, relative, shape = max(mine, key=lambda r: (r[2], r[0]))
        return Floor(MARGIN_FACTOR * relative, f"{MARGIN_FACTOR:g} x the widest process-to-process spread "
                     f"{relative:.2%} ({shape}) in {path}, this GPU model's newest spread record", relative, shape,
                     path, made_on)
    if read:
        path, made_on, _, relative, shape = max(read, key=lambda r: (r[3], r[0]))
        return Floor(MARGIN_FACTOR * relative, f"no spread record names {gpu}, so {MARGIN_FACTOR:g} x the widest "
                     f"process-to-process spread of any card's: {relative:.2%} ({shape}) in {path}, made on "
                     f"{made_on} (this card's spread between processes is not measured)", relative, shape, path,
                     made_on)
    return NO_FLOOR


def spread_paths(folder=RESULTS_DIR):
    """The committed spread records: every ``SPREAD_GLOB`` file of properties/results/, sorted."""
    return sorted(Path(folder).glob(SPREAD_GLOB))


def read_records(paths, shown=shown):
    """[(shown(path), record)] of ``paths``; an unreadable file is a string the check reports as malformed."""
    out = []
    for path in paths:
        try:
            out.append((shown(path), json.loads(Path(path).read_text())))
        except (OSError, ValueError) as exc:
            out.append((shown(path), f"unreadable: {exc}"))
    return out


@dataclass(frozen=True)
class Margin:
    """The margin a record is checked with: ``value`` = max(``rounds``, ``floor.margin``); ``rounds`` MARGIN_FACTOR x
    the widest spread of the record's rounds (``rounds_from``: in words, which field held it)."""

    value: float
    rounds: float
    rounds_from: str
    floor: Floor

    def line(self, path):
        return (f"margin {self.value:.2%} = max({self.rounds:.2%} from the rounds of {path} ({self.rounds_from}), "
                f"floor {self.floor.margin:.2%}: {self.floor.why})")

    def as_json(self):
        return {"value": self.value, "rounds": self.rounds, "rounds_from": self.rounds_from,
                "floor": self.floor.as_json()}


def reference_and_margin(record, path, floor=NO_FLOOR):
    """({(name, b): reference µs}, Margin) of a record's section with ``floor``; RecordError naming the first bad
    field (SECTION_SCHEMA_FILE's rules first)."""
    part = check(record, SECTION_SCHEMA_FILE, path)[SECTION]
    margin = _finite(part["margin"], path, f"{SECTION}.margin")
    if "rounds_margin" in part:
        rounds_from = f"{SECTION}.rounds_margin"
        rounds = _finite(part["rounds_margin"], path, rounds_from)
    else:
        rounds, rounds_from = margin, f"{SECTION}.margin, written before the floor"
    reference = {(name, b): _finite(part["reference_us"].get(name, {}).get(str(b)), path,
                                    f"{SECTION}.reference_us.{name}.{b}") for name, b in SHAPES}
    return reference, Margin(max(rounds, floor.margin), rounds, rounds_from, floor)


def pick(records, gpu):
    """(path, record) of the newest of ``records`` ([(path, dict)]) with a speed section that names ``gpu``, or
    None; RecordError for a record PROVENANCE_SCHEMA_FILE refuses (not an object, or a speed record without its GPU
    model and date)."""
    mine = []
    for path, record in records:
        check(record, PROVENANCE_SCHEMA_FILE, path)
        if SECTION in record and record["provenance"]["gpu"] == gpu:
            mine.append((record["provenance"]["date"], str(path), record))
    if not mine:
        return None
    date, path, record = max(mine)
    return path, record


@dataclass(frozen=True)
class Outcome:
    """``status``: PASS, FAIL or NOT_CHECKED; ``lines``: what decided it, one per shape or problem (after the line
    stating the margin, when there is one); ``record``: the file checked against (None when none was); ``margin``:
    the Margin (None when none was used)."""

    status: str
    lines: tuple
    record: object = None
    margin: object = None


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


def decide(records, gpu, measure, spreads=()):
    """The speed check: the record of ``gpu`` among ``records`` ([(path, dict)]), its margin with the floor of
    ``spreads`` (spread records, [(path, dict)]), then ``measure()`` (called only when there is a record:
    {name: {b: µs}}) compared with it, after a line stating the margin. NOT_CHECKED naming the card when no record
    names it; FAIL with one line naming the file and field when a record is malformed."""
    try:
        found = pick(records, gpu)
        if found is None:
            return Outcome(NOT_CHECKED, (f"no bench record with a {SECTION} section names {gpu} (among "
                                         f"{', '.join(str(p) for p, _ in records) or 'no files'}): this card's "
                                         "speed is not checked",))
        path, record = found
        reference, margin = reference_and_margin(record, path, floor_of(spreads, gpu))
    except RecordError as exc:
        return Outcome(FAIL, (str(exc),))
    outcome = compare(reference, margin.value, measure(), path)
    return Outcome(outcome.status, (margin.line(path),) + outcome.lines, path, margin)


# ---------------------------------------------------------------------------------------------- the spread record

_LOG_LINE = re.compile(r"^\s*(ok|FAIL) (\S+) b=(\d+): ([0-9.]+) µs now, ([0-9.]+) µs in (\S+) \(")
_LOG_LAST = re.compile(r"^speed check: \S+ \((.+), (\S+)\)$")


def parse_log(text, path):
    """(gpu, kernel, {name: {b: µs now}}, {name: {b: µs in the record}}) of a speed check's printed output (its
    lines "ok|FAIL <name> b=<b>: X µs now, Y µs in <record> (...)" and its last line "speed check: <STATUS> (<gpu>,
    <kernel>)"); ValueError naming the file when a shape is missing, repeated, or the last line is not there."""
    now, then, last = {n: {} for n in VARIANTS}, {n: {} for n in VARIANTS}, None
    for line in text.splitlines():
        found = _LOG_LINE.match(line)
        if found and found[2] in now:
            if found[3] in now[found[2]]:
                raise ValueError(f"{path}: {found[2]} b={found[3]} is printed twice")
            now[found[2]][found[3]], then[found[2]][found[3]] = float(found[4]), float(found[5])
        last = _LOG_LAST.match(line.strip()) or last
    missing = [shape_label(n, b) for n, b in SHAPES if str(b) not in now[n]]
    if missing or last is None:
        raise ValueError(f"{path}: not a whole speed check's output: "
                         f"{'no figure of ' + ', '.join(missing) if missing else 'no last line speed check: ...'}")
    return last[1], last[2], now, then


def _logged(bench, bench_path, log_path, text, kernel):
    """The "now" figures of a speed check's log of ``kernel`` against ``bench``: ValueError unless it ran on the
    bench's GPU and each "in the record" figure is the bench's reference as the check prints it."""
    gpu, ran, now, then = parse_log(text, log_path)
    if gpu != bench["provenance"]["gpu"] or ran != kernel:
        raise ValueError(f"{log_path}: checked {ran} on {gpu}, not {kernel} on {bench['provenance']['gpu']}")
    reference = bench[SECTION]["reference_us"]
    for name, b in SHAPES:
        if f"{then[name][str(b)]:.3f}" != f"{reference[name][str(b)]:.3f}":
            raise ValueError(f"{log_path}: {shape_label(name, b)} was checked against {then[name][str(b)]:.3f} µs, "
                             f"not {bench_path}'s reference {reference[name][str(b)]:.3f} µs")
    return now


def bench_rounds(bench, bench_path):
    """The ``speed_check.rounds_us`` of bench record ``bench``; ValueError naming the file when it has none."""
    rounds = bench.get(SECTION, {}).get("rounds_us") if isinstance(bench, dict) else None
    if not isinstance(rounds, dict):
        raise ValueError(f"{bench_path}: no {SECTION}.rounds_us (a bench record made with --speed-rounds)")
    return rounds


def spread_record(bench, bench_path, logs, planted=None, made_by=None):
    """A spread record (SPREAD_SCHEMA) of the kernel's figure per shape in every process: each round of bench record
    ``bench`` (its ``speed_check.rounds_us``) and each speed check in ``logs`` ([(path, text)], runs of the kernel
    against that record), their (max - min) / median per shape and the widest; ``planted`` ((path, text), or None):
    the planted slower kernel's log, its figures kept beside them. The provenance is the bench record's (gpu,
    commit, date, driver) with the files read. ValueError on a log of another card, kernel or record."""
    prov = bench.get("provenance") or {}
    rounds = bench_rounds(bench, bench_path)
    count = len(rounds[VARIANTS[0]]["1"])
    processes = [{"source": f"{bench_path} {SECTION}.rounds_us[{i}]", "kind": BENCH_ROUND} for i in range(count)]
    columns = [{n: {str(b): rounds[n][str(b)][i] for m, b in SHAPES if m == n} for n in VARIANTS}
               for i in range(count)]
    for path, text in logs:
        processes.append({"source": str(path), "kind": SPEED_CHECK})
        columns.append(_logged(bench, bench_path, path, text, "kernel"))
    per_shape = {(n, b): [c[n][str(b)] for c in columns] for n, b in SHAPES}
    relative, widest = spread(per_shape)
    record = {"schema": SPREAD_SCHEMA,
              "provenance": {**{k: prov.get(k) for k in ("gpu", "commit", "date", "driver")},
                             "bench_record": str(bench_path), "logs": [str(p) for p, _ in logs]},
              "what": "the speed check's figure of every shape of the unchanged kernel in each of several processes "
                      "on one idle card (the bench's rounds, then speed-check runs): its process-to-process spread, "
                      "the floor of the speed check's margin (properties/bench/speed_record.py)",
              "method": f"{bench[SECTION].get('method')}; a speed check's figure as its log prints it (3 decimals), "
                        "a round's as the bench record holds it",
              "made_by": made_by,
              "processes": processes,
              "figures_us": {n: {str(b): per_shape[n, b] for m, b in SHAPES if m == n} for n in VARIANTS},
              "spread": {n: {str(b): relative[n, b] for m, b in SHAPES if m == n} for n in VARIANTS},
              "widest": {"relative": relative[widest], "shape": shape_label(*widest)}}
    if planted is not None:
        path, text = planted
        _, kernel, _, _ = parse_log(text, path)
        record["provenance"]["planted_log"] = str(path)
        record["planted"] = {"log": str(path), "kernel": kernel,
                             "figures_us": _logged(bench, bench_path, path, text, kernel)}
    return record
