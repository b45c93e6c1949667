"""The README's "Verifying your own kernel", run as written: its module saved outside the repository, its
soak command catching the deliberate bug in every row of the tie family and almost no plain row, and the
first case file of the tie family replaying against the module by name (the paths under /tmp moved into a
fresh folder)."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Verifying your own kernel"
MAX_LINES = 25


def _section():
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + len(SECTION))].rstrip()


def _blocks(section):
    return re.findall(r"```(\w*)\n(.*?)```", section, re.S)


def _run(command, tmp_path, case=""):
    """The README's ``command`` with /tmp/ moved to ``tmp_path`` and CASE replaced by ``case``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("VERIFY_IMPL", None)
    argv = shlex.split(command.replace("/tmp/", f"{tmp_path}/").replace("CASE", case))
    assert argv[0] == "python"
    return subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=600)


def test_the_section_is_short_and_its_kernel_is_caught_and_replayed(tmp_path):
    section = _section()
    assert len(section.splitlines()) <= MAX_LINES
    (_, module), (_, commands) = _blocks(section)
    assert "/tmp/my_kernel.py" in commands
    (tmp_path / "my_kernel.py").write_text(module)
    soak, replay = commands.strip().splitlines()
    caught = _run(soak, tmp_path)
    assert caught.returncode == 1, caught.stderr[-2000:]
    verdict = json.loads((tmp_path / "mine" / "verdict-mine.json").read_text())
    families = verdict["families"]
    ties, plain = families["tie_within_lane"]["ids"], families["plain"]["ids"]
    assert ties["rows"] > 0 and ties["differing"] == ties["rows"]
    assert plain["rows"] > 0 and plain["differing"] * 100 < plain["rows"]  # a tie there is one made by rounding
    case = families["tie_within_lane"]["first_case_file"]
    replayed = _run(replay, tmp_path, case)
    assert replayed.returncode == 1 and replayed.stdout.splitlines()[-1] == "replay: DIFFER (exit 1)", replayed.stderr
    assert re.search(r"^    mine ids vs model", replayed.stdout, re.M), replayed.stdout
