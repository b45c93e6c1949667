"""Reading a record (a JSON file a command wrote) against its JSON schema, for every command that takes one:
a file that is missing, binary, truncated, not JSON, of the wrong type or lacking a key is RecordError, one
line naming the file and the field (``FILE: FIELD: what is wrong``), before anything uses it. jsonschema
validates (Draft 2020-12)."""

import json
from functools import lru_cache
from pathlib import Path

import jsonschema

MESSAGE_CHARS = 160  # of jsonschema's message, which quotes the offending value


class RecordError(ValueError):
    """A record that cannot be used; the message is one line naming the file and the field."""


@lru_cache(maxsize=None)
def schema(path):
    """The JSON schema in the file ``path`` (checked to be one)."""
    loaded = json.loads(Path(path).read_text())
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def check(data, schema_path, where):
    """``data`` when it matches the schema in ``schema_path``; else RecordError naming ``where`` and the first
    field that does not."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema(schema_path)).iter_errors(data))
    if error is None:
        return data
    field = ".".join(map(str, error.absolute_path)) or "(the record itself)"
    message = " ".join(error.message.split())
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + "..."
    raise RecordError(f"{where}: {field}: {message}")


def read(path, schema_path):
    """The record in the file ``path``, checked against the schema in ``schema_path``; RecordError (one line)
    when it cannot be read, is not JSON or does not match."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise RecordError(f"{path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # binary (UnicodeDecodeError), truncated or not JSON
        raise RecordError(f"{path}: not JSON: {(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
    return check(data, schema_path, path)
