"""Case files are read strictly: a corrupt file is refused with one line naming the file and the field and
exit 2 from replay, never read as another case (a corrupt file must not look like a reproduced bug)."""

import copy
import dataclasses
import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.layout import EXPERTS, MAX_TILE, MAX_TOKENS, TOP_K, metadata_size
from properties.engine import casefile
from properties.engine.cases import FIELDS
from properties.engine.compare import MAX_LISTED
from properties.replay import AGREE, DIFFER, UNREADABLE

CORPORA = casefile.CORPORA
# Shapes that differ: b = 1 without metadata, b > 1 with metadata, a saved disagreement with two entries.
BASES = ("regression/all_equal-000.json", "examples/fault-ties-to-highest-index.json")
REPLAY_TIMEOUT_S = 120


def _base(name):
    return json.loads((CORPORA / name).read_text())


def _with_metadata():
    """The first regression case with metadata and b > 1 (the corpus holds several)."""
    for path in sorted((CORPORA / "regression").glob("*.json")):
        data = json.loads(path.read_text())
        if data["inputs"]["tile_n"] is not None and len(data["inputs"]["logits"]) > 1:
            return data
    raise AssertionError("the regression corpus holds no case with metadata and b > 1")


BASE_DATA = [_base(name) for name in BASES] + [_with_metadata()]


def _set(path, value):
    def edit(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
        return data
    return edit


# The corrupt inputs of issue 12, each with the field its one-line error must name.
ISSUE_CASES = {
    "bias word cut to 4 digits": (_set(["inputs", "bias"], "0000*256"), "inputs.bias"),
    "scale cut to 4 digits": (_set(["inputs", "scale"], "3f80"), "inputs.scale"),
    "logit word of 9 digits": (_set(["inputs", "logits", 0], "000000000*256"), "inputs.logits.0"),
    "top-level list": (lambda data: [data], "(top level)"),
    "logits a number": (_set(["inputs", "logits"], 3.5), "inputs.logits"),
    "numeric scale": (_set(["inputs", "scale"], 1.0), "inputs.scale"),
    "255 bias words": (_set(["inputs", "bias"], "00000000*255"), "inputs.bias"),
    "ids of 2 rows for b = 1": (_set(["outputs", "ids", 0, "value"], [list(range(8))] * 2), "outputs.ids.0.value"),
}


@pytest.mark.parametrize("name", ISSUE_CASES)
def test_replay_refuses_each_corrupt_file_with_one_line_and_exit_2(name, tmp_path, replay_process):
    edit, field = ISSUE_CASES[name]
    path = tmp_path / "case.json"
    path.write_text(json.dumps(edit(copy.deepcopy(BASE_DATA[0]))))
    result = replay_process(path, planted=False, timeout=REPLAY_TIMEOUT_S)
    assert result.returncode == UNREADABLE, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"replay: cannot read {path}: {field}: "), result.stderr
    assert "AGREES" not in result.stdout and "Traceback" not in result.stderr
    assert result.stdout.splitlines()[-1] == "replay: UNREADABLE (exit 2)"


def test_replay_exit_codes_are_distinct(tmp_path, replay_process):
    assert replay_process(CORPORA / BASES[0], planted=False, timeout=REPLAY_TIMEOUT_S).returncode == AGREE
    assert replay_process(CORPORA / BASES[1], planted=False, timeout=REPLAY_TIMEOUT_S).returncode == DIFFER
    truncated = tmp_path / "truncated.json"
    truncated.write_text((CORPORA / BASES[0]).read_text()[:100])
    result = replay_process(truncated, planted=False, timeout=REPLAY_TIMEOUT_S)
    assert result.returncode == UNREADABLE and "not JSON" in result.stderr
    assert replay_process(tmp_path / "missing.json", planted=False, timeout=REPLAY_TIMEOUT_S).returncode == UNREADABLE


# --- mutation test: every mutant reads as exactly the case it encodes, or is refused ---------------------------

def _paths(data, prefix=()):
    """Every (path, value) of a JSON document, depth first."""
    yield prefix, data
    children = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in children:
        yield from _paths(value, prefix + (key,))


def _word_strings(data):
    return [path for path, value in _paths(data) if isinstance(value, str) and len(path) > 1
            and path[0] in ("inputs", "outputs") and path[-1] not in ("by",) and "by" not in path]


def _get(data, path):
    for key in path:
        data = data[key]
    return data


def _edit_word(text, draw):
    """One word of ``text`` truncated, lengthened, given a non-hex digit, or its run count changed."""
    tokens = text.split(" ")
    i = draw(st.integers(0, len(tokens) - 1))
    word, star, count = tokens[i].partition("*")
    how = draw(st.sampled_from(["truncate", "extra", "non-hex", "count", "drop", "duplicate"]))
    if how == "truncate":
        word = word[:draw(st.integers(0, max(len(word) - 1, 0)))]
    elif how == "extra":
        word += draw(st.sampled_from("0f9a"))
    elif how == "non-hex":
        j = draw(st.integers(0, max(len(word) - 1, 0)))
        word = word[:j] + draw(st.sampled_from("gxG -.")) + word[j + 1:]
    elif how == "count":
        star, count = "*", str(draw(st.integers(0, 300)))
    elif how == "drop":
        return " ".join(tokens[:i] + tokens[i + 1:])
    else:
        return " ".join(tokens[:i + 1] + tokens[i:])
    tokens[i] = word + star + count
    return " ".join(tokens)


_OTHER_TYPES = st.sampled_from([None, True, 0, -1, 3.5, 8.0, "3f800000", "", [], [0], {}, {"by": []}])


@st.composite
def mutants(draw):
    """(base, mutated JSON value): one corruption of a valid case file's data."""
    data = copy.deepcopy(draw(st.sampled_from(BASE_DATA)))
    kind = draw(st.sampled_from(["word", "drop", "retype", "top-level"]))
    if kind == "top-level":
        return draw(st.sampled_from([[data], [], 3, "case", None, True]))
    if kind == "word":
        path = draw(st.sampled_from(_word_strings(data)))
        _set(list(path), _edit_word(_get(data, path), draw))(data)
        return data
    paths = [path for path, _ in _paths(data) if path and not (path[0] in ("recorded", "origin") and len(path) > 2)]
    path = draw(st.sampled_from(paths))
    parent = _get(data, path[:-1])
    if kind == "drop":
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = draw(_OTHER_TYPES)
    return data


def _expand(text):
    tokens = []
    for token in text.split():
        word, _, count = token.partition("*")
        tokens.extend([word] * int(count or 1))
    return tokens


def _canonical(data):
    """Inputs with every word run expanded, outputs as implementation -> field -> expanded value."""
    inputs = {k: ([_expand(r) for r in v] if k == "logits" else _expand(v) if k in ("bias",) else v)
              for k, v in data["inputs"].items()}
    outputs = {}
    for field, entries in data["outputs"].items():
        for entry in entries:
            value = entry["value"]
            value = _expand(value) if isinstance(value, str) else [
                _expand(r) if isinstance(r, str) else r for r in value]
            for name in entry["by"]:
                outputs.setdefault(name, {})[field] = value
    return {**data, "inputs": inputs, "outputs": outputs}


@settings(max_examples=1000, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_a_mutated_case_file_reads_as_exactly_what_it_encodes_or_is_refused(mutated):
    try:
        record = casefile.from_json(mutated)
    except casefile.CaseFileError as exc:
        assert "\n" not in str(exc)
        return
    assert _canonical(casefile.to_json(record)) == _canonical(mutated)


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(st.sampled_from(BASE_DATA), st.data())
def test_a_truncated_file_is_refused(tmp_path_factory, data, draw):
    text = json.dumps(data, indent=1)
    cut = draw.draw(st.integers(0, len(text) - 2))
    path = tmp_path_factory.mktemp("cut") / "case.json"
    path.write_text(text[:cut])
    with pytest.raises(casefile.CaseFileError, match=f"^{path}: not JSON: "):
        casefile.read(path)


# --- every count bounded before it allocates, int32 words, every nested object described (issue 20) -----------

HUGE_RUN = 10**11  # words a run may claim: expanded first, it would take 400 GB
WITH_METADATA, SAVED_DISAGREEMENT = BASE_DATA[2], BASE_DATA[1]


def _first_metadata_word(word):
    """Edit: the first metadata word of the case with metadata replaced by ``word`` (the count unchanged)."""
    def edit(data):
        entry = data["outputs"]["metadata"][0]
        words = casefile.decode_ints(entry["value"], metadata_size(data["inputs"]["tile_n"]))
        entry["value"] = f"{word} {casefile.encode_ints(words[1:])}"
        return data
    return edit


def _nested(part, key, value):
    return _set([part, 0, key] if part == "disagreements" else [part, key], value)


def _drop(path):
    def edit(data):
        target = _get(data, path[:-1])
        del target[path[-1]]
        return data
    return edit


def _repeated(path, times):
    """Edit: the list at ``path`` repeated ``times`` times."""
    return lambda data: _set(path, _get(data, path) * times)(data)


def _gpu_environment(data):
    data["recorded"]["environment"] = {"gpu": "NVIDIA H200", "machine": "x86_64", "python": "3.12", "packages": {},
                                       "commit": "0" * 40, "date": "2026-01-01T00:00:00Z"}
    return data


# name -> (base data, edit, the field its one line must name)
BOUNDS = {
    "logits row run of 10^11": (BASE_DATA[0], _set(["inputs", "logits", 0], f"00000000*{HUGE_RUN}"), "inputs.logits.0"),
    "bias run of 10^11": (BASE_DATA[0], _set(["inputs", "bias"], f"3f800000*{HUGE_RUN}"), "inputs.bias"),
    "weights row run of 10^11": (BASE_DATA[0], _set(["outputs", "weights", 0, "value", 0], f"3e000000*{HUGE_RUN}"),
                                 "outputs.weights.0.value.0"),
    "metadata run of 10^11": (WITH_METADATA, _set(["outputs", "metadata", 0, "value"], f"-1*{HUGE_RUN}"),
                              "outputs.metadata.0.value"),
    "run count of 5000 digits": (BASE_DATA[0], _set(["inputs", "bias"], "00000000*" + "9" * 5000), "inputs.bias"),
    "two runs past the row": (BASE_DATA[0], _set(["inputs", "logits", 0], "00000000*200 00000000*200"),
                              "inputs.logits.0"),
    "10-digit metadata word": (WITH_METADATA, _first_metadata_word(9999999999), "outputs.metadata.0.value"),
    "metadata word below int32": (WITH_METADATA, _first_metadata_word(-2**31 - 1), "outputs.metadata.0.value"),
    "9 logits rows (b > MAX_TOKENS)": (BASE_DATA[0], _repeated(["inputs", "logits"], 9), "inputs.logits"),
    "9 weight rows": (BASE_DATA[0], _repeated(["outputs", "weights", 0, "value"], 9), "outputs.weights.0.value"),
    "id outside int32": (BASE_DATA[0], _set(["outputs", "ids", 0, "value", 0, 0], 2**31), "outputs.ids.0.value.0.0"),
    "disagreement without fields": (SAVED_DISAGREEMENT, _set(["disagreements", 0], {}), "disagreements.0"),
    "disagreement without its field": (SAVED_DISAGREEMENT, _drop(["disagreements", 0, "field"]), "disagreements.0"),
    "disagreement of an unknown field": (SAVED_DISAGREEMENT, _nested("disagreements", "field", "scores"),
                                         "disagreements.0.field"),
    "disagreement of no count and no note": (SAVED_DISAGREEMENT, _nested("disagreements", "count", None),
                                             "disagreements.0"),
    "disagreement element a number": (SAVED_DISAGREEMENT, _set(["disagreements", 0, "first", 0, "got"], 3),
                                      "disagreements.0.first.0.got"),
    "disagreement element without want": (SAVED_DISAGREEMENT, _drop(["disagreements", 0, "first", 0, "want"]),
                                          "disagreements.0.first.0"),
    "recorded without environment": (BASE_DATA[0], _drop(["recorded", "environment"]), "recorded"),
    "recorded with an unknown key": (BASE_DATA[0], _nested("recorded", "when", "now"), "recorded"),
    "environment a string": (BASE_DATA[0], _nested("recorded", "environment", "H200"), "recorded.environment"),
    "environment without gpu": (BASE_DATA[0], _drop(["recorded", "environment", "gpu"]), "recorded.environment"),
    "a GPU without its compute capability": (BASE_DATA[0], _gpu_environment, "recorded.environment"),
    "no GPU but a compute capability": (BASE_DATA[0], _set(["recorded", "environment", "gpu"], None),
                                        "recorded.environment"),
    "a package version a number": (BASE_DATA[0], _set(["recorded", "environment", "packages", "numpy"], 2),
                                   "recorded.environment.packages.numpy"),
    "origin a list": (BASE_DATA[0], _set(["origin"], []), "origin"),
    "origin with an unknown key": (BASE_DATA[0], _nested("origin", "why", "test"), "origin"),
    "origin draw negative": (BASE_DATA[0], _nested("origin", "draw", -1), "origin.draw"),
    "origin soak without its rank": (BASE_DATA[0], _nested("origin", "soak", {"seed": 0, "plan": 0, "batch": 0,
                                                                             "problem": 0, "b": 1}), "origin.soak"),
}


@pytest.mark.parametrize("name", BOUNDS)
def test_a_bad_count_word_or_nested_object_is_refused_with_one_line_naming_the_file_and_field(name, tmp_path):
    base, edit, field = BOUNDS[name]
    path = tmp_path / "case.json"
    path.write_text(json.dumps(edit(copy.deepcopy(base))))
    with pytest.raises(casefile.CaseFileError) as refused:
        casefile.read(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: {field}: "), message


def test_a_run_is_refused_before_it_is_expanded():
    count = 10**7  # 40 MB of words if expanded before the count is checked
    data = _set(["inputs", "logits", 0], f"00000000*{count}")(copy.deepcopy(BASE_DATA[0]))
    tracemalloc.start()
    try:
        with pytest.raises(casefile.CaseFileError, match=r"^inputs\.logits\.0: "):
            casefile.from_json(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < count * 4 // 10, f"reading allocated {peak} bytes for a refused run of {count} words"


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path, monkeypatch):
    path = tmp_path / "case.json"
    path.write_text(json.dumps(BASE_DATA[0]))
    monkeypatch.setattr(casefile, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(casefile.CaseFileError, match=f"^{path}: \\(file\\): {path.stat().st_size} bytes, more than"):
        casefile.read(path)


def test_the_writer_refuses_what_the_reader_would_and_writes_nothing(tmp_path):
    record = casefile.from_json(copy.deepcopy(BASE_DATA[0]))
    path = tmp_path / "folder" / "case.json"
    with pytest.raises(casefile.CaseFileError, match=f"^{path}: not written: origin: "):
        casefile.write(path, dataclasses.replace(record, origin={"why": "test"}))
    assert not path.parent.exists()
    assert casefile.read(casefile.write(path, record)).case.same_inputs(record.case)


def test_the_schemas_bounds_are_the_layouts():
    schema = json.loads(casefile.SCHEMA_PATH.read_text())
    inputs, defs = schema["properties"]["inputs"]["properties"], schema["$defs"]
    ids_rows = defs["ids_entry"]["properties"]["value"]
    rows = [inputs["logits"], ids_rows, defs["weights_entry"]["properties"]["value"]]
    assert [(r["minItems"], r["maxItems"]) for r in rows] == [(1, MAX_TOKENS)] * 3
    assert defs["origin"]["properties"]["soak"]["properties"]["b"]["maximum"] == MAX_TOKENS
    assert ids_rows["items"]["minItems"] == ids_rows["items"]["maxItems"] == TOP_K
    assert (inputs["tile_n"]["minimum"], inputs["tile_n"]["maximum"]) == (1, MAX_TILE)
    # RoutingCase and the kernel contract take 0 <= offset <= EXPERTS (an empty local range at either end).
    assert (inputs["local_expert_offset"]["maximum"], inputs["num_local_experts"]["maximum"]) == (EXPERTS, EXPERTS)
    assert defs["disagreement"]["properties"]["field"]["enum"] == list(FIELDS)
    assert defs["disagreement"]["properties"]["first"]["maxItems"] == MAX_LISTED
