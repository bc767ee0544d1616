"""Every test runs in GRAPH_MODE on the CPU, with fresh buffers from the fixtures."""
import mindspore as ms
import pytest

# Set once, before any kernel runs: MindSpore refuses set_device once its runtime started
# (a module-scoped fixture may run a kernel before the first function-scoped one).
ms.set_device("CPU")


@pytest.fixture(autouse=True)
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
