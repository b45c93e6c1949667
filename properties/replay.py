"""Replay saved cases against the model, live.

    python -m properties.replay CASE_OR_FOLDER ...        (make replay CASE=...)

Every implementation that runs here (on a GPU: the model, Triton, the kernel and FlashInfer; on a CPU: the
model) runs the case again, and each live output and each recorded output is compared with the model's live
output, bit for bit. Exit status: 0 when everything agrees, 1 when anything differs (a saved failure
reproduces), 2 when a file cannot be read or lacks an output its recording implementations write
(properties/engine/casefile.py WRITES): one line naming the file and the field; every file is read before any
case runs. The last line printed says which: ``replay: AGREE``, ``replay: DIFFER`` or ``replay: UNREADABLE``.
"""

import argparse
import sys

from properties.engine import casefile
from properties.engine.compare import describe, disagreements
from properties.engine.implementations import REFERENCE, run_all, unavailable

RECORDED = " (recorded)"
AGREE, DIFFER, UNREADABLE = 0, 1, 2
VERDICTS = {AGREE: "AGREE", DIFFER: "DIFFER", UNREADABLE: "UNREADABLE"}


def replay(record):
    """(live outputs, disagreements) of a CaseFile: live and recorded outputs against the live model."""
    live = run_all(record.case)
    recorded = {name + RECORDED: out for name, out in record.outputs.items()}
    return live, disagreements({**live, **recorded}, reference=REFERENCE, tile_n=record.case.tile_n)


def _summary(path, record, live, found):
    env = record.recorded.get("environment", {})
    lines = [f"{path}: {record.case.generator}, b={record.case.b}, tile_n={record.case.tile_n}, "
             f"recorded by {', '.join(record.recorded.get('by', []))} on {env.get('gpu') or 'a CPU'}",
             f"  live here: {', '.join(live)}"]
    if record.disagreements:
        lines.append(f"  saved with {len(record.disagreements)} disagreement(s): "
                     + "; ".join(describe(d, record.case.tile_n) for d in record.disagreements))
    if found:
        verdict = "REPRODUCED" if record.disagreements else "DIFFERS"
        lines.append(f"  {verdict}: {len(found)} disagreement(s) now")
        lines.extend("    " + describe(d) for d in found)
    else:
        lines.append("  AGREES: every output equals the live model bit for bit")
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


def run(cases):
    """Replay every case file or folder in ``cases``; return AGREE, DIFFER or UNREADABLE."""
    paths = casefile.case_files(cases)
    if not paths:
        print(f"replay: no case files in {' '.join(map(str, cases))}", file=sys.stderr)
        return UNREADABLE
    records, errors = _read_all(paths)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(_counts(len(paths), 0, 0, len(errors)) + " (none replayed: every file is read before any case runs)")
        return UNREADABLE
    missing = unavailable()
    if missing:
        print("not running here: " + "; ".join(f"{name} ({why})" for name, why in missing.items()))
    statuses = []
    for path, record in records.items():
        live, found = replay(record)
        print(_summary(path, record, live, found))
        statuses.append(DIFFER if found else AGREE)
    print(_counts(len(paths), statuses.count(AGREE), statuses.count(DIFFER), 0))
    return max(statuses)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="case files or folders of them")
    status = run(parser.parse_args(argv).cases)
    print(f"replay: {VERDICTS[status]} (exit {status})")
    return status


if __name__ == "__main__":
    sys.exit(main())
