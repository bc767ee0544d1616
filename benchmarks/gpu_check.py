"""One command for the first machine with a GPU: the core tests and the speed figures, on the GPU.

    python -m benchmarks.gpu_check

runs each core test file with the device set to GPU (``MSRB_TEST_DEVICE=GPU``, read by
``tests/conftest.py``), then ``python -m benchmarks`` on the GPU, and prints one screen: pass
or fail per test file, the W1/W3 direct and in-graph figures, and the MindSpore and CUDA
versions. Without a usable GPU it says so and exits 0; with a GPU it exits 1 if a test failed.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from benchmarks.gpu_inventory import ROOT, child_env

CORE_TESTS = ("tests/ops", "tests/test_replay_buffer.py", "tests/test_priority_replay_buffer.py",
              "tests/test_reservoir_replay_buffer.py", "tests/test_trajectory.py", "tests/test_transition.py",
              "tests/test_writer.py", "tests/test_specs.py", "tests/test_graph.py", "tests/test_checkpoint.py")
# The lines of `python -m benchmarks` that give the W1/W3 figures, direct and in a graph.
FIGURE_LINES = re.compile(r"^\| (empty compiled call|insert 1 \(W1\)|sample 64 \(W1\)|sample (32|256) \(W3\)|"
                          r"in the compiled graph|numpy-fed)|^W3 insert")


def probe() -> tuple[bool, str]:
    """Whether MindSpore can run a kernel on a GPU here, and what it said (versions, or why not)."""
    if shutil.which("nvidia-smi") is None:
        return False, "no GPU found: nvidia-smi is not on PATH"
    child = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--probe"], cwd=ROOT, env=child_env(),
                           capture_output=True, text=True, check=False, timeout=600)
    if child.returncode != 0:
        lines = (child.stderr or child.stdout).strip().splitlines()
        return False, "MindSpore could not run a kernel on the GPU: " + (lines[-1] if lines else "no output")
    return True, child.stdout.strip().splitlines()[-1]


def _probe_child() -> None:
    import mindspore as ms
    import numpy as np

    ms.set_device("GPU")
    value = (ms.Tensor(np.arange(4, dtype=np.float32)) * 2).asnumpy()
    assert value.tolist() == [0.0, 2.0, 4.0, 6.0], value
    cuda = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False).stdout.strip().replace("\n", "; ")
    print(f"MindSpore {ms.__version__}, GPU and driver: {cuda or 'unknown'}, CUDA runtime of the plugin: "
          f"{os.environ.get('CUDA_VERSION', 'see nvcc --version')}")


def run_tests() -> list[tuple[str, bool, str]]:
    """Each core test file on the GPU: (file, passed, pytest's summary line)."""
    results = []
    for path in CORE_TESTS:
        child = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", path], cwd=ROOT,
                               env=child_env(MSRB_TEST_DEVICE="GPU"), capture_output=True, text=True, check=False)
        lines = child.stdout.strip().splitlines()
        results.append((path, child.returncode == 0, lines[-1] if lines else child.stderr.strip()[-200:]))
    return results


def run_figures() -> list[str]:
    """The W1/W3 lines of ``python -m benchmarks`` run on the GPU."""
    with tempfile.TemporaryDirectory() as out:
        child = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--bench", out], cwd=ROOT,
                               env=child_env(), capture_output=True, text=True, check=False)
    if child.returncode != 0:
        return [f"python -m benchmarks failed on the GPU: {child.stderr.strip().splitlines()[-1:]}"]
    return [line for line in child.stdout.splitlines() if FIGURE_LINES.search(line)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bench", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        _probe_child()
        return 0
    if args.bench:
        import mindspore as ms

        from benchmarks.__main__ import main as benchmarks_main

        ms.set_device("GPU")
        benchmarks_main(["--out", args.bench])
        return 0
    found, versions = probe()
    if not found:
        print(f"{versions}. Nothing to check on this machine; run `python -m benchmarks.gpu_check` where "
              f"a GPU is (docs/platforms.md).")
        return 0
    print(versions)
    tests = run_tests()
    for path, passed, summary in tests:
        print(f"{'PASS' if passed else 'FAIL'}  {path}: {summary}")
    print("\n".join(run_figures()))
    return 0 if all(passed for _, passed, _ in tests) else 1


if __name__ == "__main__":
    sys.exit(main())
