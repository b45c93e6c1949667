"""The generated mutants (properties/mutants/generate.py, generated.py) on the CPU.

The set covers every operator on the current kernel, is the same for the same source, names each mutant by its
site and never by its text (a pure refactor of a copy, a local renamed and a function moved, keeps every name
and the static tier's verdict), makes no no-op mutant, and every listed equivalent still names a generated
mutant. The prefilter's rule: only a mutant whose lines run in device code or the launch digest alone may be
called equivalent by its digests. The score counts each verdict per function and operator.
"""

import ast
import concurrent.futures
import functools
import json
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from common.provenance import REPO_ROOT
from kernel import routing
from kernel.layout import MAX_TILE, TOP_K, VECTOR_WORDS
from properties.mutants import catalog, equivalents, generate, generated, probe, runner
from properties.mutants.catalog import CONTRACT_CPU, DIFFERENTIAL, KERNEL_DIR, STATIC



@functools.cache
def _mutants():
    """The generated set of the real kernel: made on first use, not at collection, where every pytest-xdist worker
    would pay its seconds whether or not it runs one of these tests."""
    return generate.generate(KERNEL_DIR)


def test_every_operator_applies_somewhere_and_every_target_file_has_mutants():
    assert {m.operator for m in _mutants()} == set(generate.OPERATORS)
    assert {m.target for m in _mutants()} == set(generate.TARGETS)


def _functions(text):
    """The qualified name of every function (methods included) of a source."""
    def walk(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                if isinstance(child, ast.FunctionDef):
                    yield ".".join(scope + [child.name])
                yield from walk(child, scope + [child.name])
    return set(walk(ast.parse(text), []))


def test_every_function_of_the_kernel_has_a_generated_site_and_every_file_is_a_target_or_says_why_not():
    files = {p.name for p in KERNEL_DIR.glob("*.py")}
    assert files == set(generate.TARGETS) | set(generate.UNTARGETED), files
    sited = {(m.target, m.function) for m in _mutants() if m.operator != generate.HAND}
    missing = [f"{t}:{f}" for t in generate.TARGETS for f in sorted(_functions((KERNEL_DIR / t).read_text()))
               if (t, f) not in sited]
    assert not missing, f"functions with no generated site (add an operator that reaches them): {missing}"


def test_the_same_source_gives_the_same_set_in_the_same_order_with_unique_names():
    names = [m.name for m in _mutants()]
    assert names == [m.name for m in generate.generate(KERNEL_DIR)]
    assert len(set(names)) == len(names)


def test_every_mutant_changes_the_syntax_tree_and_edits_its_segment_alone():
    texts = {target: (KERNEL_DIR / target).read_text() for target in generate.TARGETS}
    trees = {target: ast.dump(ast.parse(text)) for target, text in texts.items()}
    for m in _mutants():
        text = texts[m.target]
        mutated = m.apply(text)
        assert ast.dump(ast.parse(mutated)) != trees[m.target], m.name
        begin = generate._offset(text.splitlines(keepends=True), m.start)
        assert mutated[:begin] == text[:begin] and mutated[begin:].endswith(text[begin + len(m.old):]), m.name


SAMPLE = """
from kernel.layout import TOP_K, WARP, VECTOR_WORDS, TENSOR_ALIGN

ZERO = Imm(0x0)
ONE = Imm(0x3F800000)


def helper(a, b):
    return a


def f(x, y, out):
    total = add_f32(ZERO, x)
    total = sub_f32(total, y)
    out[0] = helper(x, y)
    lane = cutlass.min(x, TOP_K)
    return total
"""
LAYOUT_SAMPLE = "TOP_K = 8\nMAX_TOKENS = 8\nWARP = 32\nVECTOR_WORDS = 4\nTENSOR_ALIGN = 16\n"


@pytest.mark.parametrize("operator,edits", [
    (generate.CALL_SIBLING, {("add_f32", "sub_f32"), ("sub_f32", "add_f32"), ("cutlass.min", "cutlass.max")}),
    (generate.ARGUMENT_SWAP, {("x, y", "y, x")}),  # helper's call; add_f32's operands commute, so it has none
    (generate.CONSTANT_NEIGHBOUR, {("ZERO", "ONE"), ("TOP_K", "WARP")}),  # MAX_TOKENS: the same value, not imported
    (generate.STATEMENT_DROPPED, {("out[0] = helper(x, y)", "pass"), ("return a", "pass")}),
    (generate.STATEMENTS_EXCHANGED, {("total = add_f32(ZERO, x)\n    total = sub_f32(total, y)",
                                      "total = sub_f32(total, y)\n    total = add_f32(ZERO, x)")}),
], ids=lambda x: x if isinstance(x, str) else "")
def test_each_new_operator_makes_the_edits_it_claims_on_a_sample(operator, edits):
    """On a small source: the sibling of each listed call, the first differing arguments of a call of the file's
    own function, the next constant of another value that the file sees, the last store (else the return) of each
    function, and the one exchange where a read meets a name rebound (total bound before both)."""
    package = {"sample.py": SAMPLE, "layout.py": LAYOUT_SAMPLE}
    made = {(m.old, m.new) for m in generate.mutants_of("sample.py", SAMPLE, package) if m.operator == operator}
    if operator == generate.STATEMENTS_EXCHANGED:
        assert made == set(), "the first total is bound by the first statement itself: no exchange may read it unbound"
        text = SAMPLE.replace("def f(x, y, out):\n", "def f(x, y, out):\n    total = x\n")
        made = {(m.old, m.new) for m in generate.mutants_of("sample.py", text, package) if m.operator == operator}
    assert made == edits


def test_the_contract_signature_loses_each_element_once():
    text = "def signature(a, b, c, d, e, f):\n    return (a, type(b), c,\n            d, e, f)\n"
    made = [(m.old, m.new) for m in generate.mutants_of(generate.CONTRACT_FILE, text)
            if m.operator == generate.ELEMENT_DROPPED]
    assert made == [("a, ", ""), ("type(b), ", ""), ("c,\n            ", ""), ("d, ", ""), ("e, ", ""), (", f", "")]


def test_the_torch_ops_fake_implementation_is_a_site_and_contract_cpu_kills_its_mutant():
    """kernel/op.py's fake implementation, route's checks on fake tensors: dropping them is a generated mutant,
    killed by the contract's CPU tier (its part on fake tensors run alone: the probe's own copy of kernel/op.py
    registers the op)."""
    op = {m.name: m for m in _mutants() if m.target == "op.py"}
    dropped = op.get("op._fake.statement_dropped.0")
    assert dropped is not None and dropped.old == "contract.check_abstract(*call.args)", sorted(op)
    outcome = runner.run_probe(dropped, CONTRACT_CPU, ("--part", "fake"), make_copy=generated._copy)
    assert outcome.error is None and outcome.killed and outcome.case == {"part": "fake"}, outcome
    assert outcome.evidence[0].startswith("fake / ") and "the op's fake accepted a call" in outcome.evidence[0]


def test_the_hand_written_mutants_are_few_each_with_its_reason_and_generated_as_one_segment():
    hand = [m for m in _mutants() if m.operator == generate.HAND]
    assert [m.ordinal for m in hand] == [m.name for m in catalog.CATALOG] and len(hand) <= catalog.MAX_HAND
    assert all(m.reason.strip() for m in hand)
    for m in hand:
        text = (KERNEL_DIR / m.target).read_text()
        edited = m.apply(text)
        want = text
        for edit in next(c for c in catalog.CATALOG if c.name == m.ordinal).edits:
            want = want.replace(edit.old, edit.new)
        assert edited == want, m.name


def test_each_catalog_mutant_an_operator_expresses_names_generated_mutants():
    names = {m.name for m in _mutants()}
    missing = {c: [n for n in made if n not in names] for c, made in catalog.EXPRESSED.items()
               if any(n not in names for n in made)}
    assert not missing, f"properties/mutants/catalog.py's EXPRESSED names no generated mutant: {missing}"
    assert all(catalog.EXPRESSED.values())
    assert not set(catalog.EXPRESSED) & {m.name for m in catalog.CATALOG}
    assert not {n for made in catalog.EXPRESSED.values() for n in made} & set(equivalents.LISTED)


def test_every_listed_equivalent_names_a_generated_mutant():
    names = {m.name for m in _mutants()}
    missing = sorted(set(equivalents.LISTED) - names)
    assert not missing, f"listed equivalents that name no generated mutant (properties/mutants/equivalents.py): " \
                        f"{missing}"
    assert all(reason.strip() for reason in equivalents.LISTED.values())


def test_the_padding_bounds_the_listed_equivalents_rely_on():
    """write_padding's single stores and 16-byte body (kernel/routing.py), over every start <= end of a few
    tiles: at most 3 single stores on each side, a body of whole 16-byte stores (HEAD_NEVER, TAIL_NEVER,
    WHOLE_VECTORS)."""
    words = VECTOR_WORDS
    for start in range(3 * words * 4):
        for end in range(start, 3 * words * 4 + words):
            body_start = min((start + words - 1) & -words, end)
            body_end = max(body_start, end & -words)
            assert body_start <= start + words - 1 and end - body_end <= words - 1, (start, end)
            assert body_start == body_end or (body_start % words == 0 and body_end % words == 0), (start, end)


def test_every_cta_count_fits_four_bit_planes():
    """FIFTH_PLANE: each nibble of cta_table (an expert's CTAs for 1..8 tokens) is at most 8 at every tile."""
    for tile_n in range(1, MAX_TILE + 1):
        table = routing.cta_table(tile_n) & 0xFFFFFFFF
        assert all((table >> (routing.CTA_NIBBLE * c)) & 0xF <= TOP_K for c in range(TOP_K)), tile_n
        assert max((table >> (routing.CTA_NIBBLE * c)) & 0xF for c in range(TOP_K)) < 1 << 4


@pytest.mark.parametrize("needle", ["if lane == WARP - 1:", "SCHEDULERS = 4",
                                    "return (rows + SCHEDULERS - 1) // SCHEDULERS"],
                         ids=["in a method", "at module level", "in a function"])
def test_an_edit_is_parsed_in_its_smallest_block_alone_and_dropped_when_it_breaks_it(needle):
    """Each mutant's parse check reads the smallest function or top-level statement holding its edit (a few lines,
    not the whole file, 900 times): an edit that breaks the syntax there is refused, a harmless one kept."""
    text = (KERNEL_DIR / "routing.py").read_text()
    spans = generate.blocks(ast.parse(text))
    line = next(i for i, source in enumerate(text.splitlines(), 1) if needle in source)
    broken = text.replace(needle, needle.replace(" ", " ) ", 1), 1)
    kept = text.replace(needle, needle + "  # a comment", 1)
    assert not generate.parses(broken, text, line, line, spans)
    assert generate.parses(kept, text, line, line, spans)
    with pytest.raises(SyntaxError):
        compile(broken, "routing.py", "exec", ast.PyCF_ONLY_AST)


def test_a_mutant_refuses_a_source_that_no_longer_holds_its_segment():
    m = _mutants()[0]
    text = (KERNEL_DIR / m.target).read_text()
    with pytest.raises(ValueError, match=m.name):
        m.apply("\n" * m.start[0] + text)


def test_selection_by_name_or_prefix_and_a_name_that_selects_nothing_is_refused():
    first = _mutants()[0]
    assert generated.select(_mutants(), [first.name]) == [first]
    prefix = f"{first.name.split('.')[0]}.{first.function}"
    assert first in generated.select(_mutants(), [prefix])
    with pytest.raises(ValueError, match="no_such"):
        generated.select(_mutants(), ["no_such"])


# ---------------------------------------------------------------------------------------------- a pure refactor

def _rename_a_local(text):
    """The first top-level function's first assigned local (not a parameter) renamed everywhere in it."""
    tree = ast.parse(text)
    for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        params = {a.arg for a in function.args.args}
        assigned = [t.id for n in ast.walk(function) if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name) and t.id not in params]
        if assigned:
            old = assigned[0]
            names = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == old]
            lines = text.splitlines(keepends=True)
            for node in sorted(names, key=lambda n: (n.lineno, n.col_offset), reverse=True):
                begin = generate._offset(lines, (node.lineno, node.col_offset))
                text = text[:begin] + old + "_renamed" + text[begin + len(old):]
                lines = text.splitlines(keepends=True)
            return text, old
    raise AssertionError("no top-level function with a local to rename")


def _move_last_function_first(text):
    """The last top-level function moved (with its decorators) before the first one."""
    tree = ast.parse(text)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    first, last = functions[0], functions[-1]
    lines = text.splitlines(keepends=True)
    start = lambda n: min([n.lineno] + [d.lineno for d in n.decorator_list]) - 1  # noqa: E731
    moved = "".join(lines[start(last):last.end_lineno])
    rest = lines[:start(last)] + lines[last.end_lineno:]
    at = start(first)
    return "".join(rest[:at]) + moved + "\n\n" + "".join(rest[at:])


@pytest.fixture(scope="module")
def refactored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("refactored") / "kernel"
    shutil.copytree(KERNEL_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    renamed, local = _rename_a_local((folder / "routing.py").read_text())
    (folder / "routing.py").write_text(_move_last_function_first(renamed))
    return folder, local


def test_a_pure_refactor_keeps_every_mutants_name_and_edit(refactored):
    folder, local = refactored
    after = {m.name: m for m in generate.generate(folder, hand=False)}  # a hand-written one is pinned to its text
    assert set(after) == {m.name for m in _mutants() if m.operator != generate.HAND}
    for m in (m for m in _mutants() if m.operator != generate.HAND):
        twin = after[m.name]
        assert (twin.operator, twin.old.replace(local + "_renamed", local), twin.new.replace(local + "_renamed", local)) \
            == (m.operator, m.old, m.new), m.name
    assert any(after[m.name].start != m.start for m in _mutants() if m.target == "routing.py" and m.name in after)


def test_a_pure_refactor_keeps_the_kernels_ptx_and_a_mutants_static_verdict(refactored):
    folder, _ = refactored
    name = next(m.name for m in _mutants() if m.operator == generate.PTX_SIBLING and m.target == "primitives.py")
    twin = next(m for m in generate.generate(folder, hand=False) if m.name == name)

    def copy_of(kernel_dir):
        return lambda mutant, target: generated._copy(mutant, target, kernel_dir)

    work = [(None, KERNEL_DIR), (None, folder), (twin, folder)]
    with runner.concurrent.futures.ThreadPoolExecutor(2) as pool:
        real, real_after, mutant = pool.map(lambda job: runner.run_probe(job[0], STATIC, make_copy=copy_of(job[1])),
                                            work)
    assert real.error is None and real_after.error is None, real.error or real_after.error
    assert real_after.ptx == real.ptx and real_after.launches == real.launches and real_after.killed is False
    assert mutant.error is None and mutant.killed, (name, mutant.error, mutant.evidence)


# ---------------------------------------------------------------------------------------------- the prefilter's rule

def _coverage(imported=(), device=(), host=(), launches=()):
    variant = {"device": {"routing.py": list(device)}, "host": {"routing.py": list(host)}}
    return {"import": {"routing.py": list(imported)}, "variants": {"v0": variant, "v1": {"device": {}, "host": {}}},
            "launches": {"routing.py": list(launches)}}


def _at(line, target="routing.py"):
    return generate.Mutant(target, "f", generate.INT_PLUS_ONE, 0, (line, 0), (line, 1), "1", "2")


@pytest.mark.parametrize("coverage,want", [
    (_coverage(device=[5]), (["v0"], False, True)),  # device code alone: decided by its digests
    (_coverage(launches=[5]), ([], True, True)),  # the launch digest alone
    (_coverage(imported=[5]), (["v0", "v1"], False, False)),  # import time: every variant, never equivalent
    (_coverage(device=[5], host=[5]), (["v0"], False, False)),  # also host code: never equivalent
    (_coverage(), ([], False, False)),  # no compile runs it (route's host code): no compile, never equivalent
], ids=["device", "launch", "import", "host", "runtime"])
def test_only_a_mutant_of_device_code_or_the_launch_digest_may_be_equivalent_by_its_digests(coverage, want):
    assert generated.reach(_at(5), coverage) == want


def test_a_contract_mutant_is_never_equivalent_by_its_digests():
    assert generated.reach(_at(5, "contract.py"), {**_coverage(), "variants": {}})[2] is False


def test_the_score_counts_each_verdict_per_function_and_operator():
    rows = [{"file": "kernel/routing.py", "function": "f", "operator": op, "line": line, "old": "1", "verdict": v}
            for op, line, v in (("a", 1, "killed"), ("a", 1, "survived"), ("b", 2, "equivalent"), ("b", 3, "killed"))]
    score = generated.score(rows)
    assert score["total"]["sites"] == 3 and score["total"]["mutants"] == 4 and score["total"]["score"] == "2/3"
    assert score["by_operator"]["a"]["survived"] == 1 and score["by_operator"]["b"]["equivalent"] == 1
    assert score["by_function"]["kernel/routing.py:f"]["killed"] == 2


class _Rows(generated.Run):
    """A Run holding one mutant's row alone (no generation, no digests)."""

    def __init__(self, mutant, plan, tiers):
        self.rows = {mutant.name: {"verdict": "not_run", "plan": plan, "tiers": tiers, "killed_by": None}}


@pytest.mark.parametrize("tiers,want", [
    ({"contract-cpu": {"killed": False}, "differential": {"killed": True}}, ("killed", "differential")),
    ({"contract-cpu": {"killed": False}, "differential": {"killed": False, "raised": ["a fault"]}},
     ("crashed", "differential")),
    ({"contract-cpu": {"killed": False}, "differential": {"killed": None, "error": "probe exit 2"}},
     ("crashed", "differential")),
    ({"contract-cpu": {"killed": False}, "differential": {"killed": False}}, ("survived", None)),
    ({"contract-cpu": {"killed": False}}, ("not_run", None)),
], ids=["killed", "raised", "error", "survived", "not run"])
def test_a_mutant_survives_only_when_every_planned_tier_ran_and_none_saw_it(tiers, want):
    row = {"verdict": "not_run", "plan": ["contract-cpu", "differential"], "tiers": tiers, "killed_by": None}
    generated.settle(row)
    assert (row["verdict"], row["killed_by"]) == want


def test_a_record_written_mid_run_holds_each_verdict_its_tiers_decided(tmp_path):
    """A run ended by a signal or its machine's time limit leaves the record of its last write: the mutants its
    tiers decided read as decided there, the rest as not run."""
    first, second = _mutants()[:2]
    run = generated.Run([first, second], "cpu", tmp_path / "record.json", None, 1, print)
    run.rows[first.name].update(plan=["differential"], tiers={"differential": {"killed": True}})
    run.rows[second.name].update(plan=["differential"])
    run.write()
    data = json.loads(run.out.read_text())
    assert [(r["verdict"], r["killed_by"]) for r in data["mutants"]] == [("killed", "differential"), ("not_run", None)]
    assert data["score"]["total"]["killed"] == 1 and data["verdict"] == "FAIL"


def test_a_resumed_mutant_whose_chain_ended_runs_no_later_tier(tmp_path, monkeypatch):
    """A probe that gave no verdict ends the mutant's chain in a resumed run as in the run that recorded it (the
    mutant is crashed either way); one whose checks raised goes on to its next tier, which may kill it."""
    crashed, raised = _mutants()[:2]
    run = generated.Run([crashed, raised], "cpu", tmp_path / "record.json", None, 1, print)
    for m, first in ((crashed, {"killed": None, "error": "probe exit 2"}), (raised, {"killed": False,
                                                                                  "raised": ["a fault"]})):
        run.rows[m.name].update(plan=[CONTRACT_CPU, DIFFERENTIAL], tiers={CONTRACT_CPU: first},
                                reach={"decidable": False})
    monkeypatch.setattr(runner, "_pool_run", lambda work, jobs, log: {
        ("real", tier): runner.Outcome(tier, killed=False, seconds=1.0) for _, tier, _ in work})
    probed = []
    monkeypatch.setattr(runner, "run_probe", lambda mutant, tier, *args, **kwargs: probed.append(
        (mutant.name, tier)) or runner.Outcome(tier, killed=True))
    run.tiers((CONTRACT_CPU, DIFFERENTIAL))
    assert probed == [(raised.name, DIFFERENTIAL)]
    assert [run.rows[m.name]["verdict"] for m in (crashed, raised)] == ["crashed", "killed"]


def test_the_watchdog_ends_a_probe_that_outlives_its_limit_and_the_tier_counts_it_crashed(tmp_path):
    """A mutant whose kernel never finishes (a loop's step made 0) holds its probe at the first synchronisation:
    the watchdog beside the copy ends the process, with the traceback of where it waited in the probe's log."""
    copy = functools.partial(generated._watched_copy, seconds=1)
    outcome = runner.run_probe(_mutants()[0], "contract-cpu", make_copy=copy)
    assert outcome.killed is None and outcome.error.startswith(generated.ENDED_BY_WATCHDOG) and outcome.seconds < 30
    row = {"verdict": "not_run", "plan": ["contract-cpu"], "killed_by": None,
           "tiers": {"contract-cpu": {"killed": outcome.killed, "error": outcome.error}}}
    generated.settle(row)
    assert (row["verdict"], row["killed_by"]) == ("crashed", "contract-cpu")


def test_a_process_started_in_a_folder_without_the_watchdog_runs_on(tmp_path):
    generated._copy(None, tmp_path)
    code = "import time; time.sleep(3); print('ran on')"
    done = subprocess.run([sys.executable, "-c", code], env=runner._probe_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ran on"
    generated._watched_copy(None, tmp_path, seconds=1)
    done = subprocess.run([sys.executable, "-c", code], env=runner._probe_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -signal.SIGALRM and "ran on" not in done.stdout


@pytest.mark.parametrize("prefilter,want", [
    ({"killed": True, "raised": [], "differs": True}, "killed"),
    ({"killed": True, "raised": ["load placement raised ValueError: no wait"], "differs": True}, "killed"),
    ({"killed": False, "raised": ["load placement raised ValueError"], "differs": True}, "not_run"),
], ids=["a check found it", "one check found it, another raised", "only raised"])
def test_a_static_kill_counts_whatever_another_check_raised(prefilter, want):
    """A wait removed from a variant: the SASS check finds no ACQBULK while the PTX checks, needing the one wait,
    raise; the kill is the finding."""
    mutant = _at(1)
    run = _Rows(mutant, [], {})
    run.rows[mutant.name].update(prefilter=prefilter, reach={"decidable": True}, known_kill=None)
    run.classify(mutant)
    assert run.rows[mutant.name]["verdict"] == want


@pytest.mark.parametrize("launches,want", [
    (False, ["differential"]), (True, ["differential", "contract-gpu"])], ids=["same launches", "launches changed"])
def test_a_device_mutant_that_changes_what_route_launches_also_meets_the_launch_check(launches, want):
    """A kernel launched in place of another (kernel_tokens' bound moved) gives the same outputs: the contract's
    GPU tier, which reads the launches back from CUDA graphs, must see it."""
    mutant = _at(1)
    run = _Rows(mutant, [], {})
    run.rows[mutant.name].update(prefilter={"killed": False, "differs": True, "launches": launches},
                                 reach={"decidable": True}, known_kill=None)
    assert run.classify(mutant) == want and run.rows[mutant.name]["plan"] == want


def test_a_mutant_that_changes_only_what_route_launches_is_not_equivalent_by_its_digests():
    """The kernel choice is host code that the launch digest reaches: a mutant of it keeps every variant's PTX, and
    only the launch digest tells it from an equivalent edit (the probes' digests, compiled for real:
    tests/test_mutants_cpu.py::test_a_mutant_of_what_route_launches_keeps_the_ptx_but_not_the_launch_digest)."""
    real = {"ptx_sha256": {"v0": "p0", "v1": "p1"}, "launches_sha256": "L"}
    mutant = _at(1)
    for launches, verdict, plan in (("L", "equivalent", []), ("L'", "not_run", ["differential", "contract-gpu"])):
        run = _Rows(mutant, [], {})
        run.rows[mutant.name].update(reach={"decidable": True}, known_kill=None, refresh={"action": "probed"})
        run._absorb([{"name": mutant.name, "ptx_sha256": {}, "launches_sha256": launches, "killed": False,
                      "evidence": [], "raised": []}], real)
        assert run.classify(mutant) == plan and run.rows[mutant.name]["verdict"] == verdict, launches


@pytest.mark.parametrize("decidable,variants,want", [
    (True, ["metadata=True renormalize=True tokens=2"], ("--variants", "metadata=True renormalize=True tokens=2")),
    (True, None, ()),
    (False, ["metadata=True renormalize=True tokens=2"], ()),
], ids=["device code alone", "launches changed", "host code"])
def test_the_differential_tier_sweeps_only_the_variants_a_device_mutant_changed(decidable, variants, want):
    mutant = _at(1)
    run = _Rows(mutant, [], {})
    run.rows[mutant.name].update(prefilter={"killed": False, "differs": True, "variants": variants},
                                 reach={"decidable": decidable})
    args = run.probe_args(mutant, "differential")
    assert ("--variants" in args) == bool(want) and args[len(args) - len(want):] == want
    assert "--variants" not in run.probe_args(mutant, "contract-gpu")


def test_every_mutant_is_reached_through_the_first_line_of_a_statement():
    """Tracing sees a statement's first line, not the other lines of a statement that spans several (a tuple's
    rows), so every mutant's lines must hold a statement's first line."""
    spans = {t: generated.statements((KERNEL_DIR / t).read_text()) for t in generate.TARGETS}
    for m in _mutants():
        firsts = {span[2] for span in spans[m.target]}
        assert generated.lines_of(m, spans[m.target]) & firsts, m.name
    inside = [m for m in _mutants() if m.start[0] not in {span[2] for span in spans[m.target]}]
    assert inside, "no mutant sits inside a statement of several lines: the check above proves nothing"


class _Writer(generated.Run):
    """A Run whose record is a fixed document (no generation, no digests), written to ``out``."""

    def __init__(self, out):
        self.out, self.lock = out, threading.Lock()

    def record(self):
        return {"mutants": [{"mutant": f"m{i}", "verdict": "killed"} for i in range(200)]}


def test_probes_finishing_together_each_write_the_whole_record(tmp_path):
    """Probes finish on several threads and each writes the record: no write may lose another's file."""
    run = _Writer(tmp_path / "record.json")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: run.write(), range(200)))
    assert json.loads(run.out.read_text()) == run.record()
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


# The prefilter's coverage of the real kernel with each variant's compile replaced by a stand-in that takes only
# what compile_artifacts' signature takes (mock.create_autospec): in a process of its own, as coverage re-imports
# the kernel package.
COVERAGE_WITH_SIGNATURE_CHECKED_COMPILES = """
import json, sys
from unittest import mock
from properties.mutants import prefilter
real_import = prefilter._import_copy
def import_copy(kernel_dir):
    routing = real_import(kernel_dir)
    routing.compile_artifacts = mock.create_autospec(routing.compile_artifacts, return_value=("ptx", b"cubin"))
    return routing
prefilter._import_copy = import_copy
found = prefilter.coverage(sys.argv[1])
print(json.dumps({"variants": sorted(found["variants"]), "launches": sorted(found["launches"])}))
"""


@pytest.mark.long
def test_the_prefilters_coverage_calls_each_variants_compile_as_its_signature_takes_it():
    """A coverage worker whose compile call does not bind to compile_artifacts dies, and with it every mutant's
    prefilter: the first GPU run of the generated set did, and no default test saw it."""
    done = subprocess.run([sys.executable, "-c", COVERAGE_WITH_SIGNATURE_CHECKED_COMPILES, str(KERNEL_DIR)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["variants"] == sorted(probe.variant_name(*key) for key in generated._variant_keys())
    assert "routing.py" in found["launches"]


def test_the_harness_digest_follows_what_the_probes_import_not_whole_folders(tmp_path):
    """A resumed run reuses each outcome while the harness digest holds: a file no probe imports, the kernel
    (each mutant's own digest) or the list of equivalents (decided anew by each refresh) leaves it; a probe's
    module, an import of one, the prefilter or the run itself changes it."""
    for name in ("common", "kernel", "oracles", "properties", "corpora"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("results", "__pycache__"))
    before = generated.harness_digest(tmp_path)
    (tmp_path / "oracles" / "helper_no_probe_imports.py").write_text("X = 1\n")
    for edited in ("kernel/routing.py", "properties/mutants/equivalents.py"):
        (tmp_path / edited).write_text((tmp_path / edited).read_text() + "\n# edit\n")
    assert generated.harness_digest(tmp_path) == before
    for changed in ("properties/mutants/probe.py", "oracles/numpy_model/routing.py", "properties/mutants/prefilter.py",
                    "properties/mutants/generated.py"):
        path = tmp_path / changed
        original = path.read_text()
        path.write_text(original + "\n# changed\n")
        assert generated.harness_digest(tmp_path) != before, changed
        path.write_text(original)
