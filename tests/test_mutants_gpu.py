"""The mutant catalog on the GPU: every tier of its family on every mutant of properties/mutants/catalog.py (static
and differential for the kernel's, contract-cpu and contract-gpu for the contract's) and on the real kernel.

Every mutant must be killed (each declared tier killing it), every differential kill minimised and saved to
reports/mutants/<mutant>.json (never the committed corpora/mutants/: `make mutants-corpus` copies them there),
and the real kernel must pass both tiers and match the model on every saved case. The kill table goes to
reports/mutants.json. A few minutes: each probe compiles its own kernel copy, up to 8 at a time.
"""

from pathlib import Path

import pytest

from properties.mutants import probe, runner
from properties.mutants.catalog import CATALOG, DIFFERENTIAL

pytestmark = pytest.mark.gpu


@pytest.mark.long
def test_every_mutant_is_killed_and_the_real_kernel_passes():
    record = runner.run(tier="gpu", report=runner.DEFAULT_REPORT)
    assert record["verdict"] == "PASS", "\n".join(record["failures"])
    assert [row["mutant"] for row in record["mutants"]] == [m.name for m in CATALOG]
    for row in record["mutants"]:
        assert row["killed_by"] and not row["not_run"], row
        if DIFFERENTIAL in row["killed_by"]:
            assert row["case"] and Path(row["case"]).is_file(), f"{row['mutant']}: no saved minimal case"
            assert Path(row["case"]).parent == probe.SAVED_DIR, f"{row['case']}: saved outside {probe.SAVED_DIR}"
