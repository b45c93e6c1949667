"""Replay saved cases against the model, live.

    python -m properties.replay CASE_OR_FOLDER ... [--impl NAME=MODULE:ATTR | NAME=PATH.py:ATTR | NAME] ...
                                                          (make replay CASE=...)
    python -m properties.replay --impl mine=PLUGIN.py:route --impl triton CASE.json   (one --impl each)

Every implementation that runs here (on a GPU: the model, Triton, the kernel and FlashInfer; on a CPU: the
model), every plug-in of ``--impl`` (properties/engine/plugins.py) and every built-in it names runs the case
again, and each live output and each recorded output is compared with its reference's live output (the
model's unless the implementation declares another, or the file records another for it), bit for bit. Plug-ins
come only from ``--impl`` and installed entry points: replay does not read VERIFY_IMPL (the gate's). Exit
status: 0 when everything agrees, 1 when anything differs (a saved failure reproduces), 2 when a file cannot be
read or lacks an output its recording implementations write (the registry's ``writes()``): one line naming the
file and the field; every file is read before any case runs; 3 when some case compared nothing (no recorded
output and no live implementation here but the model, the reference itself: nothing was checked, so it must not
pass as agreeing); 4 when an implementation asked for cannot run here (a GPU one on a CPU, a plug-in whose
module is missing or whose probe fails, or one whose code raised or exited on a case: whatever a plug-in does
is its outcome, never replay's exit): "implementation NAME not run: <reason>". The last line printed says
which: ``replay: AGREE``, ``replay: DIFFER``, ``replay: UNREADABLE``, ``replay: NOTHING COMPARED`` or
``replay: NOT RUN``; before it, a folder's counts. A malformed --impl is one line naming it, exit 2.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.replay")

import argparse
import sys

from common import interrupts
from properties.engine import casefile
from properties.engine import implementations
from properties.engine import plugins
from properties.engine.cases import FIELDS
from properties.engine.compare import describe, disagreements, field_bits
from properties.engine.implementations import REFERENCE, available, references_of, run_all, unavailable, writes
from properties.engine.plugins import NotRun
from common.args import OneLineParser

RECORDED = " (recorded)"
AGREE, DIFFER, UNREADABLE, NOTHING_COMPARED, NOT_RUN = 0, 1, 2, 3, 4
VERDICTS = {AGREE: "AGREE", DIFFER: "DIFFER", UNREADABLE: "UNREADABLE", NOTHING_COMPARED: "NOTHING COMPARED",
            NOT_RUN: "NOT RUN"}


def compared(outputs, references=None):
    """"<implementation> <field>" for every output ``disagreements`` compares with its reference's: each field
    of every implementation that produced it, but the references' own (``references``: name -> reference)."""
    references = references or {}
    return [f"{name} {field}" for name, out in outputs.items()
            if name not in (REFERENCE, *references.values()) for field in FIELDS if field_bits(out, field) is not None]


def check(record, names=None):
    """(live outputs, the outputs compared, disagreements) of a CaseFile: live and recorded outputs (of
    ``names``, default every available implementation) against their references' live outputs."""
    recorded_references = casefile.references(record)
    wanted = list(available() if names is None else names)
    live = run_all(record.case, wanted + [r for r in recorded_references.values() if r not in wanted])
    recorded = {name + RECORDED: out for name, out in record.outputs.items()}
    references = {**references_of(live), **{name + RECORDED: ref for name, ref in recorded_references.items()}}
    return (live, compared({**live, **recorded}, references),
            disagreements({**live, **recorded}, reference=REFERENCE, tile_n=record.case.tile_n, references=references))


def replay(record, names=None):
    """(live outputs, disagreements) of a CaseFile: live and recorded outputs (of ``names``, default every
    available implementation) against the live model."""
    live, _, found = check(record, names)
    return live, found


def _summary(path, record, live, checked, found):
    env = record.recorded.get("environment", {})
    lines = [f"{path}: {record.case.generator}, b={record.case.b}, tile_n={record.case.tile_n}, "
             f"recorded by {', '.join(record.recorded.get('by', [])) or 'nobody'} on {env.get('gpu') or 'a CPU'}",
             f"  live here: {', '.join(live)}"]
    if record.disagreements:
        lines.append(f"  saved with {len(record.disagreements)} disagreement(s): "
                     + "; ".join(describe(d, record.case.tile_n) for d in record.disagreements))
    if found:
        verdict = "REPRODUCED" if record.disagreements else "DIFFERS"
        lines.append(f"  {verdict}: {len(found)} disagreement(s) now")
        lines.extend("    " + describe(d) for d in found)
    elif not checked:
        lines.append(f"  NOTHING COMPARED: no recorded output and no live implementation here but the {REFERENCE}")
    else:
        lines.append(f"  AGREES: every output equals its reference's live output bit for bit ({len(checked)} compared)")
    return "\n".join(lines)


def _read_complete(path):
    """The CaseFile at ``path``; CaseFileError (one line) when it cannot be read or lacks a field one of its
    recording implementations writes (a recording that lost an output must not pass as one that agrees)."""
    record = casefile.read(path)
    missing = casefile.missing_fields(record, writes())
    if missing:
        raise casefile.CaseFileError(f"{path}: outputs: recorded outputs missing: {', '.join(missing)}")
    return record


def _read_all(paths):
    """(path -> CaseFile for every readable path, one line for each unreadable one)."""
    records, errors = {}, []
    for path in paths:
        try:
            records[path] = _read_complete(path)
        except casefile.CaseFileError as exc:
            errors.append(f"replay: cannot read {exc}")
        except OSError as exc:
            errors.append(f"replay: cannot read {exc.filename}: {exc.strerror}")
    return records, errors


def _counts(files, agree, differ, unreadable):
    return f"replay: {files} case file(s): {agree} agree, {differ} differ, {unreadable} unreadable"


def _impl_spec(text):
    """--impl: a built-in's name, or a plug-in spec of the right form (loaded and probed only once every file
    was read)."""
    if "=" in text:
        try:
            plugins.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--impl ")) from None
    elif text not in implementations.REGISTRY:
        raise argparse.ArgumentTypeError(f"{text!r}: not a built-in implementation "
                                         f"({', '.join(implementations.REGISTRY)}) nor NAME=MODULE:ATTR")
    return text


def _implementations(impls):
    """The names to run: every available one and each of ``impls`` (built-in names or plug-in specs, loaded and
    probed); NotRun (one line) for one that cannot run here."""
    for name in (spec for spec in impls if "=" not in spec):
        reason = implementations.REGISTRY[name].unavailable()
        if reason is not None:
            raise NotRun(name, reason)
    named = implementations.resolve(impls, tuple(implementations.REGISTRY))
    refused = implementations.refused()
    if refused:
        name, reason = next(iter(refused.items()))
        raise NotRun(name, reason)
    chosen = available()
    return chosen + [name for name in named if name not in chosen]


def run(cases, impls=()):
    """Replay every case file or folder in ``cases`` on every available implementation and on ``impls``
    (built-in names or plug-in specs); return AGREE, DIFFER, UNREADABLE, NOTHING_COMPARED (the worst over the
    cases, NOTHING_COMPARED worst of all) or NOT_RUN (an implementation asked for cannot run here)."""
    paths = casefile.case_files(cases)
    if not paths:
        print(f"replay: no case files in {' '.join(map(str, cases))}", file=sys.stderr)
        return UNREADABLE
    records, errors = _read_all(paths)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(_counts(len(paths), 0, 0, len(errors)) + " (none replayed: every file is read before any case runs)")
        return UNREADABLE
    try:
        names = _implementations(impls)
    except NotRun as exc:  # every file was read: the implementation, not a file, is what failed
        print(f"replay: {exc}", file=sys.stderr)
        return NOT_RUN
    missing = {name: why for name, why in unavailable().items() if name not in names}
    if missing:
        print("not running here: " + "; ".join(f"{name} ({why})" for name, why in missing.items()))
    statuses = []
    for path, record in records.items():
        try:
            live, checked, found = check(record, names)
        except NotRun as exc:  # a plug-in that raised, exited or was interrupted by its own code on this case
            print(f"replay: {exc} (on {path})", file=sys.stderr)
            print(_counts(len(paths), statuses.count(AGREE), statuses.count(DIFFER), 0)
                  + f", {len(paths) - len(statuses)} not replayed")
            return NOT_RUN
        print(_summary(path, record, live, checked, found))
        if_equal = AGREE if checked else NOTHING_COMPARED
        statuses.append(DIFFER if found else if_equal)
    print(_counts(len(paths), statuses.count(AGREE), statuses.count(DIFFER), 0)
          + (f", {statuses.count(NOTHING_COMPARED)} compared nothing" if NOTHING_COMPARED in statuses else ""))
    return max(statuses)


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.replay", description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="case files or folders of them")
    parser.add_argument("--impl", action="append", default=[], type=_impl_spec,
                        metavar="NAME[=MODULE:ATTR|=PATH.py:ATTR]",
                        help="also run this built-in or plug-in (one per --impl; repeat it for more)")
    args = parser.parse_args(argv)
    status = run(args.cases, args.impl)
    print(f"replay: {VERDICTS[status]} (exit {status})")
    return status


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.replay", main))
