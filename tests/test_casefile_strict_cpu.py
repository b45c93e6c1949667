"""A case file is exactly one JSON object as its schema says, or it is refused (issue 29, item 5): a key given
twice at any depth, NaN or Infinity, data after the object, a byte-order mark, bytes that are not UTF-8, a lone
surrogate, a top level that is not an object, and 1.0 or 1e3 where the schema wants an integer are each refused
with one line naming the file and the fault: a ValueError from the API, exit 2 from every command line that
reads case files (replay, corpus record, mutants replay, view). Each fault is injected into well-formed case
files, the committed ones, so the fault alone is what is refused."""

import codecs
import concurrent.futures
import copy
import dataclasses
import json
import os
import subprocess
import sys
from functools import lru_cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties import corpus, replay, view
from properties.corpus import CASES_PER_GENERATOR
from properties.engine import casefile
from properties.inputs.strategies import GENERATORS
from properties.mutants import __main__ as mutants_cli

# Case files of every shape: a regression case without metadata, a saved disagreement, the soak's planted fault.
BASES = tuple(casefile.CORPORA / name for name in ("regression/all_equal-000.json",
                                                    "examples/fault-ties-to-highest-index.json",
                                                    "examples/soak-fault-ties-to-highest-index.json"))
VERDICT_CASES = casefile.REPO_ROOT / "properties" / "results" / "verdict-cases"  # the plug-in verdicts' cases (results index)
COMMITTED = sorted(casefile.CORPORA.rglob("*.json")) + sorted(VERDICT_CASES.glob("*.json"))
PROCESS_TIMEOUT_S = 120
MARK = "@@fault@@"  # a string no case file holds: the one value written as the fault's text
# Bytes no UTF-8 text holds: a stray 0xff, a lone continuation byte, an overlong "/", an encoded surrogate, a
# sequence cut short.
INVALID_UTF8 = (b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82")
LONE_SURROGATES = ("\\ud800", "\\udfff", "\\ud83dx")
CONSTANTS = ("NaN", "Infinity", "-Infinity")
TRAILERS = ("{}", "[]", "0", "null", "x", ",", '"more"', "}")
NOT_OBJECTS = ("[{text}]", "null", "3", '"case"', "true", "[]")


@lru_cache(maxsize=None)
def _data(path):
    return json.loads(path.read_bytes())


def _paths(data, prefix=()):
    """Every (path, value) of a JSON document, depth first."""
    yield prefix, data
    children = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in children:
        yield from _paths(value, prefix + (key,))


def _written_with(data, path, text):
    """The file's bytes as the writer writes ``data`` (json.dumps, indent 1), the value at ``path`` written as
    ``text`` (str or bytes) instead."""
    data = copy.deepcopy(data)
    if not path:
        data = MARK
    else:
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = MARK
    out = json.dumps(data, indent=1).encode()
    assert out.count(f'"{MARK}"'.encode()) == 1
    return out.replace(f'"{MARK}"'.encode(), text if isinstance(text, bytes) else text.encode())


def _field(path):
    return ".".join(map(str, path))


def _object_text(obj, key, value_text, first):
    """``obj`` as one line of JSON with ``key`` given a second time, valued ``value_text``, first or last."""
    pairs = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()]
    extra = f"{json.dumps(key)}: {value_text}"
    return "{" + ", ".join([extra, *pairs] if first else [*pairs, extra]) + "}"


# Each fault: inject(data, choose) -> (bytes, what the one line must say); ``choose(options)`` picks one option.
def duplicated_key(data, choose):
    path, obj = choose([(p, v) for p, v in _paths(data) if isinstance(v, dict) and v])
    key = choose(list(obj))
    value = choose([json.dumps(obj[key]), "null", '"other"'])  # the same value too: a key twice is refused
    return _written_with(data, path, _object_text(obj, key, value, choose([False, True]))), \
        f"key {key!r} given twice in one object"


def not_a_number(data, choose):
    path = choose([p for p, _ in _paths(data) if p])
    constant = choose(CONSTANTS)
    return _written_with(data, path, constant), f"not JSON: {constant} is not a JSON number"


def fraction_for_integer(data, choose):
    path, value = choose([(p, v) for p, v in _paths(data) if type(v) is int])
    text = choose([f"{value}.0", f"{value}e0", f"{value}E+0", f"{value}.00e-0", f"{value * 10}e-1"])
    return _written_with(data, path, text), f"{_field(path)}: {text} is not an integer"


def trailing_data(data, choose):
    text = json.dumps(data, indent=1)
    trailer = choose([*TRAILERS, text])
    return f"{text}\n{trailer}\n".encode(), "not JSON: trailing data after the JSON value"


def byte_order_mark(data, choose):
    return codecs.BOM_UTF8 + json.dumps(data, indent=1).encode(), "byte-order mark"


def invalid_utf8(data, choose):
    path, value = choose([(p, v) for p, v in _paths(data) if isinstance(v, str)])
    cut = choose(range(len(value) + 1))
    raw = json.dumps(value[:cut]).encode()[:-1] + choose(INVALID_UTF8) + json.dumps(value[cut:]).encode()[1:]
    return _written_with(data, path, raw), "not UTF-8: byte 0x"


def lone_surrogate(data, choose):
    path, value = choose([(p, v) for p, v in _paths(data) if isinstance(v, str)])
    cut = choose(range(len(value) + 1))
    text = json.dumps(value[:cut])[:-1] + choose(LONE_SURROGATES) + json.dumps(value[cut:])[1:]
    return _written_with(data, path, text), "lone surrogate"


def not_an_object(data, choose):
    shape = choose(NOT_OBJECTS)
    return shape.format(text=json.dumps(data)).encode(), "(top level): "


FAULTS = {f.__name__: f for f in (duplicated_key, not_a_number, fraction_for_integer, trailing_data,
                                  byte_order_mark, invalid_utf8, lone_surrogate, not_an_object)}


def _first(options):
    return list(options)[0]


def _last(options):
    return list(options)[-1]


# Each fault at its first and its last place (depth first: the top level, then the deepest last value).
EXAMPLES = {f"{name}-{choose.__name__[1:]}": (FAULTS[name], choose) for name in FAULTS for choose in (_first, _last)}


def _example(name):
    inject, choose = EXAMPLES[name]
    return inject(_data(BASES[1]), choose)


def test_the_bases_are_read_and_every_fault_changes_their_bytes():
    for path in BASES:
        raw = path.read_bytes()
        assert casefile.parse(raw).case.generator == _data(path)["generator"]
        assert casefile.parse(json.dumps(_data(path), indent=1).encode()).case.same_inputs(casefile.parse(raw).case)
    for name in EXAMPLES:
        assert _example(name)[0] != json.dumps(_data(BASES[1]), indent=1).encode(), name


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_fault_is_refused_through_the_api_naming_it(name, tmp_path):
    raw, fault = _example(name)
    with pytest.raises(ValueError) as refused:
        casefile.parse(raw)
    assert isinstance(refused.value, casefile.CaseFileError)
    assert fault in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
    path = tmp_path / "case.json"
    path.write_bytes(raw)
    with pytest.raises(casefile.CaseFileError) as refused:
        casefile.read(path)
    assert str(refused.value).startswith(f"{path}: ") and fault in str(refused.value), str(refused.value)


def test_the_faults_named_in_the_issue_each_refused():
    """The issue's own words, each on the regression case's text as committed."""
    text = BASES[0].read_text()
    edits = {
        "a key given twice": (text.replace('"tile_n": null,', '"tile_n": null, "tile_n": 8,', 1), "'tile_n' given twice"),
        "NaN": (text.replace('"tile_n": null', '"tile_n": NaN', 1), "NaN is not a JSON number"),
        "Infinity": (text.replace('"tile_n": null', '"tile_n": Infinity', 1), "Infinity is not a JSON number"),
        "trailing data": (text + "{}\n", "trailing data"),
        "a byte-order mark": ("\ufeff" + text, "byte-order mark"),
        "1.0 for an integer": (text.replace('"num_local_experts": 0', '"num_local_experts": 0.0', 1),
                               "inputs.num_local_experts: 0.0 is not an integer"),
        "0e3 for an integer": (text.replace('"local_expert_offset": 0', '"local_expert_offset": 0e3', 1),
                               "inputs.local_expert_offset: 0e3 is not an integer"),
        "UTF-16": (text.encode("utf-16"), "not UTF-8: byte 0xff at offset 0"),
    }
    for what, (edited, fault) in edits.items():
        raw = edited if isinstance(edited, bytes) else edited.encode()
        assert raw != text.encode(), what
        with pytest.raises(casefile.CaseFileError) as refused:
            casefile.parse(raw)
        assert fault in str(refused.value), (what, str(refused.value))


@pytest.mark.long
def test_every_committed_case_file_is_read_strictly_and_written_back_byte_for_byte(tmp_path):
    """The writer side: what the strict reader reads from each committed file, the writer (which refuses what
    the reader would) writes back as exactly the committed bytes."""
    regression = [p for p in COMMITTED if p.parent == casefile.REGRESSION_DIR]
    assert len(regression) >= CASES_PER_GENERATOR * len(GENERATORS) and any(p.parent == VERDICT_CASES for p in COMMITTED)
    for path in COMMITTED:
        assert casefile.write(tmp_path / "case.json", casefile.read(path)).read_bytes() == path.read_bytes(), path


@st.composite
def faulted_files(draw):
    """(bytes, what the refusal must say): a committed case file with one fault drawn and injected."""
    path = draw(st.sampled_from(COMMITTED))
    inject = draw(st.sampled_from(list(FAULTS.values())))
    return inject(_data(path), lambda options: draw(st.sampled_from(list(options))))


@given(faulted_files())
def test_a_well_formed_case_file_with_one_fault_injected_is_always_refused(faulted):
    raw, fault = faulted
    with pytest.raises(casefile.CaseFileError) as refused:
        casefile.parse(raw)
    assert fault in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


# ---- every command line that reads case files: exit 2, one line naming the file and the fault, nothing run

# name -> (main, its argv for the case file and the page it may write, how its one line starts)
CLIS = {
    "replay": (replay.main, lambda case, page: [case], "replay: cannot read {case}: "),
    "corpus record": (corpus.main, lambda case, page: ["record", case], "corpus record: cannot read {case}: "),
    "mutants replay": (mutants_cli.main, lambda case, page: ["replay", case],
                       "mutants replay: error: cannot read {case}: "),
    "view": (view.main, lambda case, page: [case, "--out", page], "view: error: {case}: "),
}
MODULES = {"replay": "properties.replay", "corpus record": "properties.corpus", "mutants replay": "properties.mutants",
           "view": "properties.view"}


def _status(main, argv):
    try:
        return main(argv)
    except SystemExit as exited:  # OneLineParser.error
        return exited.code


def _assert_refused(status, err, out, cli, case, fault, folder, raw):
    lines = err.splitlines()
    assert status == 2, (status, err, out)
    assert len(lines) == 1 and lines[0].startswith(CLIS[cli][2].format(case=case)) and fault in lines[0], lines
    assert "AGREE" not in out and "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["case.json"] and (folder / "case.json").read_bytes() == raw


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_each_fault_is_refused_by_each_command_line_in_one_line_naming_the_file(name, cli, tmp_path, capsys):
    raw, fault = _example(name)
    case = tmp_path / "case.json"
    case.write_bytes(raw)
    main, argv, _ = CLIS[cli]
    status = _status(main, argv(str(case), str(tmp_path / "page.html")))
    captured = capsys.readouterr()
    _assert_refused(status, captured.err, captured.out, cli, case, fault, tmp_path, raw)


def _run_module(cli, folder):
    command = MODULES[cli].split()
    argv = CLIS[cli][1](str(folder / "case.json"), str(folder / "page.html"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(casefile.REPO_ROOT), os.environ.get("PYTHONPATH")])),
           "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", *command, *argv], capture_output=True, text=True,
                          cwd=casefile.REPO_ROOT, env=env, timeout=PROCESS_TIMEOUT_S)


def test_a_key_given_twice_is_refused_by_each_command_as_run(tmp_path):
    """The issue's report (a key given twice replayed as AGREE), through ``python -m`` of each command."""
    raw, fault = _example("duplicated_key-last")
    folders = {cli: tmp_path / cli.replace(" ", "-") for cli in CLIS}
    for folder in folders.values():
        folder.mkdir()
        (folder / "case.json").write_bytes(raw)
    with concurrent.futures.ThreadPoolExecutor(len(CLIS)) as pool:
        done = dict(zip(CLIS, pool.map(lambda cli: _run_module(cli, folders[cli]), CLIS)))
    for cli, result in done.items():
        _assert_refused(result.returncode, result.stderr, result.stdout, cli, folders[cli] / "case.json", fault,
                        folders[cli], raw)


# ---- the writer: nothing written that the strict reader refuses

@pytest.mark.parametrize("origin, fault", [
    ({"description": "\ud800"}, "lone surrogate"),
    ({"draw": float("nan")}, "Out of range float values are not JSON compliant"),
    ({"1": 0, 1: 0}, "key '1' given twice"),  # json.dumps writes the int key 1 as "1"
], ids=["lone surrogate", "NaN", "a key written twice"])
def test_the_writer_writes_nothing_the_strict_reader_refuses(origin, fault, tmp_path):
    record = casefile.read(BASES[0])
    path = tmp_path / "folder" / "case.json"
    with pytest.raises(casefile.CaseFileError) as refused:
        casefile.write(path, dataclasses.replace(record, origin=origin))
    assert str(refused.value).startswith(f"{path}: not written: ") and fault in str(refused.value), str(refused.value)
    assert not path.parent.exists()
