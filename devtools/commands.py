"""Running child commands without ever deadlocking on their output (standard library only:
the local Kafka cluster uses it too).

A child's output is never left in a pipe nobody reads: a pipe holds 64 KiB, and a child that
writes more blocks until it is read, so a harness that reads only after waiting deadlocks with
it. A command run to its end has its output drained while it runs (``run_command``); a process
watched while it runs (a service, a broker) writes to a file (``start_logged``). Output is
decoded with errors replaced: a child cut off in the middle of a character fails with its
output shown, not with a decoding error."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


# How much of a child's output a failure shows: the end, where the error usually is.
SHOWN_OUTPUT_CHARS = 6000


def _decoded(output: str | bytes | None) -> str:
    if output is None:
        return ""
    return output if isinstance(output, str) else output.decode("utf-8", errors="replace")


def _shown(command: Sequence[str | os.PathLike[str]], stdout: str, stderr: str) -> str:
    text = stdout + (("\n" + stderr) if stderr else "")
    cut = f"[... {len(text) - SHOWN_OUTPUT_CHARS} characters before]\n" if len(text) > SHOWN_OUTPUT_CHARS else ""
    return f"{' '.join(map(str, command))}\n{cut}{text[-SHOWN_OUTPUT_CHARS:]}"


class CommandFailed(RuntimeError):
    """A command that exited with an error (``check=True``) or outlived its deadline; the
    message ends with its output."""


def run_command(
    command: Sequence[str | os.PathLike[str]],
    timeout: float,
    *,
    input: str | bytes | None = None,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = False,
    merge_stderr: bool = False,
    binary: bool = False,
    preexec_fn=None,
) -> subprocess.CompletedProcess:
    """Run ``command`` to its end, its output drained while it runs (``communicate``) and
    decoded as UTF-8 with errors replaced (``binary``: bytes as they came). A command still
    running after ``timeout`` seconds is killed and CommandFailed raised with what it wrote;
    with ``check``, so is a non-zero exit."""
    try:
        result = subprocess.run(
            list(map(str, command)) if not isinstance(command, str) else command,
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            cwd=cwd,
            env=None if env is None else dict(env),
            timeout=timeout,
            preexec_fn=preexec_fn,
            **({} if binary else {"encoding": "utf-8", "errors": "replace"}),
        )
    except subprocess.TimeoutExpired as exc:
        output = _shown(command, _decoded(exc.stdout), _decoded(exc.stderr))
        raise CommandFailed(f"still running after {timeout:g} s, killed: {output}") from None
    if check and result.returncode != 0:
        output = _shown(command, _decoded(result.stdout), _decoded(result.stderr))
        raise CommandFailed(f"exit {result.returncode}: {output}")
    return result


def start_logged(
    command: Sequence[str | os.PathLike[str]], log_path: Path, stderr_path: Path | None = None, **popen_args
) -> subprocess.Popen:
    """Start ``command`` with its standard output and error going to ``log_path`` (the error to
    ``stderr_path`` if given): never a pipe that could fill while nobody reads it. No standard
    input. ``read_log`` reads a log back."""
    with log_path.open("wb") as log, (stderr_path or Path(os.devnull)).open("wb") as errors:  # the child holds its own copies
        stderr = errors if stderr_path is not None else subprocess.STDOUT
        return subprocess.Popen(list(map(str, command)), stdin=subprocess.DEVNULL, stdout=log, stderr=stderr, **popen_args)


def read_log(log_path: Path) -> str:
    """A child's log as text, whatever bytes it holds (a write cut off mid-character too)."""
    try:
        return log_path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""

