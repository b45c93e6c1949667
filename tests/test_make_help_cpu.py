"""`make help`: one row for every .PHONY target of the Makefile, each saying what it does, and the README's table
of targets is exactly what `make help` prints."""

import re
import subprocess

from common.provenance import REPO_ROOT

ROW = re.compile(r"^\| `make ([a-z0-9-]+)` \| (.+) \|$")


def _phony_targets():
    text = (REPO_ROOT / "Makefile").read_text()
    return {name for line in re.findall(r"^\.PHONY:(.*)$", text, re.M) for name in line.split()}


def _make_help():
    return subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True).stdout


def test_make_help_lists_every_phony_target_once_with_what_it_does():
    phony = _phony_targets()
    assert {"help", "verify", "test"} <= phony
    rows = [ROW.match(line) for line in _make_help().splitlines()[2:]]
    assert all(rows), _make_help()
    listed = [row.group(1) for row in rows]
    assert sorted(listed) == sorted(phony), f"make help and .PHONY differ: {set(listed) ^ phony}"
    assert all(len(row.group(2).split()) >= 3 for row in rows)


def test_the_readmes_table_of_targets_is_make_help():
    assert _make_help() in (REPO_ROOT / "README.md").read_text()
