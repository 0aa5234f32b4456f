"""Run the parts of the test command, time each, and print the times at the end.

    python3 .ci/parts.py [--modules JUNIT_XML]... 'NAME=COMMAND' ['+NAME=COMMAND']... ...

Each argument is a part: a name and a shell command. A part whose argument starts with ``+``
runs at the same time as the part before it (its output kept in a log and printed when it
ends, so two parts' lines never interleave); the next part without ``+`` starts when every
part of that group has ended. After the first group with a failed part no further group
starts. The table of parts (wall-clock seconds, exit status; "not run" for the parts after a
failure) is printed at the end in every case, and the exit status is non-zero when any part
failed. ``--modules`` names a JUnit XML file a part writes (pytest's ``--junitxml``); the
table is followed by the seconds each test module took in it (setup, call and teardown of
its tests, module fixtures included), the slowest first, and each module's worker when the
run was spread over several (xdist).

Stdlib only: it runs before the virtual environment exists (its first part creates it)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Part:
    name: str
    command: str
    seconds: float | None = None
    status: int | None = None
    log: Path | None = field(default=None, repr=False)


def parse(arguments: list[str]) -> tuple[list[list[Part]], list[Path]]:
    groups: list[list[Part]] = []
    modules: list[Path] = []
    items = iter(arguments)
    for argument in items:
        if argument == "--modules":
            modules.append(Path(next(items)))
            continue
        joined = argument.startswith("+")
        name, sep, command = argument.removeprefix("+").partition("=")
        if not sep or not name.strip() or not command.strip():
            raise SystemExit(f"parts.py: {argument!r} is not NAME=COMMAND (or +NAME=COMMAND)")
        if joined and not groups:
            raise SystemExit(f"parts.py: {argument!r} runs alongside a part, but none comes before it")
        if joined:
            groups[-1].append(Part(name.strip(), command))
        else:
            groups.append([Part(name.strip(), command)])
    return groups, modules


def run_group(group: list[Part], logs: Path) -> None:
    if len(group) == 1:  # its output straight to ours
        part = group[0]
        print(f"==> {part.name}: {part.command}", flush=True)
        started = time.monotonic()
        part.status = subprocess.call(part.command, shell=True)
        part.seconds = time.monotonic() - started
        return
    running: list[tuple[Part, subprocess.Popen, float]] = []
    for index, part in enumerate(group):
        print(f"==> {part.name} (alongside {', '.join(p.name for p in group if p is not part)}): {part.command}", flush=True)
        part.log = logs / f"{index}.log"
        with open(part.log, "wb") as out:
            process = subprocess.Popen(part.command, shell=True, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        running.append((part, process, time.monotonic()))
    while running:
        time.sleep(0.5)
        for entry in [entry for entry in running if entry[1].poll() is not None]:
            running.remove(entry)
            part, process, started = entry
            part.seconds, part.status = time.monotonic() - started, process.returncode
            print(f"==> {part.name} ended ({'ok' if part.status == 0 else f'exit {part.status}'}, {part.seconds:.0f} s); its output:", flush=True)
            sys.stdout.buffer.write(part.log.read_bytes())
            sys.stdout.flush()


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def table(groups: list[list[Part]], total: float) -> str:
    width = max(len(p.name) for g in groups for p in g)
    lines = ["", "Time per part (m:ss, wall clock; parts marked | ran at the same time as the one above):"]
    for group in groups:
        for index, part in enumerate(group):
            mark = "|" if index else " "
            if part.status is None:
                lines.append(f"  {mark} {part.name:<{width}}     -  not run")
            else:
                result = "ok" if part.status == 0 else f"FAILED (exit {part.status})"
                lines.append(f"  {mark} {part.name:<{width}}  {minutes(part.seconds):>5}  {result}")
    lines.append(f"    {'total':<{width}}  {minutes(total):>5}")
    return "\n".join(lines)


def module_table(path: Path) -> str:
    """Seconds per test module in a JUnit XML file, the slowest first."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        return f"\n(no module times: {path}: {error})"
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    workers: dict[str, set[str]] = defaultdict(set)
    for case in root.iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is the module's dotted path, then the class if any: keep up to test_*
        while module and not module[-1].startswith("test_"):
            module.pop()
        name = ".".join(module) or case.get("classname", "?")
        seconds[name] += float(case.get("time") or 0)
        tests[name] += 1
        for prop in case.iter("property"):
            if prop.get("name") == "worker":
                workers[name].add(prop.get("value", ""))
    if not seconds:
        return f"\n(no test cases in {path})"
    width = max(len(name) for name in seconds)
    lines = [f"", f"Seconds per test module ({path}):"]
    for name, spent in sorted(seconds.items(), key=lambda item: -item[1]):
        on = f"  {','.join(sorted(workers[name]))}" if workers[name] else ""
        lines.append(f"  {name:<{width}}  {spent:7.1f} s  {tests[name]:3d} tests{on}")
    lines.append(f"  {'sum':<{width}}  {sum(seconds.values()):7.1f} s  {sum(tests.values()):3d} tests")
    return "\n".join(lines)


def main(arguments: list[str]) -> int:
    groups, modules = parse(arguments)
    if not groups:
        raise SystemExit(__doc__)
    for path in modules:  # a stale file would be reported as this run's
        path.unlink(missing_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ci-parts-") as logs:
        try:
            for group in groups:
                run_group(group, Path(logs))
                if any(part.status != 0 for part in group):
                    break
        except KeyboardInterrupt:
            print("\ninterrupted", flush=True)
            failed = True
        else:
            failed = any(part.status not in (0, None) for g in groups for part in g)
        for path in modules:
            if path.exists():
                print(module_table(path))
        print(table(groups, time.monotonic() - started), flush=True)
    return 1 if failed or any(part.status is None for g in groups for part in g) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
