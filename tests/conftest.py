"""Every test runs in GRAPH_MODE on the CPU, with fresh buffers from the fixtures."""
import mindspore as ms
import pytest


@pytest.fixture(autouse=True)
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    yield
