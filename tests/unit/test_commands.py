"""Child commands of the tests and tools: output drained while they run or written to a file,
never a deadlock on a full pipe, and a failure that shows what the child wrote."""

from __future__ import annotations

import sys
import time

import pytest

from devtools.commands import CommandFailed, read_log, run_command, start_logged

WRITE_A_MEGABYTE = "import sys; sys.stdout.write('x' * 1_000_000); sys.stderr.write('e' * 1_000_000)"


def test_a_command_writing_more_than_a_pipe_holds_runs_to_its_end():
    result = run_command([sys.executable, "-c", WRITE_A_MEGABYTE], 60)
    assert result.returncode == 0 and len(result.stdout) == 1_000_000 and len(result.stderr) == 1_000_000


def test_a_command_past_its_deadline_is_killed_and_shown_even_when_cut_inside_a_character():
    # "é" is two bytes in UTF-8; the child stops after the first and hangs.
    hang = "import sys, time; sys.stdout.buffer.write(b'before the hang ' + 'é'.encode()[:1]); sys.stdout.flush(); time.sleep(60)"
    started = time.monotonic()
    with pytest.raises(CommandFailed) as failed:
        run_command([sys.executable, "-c", hang], 2)
    assert time.monotonic() - started < 30
    message = str(failed.value)
    assert "still running after 2 s, killed" in message and "before the hang \ufffd" in message, message


def test_a_failed_check_shows_the_end_of_the_output():
    fail = "import sys; print('x' * 100_000); print('the reason', file=sys.stderr); sys.exit(3)"
    with pytest.raises(CommandFailed) as failed:
        run_command([sys.executable, "-c", fail], 60, check=True)
    message = str(failed.value)
    assert message.startswith("exit 3: ") and message.endswith("the reason\n") and len(message) < 7000, message[:300]


def test_a_logged_process_never_blocks_on_its_output(tmp_path):
    log = tmp_path / "child.log"
    process = start_logged([sys.executable, "-c", WRITE_A_MEGABYTE + "; sys.stdout.buffer.write(b'\\xff')"], log)
    assert process.wait(60) == 0
    text = read_log(log)
    assert len(text) == 2_000_001 and text.count("\ufffd") == 1
