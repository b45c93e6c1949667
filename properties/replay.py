"""Replay saved cases against the model, live.

    python -m properties.replay CASE_OR_FOLDER ...        (make replay CASE=...)

Every implementation that runs here (on a GPU: the model, Triton, the kernel and FlashInfer; on a CPU: the
model) runs the case again, and each live output and each recorded output is compared with the model's live
output, bit for bit. Exit status: 0 when everything agrees, 1 when anything differs (a saved failure
reproduces), 2 when a file cannot be read or lacks an output its recording implementations write
(properties/engine/casefile.py WRITES): one line naming the file and the field; every file is read before any
case runs; 3 when some case compared nothing (no recorded output and no live implementation here but the
model, the reference itself: nothing was checked, so it must not pass as agreeing). The last line printed
says which: ``replay: AGREE``, ``replay: DIFFER``, ``replay: UNREADABLE`` or ``replay: NOTHING COMPARED``.
"""

import sys

from properties.engine import casefile
from properties.engine.cases import FIELDS
from properties.engine.compare import describe, disagreements, field_bits
from properties.engine.implementations import REFERENCE, run_all, unavailable
from properties.tools.args import OneLineParser

RECORDED = " (recorded)"
AGREE, DIFFER, UNREADABLE, NOTHING_COMPARED = 0, 1, 2, 3
VERDICTS = {AGREE: "AGREE", DIFFER: "DIFFER", UNREADABLE: "UNREADABLE", NOTHING_COMPARED: "NOTHING COMPARED"}


def compared(outputs, reference=REFERENCE):
    """"<implementation> <field>" for every output ``disagreements`` compares with ``reference``'s: each field
    of every other implementation that produced it."""
    return [f"{name} {field}" for name, out in outputs.items() if name != reference
            for field in FIELDS if field_bits(out, field) is not None]


def check(record):
    """(live outputs, the outputs compared, disagreements) of a CaseFile: live and recorded outputs against the
    live model."""
    live = run_all(record.case)
    recorded = {name + RECORDED: out for name, out in record.outputs.items()}
    return live, compared({**live, **recorded}), disagreements({**live, **recorded}, reference=REFERENCE)


def replay(record):
    """(live outputs, disagreements) of a CaseFile: live and recorded outputs against the live model."""
    live, _, found = check(record)
    return live, found


def _summary(path, record, live, checked, found):
    env = record.recorded.get("environment", {})
    lines = [f"{path}: {record.case.generator}, b={record.case.b}, tile_n={record.case.tile_n}, "
             f"recorded by {', '.join(record.recorded.get('by', [])) or 'nobody'} on {env.get('gpu') or 'a CPU'}",
             f"  live here: {', '.join(live)}"]
    if record.disagreements:
        lines.append(f"  saved with {len(record.disagreements)} disagreement(s): "
                     + "; ".join(describe(d) for d in record.disagreements))
    if found:
        verdict = "REPRODUCED" if record.disagreements else "DIFFERS"
        lines.append(f"  {verdict}: {len(found)} disagreement(s) now")
        lines.extend("    " + describe(d) for d in found)
    elif not checked:
        lines.append(f"  NOTHING COMPARED: no recorded output and no live implementation here but the {REFERENCE}")
    else:
        lines.append(f"  AGREES: every output equals the live model bit for bit ({len(checked)} compared)")
    return "\n".join(lines)


def _read_complete(path):
    """The CaseFile at ``path``; CaseFileError (one line) when it cannot be read or lacks a field one of its
    recording implementations writes (a recording that lost an output must not pass as one that agrees)."""
    record = casefile.read(path)
    missing = casefile.missing_fields(record)
    if missing:
        raise casefile.CaseFileError(f"{path}: outputs: recorded outputs missing: {', '.join(missing)}")
    return record


def _read_all(paths):
    """path -> CaseFile for every path; CaseFileError or OSError (one line) for the first unreadable one."""
    return {path: _read_complete(path) for path in paths}


def run(cases):
    """Replay every case file or folder in ``cases``; return AGREE, DIFFER, UNREADABLE or NOTHING_COMPARED
    (the worst over the cases, NOTHING_COMPARED worst of all)."""
    paths = casefile.case_files(cases)
    if not paths:
        print(f"replay: no case files in {' '.join(map(str, cases))}", file=sys.stderr)
        return UNREADABLE
    try:
        records = _read_all(paths)
    except casefile.CaseFileError as exc:
        print(f"replay: cannot read {exc}", file=sys.stderr)
        return UNREADABLE
    except OSError as exc:
        print(f"replay: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return UNREADABLE
    missing = unavailable()
    if missing:
        print("not running here: " + "; ".join(f"{name} ({why})" for name, why in missing.items()))
    status = AGREE
    for path, record in records.items():
        live, checked, found = check(record)
        print(_summary(path, record, live, checked, found))
        status = max(status, DIFFER if found else AGREE)
        status = max(status, AGREE if checked else NOTHING_COMPARED)
    return status


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.replay", description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="case files or folders of them")
    status = run(parser.parse_args(argv).cases)
    print(f"replay: {VERDICTS[status]} (exit {status})")
    return status


if __name__ == "__main__":
    sys.exit(main())
