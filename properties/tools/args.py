"""The one-line argument parser and typed arguments of every command line, defined in oracles/args.py (the
oracles' command lines use them too, and oracles/ may not import properties/)."""

from oracles.args import (  # noqa: F401 - the harness's name for the same definitions
    USAGE_EXIT,
    OneLineParser,
    count,
    existing_dir,
    existing_file,
    existing_path,
    integer,
    json_object_file,
    number,
    output_dir,
    output_file,
    read_json_object,
)
