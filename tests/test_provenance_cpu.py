"""One provenance record, one package list: every writer of a record (case files, the soak's summary, the bench,
the gate's report) names the versions of common.provenance.PACKAGES, through common.provenance.record."""

import ast

from common import provenance
from common.provenance import PACKAGES, REPO_ROOT
from properties.bench import cli as bench_cli
from properties.engine import casefile
from properties.soak import summary as soak_summary


def test_case_files_name_the_one_package_list():
    assert list(casefile.environment()["packages"]) == list(PACKAGES)


def test_the_soak_summary_names_the_one_package_list():
    assert list(soak_summary.provenance([])["packages"]) == list(PACKAGES)


def test_the_bench_names_the_one_package_list_and_keeps_its_keys():
    record = bench_cli.provenance()
    assert list(record["packages"]) == list(PACKAGES)
    assert {"gpu", "commit", "date", "clocks", "host", "nvidia-cutlass-dsl", "flashinfer"} <= set(record)


def test_the_record_names_every_package_of_the_list():
    assert set(provenance.record()["packages"]) == set(PACKAGES) and len(set(PACKAGES)) == len(PACKAGES)


def _package_lists(path):
    """Line numbers in ``path`` of a tuple or list literal of two or more strings, every one a name of PACKAGES
    (a package list of its own)."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) and e.value in PACKAGES for e in node.elts)]


def test_no_writer_keeps_a_package_list_of_its_own():
    own = {str(path.relative_to(REPO_ROOT)): lines for root in ("common", "oracles", "properties")
           for path in sorted((REPO_ROOT / root).rglob("*.py"))
           if path != REPO_ROOT / "common" / "provenance.py" and (lines := _package_lists(path))}
    assert own == {}
