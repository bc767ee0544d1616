"""Timing and memory helpers shared by the benchmarks."""
from __future__ import annotations

import gc
import json
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

W1_SHAPES = [(4,), (1,), (1,), (4,)]
W3_SHAPES = [(84, 84, 4), (), (), ()]


def median_seconds(call: Callable[[], object], repeats: int, warmup: int = 20,
                   sync: Callable[[object], object] | None = None) -> float:
    """Median wall time of ``call`` over ``repeats`` calls after ``warmup`` calls.

    ``sync`` (applied to the call's result) waits for asynchronous device work, so the
    figure is the time until the result is usable.
    """
    for _ in range(warmup):
        result = call()
        if sync:
            sync(result)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        if sync:
            sync(result)
        times.append(time.perf_counter() - start)
    return statistics.median(times)



def in_rounds(calls: dict[str, Callable[[], object]], repeats: int, rounds: int = 4,
              sync: Callable[[object], object] | None = None) -> dict[str, list[float]]:
    """Per-round median seconds of each call; the calls take turns, round after round.

    This machine drifts between a fast and a slow state for seconds at a time, so figures
    meant to be compared are measured side by side in every round and compared round by
    round (see :func:`ratio`), not one block after another.
    """
    per_round = max(1, repeats // rounds)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(median_seconds(call, per_round, sync=sync))
    return times


def ratio(times: dict[str, list[float]], numerator: str, denominator: str) -> float:
    """Median over rounds of the per-round ratio ``numerator / denominator``."""
    return statistics.median(a / b for a, b in zip(times[numerator], times[denominator]))

def rss() -> int:
    """Resident memory of this process, in bytes."""
    return psutil.Process().memory_info().rss


class PeakRSS:
    """Context manager sampling resident memory every ``interval`` seconds; ``peak`` after exit."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    def __enter__(self) -> PeakRSS:
        gc.collect()
        self.baseline = self.peak = rss()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(self.interval)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def table(rows: list[list[object]], header: list[str]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Held-solve runs per variant: seeds run, held solves, medians of the held ones, per-seed figures.

    Each run is a dict with ``variant``, ``solved``, ``solved_at`` (environment steps),
    ``solve_time`` (seconds) and ``env_steps`` (the steps run, shown for runs that did not hold).
    """
    summary = {}
    for variant in dict.fromkeys(run["variant"] for run in runs):
        mine = [run for run in runs if run["variant"] == variant]
        held = [run for run in mine if run["solved"]]
        summary[variant] = {
            "seeds": len(mine), "held": len(held),
            "median_steps": f"{statistics.median(r['solved_at'] for r in held):,.0f}" if held else "-",
            "median_seconds": f"{statistics.median(r['solve_time'] for r in held):.1f}" if held else "-",
            "steps": " / ".join(f"{r['solved_at']:,}" if r["solved"] else f"> {r['env_steps']:,}" for r in mine),
            "seconds": " / ".join(f"{r['solve_time']:.0f}" if r["solved"] else "-" for r in mine)}
    return summary


def record_run(results: dict[str, Any], run: dict[str, Any], path: Any) -> None:
    """Add a held-solve ``run`` to ``results["runs"]``, summarize, write ``results`` to ``path`` and say so.

    Written after every run, so an interrupted measurement keeps what it finished.
    """
    results["runs"].append(run)
    results["summary"] = summarize(results["runs"])
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"seed {run['seed']}, {run['variant']}: held at {run['solved_at']} in {run['solve_time']} s", flush=True)
