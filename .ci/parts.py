"""Run the parts of the test command, time each, and print the times at the end.

    python3 .ci/parts.py [--modules JUNIT_XML]... 'NAME=COMMAND' ['+NAME=COMMAND' | '>NAME=COMMAND']...

Each argument is a part: a name and a shell command. Parts run one after the other, except
that a part whose argument starts with ``+`` runs at the same time as the part before it, and
one starting with ``>`` runs right after the part before it, in the same lane, at the same
time as the other lanes of its group (e.g. a build and the check that reads what it built,
alongside the unit tests). The output of parts that run at the same time is kept in a log
each and printed when the part ends, so their lines never interleave. The next part without
``+`` or ``>`` starts when every lane of the group has ended. A lane stops at its first failed
part, and after a group with a failed part no further group starts. The table of parts
(wall-clock seconds, exit status, "not run" for the parts after a failure) is printed at the
end in every case, and the exit status is non-zero when any part failed or did not run.
``--modules`` names a JUnit XML file a part writes (pytest's ``--junitxml``); the table is
preceded by the seconds each test module took in it (setup, call and teardown of its tests,
module fixtures included), the slowest first, with the test process each ran in (xdist's
worker, when there were several).

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


Lane = list[Part]


def parse(arguments: list[str]) -> tuple[list[list[Lane]], list[Path]]:
    groups: list[list[Lane]] = []
    modules: list[Path] = []
    items = iter(arguments)
    for argument in items:
        if argument == "--modules":
            modules.append(Path(next(items)))
            continue
        how = argument[0] if argument[:1] in ("+", ">") else ""
        name, sep, command = argument[len(how):].partition("=")
        if not sep or not name.strip() or not command.strip():
            raise SystemExit(f"parts.py: {argument!r} is not NAME=COMMAND (or +NAME=COMMAND, >NAME=COMMAND)")
        if how and not groups:
            raise SystemExit(f"parts.py: {argument!r} goes with a part before it, but there is none")
        part = Part(name.strip(), command)
        if how == "+":
            groups[-1].append([part])
        elif how == ">":
            groups[-1][-1].append(part)
        else:
            groups.append([[part]])
    return groups, modules


def run_group(group: list[Lane], logs: Path) -> None:
    if len(group) == 1:  # one lane: its output straight to ours
        for part in group[0]:
            print(f"==> {part.name}: {part.command}", flush=True)
            started = time.monotonic()
            part.status = subprocess.call(part.command, shell=True)
            part.seconds = time.monotonic() - started
            if part.status != 0:
                return
        return
    names = [", ".join(p.name for p in lane) for lane in group]
    running: list[tuple[Lane, Part, subprocess.Popen, float]] = []

    def start(lane: Lane, part: Part) -> None:
        others = [n for n, other in zip(names, group) if other is not lane]
        print(f"==> {part.name} (alongside {'; '.join(others)}): {part.command}", flush=True)
        part.log = logs / f"{id(part)}.log"
        with open(part.log, "wb") as out:
            process = subprocess.Popen(part.command, shell=True, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        running.append((lane, part, process, time.monotonic()))

    for lane in group:
        start(lane, lane[0])
    while running:
        time.sleep(0.5)
        for entry in [entry for entry in running if entry[2].poll() is not None]:
            running.remove(entry)
            lane, part, process, started = entry
            part.seconds, part.status = time.monotonic() - started, process.returncode
            print(f"==> {part.name} ended ({'ok' if part.status == 0 else f'exit {part.status}'}, {part.seconds:.0f} s); its output:", flush=True)
            sys.stdout.buffer.write(part.log.read_bytes())
            sys.stdout.flush()
            following = lane.index(part) + 1
            if part.status == 0 and following < len(lane):
                start(lane, lane[following])


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def table(groups: list[list[Lane]], total: float) -> str:
    parts = [part for group in groups for lane in group for part in lane]
    width = max(len(part.name) for part in parts)
    lines = ["", "Time per part (m:ss, wall clock; a part marked | ran at the same time as the lane above it, > after the part above it):"]
    for group in groups:
        for index, lane in enumerate(group):
            for position, part in enumerate(lane):
                mark = ">" if position else ("|" if index else " ")
                if part.status is None:
                    lines.append(f"  {mark} {part.name:<{width}}  {'-':>5}  not run")
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
                if any(part.status != 0 for lane in group for part in lane):
                    break
        except KeyboardInterrupt:
            print("\ninterrupted", flush=True)
            failed = True
        else:
            failed = False
        for path in modules:
            if path.exists():
                print(module_table(path))
        print(table(groups, time.monotonic() - started), flush=True)
    return 1 if failed or any(part.status != 0 for g in groups for lane in g for part in lane) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
