"""argparse with one-line errors, for every command line of the repository (the oracles' own, hence its place:
oracles/ may not import properties/; every command imports it from here): ``PROG: error: MESSAGE`` on stderr and
exit USAGE_EXIT, before anything runs, no usage dump; and the typed arguments those command lines share, each
refusing a bad value with a message that argparse prefixes with the argument's name (``argument --rows: ...``).

A type helper is a function of the argument's text returning its value or raising
argparse.ArgumentTypeError; the factories below (``integer``, ``number``, ``count``) make one per range."""

import argparse
import json
import math
import os
import sys
from pathlib import Path

__all__ = ["USAGE_EXIT", "OneLineParser", "integer", "count", "number", "existing_file", "existing_dir",
           "existing_path", "read_json_object", "json_object_file", "output_file", "output_dir", "check_output",
           "check_output_of"]

USAGE_EXIT = 2


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit USAGE_EXIT (its subparsers too: argparse
    makes them of the parser's own class)."""

    def error(self, message):
        print(f"{self.prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
        sys.exit(USAGE_EXIT)


def _range_text(minimum, maximum):
    if maximum is None:
        return f">= {minimum}"
    if minimum is None:
        return f"<= {maximum}"
    return f"in {minimum}..{maximum}"


def _check_range(value, text, kind, minimum, maximum):
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise argparse.ArgumentTypeError(f"must be {kind} {_range_text(minimum, maximum)}, got {text!r}")
    return value


def integer(minimum=None, maximum=None):
    """A type for an integer (decimal digits) in [minimum, maximum] (None: unbounded on that side)."""
    def parse(text):
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        return _check_range(value, text, "an integer", minimum, maximum)
    parse.__name__ = "integer"
    return parse


def count(minimum=1, maximum=None):
    """A type for a whole count written as digits or in float notation (``3e8``), in [minimum, maximum]."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if not math.isfinite(value) or value != int(value):
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
        return _check_range(int(value), text, "a whole number", minimum, maximum)
    parse.__name__ = "count"
    return parse


def number(minimum=None, maximum=None, above=None):
    """A type for a finite float in [minimum, maximum], and strictly greater than ``above`` when given
    (NaN and infinities are refused: a NaN compares false with every bound)."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"must be a number > {above}, got {text!r}")
        return _check_range(value, text, "a number", minimum, maximum)
    parse.__name__ = "number"
    return parse


def existing_file(text):
    """A path naming an existing regular file."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"not a file: {text}")
    return path


def existing_dir(text):
    """A path naming an existing folder."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no such folder: {text}" if not path.exists() else f"not a folder: {text}")
    return path


def existing_path(text):
    """A path naming an existing file or folder."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or folder: {text}")
    return path


def read_json_object(path):
    """The JSON object held by the file ``path``; argparse.ArgumentTypeError when it is missing, not a file,
    not JSON or not an object."""
    path = existing_file(str(path))
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(f"{path}: not JSON: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"{path}: must hold a JSON object, holds a {type(data).__name__}")
    return data


def json_object_file(text):
    """A path naming a file that holds a JSON object (the file is read to check it)."""
    read_json_object(text)
    return Path(text)


def output_file(text):
    """A path a file can be written to, checked before any work (``check_output``)."""
    return check_output(text)


def output_dir(text):
    """A path a folder of files can be made at, checked before any work (``check_output``)."""
    return check_output(text, folder=True)


def check_output(text, folder=False):
    """The Path ``text`` once a file (``folder``: a folder of files) can be written there: the path is a
    regular file or nothing (``folder``: a folder or nothing), writable; no existing file where a folder on
    its way should be; the nearest existing folder on its way writable, on a writable file system with room
    left. argparse.ArgumentTypeError (one line) otherwise; nothing is written either way. The one check of
    every output path of every command (an argument's type, or called on a path the command derives)."""
    path = Path(text)
    if folder and path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"is a file, not a folder: {text}")
    if not folder and path.is_dir():
        raise argparse.ArgumentTypeError(f"is a folder, not a file: {text}")
    if not folder and path.exists() and not path.is_file():
        raise argparse.ArgumentTypeError(f"is not a regular file (a device, a pipe or a socket): {text}")
    if path.exists():
        _check_writable(path, text)
        return path
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{parent} is a file, so {text} cannot be made")
            _check_writable(parent, text)
            break
    return path


def _check_writable(where, text):
    if not os.access(where, os.W_OK | (os.X_OK if where.is_dir() else 0)):
        raise argparse.ArgumentTypeError(f"{where} is not writable, so {text} cannot be written")
    stat = os.statvfs(where)
    if stat.f_blocks == 0:
        raise argparse.ArgumentTypeError(f"{where} is on a file system that holds no files, so {text} cannot be written")
    if stat.f_flag & os.ST_RDONLY:
        raise argparse.ArgumentTypeError(f"{where} is on a read-only file system, so {text} cannot be written")
    if (stat.f_bfree if os.geteuid() == 0 else stat.f_bavail) == 0:
        raise argparse.ArgumentTypeError(f"the file system of {where} is full, so {text} cannot be written")


def check_output_of(parser, option, path, folder=False):
    """``check_output`` of a path a command derived (a default, a name made from its input): on failure the
    parser's one-line error naming ``option``, exit USAGE_EXIT."""
    try:
        return check_output(path, folder)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"argument {option}: {exc}")
