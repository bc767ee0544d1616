"""Every (primitive, input dtypes) the library's graphs use is registered by MindSpore 2.10's GPU kernels.

The inventory compiles every graph under MindSpore's IR dump (benchmarks/gpu_scenarios.py)
and the committed table docs/gpu/kernels-2.10.0.json says what the GPU kernels register
(docs/platforms.md).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor

from benchmarks.gpu_check import main as gpu_check
from benchmarks.gpu_inventory import inventory, load_table, parse_ir, supported, unsupported
from benchmarks.gpu_scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def found():
    return inventory(SCENARIOS)


@pytest.mark.slow
def test_every_scenario_compiles_graphs_that_the_inventory_reads(found):
    assert set(found) == set(SCENARIOS)
    for scenario, primitives in found.items():
        assert "Load" in primitives and len(primitives) > 10, scenario
    everything = {p for primitives in found.values() for p in primitives}
    # The kernels each part of the library is built on are all seen.
    assert {"ScatterUpdate", "ScatterNdUpdate", "Gather", "AssignAdd", "BitwiseXor", "Sort", "TopK", "SearchSorted",
            "Assert", "MatMul", "Adam"} <= everything


@pytest.mark.slow
def test_every_pair_the_graphs_use_is_registered_by_a_gpu_kernel(found):
    assert unsupported(found, load_table()) == []


@pytest.mark.slow
def test_no_direct_call_graph_holds_a_host_node(found):
    # PyExecute (MindSpore's JIT fallback) runs on the host. A user's graph reading a draw's
    # info held one while get_next and sample_with_info built BufferInfo there (docs/platforms.md).
    hosts = {scenario for scenario, primitives in found.items() if "PyExecute" in primitives}
    assert hosts == set(), hosts


def test_the_table_refuses_what_the_gpu_kernels_do_not_register():
    table = load_table()
    assert supported(table, "ScatterUpdate", ["Float32", "Int32", "Float32"])
    assert not supported(table, "ScatterUpdate", ["Float64", "Int32", "Float64"])
    assert not supported(table, "ScatterUpdate", ["Bool", "Int32", "Bool"])
    assert supported(table, "ScatterNdUpdate", ["Float64", "Int32", "Float64"])
    assert not supported(table, "Mul", ["Bool", "Bool", "Bool"])
    assert not supported(table, "AKernelNobodyRegistered", ["Float32"])
    assert supported(table, "Load", ["Float64"])  # virtual: no kernel runs
    found = {"made_up": {"ScatterUpdate": [["Float64", "Int32", "Float64"]], "Add": [["Int32", "Int32"]]}}
    assert unsupported(found, table) == [{"primitive": "ScatterUpdate", "dtypes": ["Float64", "Int32", "Float64"],
                                          "scenarios": ["made_up"]}]


def test_every_row_of_the_table_cites_its_source():
    table = load_table()
    assert table["mindspore"] == "2.10.0"
    for primitive, entry in table["primitives"].items():
        assert entry["file_2_10"].startswith("mindspore/ops/kernel/gpu/"), primitive
        assert entry["source_read"] and (entry["signatures"] or entry["variadic_signatures"]), primitive


IR = """  %0(CNode_1) = Load(%para1_head, UMonad[U])
      : (<Ref[Tensor[Int32]], (), ref_key=head>, <UMonad, NoShape>) -> (<Tensor[Int32], ()>)
  %1(CNode_2) = PrimFunc_Gather(%para2_c, %0, I64(0), I64(0))
      : (<Ref[Tensor[Float64]], (8, 2)>, <Tensor[Int32], (4)>, <Int64, NoShape>, <Int64, NoShape>)
  %2(CNode_3) = PrimFunc_Cast(%1, Tensor(shape=[], dtype=Int64, value=43))
      : (<Tensor[Float64], (4, 2)>, <Tensor[Int64], (), value=...>) -> (<Tensor[Float32], (4, 2)>)
  %3(CNode_4) = PrimFunc_ReduceSum(%2, (1), Bool(0), Bool(0))
      : (<Tensor[Float32], (4, 2)>, <Tuple[Int64*1], TupleShape(NoShape)>, <Bool, NoShape>, <None, NoShape>)
"""


def test_the_ir_reader_gives_each_node_its_inputs_in_the_tables_notation():
    assert parse_ir(IR) == [("Load", ("Int32",)), ("Gather", ("Float64", "Int32", "Int64@Number", "Int64@Number")),
                            ("Cast", ("Float64", "Int64@Const")),
                            ("ReduceSum", ("Float32", "Int64@Tuple", "Bool@Number", "None"))]
    table = load_table()
    assert all(supported(table, primitive, inputs) for primitive, inputs in parse_ir(IR))


# ------------------------------------------------------- what the table made us change
def test_float64_columns_are_written_through_a_kernel_the_gpu_has():
    from mindspore_rl_buffer.ops import insert

    column = Parameter(Tensor(np.zeros((4, 2))), requires_grad=False)
    batch = [Tensor(np.array([[1.5, 2.5], [3.5, 4.5]]))]
    rows, _, _ = insert([column], Tensor(1, ms.int32), Tensor(3, ms.int32), batch)
    expected = np.zeros((4, 2))
    expected[[0, 1]] = [[1.5, 2.5], [3.5, 4.5]]  # head 1, count 3: the write position is row 0, then 1 overwrites
    assert rows.asnumpy().tolist() == [0, 1]
    np.testing.assert_array_equal(column.asnumpy(), expected)


@pytest.mark.parametrize("n", [7, 5000])
def test_sorting_long_rows_as_float32_keys_is_exact_below_2_to_the_24(n):
    from mindspore_rl_buffer.ops._common import sort_ints

    values = np.random.default_rng(n).integers(0, 2**24, n).astype(np.int32)
    ordered, order = sort_ints(Tensor(values), 2**24)
    assert ordered.dtype == Tensor(values).dtype
    np.testing.assert_array_equal(ordered.asnumpy(), np.sort(values))
    np.testing.assert_array_equal(values[order.asnumpy()], np.sort(values))


def test_an_ordered_sample_longer_than_4096_is_oldest_first():
    from mindspore_rl_buffer import ReplayBuffer

    rb = ReplayBuffer(5000, 10000, [()], [ms.int32], seed=3)
    rb.insert([np.arange(12000, dtype=np.int32)])  # wrapped: head 2000, the oldest value 2000
    (values,) = rb.sample(True)
    values = values.asnumpy()
    assert (np.diff(values) >= 0).all() and values.min() >= 2000 and values.max() < 12000


# ------------------------------------------------------------------------ gpu_check
def test_gpu_check_without_a_gpu_says_so_and_exits_cleanly(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "")  # no nvidia-smi
    assert gpu_check([]) == 0
    assert "no GPU found" in capsys.readouterr().out


def test_gpu_check_runs_from_the_command_line():
    child = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check"], capture_output=True, text=True,
                           check=False, timeout=600, cwd=ROOT)
    assert child.returncode == 0, child.stderr
    assert "GPU" in child.stdout


def test_a_priority_update_of_more_than_4096_repeated_slots_is_numpys_assignment():
    from mindspore_rl_buffer import PriorityReplayBuffer

    prb = PriorityReplayBuffer(1.0, 3000, 4, [()], [ms.float32], seed=5)
    prb.insert([np.zeros(3000, np.float32)])
    rng = np.random.default_rng(11)
    slots = rng.integers(0, 3000, 5000).astype(np.int32)
    priorities = rng.uniform(0.5, 2.0, 5000).astype(np.float32)
    prb.update_priorities(slots, priorities)
    leaves = np.ones(3000, np.float32)  # inserted items take the largest priority so far, 1
    leaves[slots] = priorities  # numpy: the last occurrence wins
    first_leaf = len(prb.sum_tree.asnumpy()) // 2
    np.testing.assert_allclose(prb.sum_tree.asnumpy()[first_leaf:first_leaf + 3000], leaves, rtol=1e-6)
