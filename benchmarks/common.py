"""Timing and memory helpers shared by the benchmarks."""
from __future__ import annotations

import contextlib
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROVENANCE_KEYS = ("date", "commit", "dirty", "mindspore", "numpy", "python", "cpu", "cpu_count", "load_average",
                   "command")

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


def time_ratios(runs: list[dict[str, Any]], baseline: str) -> dict[str, dict[str, Any]]:
    """Each variant's seconds to a held solve over ``baseline``'s: per seed, and of the medians.

    A seed that either variant did not hold counts as the budget's wall time, so a failure
    never flatters the ratio.
    """
    def seconds(run: dict[str, Any]) -> float:
        return run["solve_time"] if run["solved"] else run["train_seconds"]

    base = {run["seed"]: seconds(run) for run in runs if run["variant"] == baseline}
    ratios = {}
    for variant in dict.fromkeys(run["variant"] for run in runs if run["variant"] != baseline):
        mine = {run["seed"]: seconds(run) for run in runs if run["variant"] == variant}
        seeds = [seed for seed in mine if seed in base]
        ratios[variant] = {
            "per_seed": {seed: mine[seed] / base[seed] for seed in seeds},
            "of_medians": statistics.median(mine[s] for s in seeds) / statistics.median(base[s] for s in seeds)}
    return ratios


def _git(*args: str, cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_of(root: Path) -> str | None:
    """The commit checked out at ``root``, or None outside a git checkout."""
    return _git("rev-parse", "HEAD", cwd=root)


@contextlib.contextmanager
def checkout(commit: str | None, current: Path = ROOT) -> Iterator[Path]:
    """The tree of ``commit``, checked out by ``git worktree`` into a temporary folder and laid out
    as the installed package is, removed on exit; ``current`` itself for ``None`` (a smoke run)."""
    if commit is None:
        yield current
        return
    with tempfile.TemporaryDirectory(prefix="benchmark_baseline_") as folder:
        tree = Path(folder) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, capture_output=True,
                       text=True, check=True)
        try:
            package = tree / "mindspore_rl_buffer"
            for name in ("ops", "configs"):  # installed as mindspore_rl_buffer.ops and .configs
                if not (package / name).exists():
                    (package / name).symlink_to(Path("..") / name)
            yield tree
        finally:
            _git("worktree", "remove", "--force", str(tree))


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else :func:`platform.processor`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """Where and how a run was measured; call it when the run starts (the load average is the start's).

    ``commit`` is the short hash of ``HEAD`` (``"unknown"`` outside a git checkout) and ``dirty``
    whether the work tree had changes outside ``benchmarks/results`` (a recorded run is not code:
    benchmarks run one after another record theirs at the same commit); ``command`` is the
    command line (``argv`` if given, else ``sys.argv``), naming the calling benchmark's module.
    """
    import numpy

    try:
        import mindspore
        mindspore_version = mindspore.__version__
    except ImportError:
        mindspore_version = None
    commit = _git("rev-parse", "--short", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{RESULTS.relative_to(ROOT)}") \
        if commit else None
    args = sys.argv[1:] if argv is None else list(argv)
    caller = sys._getframe(1).f_globals  # the benchmark's module, run with -m, run as a file or imported
    spec, program = caller.get("__spec__"), sys.argv[0]
    if spec is not None and spec.name:
        program = "-m " + spec.name.removesuffix(".__main__")
    elif caller.get("__file__"):
        program = os.path.relpath(caller["__file__"], ROOT)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit or "unknown",
        "dirty": bool(status) if commit else None,
        "mindspore": mindspore_version,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "command": " ".join(["python", program, *args]),
    }


def results_path(name: str, out: str | Path | None, smoke: bool = False) -> Path | None:
    """Where benchmark ``name`` writes its JSON: ``out/<name>.json``, by default in ``benchmarks/results``.

    A smoke run without ``out`` records nothing (None): its tiny figures must not replace a real run's.
    """
    if out is None and smoke:
        return None
    folder = RESULTS if out is None else Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.json"


def write_results(results: dict[str, Any], path: Path | None) -> None:
    """Write ``results`` (with its ``"run"`` provenance, see :func:`provenance`) as JSON to ``path``."""
    if "run" not in results:
        raise ValueError("results need their run's provenance under 'run'")
    if path is not None:
        path.write_text(json.dumps(results, indent=2, default=str) + "\n")


def finish(results: dict[str, Any], path: Path | None, text: str, started: float) -> dict[str, Any]:
    """Write ``results`` to ``path``, print ``text`` and where the figures went and how long the run took."""
    write_results(results, path)
    print(text)
    print(f"\nfigures: {path or 'not recorded (smoke run without --out)'}; {time.perf_counter() - started:.0f} s")
    return results


def run_in_tree(script: Path, root: Path, args: list[str], mark: str, timeout: float,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """The figures of ``script --child *args`` run in a fresh process that imports the tree ``root``.

    The child prints its figures as JSON on a line starting with ``mark``, with the path of the
    package it imported under ``"package"`` and the file of every ``mindspore_rl_buffer`` module it
    imported under ``"modules"``. ``root`` must be laid out as the installed package is
    (:func:`checkout`): in a plain checkout, ``mindspore_rl_buffer.ops`` and ``.configs`` are
    imported from the installed project instead, and the figures would mix two trees.

    Raises:
        RuntimeError: If the process fails, prints no figures, or imported the package or one of
            its modules (``ops`` and ``configs`` included) from outside ``root``.
    """
    environment = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    done = subprocess.run([sys.executable, str(script), "--child", *args], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith(mark)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the process on {root} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    figures = json.loads(lines[-1][len(mark):])
    if not Path(figures["package"]).resolve().is_relative_to(Path(root).resolve()):
        raise RuntimeError(f"the process imported {figures['package']}, not the tree {root}")
    outside = sorted(name for name, path in figures["modules"].items()
                     if not Path(path).resolve().is_relative_to(Path(root).resolve()))
    if outside:
        raise RuntimeError(f"the process on the tree {root} imported {len(outside)} modules of the package from "
                           f"outside it, such as {outside[0]} from {figures['modules'][outside[0]]}: lay the tree out "
                           f"as the installed package is (benchmarks.common.checkout)")
    del figures["modules"]  # checked; the records keep the package's path only
    return figures


def record_run(results: dict[str, Any], run: dict[str, Any], path: Path | None) -> None:
    """Add a held-solve ``run`` to ``results["runs"]``, summarize, write ``results`` to ``path`` and say so.

    Written after every run, so an interrupted measurement keeps what it finished.
    """
    results["runs"].append(run)
    results["summary"] = summarize(results["runs"])
    write_results(results, path)
    print(f"seed {run['seed']}, {run['variant']}: held at {run['solved_at']} in {run['solve_time']} s", flush=True)
