"""The config loader: dqn-style entries, nested entries, files, and the errors for bad specs."""
from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path

import mindspore as ms
import pytest
from mindspore import nn

from mindspore_rl_buffer import ReplayBuffer, create_buffer, load_config
from mindspore_rl_buffer.config import buffer_arguments

ROOT = Path(__file__).resolve().parents[1]
DQN_ENTRY = {"number": 1, "type": ReplayBuffer, "capacity": 100000,
             "data_shape": [(4,), (1,), (1,), (4,)],
             "data_type": [ms.float32, ms.int32, ms.float32, ms.float32], "sample_size": 64}


def test_the_dqn_config_file_loads_and_builds_its_buffer():
    config = load_config(ROOT / "configs" / "dqn.py")
    rb = create_buffer(config["replay_buffer"])
    assert isinstance(rb, ReplayBuffer)
    # The file's entry, not the loader's defaults: the shipped DQN draws 128 per learn step.
    assert (rb.capacity, rb.sample_size) == (100000, 128)
    # The core entry's columns, plus `terminated` so DQN stops bootstrapping at a fallen pole.
    assert [s.shape for s in rb.specs] == [(4,), (1,), (1,), (4,), (1,)]
    assert [s.dtype for s in rb.specs] == [ms.float32, ms.int32, ms.float32, ms.float32, ms.float32]


def test_create_buffer_does_not_change_the_callers_dict():
    entry = copy.deepcopy(DQN_ENTRY)
    create_buffer(entry)
    assert entry == DQN_ENTRY


def test_nested_form_string_type_and_dtype_names():
    rb = create_buffer({"number": 1, "type": "ReplayBuffer",
                        "params": {"capacity": 10, "data_shape": [[3], []], "data_type": ["float32", "int64"],
                                   "sample_size": 4, "ordered": True, "names": ["obs", "step"]}})
    assert [(s.name, s.shape, s.dtype) for s in rb.specs] == [("obs", (3,), ms.float32), ("step", (), ms.int64)]
    assert rb.columns[0].name == "obs"


def test_number_greater_than_one_gives_independent_buffers():
    buffers = create_buffer({**DQN_ENTRY, "number": 3, "capacity": 10})
    assert isinstance(buffers, nn.CellList) and len(buffers) == 3
    import numpy as np

    buffers[1].insert([np.zeros((2, 4), np.float32), np.zeros((2, 1), np.int32),
                       np.zeros((2, 1), np.float32), np.zeros((2, 4), np.float32)])
    assert [int(b.size()) for b in buffers] == [0, 2, 0]


@pytest.mark.parametrize(("kind", "seeds"), [
    ("ReplayBuffer", {"seed": 7}), ("ReplayBuffer", {"seed": 2**31 - 1}),  # the second buffer's seed wraps to 0
    ("ReservoirReplayBuffer", {"seed": 7}), ("ReservoirReplayBuffer", {"seed0": 7}),
    ("ReservoirReplayBuffer", {"seed1": 7})])
@pytest.mark.slow
def test_the_buffers_of_a_seeded_entry_draw_apart_and_reproducibly(kind, seeds):
    import numpy as np

    entry = {"number": 2, "type": kind, "capacity": 1000, "data_shape": [(1,)], "data_type": ["int32"],
             "sample_size": 16, **seeds}
    first, second = (create_buffer(entry) for _ in range(2))
    draws = []
    for buffers in (first, second):
        for buffer in buffers:
            buffer.insert([np.arange(4000, dtype=np.int32).reshape(-1, 1)])
        draws.append([buffer.sample()[0].asnumpy().ravel().tolist() for buffer in buffers])
    assert draws[0] == draws[1], "the same entry drew differently"
    assert draws[0][0] != draws[0][1], "two buffers of one seeded entry drew alike"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_yaml_and_json_configs(tmp_path, suffix):
    entry = {"number": 1, "type": "ReplayBuffer", "capacity": 50, "data_shape": [[4], [1]],
             "data_type": ["float32", "int32"], "sample_size": 8}
    path = tmp_path / f"algo{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"replay_buffer": entry}))
    else:
        import yaml

        path.write_text(yaml.safe_dump({"replay_buffer": entry}))
    rb = create_buffer(load_config(path)["replay_buffer"])
    assert rb.capacity == 50 and [s.shape for s in rb.specs] == [(4,), (1,)]


def refuse_to_build(monkeypatch):
    """Make building a ReplayBuffer fail the test: the errors below must come before any is built."""
    @functools.wraps(ReplayBuffer.__init__)  # keeps the signature, which gives the config keys
    def init(self, *args, **kwargs):
        raise AssertionError("a ReplayBuffer was built before the config error was raised")

    monkeypatch.setattr(ReplayBuffer, "__init__", init)


def test_number_is_bounded_before_anything_is_built(monkeypatch):
    assert buffer_arguments({**DQN_ENTRY, "number": 1024})[1] == 1024
    refuse_to_build(monkeypatch)
    for number in (1025, 100000000000):
        with pytest.raises(ValueError, match=rf"For 'create_buffer', 'number' must be an int <= 1024 "
                                             rf"\(the most buffers one entry may build\), but got {number}\."):
            create_buffer({**DQN_ENTRY, "number": number})


def test_multi_type_entries_are_all_validated_before_any_is_built(monkeypatch):
    refuse_to_build(monkeypatch)
    with pytest.raises(ValueError, match=r"'capacity' must be an int >= 1, but got 0"):
        create_buffer({"multi_type_replaybuffer": True, "local": DQN_ENTRY, "global": {**DQN_ENTRY, "capacity": 0}})


def test_a_multi_type_config_without_entries_is_refused():
    with pytest.raises(ValueError, match=r"For 'create_buffer', a multi_type_replaybuffer config must hold at least "
                                         r"one named buffer entry beside 'multi_type_replaybuffer', but got none\."):
        create_buffer({"multi_type_replaybuffer": True})


TRANSITION_ENTRY = {"type": "TransitionReplayBuffer", "capacity": 64, "sample_size": 4, "num_envs": 2,
                    "data_shape": [(4,), (), (), (), ()],
                    "data_type": ["float32", "int32", "float32", "bool", "bool"]}


@pytest.mark.parametrize("entry, message", [
    ({**DQN_ENTRY, "names": ["head", "a", "r", "s2"]}, r"For 'ReplayBuffer', the column name 'head' is reserved"),
    ({**DQN_ENTRY, "names": ["", "a", "r", "s2"]},
     r"For 'ReplayBuffer', 'names' must be non-empty strings, but got ''"),
    ({**DQN_ENTRY, "names": [" s", "a", "r", "s2"]}, r"the column name ' s' must not start or end with whitespace"),
    ({**DQN_ENTRY, "data_shape": [(0,), (1,), (1,), (4,)]},
     r"the shape of column 'column_0' must be a tuple of ints >= 1"),
    ({**DQN_ENTRY, "type": "PriorityReplayBuffer", "alpha": 0.6, "names": ["sum_tree", "a", "r", "s2"]},
     r"For 'PriorityReplayBuffer', the column name 'sum_tree' is reserved"),
    ({**TRANSITION_ENTRY, "data_shape": [(4,), (), (), ()], "data_type": ["float32", "int32", "float32", "bool"]},
     r"For 'TransitionReplayBuffer', 'shapes' must list at least 5 columns"),
    ({**TRANSITION_ENTRY, "data_shape": [(4,), (), (2,), (), ()]}, r"the shape of column 'reward' must be \(\)"),
    ({**TRANSITION_ENTRY, "capacity": 63}, r"'capacity' \(63\) must be a multiple of 'num_envs' \(2\)"),
    ({**TRANSITION_ENTRY, "names": ["ranks", "action", "reward", "terminated", "truncated"]},
     r"the column name 'ranks' is reserved"),
])
def test_a_multi_type_entry_s_columns_are_checked_before_any_buffer_is_built_naming_the_entry(
        monkeypatch, entry, message):
    refuse_to_build(monkeypatch)  # the first entry, a ReplayBuffer, must not be built before the second's error
    with pytest.raises(ValueError, match=message) as raised:
        create_buffer({"multi_type_replaybuffer": True, "first": DQN_ENTRY, "second": entry})
    assert str(raised.value).endswith(" (in the entry 'second' of the multi_type_replaybuffer config).")


@pytest.mark.parametrize("base, key, value, error, message", [
    (DQN_ENTRY, "replace", "no", TypeError, r"'replace' must be a bool, but got str"),
    (DQN_ENTRY, "ordered", 1, TypeError, r"'ordered' must be a bool, but got int"),
    (DQN_ENTRY, "seed", -1, ValueError, r"'seed' must be an int >= 0, but got -1"),
    (DQN_ENTRY, "seed", 1.5, TypeError, r"'seed' must be an int, but got float"),
    (DQN_ENTRY, "seed", 2**40, ValueError, r"'seed' must be an int in \[0, 2\*\*31\)"),
    ({**DQN_ENTRY, "type": "ReservoirReplayBuffer"}, "seed0", -2, ValueError, r"'seed0' must be an int >= 0"),
    ({**DQN_ENTRY, "type": "ShardedReplayBuffer"}, "sampling", "all", ValueError,
     r"'sampling' must be 'local' or 'global'"),
    (TRANSITION_ENTRY, "n_step", 0, ValueError, r"'n_step' must be an int >= 1, but got 0"),
    (TRANSITION_ENTRY, "stack_size", "4", TypeError, r"'stack_size' must be an int, but got str"),
    (TRANSITION_ENTRY, "num_envs", True, TypeError, r"'num_envs' must be an int, but got bool"),
    (TRANSITION_ENTRY, "gamma", 1.5, ValueError, r"'gamma' must be a float in \[0, 1\], but got 1.5"),
    (TRANSITION_ENTRY, "seed", -1, ValueError, r"'seed' must be an int >= 0"),
])
def test_an_entry_s_options_are_checked_before_its_buffer_is_built(base, key, value, error, message):
    buffer_arguments(base)
    with pytest.raises(error, match=r"^For 'create_buffer', " + message):
        buffer_arguments({**base, key: value})  # a pure check: a trainer builds networks and graphs before its buffer


class _UserBuffer(nn.Cell):
    """A user's buffer class whose options mean something else than the library's."""

    def __init__(self, sample_size, capacity, shapes, types, replace="ring", seed="auto"):
        super().__init__()
        self.options = (replace, seed)


def test_a_user_class_keeps_its_own_options_and_seeds():
    built = create_buffer({"number": 2, "type": _UserBuffer, "capacity": 4, "data_shape": [(1,)],
                           "data_type": ["float32"], "replace": "slots", "seed": 5})
    assert [buffer.options for buffer in built] == [("slots", 5), ("slots", 5)]


def without(key):
    return {k: v for k, v in DQN_ENTRY.items() if k != key}


@pytest.mark.parametrize("entry, error, message", [
    (without("capacity"), ValueError, r"the key 'capacity' is missing"),
    (without("type"), ValueError, r"the key 'type' is missing"),
    ({**DQN_ENTRY, "capacity": 0}, ValueError, r"'capacity' must be an int >= 1, but got 0"),
    ({**DQN_ENTRY, "sample_size": -3}, ValueError, r"'sample_size' must be an int >= 1"),
    ({**DQN_ENTRY, "capacity": 10, "replace": False}, ValueError,
     r"'sample_size' \(64\) must not exceed 'capacity' \(10\)"),
    ({**DQN_ENTRY, "data_type": [ms.float32, ms.int32]}, ValueError, r"got 4 shapes and 2 types"),
    ({**DQN_ENTRY, "data_type": ["float32", "int32", "foat32", "float32"]}, ValueError,
     r"unknown data_type\[2\] foat32; did you mean float32\?"),
    ({**DQN_ENTRY, "capcity": 5}, ValueError, r"unknown key 'capcity'; did you mean capacity\?"),
    ({**DQN_ENTRY, "type": "ReplayBufer"}, ValueError, r"did you mean ReplayBuffer\?"),
    ({**DQN_ENTRY, "number": 0}, ValueError, r"'number' must be an int >= 1"),
    ([("capacity", 5)], TypeError, r"'spec' must be a dict"),
    # Wrong types name the entry's key, as wrong values do, not the constructor's argument.
    ({**DQN_ENTRY, "data_shape": 4}, TypeError,
     r"^For 'create_buffer', 'data_shape' must be a list or tuple with one entry per column, but got int\.$"),
    ({**DQN_ENTRY, "data_type": "float32"}, TypeError,
     r"^For 'create_buffer', 'data_type' must be a list or tuple with one entry per column, but got str\.$"),
    ({**DQN_ENTRY, "names": "sars"}, TypeError,
     r"^For 'create_buffer', 'names' must be a list or tuple with one entry per column, but got str\.$"),
    ({**DQN_ENTRY, "data_shape": [(4,), "1", (1,), (4,)]}, TypeError,
     r"^For 'create_buffer', shapes\[1\] must be a tuple of non-negative ints, but got str\.$"),
    ({**DQN_ENTRY, "names": ["state", "action", "reward", 3]}, TypeError,
     r"^For 'create_buffer', the name of a spec must be a str, but got int\.$"),
])
def test_bad_specs_name_the_key(monkeypatch, entry, error, message):
    refuse_to_build(monkeypatch)
    with pytest.raises(error, match=message):
        create_buffer(entry)


DQN_SOURCE = """
import mindspore as ms
from mindspore_rl_buffer import ReplayBuffer

algorithm_config = {
    'replay_buffer': {'number': 1, 'type': ReplayBuffer, 'capacity': 100000,
                      'data_shape': [(4,), (1,), (1,), (4,)],
                      'data_type': [ms.float32, ms.int32, ms.float32, ms.float32],
                      'sample_size': 64},
}
"""


def test_the_core_issue_config_and_its_misspelt_dtype(tmp_path):
    good, bad = tmp_path / "dqn.py", tmp_path / "dqn_typo.py"
    good.write_text(DQN_SOURCE)
    assert [s.shape for s in create_buffer(load_config(good)["replay_buffer"]).specs] == [(4,), (1,), (1,), (4,)]
    bad.write_text(DQN_SOURCE.replace("ms.float32, ms.float32]", "ms.foat32, ms.float32]"))
    with pytest.raises(ValueError, match=r"unknown data_type\[2\] foat32; did you mean float32\?"):
        load_config(bad)


def test_load_config_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config file"):
        load_config(tmp_path / "missing.py")
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="must define a dict 'algorithm_config'"):
        load_config(tmp_path / "empty.py")
    (tmp_path / "algo.toml").write_text("")
    with pytest.raises(ValueError, match=r"must end in \.py, \.yaml, \.yml or \.json"):
        load_config(tmp_path / "algo.toml")


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_a_config_that_is_not_utf8_names_the_file(tmp_path, suffix):
    path = tmp_path / f"algo{suffix}"
    path.write_bytes(b"replay_buffer: {number: 1}\n\xff\xfe bad")
    with pytest.raises(ValueError, match=rf"^For 'load_config', the config file '{re.escape(str(path))}' must be "
                                         rf"UTF-8 text, but got the byte 0xff at offset 27, which is not UTF-8\.$"):
        load_config(path)


def test_a_yaml_key_given_twice_is_refused_naming_key_file_and_lines(tmp_path, monkeypatch):
    refuse_to_build(monkeypatch)
    flow = tmp_path / "flow.yaml"
    flow.write_text("replay_buffer: {number: 1, type: ReplayBuffer, capacity: 100, capacity: 5, data_shape: [[4]], "
                    "data_type: [float32], sample_size: 2}\n")
    block = tmp_path / "block.yaml"
    block.write_text("replay_buffer:\n  capacity: 100\nlearner: {gamma: 0.99}\nreplay_buffer:\n  capacity: 5\n")
    for path, key, first, again in ((flow, "capacity", "line 1, column 48", "line 1, column 63"),
                                    (block, "replay_buffer", "line 1, column 1", "line 4, column 1")):
        where = re.escape(str(path))
        with pytest.raises(ValueError, match=rf"^For 'load_config', the key '{key}' must be given once in a mapping, "
                                             rf"but '{where}' gives it at {first} and again at {again}\.$"):
            load_config(path)
    # Keys that compare equal in Python are one key, however the file spells them.
    (tmp_path / "spelt.yaml").write_text("seeds: {1: a, 0x1: b}\n")
    with pytest.raises(ValueError, match=r"the key '0x1' must be given once"):
        load_config(tmp_path / "spelt.yaml")


def test_a_json_key_given_twice_and_malformed_files_are_refused_naming_the_file(tmp_path, monkeypatch):
    refuse_to_build(monkeypatch)
    twice = tmp_path / "twice.json"
    twice.write_text('{"replay_buffer": {"capacity": 100, "capacity": 5}}')
    with pytest.raises(ValueError, match=rf"^For 'load_config', the key 'capacity' must be given once in an object, "
                                         rf"but '{re.escape(str(twice))}' gives it twice in one object\.$"):
        load_config(twice)
    for name, text, what in (("cut.yaml", "replay_buffer:\n  data_shape: [[4], [1]\n", "YAML"),
                             ("cut.json", '{"replay_buffer": {"capacity": 1', "JSON")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ValueError, match=rf"(?s)^For 'load_config', '{re.escape(str(path))}' must be valid {what}, "
                                             rf"but: .*line \d+"):
            load_config(path)


def test_yaml_configs_read_as_safe_load_reads_them(tmp_path):
    import yaml

    shipped = ROOT / "configs" / "dqn.yaml"
    assert load_config(shipped) == yaml.safe_load(shipped.read_text(encoding="utf-8"))
    # A merge key's own keys override its base's; the same key in two mappings is no repeat.
    path = tmp_path / "merge.yaml"
    path.write_text("base: &base {capacity: 100, sample_size: 2, inner: &inner {a: 1}}\n"
                    "replay_buffer: {<<: *base, capacity: 5, inner: {<<: *inner, a: 2}}\n"
                    "other: {capacity: 7, tags: [x, x]}\n")
    config = load_config(path)
    assert config == yaml.safe_load(path.read_text(encoding="utf-8"))
    assert config["replay_buffer"] == {"capacity": 5, "sample_size": 2, "inner": {"a": 2}}


def test_a_python_dict_key_given_twice_is_refused_before_the_file_runs(tmp_path):
    ran = tmp_path / "ran"
    path = tmp_path / "dqn_twice.py"
    path.write_text(f"open({str(ran)!r}, 'w').close()\n"
                    + DQN_SOURCE.replace("'capacity': 100000,", "'capacity': 100000, 'capacity': 5,"))
    with pytest.raises(ValueError, match=rf"^For 'load_config', the key 'capacity' must be given once in a dict, "
                                         rf"but '{re.escape(str(path))}' gives it at line 7, column 58 and again "
                                         rf"at line 7, column 78\.$"):
        load_config(path)
    assert not ran.exists()


@pytest.mark.parametrize("name", ["dqn.py", "dqn_nstep.py", "dqn_data_parallel.py"])
def test_the_shipped_python_configs_load(name):
    assert set(load_config(ROOT / "configs" / name)) >= {"replay_buffer", "learner", "trainer"}


@pytest.mark.parametrize(("content", "error"), [
    (DQN_SOURCE.replace("'sample_size': 64}", "'sample_size': 64"), "SyntaxError"),
    (DQN_SOURCE.encode() + b"\x00\x00", "(SyntaxError|ValueError)"),
    (bytes(range(256)) * 4, "SyntaxError")], ids=["syntax_error", "nul_bytes", "binary"])
def test_a_python_config_that_does_not_parse_is_refused_naming_the_file(tmp_path, content, error):
    path = tmp_path / "dqn.py"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError, match=rf"^For 'load_config', '{re.escape(str(path))}' must be a valid Python file, "
                                         rf"but parsing it raised {error}: \S"):
        load_config(path)


@pytest.mark.parametrize(("prefix", "error"), [
    ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
    ("import mindspore_rl_buffer_no_such_module\n", "ModuleNotFoundError: No module named "
                                                    "'mindspore_rl_buffer_no_such_module'"),
    ("import math\nmath.no_such_function()\n", "AttributeError: .*no_such_function")],
    ids=["raise", "missing_module", "other_attribute"])
def test_a_python_config_that_raises_when_run_is_refused_naming_the_file_and_error(tmp_path, prefix, error):
    path = tmp_path / "dqn.py"
    path.write_text(prefix + DQN_SOURCE)
    with pytest.raises(ValueError, match=rf"^For 'load_config', '{re.escape(str(path))}' must run without error, "
                                         rf"but running it raised {error}"):
        load_config(path)


def test_the_train_command_reports_a_config_that_fails_to_load(tmp_path, capsys):
    from mindspore_rl_buffer.apps.dqn import cli

    path = tmp_path / "dqn.py"
    path.write_text("import mindspore_rl_buffer_no_such_module\n")
    assert cli.main(["train", "--config", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: For 'load_config', '{path}' must run without error, but running it raised "
                          f"ModuleNotFoundError")
    assert "Traceback" not in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize(("text", "spelling"), [("1e-3", "1.0e-3"), ("1e5", "100000 (or 1.0e+5 for a float)"),
                                                ("1.0e5", "100000 (or 1.0e+5 for a float)"),
                                                ("-2.5e3", "-2500 (or -2.5e+3 for a float)"), ("+1e+20", "+1.0e+20"),
                                                ("1E-3", "1.0e-3")])
def test_a_number_yaml_reads_as_text_is_refused_naming_key_line_and_spelling(tmp_path, monkeypatch, text, spelling):
    import yaml

    refuse_to_build(monkeypatch)
    path = tmp_path / "numbers.yaml"
    path.write_text(f"learner:\n  gamma: 0.99\n  learning_rate: {text}\n")
    assert yaml.safe_load(path.read_text())["learner"]["learning_rate"] == text  # what PyYAML makes of it
    with pytest.raises(ValueError, match=rf"^For 'load_config', the key 'learning_rate' in '{re.escape(str(path))}' "
                                         rf"\(line 3\) must be a number as YAML 1\.1 spells one, but got "
                                         rf"{re.escape(text)}, which it reads as text: write {re.escape(spelling)}, "
                                         rf"or quote it if text is meant\.$"):
        load_config(path)
    (tmp_path / "spelt.yaml").write_text(f"learner:\n  learning_rate: {spelling.split()[0]}\n")
    assert load_config(tmp_path / "spelt.yaml")["learner"]["learning_rate"] == float(text)


def test_create_buffer_on_a_yaml_file_with_a_capacity_of_1e5_gets_the_spelling(tmp_path, monkeypatch):
    refuse_to_build(monkeypatch)
    path = tmp_path / "buffer.yaml"
    entry = ("  number: 1\n  type: ReplayBuffer\n  capacity: 1e5\n  data_shape: [[4], [1]]\n"
             "  data_type: [float32, int32]\n  sample_size: 64\n")
    path.write_text("replay_buffer:\n" + entry)
    with pytest.raises(ValueError, match=r"the key 'capacity' in .* \(line 4\) must be a number as YAML 1\.1 spells "
                                         r"one, but got 1e5, which it reads as text: write 100000 \(or 1\.0e\+5"):
        create_buffer(load_config(path)["replay_buffer"])
    path.write_text("replay_buffer:\n" + entry.replace("1e5", "100000"))
    assert buffer_arguments(load_config(path)["replay_buffer"])[2]["capacity"] == 100000


def test_text_that_spells_a_number_stays_text_when_quoted_and_list_items_are_checked(tmp_path, monkeypatch):
    refuse_to_build(monkeypatch)
    path = tmp_path / "quoted.yaml"
    path.write_text("replay_buffer: {names: ['1e5', \"2e3\", !!str 4e2], tag: !!str 7}\n")
    assert load_config(path)["replay_buffer"] == {"names": ["1e5", "2e3", "4e2"], "tag": "7"}
    path.write_text("policy:\n  hidden_sizes: [64,\n    1e2]\n")
    with pytest.raises(ValueError, match=r"item 1 of a list in .* \(line 3\) must be a number .* but got 1e2, which "
                                         r"it reads as text: write 100 \(or 1\.0e\+2 for a float\)"):
        load_config(path)


@pytest.mark.parametrize(("text", "read"), [("010", "the octal number 8"), ("-0_10", "the octal number -8"),
                                            ("09", "text"), ("1:30", "the base-60 number 90"),
                                            ("1:30.5", "the base-60 number 90.5"),
                                            ("12:30:00", "the base-60 number 45000")])
def test_a_number_yaml_reads_otherwise_than_written_is_refused_naming_key_line_and_reading(tmp_path, monkeypatch,
                                                                                             text, read):
    import yaml

    refuse_to_build(monkeypatch)
    path = tmp_path / "numbers.yaml"
    path.write_text(f"trainer:\n  seed: 1\n  max_steps: {text}\n")
    assert yaml.safe_load(path.read_text())["trainer"]["max_steps"] != int(text.replace(":", "").split(".")[0])
    with pytest.raises(ValueError, match=rf"^For 'load_config', the key 'max_steps' in '{re.escape(str(path))}' "
                                         rf"\(line 3\) must be a number that YAML 1\.1 reads as written, but got "
                                         rf"{re.escape(text)}, which it reads as {re.escape(read)}: write the number "
                                         rf"without a leading zero or colon, or quote it if text is meant\.$"):
        load_config(path)
    path.write_text(f"trainer:\n  seeds: [1, {text}]\n")
    with pytest.raises(ValueError, match=r"item 1 of a list in .* \(line 2\) must be a number that YAML 1\.1 reads"):
        load_config(path)
    path.write_text(f"trainer:\n  tag: '{text}'\n  other: !!str {text}\n  zero: 0\n  ten: 10\n  half: 0.5\n")
    assert load_config(path)["trainer"] == {"tag": text, "other": text, "zero": 0, "ten": 10, "half": 0.5}


def test_a_python_config_that_exits_is_refused_and_the_caller_goes_on(tmp_path):
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(ValueError, match=r"'.*exits.py' must run without error, but running it raised SystemExit: 3"):
        load_config(tmp_path / "exits.py")  # SystemExit ended the caller's program


@pytest.mark.parametrize("name, text", [("long.json", '{"n": %s}'), ("long.yaml", "n: %s\n")])
def test_an_int_past_python_s_digit_limit_is_refused_naming_the_file(tmp_path, name, text):
    (tmp_path / name).write_text(text % ("9" * 5000))
    with pytest.raises(ValueError, match=rf"^For 'load_config', '.*{name}' .*Exceeds the limit \(4300 digits\)"):
        load_config(tmp_path / name)


def test_a_folder_given_as_the_config_file_is_named_a_folder(tmp_path):
    (tmp_path / "dqn.yaml").mkdir()
    with pytest.raises(ValueError, match=r"the config file '.*dqn.yaml' is a folder, not a file\."):
        load_config(tmp_path / "dqn.yaml")


def test_an_error_in_a_multi_type_config_names_its_entry():
    entry = {"number": 1, "type": "ReplayBuffer", "capacity": 4, "data_shape": [[2]], "data_type": ["float32"]}
    with pytest.raises(TypeError, match=r"'spec' must be a dict, but got list \(in the entry 'global' of the "
                                        r"multi_type_replaybuffer config\)"):
        create_buffer({"multi_type_replaybuffer": True, "local": entry, "global": [entry]})
    with pytest.raises(ValueError, match=r"'capacity' must be an int >= 1, but got 0 \(in the entry 'local'"):
        create_buffer({"multi_type_replaybuffer": True, "local": {**entry, "capacity": 0}, "global": entry})


HOSTILE_FILES = {  # (name, content): what load_config must refuse naming the file, and how
    "deep.json": ("[" * 100_000 + "]" * 100_000, "nests too deep to read"),
    "deep.yaml": ("a: " + "[" * 5_000 + "]" * 5_000 + "\n", "nests too deep to read"),
    "deep.py": ("algorithm_config = {'x': " + "+".join(["1"] * 200_000) + "}\n", "nests too deep to read"),
    "large.yaml": ("# a comment line of a config that grew too large\n" * 30_000, "must hold at most 1,048,576 bytes"),
    "merged_twice.yaml": ("a: &a {capacity: 100}\nb: &b {capacity: 7}\nreplay_buffer:\n  <<: *a\n  <<: *b\n",
                          "the key '<<' must be given once in a mapping"),
}


# deep.yaml nests past the recursion limit: seconds of parsing, so it runs in the slow tier.
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "deep.yaml" else name
                                  for name in HOSTILE_FILES])
def test_hostile_config_files_are_refused_naming_the_file(tmp_path, name):
    # Each raised from deep inside Python (RecursionError) or was taken: a second merge won silently,
    # and a 15 MB YAML file took 35 s and 1.5 GB.
    content, message = HOSTILE_FILES[name]
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=f"(?=.*'{re.escape(str(path))}').*{re.escape(message)}"):
        load_config(path)


def test_a_config_path_that_is_not_a_regular_file_is_refused_saying_what_it_is(tmp_path):
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    __import__("os").mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "a.py").write_text("algorithm_config = {}\n")
    cases = {"loop.yaml": "cannot be examined: Too many levels of symbolic links",
             "fifo.yaml": "must be a regular file, but it is a device, a FIFO or a socket",
             "a.py/b.yaml": "cannot be examined: Not a directory",
             "x" * 300 + ".yaml": "cannot be examined: File name too long"}
    for name, message in cases.items():
        with pytest.raises(ValueError, match=f"For 'load_config', the config file '.*' {message}"):
            load_config(tmp_path / name)


def test_a_huge_int_or_a_misspelt_dtype_in_a_latin_1_file_is_named_by_its_key(tmp_path):
    huge = dict(DQN_ENTRY, capacity=10**20_000)
    with pytest.raises(ValueError, match=r"'capacity' must be an int <= 1073741824 .* but got <an int of 66,439 bits>"):
        create_buffer(huge)  # Python refuses to write the int: the message had failed in turn
    with pytest.raises(ValueError, match=r"the shape of column 'column_0' must be dims of at most 1099511627776"):
        create_buffer(dict(DQN_ENTRY, data_shape=[(10**20_000,)], data_type=[ms.float32]))
    latin = tmp_path / "latin.py"
    latin.write_bytes("# -*- coding: latin-1 -*-\n# r\xe9glages\nimport mindspore as ms\nalgorithm_config = "
                      "{'replay_buffer': {'data_type': [ms.foat32]}}\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"unknown data_type\[0\] foat32; did you mean float32\?"):
        load_config(latin)  # the file had been read again as UTF-8 to find the key


@pytest.mark.parametrize("value", ["yes", 1, False])
def test_multi_type_replaybuffer_must_be_true(value):
    spec = {"multi_type_replaybuffer": value, "a": dict(DQN_ENTRY)}
    with pytest.raises(ValueError, match=r"'multi_type_replaybuffer' must be True .* but got"):
        create_buffer(spec)


def test_an_unknown_type_name_is_quoted_cut_short():
    entry = {"type": "A" * 100_000, "capacity": 10, "data_shape": [[4]], "data_type": ["float32"]}
    with pytest.raises(ValueError, match=r"'type' must be a buffer class .*, but got 'A{20,}\.\.\.A+'$") as refused:
        create_buffer(entry)
    assert len(str(refused.value)) < 400


@pytest.mark.parametrize("cls, got", [(42, "int"), ("ReplayBuffer", "str"), (dict, "dict"), (lambda: None, "function")])
def test_register_buffer_type_refuses_what_is_no_cell_class(cls, got, monkeypatch):
    from mindspore_rl_buffer import config

    monkeypatch.setattr(config, "BUFFER_TYPES", dict(config.BUFFER_TYPES))
    before = dict(config.BUFFER_TYPES)
    with pytest.raises(TypeError, match=rf"^For 'register_buffer_type', 'cls' must be a buffer class \(an nn.Cell\), "
                                        rf"but got {got}\.$"):
        config.register_buffer_type(cls)
    assert dict(config.BUFFER_TYPES) == before


def test_register_buffer_type_keeps_the_library_names_and_takes_a_class_defined_anew(monkeypatch):
    from mindspore_rl_buffer import config

    monkeypatch.setattr(config, "BUFFER_TYPES", dict(config.BUFFER_TYPES))
    shadow = type("ReplayBuffer", (nn.Cell,), {})  # a user's class of the library's name: configs built it silently
    with pytest.raises(ValueError, match=r"^For 'register_buffer_type', the name ReplayBuffer is the library's "
                                         r"mindspore_rl_buffer\.replay_buffer\.ReplayBuffer, but got the class "):
        config.register_buffer_type(shadow)
    assert config.BUFFER_TYPES["ReplayBuffer"] is ReplayBuffer
    config.register_buffer_type(ReplayBuffer)  # the library's own, again: nothing changes
    first = config.register_buffer_type(type("EpisodeBuffer", (ReplayBuffer,), {}))
    second = config.register_buffer_type(type("EpisodeBuffer", (ReplayBuffer,), {}))  # a notebook's cell run again
    assert first is not second and config.BUFFER_TYPES["EpisodeBuffer"] is second
    built = config.create_buffer({"type": "EpisodeBuffer", "capacity": 4, "data_shape": [[2]],
                                  "data_type": ["float32"]})
    assert type(built) is second
