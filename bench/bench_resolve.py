"""In-process quota resolution: 100,000 (user, client-id) pairs against 10,000 overrides.

Run: .venv/bin/python bench/bench_resolve.py [--pairs 100000] [--overrides 10000]
Baseline in the same run: one dict lookup per pair (the least any resolution must do)."""

from __future__ import annotations

import argparse
import random
import time

from app.quotas.model import DEFAULT, QuotaEntity, QuotaGroup, QuotaTable, QuotaType
from app.quotas.resolution import resolve


def build_table(overrides: int) -> QuotaTable:
    entries = {}
    for n in range(overrides):
        shape = n % 4
        entity = (
            QuotaEntity(f"user-{n}", f"client-{n}"),
            QuotaEntity(f"user-{n}", DEFAULT),
            QuotaEntity(f"user-{n}", None),
            QuotaEntity(None, f"client-{n}"),
        )[shape]
        entries[entity] = {QuotaType.PRODUCE: 1e6 + n, QuotaType.FETCH: 2e6 + n}
    entries[QuotaEntity(DEFAULT, None)] = {QuotaType.PRODUCE: 5e6}
    groups = {f"group-{g}": QuotaGroup(f"group-{g}", frozenset(f"member-{g}-{m}" for m in range(10)), frozenset(), {QuotaType.PRODUCE: 3e6}) for g in range(100)}
    return QuotaTable({QuotaType.PRODUCE: 1e7}, entries, groups, frozenset({"admin"}), frozenset({QuotaType.PRODUCE}), {t: 65536.0 for t in QuotaType})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--overrides", type=int, default=10_000)
    args = parser.parse_args()
    table = build_table(args.overrides)
    rng = random.Random(7)
    pairs = [(f"user-{rng.randrange(args.overrides * 2)}", f"client-{rng.randrange(args.overrides * 2)}") for _ in range(args.pairs)]

    lookup = {(e.user, e.client_id): l for e, l in table.overrides.items()}
    start = time.perf_counter()
    hits = sum(1 for pair in pairs if pair in lookup)
    baseline = time.perf_counter() - start

    start = time.perf_counter()
    levels: dict[str, int] = {}
    for user, client_id in pairs:
        level = resolve(table, user, client_id, QuotaType.PRODUCE, 0.5).level.value
        levels[level] = levels.get(level, 0) + 1
    elapsed = time.perf_counter() - start
    per = elapsed / args.pairs * 1e6
    print(f"{args.pairs} resolutions against {len(table.overrides)} overrides and {len(table.groups)} groups")
    print(f"baseline (one dict lookup per pair): {baseline / args.pairs * 1e6:.2f} us/pair ({hits} hits)")
    print(f"resolve: {per:.2f} us/resolution, {elapsed:.2f} s in all, {per / (baseline / args.pairs * 1e6):.0f}x the baseline")
    print("levels matched:", dict(sorted(levels.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
