"""Every test runs in GRAPH_MODE on the CPU (on the GPU with MSRB_TEST_DEVICE=GPU), with fresh buffers."""
import gc
import os

import mindspore as ms
import pytest

# Set once, before any kernel runs: MindSpore refuses set_device once its runtime started
# (a module-scoped fixture may run a kernel before the first function-scoped one).
# `python -m benchmarks.gpu_check` sets MSRB_TEST_DEVICE=GPU to run the core tests on a GPU.
ms.set_device(os.environ.get("MSRB_TEST_DEVICE", "CPU"))
# `mindspore-rl-buffer train` keeps compiled graphs under ~/.cache by default: the tests' runs (in
# this process and the ones it starts) store none, and a test of the cache names its folder.
os.environ["MSRB_COMPILE_CACHE"] = "off"


def pytest_collection_finish(session):
    # MindSpore runs a full garbage collection before each graph compile; the imports' and the
    # collected tests' objects, frozen here, are left out of every one of them (as `train` does).
    gc.freeze()


@pytest.fixture(autouse=True)
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
