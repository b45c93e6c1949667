"""One vocabulary: every ``python -m`` command of properties/ and oracles/ spells a shared concept with the one flag
of CONCEPTS and takes it the same way (``--impl`` one value, repeated, everywhere). The parsers are read, not guessed: each
command's ``main`` runs with ``ArgumentParser.parse_args`` replaced by a catch of the parser it was about to use
(nothing after it runs), its subcommands' parsers included."""

import argparse
import importlib
import re

import pytest

from common.provenance import REPO_ROOT

# concept: (the one flag, spellings refused as a flag, last words refused in a longer flag such as --ncu-bs)
CONCEPTS = {
    "token counts": ("--b", ("--bs", "--batch-size", "--tokens", "--num-tokens"), ("bs", "tokens")),
    "the GEMM tile": ("--tile", ("--tile-n", "--tiles", "--tile-size"), ("tile-n", "tile-size")),
    "timed repeats": ("--repeats", ("--repetitions", "--reps", "--repeat"), ("repetitions", "reps")),
    "implementations under test": ("--impl", ("--impls", "--implementation", "--implementations"), ()),
    "the output file": ("--out", ("--output", "--summary", "--html", "--out-file", "--output-file"), ()),
    "the device": ("--device", ("--gpu", "--cuda", "--dev", "--devices"), ()),
}
# Commands with subcommands that main dispatches itself, before any parser: the argv that reaches each.
DISPATCHED = {"properties.mutants.__main__": (["replay"], ["generated"])}


class _Caught(Exception):
    def __init__(self, parser):
        super().__init__(parser.prog)
        self.parser = parser


def _runnable():
    """{module: its source} of every module of common/, properties/ and oracles/ that a ``python -m`` runs."""
    found = {}
    for root in ("common", "properties", "oracles"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            text = path.read_text()
            if path.name == "__main__.py" or '__name__ == "__main__"' in text:
                found[".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)] = text
    return found


def _main_module(module, text):
    """The module whose ``main`` ``python -m module`` runs: the one it imports main from, else itself."""
    runs = re.search(r"^from (\S+) import main$", text, re.M)
    return runs.group(1) if runs else module


def _parses(module):
    return ".parse_args(" in (REPO_ROOT / module.replace(".", "/")).with_suffix(".py").read_text()


RUNNABLE = _runnable()
# Runnable modules that parse no command line, and why.
NO_COMMAND_LINE = {"properties.mutants.prefilter": "the generated runner's worker, started with a plan and a result file",
                   "properties.codegen.listing": "prints the kernel variants' listing"}
# The modules whose main parses a command line that a ``python -m`` runs.
COMMANDS = sorted({_main_module(m, t) for m, t in RUNNABLE.items() if _parses(_main_module(m, t))})


def _parsers(module, monkeypatch):
    """The parsers ``module``'s main builds (its subcommands' too)."""
    def catch(self, args=None, namespace=None):
        raise _Caught(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    main = importlib.import_module(module).main
    caught = []
    for argv in ([], *DISPATCHED.get(module, ())):
        with pytest.raises(_Caught) as info:
            main(list(argv))
        caught.append(info.value.parser)
    parsers = []
    while caught:
        parser = caught.pop()
        parsers.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                caught.extend(action.choices.values())
    return parsers


def _options(parser):
    return {flag: action for action in parser._actions for flag in action.option_strings if flag.startswith("--")}


def test_every_runnable_module_runs_a_checked_command_or_says_why_not():
    """A command whose parser is built in another module (``python -m pkg`` running pkg.cli's main) is checked
    there; a runnable module that parses no command line is listed with its reason."""
    unchecked = [m for m, t in RUNNABLE.items() if _main_module(m, t) not in COMMANDS and m not in NO_COMMAND_LINE]
    assert unchecked == []
    assert not set(NO_COMMAND_LINE) & set(COMMANDS) and set(NO_COMMAND_LINE) <= set(RUNNABLE)


def test_the_commands_are_found():
    assert {"properties.soak.__main__", "properties.replay", "properties.bench.cli", "properties.view",
            "oracles.mufu.__main__", "oracles.flashinfer_routing.build"} <= set(COMMANDS)


def _second_spellings(parser):
    """One line per flag of ``parser`` that spells a concept of CONCEPTS otherwise than its one flag."""
    return [f"{parser.prog}: {flag} spells {concept}, whose flag is {one}"
            for flag in _options(parser) for concept, (one, refused, last_words) in CONCEPTS.items()
            if flag in refused or any(flag.endswith("-" + word) for word in last_words)]


@pytest.mark.parametrize("module", COMMANDS)
def test_a_concept_has_one_flag(module, monkeypatch):
    assert [line for parser in _parsers(module, monkeypatch) for line in _second_spellings(parser)] == []


@pytest.mark.parametrize("module", COMMANDS)
def test_impl_takes_one_value_and_repeats_everywhere(module, monkeypatch):
    for parser in _parsers(module, monkeypatch):
        impl = _options(parser).get("--impl")
        if impl is not None:
            assert isinstance(impl, argparse._AppendAction) and impl.nargs is None, (
                f"{parser.prog}: --impl must take one value and repeat (action='append'), as in every command, "
                "so that it never swallows a positional after it")


def test_the_check_catches_a_second_spelling():
    parser = argparse.ArgumentParser(prog="p")
    for flag in ("--b", "--ncu-bs", "--summary", "--tile", "--out"):
        parser.add_argument(flag)
    assert _second_spellings(parser) == ["p: --ncu-bs spells token counts, whose flag is --b",
                                         "p: --summary spells the output file, whose flag is --out"]
