"""The command line the bench's record tools share (breakdown.py, variants.py): ``--out FILE`` runs on the GPU and
writes a record, ``--table FILE`` prints a record's table (no GPU); both time CUDA graphs of ``--iterations``
launches over ``--repeats`` replays for each b of ``--b``."""

from kernel.layout import MAX_TOKENS
from common import args as types
from common import records
from common.args import OneLineParser

MAX_COUNT = 10**7


def parser(prog, description):
    """The shared parser: the --out / --table choice and the graph options."""
    made = OneLineParser(prog=prog, description=description)
    mode = made.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=types.output_file, help="record file to write (runs on the GPU)")
    mode.add_argument("--table", metavar="FILE", type=types.json_object_file, help="print a record's table")
    tokens, count = types.integer(1, MAX_TOKENS), types.integer(1, MAX_COUNT)
    made.add_argument("--b", dest="bs", type=tokens, nargs="+", default=list(range(1, MAX_TOKENS + 1)))
    made.add_argument("--iterations", type=count, default=1000, help="launches per CUDA graph")
    made.add_argument("--repeats", dest="repetitions", type=count, default=20, help="timed replays per graph")
    return made


def read_record(made, args, schema_file):
    """args.record: the --table file's record (None with --out); a one-line error naming the file and the field
    when it does not match the JSON schema in ``schema_file``."""
    args.record = None
    if args.table:
        try:
            args.record = records.read(args.table, schema_file)
        except records.RecordError as exc:
            made.error(f"argument --table: {exc}")
    return args


def main(args, table, run):
    """Print the record's table, or run: the exit status."""
    if args.record is not None:
        print(table(args.record), end="")
        return 0
    return run(args)
