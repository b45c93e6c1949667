"""The regression corpus: corpora/regression/<generator>-<nnn>.json, CASES_PER_GENERATOR cases of every
generator, replayed in full by the CPU tier.

    python -m properties.corpus generate [--force]    draw the cases (any machine), with the outputs of the
                                                     implementations available there
    python -m properties.corpus record [PATH ...]     rerun model, Triton, kernel and FlashInfer on the cases'
                                                     inputs (a GPU); rewrite their outputs and provenance

Cases are drawn by Hypothesis with derandomize=True, so one Hypothesis version draws the same cases on every
run; ``record`` keeps the inputs of the files, so the corpus does not depend on the recording machine's
Hypothesis. A case on which the implementations disagree is never recorded as expected: it is saved to
corpora/failures/ and the command fails. Both write committed files because their command lines say so:
``generate`` refuses to replace existing cases without --force, ``record`` is the recording. Every argument
is checked before any work (one line naming it, exit 2).
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.corpus")

import sys

from hypothesis import HealthCheck, Phase, given, settings

from common import interrupts
from properties.engine import casefile
from properties.engine.compare import describe, disagreements
from properties.engine.implementations import REAL, run_all, unavailable
from properties.inputs.strategies import GENERATORS
from common import args as types
from common.args import OneLineParser

CASES_PER_GENERATOR = 30
MAX_PER_GENERATOR = 1000
# Draws tried per wanted case: duplicates are dropped.
_DRAWS_PER_CASE = 2


def draw_cases(generator, count):
    """The first ``count`` distinct cases Hypothesis draws from GENERATORS[generator], derandomized."""
    drawn = []

    @settings(database=None, derandomize=True, max_examples=count * _DRAWS_PER_CASE, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(GENERATORS[generator])
    def collect(case):
        if len(drawn) < count and not any(case.same_inputs(other) for other in drawn):
            drawn.append(case)

    collect()
    if len(drawn) < count:
        raise RuntimeError(f"{generator}: only {len(drawn)} distinct cases in {count * _DRAWS_PER_CASE} draws")
    return drawn


def regression_path(generator, index, folder=None):
    return (folder or casefile.REGRESSION_DIR) / f"{generator}-{index:03d}.json"


def _save(path, case, outputs, recorded, origin):
    """Write the case when every implementation agrees; otherwise save a failure and say so."""
    found = disagreements(outputs)
    if found:
        failure = casefile.write_failure(case, outputs, found, {**origin, "property": "regression corpus"})
        print(f"{path.name}: implementations disagree, saved to {failure}:\n  "
              + "\n  ".join(describe(d) for d in found))
        return False
    casefile.write(path, casefile.CaseFile(case, outputs, recorded, origin, []))
    return True


def generate(folder, per_generator, force):
    existing = casefile.case_files([folder]) if folder.exists() else []
    if existing and not force:
        print(f"corpus generate: {folder} already holds {len(existing)} cases; --force replaces them (and their "
              "recorded outputs)", file=sys.stderr)
        return 2
    for path in existing:
        path.unlink()
    environment = casefile.environment()
    ok = True
    for generator in GENERATORS:
        for index, case in enumerate(draw_cases(generator, per_generator)):
            outputs = run_all(case)
            origin = {"generator": generator, "draw": index, "drawn_by": "Hypothesis, derandomize=True, generate phase",
                      "hypothesis_version": environment["packages"]["hypothesis"]}
            ok &= _save(regression_path(generator, index, folder), case, outputs,
                        {"by": list(outputs), "environment": environment}, origin)
        print(f"{generator}: {per_generator} cases")
    return 0 if ok else 1


def record(paths):
    files = casefile.case_files(paths)
    if not files:
        print(f"corpus record: no case files in {' '.join(map(str, paths))}", file=sys.stderr)
        return 2
    try:  # every file read before any is rewritten
        saved = {path: casefile.read(path) for path in files}
    except casefile.CaseFileError as exc:
        print(f"corpus record: cannot read {exc}", file=sys.stderr)
        return 2
    missing = {name: why for name, why in unavailable().items() if name in REAL}
    if missing:
        print("corpus record: cannot record: " + "; ".join(f"{name} ({why})" for name, why in missing.items()),
              file=sys.stderr)
        return 2
    environment = casefile.environment()
    ok = True
    for path, case_file in saved.items():
        outputs = run_all(case_file.case, REAL)
        ok &= _save(path, case_file.case, outputs, {"by": list(outputs), "environment": environment}, case_file.origin)
    print(f"recorded {len(files)} cases on {environment['gpu']}" if ok else "some cases disagree: see above")
    return 0 if ok else 1


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.corpus", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="draw the regression cases and record the outputs available here")
    gen.add_argument("--folder", type=types.output_dir, default=str(casefile.REGRESSION_DIR))
    gen.add_argument("--per-generator", type=types.integer(1, MAX_PER_GENERATOR), default=CASES_PER_GENERATOR)
    gen.add_argument("--force", action="store_true", help="replace the cases already there")
    rec = sub.add_parser("record", help="rerun every implementation on saved cases (needs a GPU)")
    rec.add_argument("paths", nargs="*", type=types.existing_path, default=[casefile.REGRESSION_DIR])
    args = parser.parse_args(argv)
    if args.command == "generate":
        return generate(args.folder, args.per_generator, args.force)
    return record(args.paths)


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.corpus", main))
