"""Interrupting a soak of the kernel on the GPU loses nothing, as on the CPU for the model alone
(tests/test_soak_interrupt_cpu.py): SIGINT and SIGTERM end it within seconds with one line and a whole summary;
interrupt, resume, SIGKILL, resume: the chunks follow each other, every batch verified once."""

import signal

import pytest

from test_soak_interrupt_cpu import interrupt_resume_kill_resume, signal_ends_the_soak

pytestmark = pytest.mark.gpu

CUTE_ON_GPU = ("--device", "cuda", "--impl", "cute")
START_S = 600  # the kernel's and the model's compilation before the first batch


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=("SIGINT", "SIGTERM"))
def test_a_signal_ends_a_kernel_soak_in_seconds_with_one_line_and_a_whole_summary(sig, tmp_path):
    signal_ends_the_soak(sig, tmp_path / "s.json", CUTE_ON_GPU, START_S)


def test_a_kernel_soak_interrupted_resumed_killed_and_resumed_verifies_every_batch_once(tmp_path):
    interrupt_resume_kill_resume(tmp_path / "s.json", CUTE_ON_GPU, START_S)
