"""The trainer's config checks: the buffer entry read through the library's loader in every form, every
section and setting checked up front, and the YAML config equivalent to the Python one."""
from __future__ import annotations

import copy
import json
import re

import mindspore as ms
import numpy as np
import pytest

from mindspore_rl_buffer import ReplayBuffer, load_config
from mindspore_rl_buffer._errors import shown
from mindspore_rl_buffer.apps.dqn import build_agent, check_config, train
from mindspore_rl_buffer.apps.dqn.numpy_buffer import NumpyReplayBuffer
from mindspore_rl_buffer.config import buffer_arguments
from tests.apps.dqn.helpers import CONFIG, ROOT, small_config

YAML = ROOT / "configs" / "dqn.yaml"

COLUMN_NAMES = ["float32", "int32", "float32", "float32", "float32"]


def _nested(config: dict) -> dict:
    """``config`` with its buffer entry in the nested form: ``type`` by name, dtypes by name."""
    flat = config["replay_buffer"]
    params = {key: value for key, value in flat.items() if key not in ("number", "type")}
    params["data_type"] = list(COLUMN_NAMES)
    config["replay_buffer"] = {"number": 1, "type": "ReplayBuffer", "params": params}
    return config


def _type_by_name(config: dict) -> dict:
    """``config`` with its flat buffer entry naming the type as a string."""
    config["replay_buffer"]["type"] = "ReplayBuffer"
    return config


@pytest.mark.parametrize(("form", "buffer_kind"), [(_nested, "device"), (_nested, "numpy"),
                                                   (_type_by_name, "device")],
                         ids=["nested_params_device", "nested_params_numpy", "type_by_name_device"])
@pytest.mark.slow
def test_other_forms_of_the_buffer_entry_build_the_agent_and_train(form, buffer_kind):
    config = form(small_config(max_steps=300))
    before = copy.deepcopy(config)
    agent = build_agent(config, buffer_kind=buffer_kind, seed=0)
    expected_type = ReplayBuffer if buffer_kind == "device" else NumpyReplayBuffer
    assert type(agent.buffer) is expected_type
    assert (agent.buffer.capacity, agent.buffer.sample_size) == (256, 64)
    result = train(config, buffer_kind=buffer_kind, seed=0, progress=False)
    assert result.env_steps == 300 and result.learn_steps == 4 * len(range(100, 301, 4))
    assert np.isfinite([loss for _, loss in result.loss_history]).all() and result.loss_history
    assert config == before, "the config was changed"


def test_check_config_returns_what_the_trainer_takes_from_the_entry():
    entry = check_config(_nested(small_config()))
    assert (entry.buffer_type, entry.capacity, entry.sample_size) == (ReplayBuffer, 256, 64)


def test_a_section_that_is_not_a_dict_is_named():
    config = small_config()
    config["trainer"] = [("max_steps", 10)]
    with pytest.raises(TypeError, match="For 'train', the 'trainer' entry must be a dict, but got list"):
        check_config(config)


def test_a_buffer_entry_the_library_refuses_is_refused_with_the_library_error():
    config = _nested(small_config())
    config["replay_buffer"]["params"]["capcity"] = config["replay_buffer"]["params"].pop("capacity")
    with pytest.raises(ValueError, match=r"unknown key 'capcity'; did you mean capacity\?"):
        check_config(config)


def test_shapes_and_types_of_different_lengths_get_the_library_error():
    config = small_config()
    config["replay_buffer"]["data_shape"] = config["replay_buffer"]["data_shape"][:4]
    with pytest.raises(ValueError, match="one entry per column, but got 4 shapes and 5 types"):
        check_config(config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"number": 2}, r"the replay buffer's 'number' must be 1, but got 2"),
        ({"type": "PriorityReplayBuffer", "alpha": 0.6},
         r"the replay buffer's 'type' must be a buffer whose sample\(\) returns the columns"),
        ({"data_shape": [(4,), (1,), (1,), (4,)], "data_type": COLUMN_NAMES[:4]},
         r"the replay buffer's 'data_shape' must be \[\(4,\), \(1,\), \(1,\), \(4,\), \(1,\)\]"),
        ({"data_type": ["float32", "int64", "float32", "float32", "float32"]},
         r"the replay buffer's 'data_type' must be \['float32', 'int32', .*but got \['float32', 'int64'"),
    ],
    ids=["number", "priority", "data_shape", "data_type"],
)
def test_buffer_entries_the_trainer_cannot_run_are_refused_in_nested_form(change, message):
    config = _nested(small_config())
    entry = config["replay_buffer"]
    for key, value in change.items():
        (entry if key in ("number", "type") else entry["params"])[key] = value
    with pytest.raises(ValueError, match="For 'train', " + message):
        check_config(config)


def test_the_data_parallel_config_passes_the_checks():
    from mindspore_rl_buffer.configs.dqn_data_parallel import algorithm_config

    entry = check_config(algorithm_config)
    assert entry.buffer_type.__name__ == "ShardedReplayBuffer" and entry.capacity == 100000


def _normalized(config: dict) -> dict:
    """A config with its buffer entry as the library's loader reads it and every sequence a list."""
    buffer_type, number, arguments = buffer_arguments(config["replay_buffer"])
    normal = json.loads(json.dumps({key: value for key, value in config.items() if key != "replay_buffer"},
                                   default=list))
    normal["replay_buffer"] = {"type": buffer_type, "number": number,
                               **{key: [list(x) for x in value] if key == "data_shape" else value
                                  for key, value in arguments.items()}}
    return normal


def test_the_yaml_config_is_the_python_config():
    assert _normalized(load_config(YAML)) == _normalized(load_config(CONFIG))


@pytest.mark.slow
def test_the_yaml_and_python_configs_train_the_same_agent(tmp_path):
    """The same shrink applied to both files; the same seed; the checkpoints must be identical."""
    weights = []
    for path in (CONFIG, YAML):
        config = load_config(path)
        config["replay_buffer"]["capacity"] = 256
        config["environment"]["num_envs"] = 4
        config["trainer"].update(learning_starts=100, eval_episodes=2, max_steps=300)
        result = train(config, tmp_path / path.suffix.lstrip("."), seed=0, progress=False)
        assert result.learn_steps > 0
        weights.append(ms.load_checkpoint(str(result.checkpoint_path)))
    assert weights[0].keys() == weights[1].keys() and len(weights[0]) == 6
    for name in weights[0]:
        np.testing.assert_array_equal(weights[0][name].asnumpy(), weights[1][name].asnumpy())


def test_every_missing_section_is_named_at_once():
    with pytest.raises(ValueError, match=r"'learner', 'policy', 'environment', 'trainer' are missing "
                                         r"\(got \['replay_buffer'\]\)\.$"):
        check_config({"replay_buffer": small_config()["replay_buffer"]})


def test_a_yaml_file_with_the_python_layout_is_told_its_top_level():
    with pytest.raises(ValueError, match="A YAML or JSON config's top level is the algorithm_config itself: remove "
                                         "the 'algorithm_config:' line"):
        check_config({"algorithm_config": small_config()})


def test_every_missing_setting_is_named_before_anything_is_built():
    config = small_config()
    del config["trainer"]["max_steps"], config["learner"]["gamma"]
    with pytest.raises(ValueError, match=r"the config must set 'learner\.gamma', 'trainer\.max_steps' \(see "):
        check_config(config)
    with pytest.raises(ValueError, match=r"'learner\.gamma'"):
        train(config, progress=False)


@pytest.mark.parametrize(("section", "key", "value", "kind"), [
    ("trainer", "max_steps", 0, r"an int in \[1, 1000000000\] \(environment steps\)"),
    ("trainer", "max_steps", -5, r"an int in \[1, 1000000000\] \(environment steps\)"),
    ("trainer", "eval_interval", 2.5, r"an int in \[1, 2\*\*31\)"),
    ("trainer", "learning_starts", True, r"an int in \[0, 2\*\*31\)"),
    ("learner", "learning_rate", "fast", "a finite number > 0"), ("learner", "double_dqn", 1, "a bool")])
def test_a_setting_of_the_wrong_kind_is_named(section, key, value, kind):
    config = small_config()
    config[section][key] = value
    with pytest.raises(ValueError, match=rf"the '{section}.{key}' must be {kind}, but got {value!r}\."):
        check_config(config)


@pytest.mark.parametrize(("section", "key", "value", "expected"), [
    ("learner", "gamma", float("nan"), r"a number in \[0, 1\]"), ("learner", "gamma", 5.0, r"a number in \[0, 1\]"),
    ("learner", "gamma", -0.1, r"a number in \[0, 1\]"), ("policy", "epsilon_start", 7.0, r"a number in \[0, 1\]"),
    ("policy", "epsilon_end", float("nan"), r"a number in \[0, 1\]"),
    ("learner", "learning_rate", -1.0, "a finite number > 0"), ("learner", "learning_rate", 0, "a finite number > 0"),
    ("learner", "learning_rate", float("inf"), "a finite number > 0"),
    ("learner", "learning_rate", 10**400, "a finite number > 0"),
    ("learner", "huber_delta", 0.0, "a finite number > 0"),
    ("trainer", "solve_threshold", float("nan"), "a finite number"),
    ("policy", "hidden_sizes", [-3], r"a non-empty list of ints in \[1, 16384\]"),
    ("policy", "hidden_sizes", [], r"a non-empty list of ints in \[1, 16384\]"),
    ("policy", "hidden_sizes", (64, 2.5), r"a non-empty list of ints in \[1, 16384\]"),
    ("policy", "hidden_sizes", 128, r"a non-empty list of ints in \[1, 16384\]"),
    ("environment", "num_envs", 100_000_000, r"an int in \[1, 100000\]"),
    ("environment", "max_episode_steps", 2**31, r"an int in \[1, 2\*\*31\)"),
    ("trainer", "eval_episodes", 1e9, r"an int in \[1, 100000\]"),
    ("trainer", "eval_episodes", 100_001, r"an int in \[1, 100000\]"),
    ("trainer", "seed", 2**31, r"an int in \[0, 2\*\*31\)"),
    ("trainer", "max_steps", 10**9 + 1, r"an int in \[1, 1000000000\]"),
    ("trainer", "max_steps", 10**14, r"an int in \[1, 1000000000\]")])
def test_a_setting_out_of_its_range_is_refused_before_anything_is_built(section, key, value, expected):
    config = small_config()
    config[section][key] = value
    message = rf"For 'train', the '{section}\.{key}' must be {expected}.*, but got {re.escape(shown(value))}\."
    with pytest.raises(ValueError, match=message):
        check_config(config)
    with pytest.raises(ValueError, match=message):
        build_agent(config)


@pytest.mark.parametrize(("section", "key", "value"), [
    ("learner", "gamma", 0), ("learner", "gamma", 1), ("policy", "epsilon_end", 0.0), ("policy", "hidden_sizes", [1]),
    ("policy", "hidden_sizes", (16384, 3)), ("environment", "num_envs", 100_000),
    ("trainer", "eval_episodes", 100_000), ("trainer", "max_steps", 10**9)])
def test_the_ends_of_a_range_are_accepted(section, key, value):
    config = small_config()
    config[section][key] = value
    check_config(config)


def test_a_sample_size_above_the_capacity_is_refused_before_anything_is_built():
    config = small_config()
    config["replay_buffer"]["sample_size"] = 257
    message = r"For 'train', the replay buffer's 'sample_size' must be at most its 'capacity' \(256\), but got 257\."
    with pytest.raises(ValueError, match=message):
        check_config(config)
    with pytest.raises(ValueError, match=message):
        build_agent(config)
    config["replay_buffer"]["sample_size"] = 256
    assert check_config(config).sample_size == 256


@pytest.mark.parametrize("budget", [10**9 + 1, 10**14])
def test_a_budget_passed_to_train_has_the_bound_of_the_config_and_the_flag(monkeypatch, budget):
    from mindspore_rl_buffer.apps.dqn import trainer

    def must_not_run(*args, **kwargs):
        raise AssertionError("built before the budget was checked")

    monkeypatch.setattr(trainer, "build_agent", must_not_run)
    with pytest.raises(ValueError, match=rf"the 'max_steps' must be an int in \[1, 1000000000\] \(an "
                                         rf"environment-step budget\), but got {budget}\."):
        train(small_config(), max_steps=budget, progress=False)


@pytest.mark.parametrize(("where", "value", "spelling"), [
    ("learner.learning_rate", "1e-3", "1.0e-3"), ("trainer.max_steps", "1e5", "100000 (or 1.0e+5 for a float)"),
    ("policy.hidden_sizes", [128, "1e2"], "100 (or 1.0e+2 for a float)"),
    ("replay_buffer.capacity", "1e5", "100000 (or 1.0e+5 for a float)"),
    ("replay_buffer.params.capacity", "1e5", "100000 (or 1.0e+5 for a float)")])
def test_text_that_spells_a_number_is_refused_naming_the_key_and_how_to_write_it(where, value, spelling):
    """As ``yaml.safe_load`` reads a plain ``1e-3`` (load_config refuses such a file itself)."""
    config = _nested(small_config()) if ".params." in where else small_config()
    *sections, key = where.split(".")
    parent = config
    for section in sections:
        parent = parent[section]
    parent[key] = value
    text = value[1] if isinstance(value, list) else value
    name = f"{where}[1]" if isinstance(value, list) else where
    with pytest.raises(ValueError, match=rf"^For 'train', the '{re.escape(name)}' must be a number, but got the text "
                                         rf"'{text}': YAML 1\.1 \(PyYAML\) reads {text} as text, not a number; write "
                                         rf"{re.escape(spelling)}\.$"):
        check_config(config)


def test_train_with_a_yaml_file_of_1e_3_says_how_to_write_it(tmp_path, capsys):
    from mindspore_rl_buffer.apps.dqn import cli

    path = tmp_path / "lr.yaml"
    path.write_text(YAML.read_text().replace("learning_rate: 0.002", "learning_rate: 2e-3"))
    assert "learning_rate: 2e-3" in path.read_text()
    assert cli.main(["train", "--config", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: For 'load_config', the key 'learning_rate' in '{path}' (line ")
    assert "but got 2e-3, which it reads as text: write 2.0e-3" in error
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("section", "key", "hint"), [
    ("policy", "hidden_size", "; did you mean hidden_sizes?"), ("learner", "double_dq", "; did you mean double_dqn?"),
    ("trainer", "seeed", "; did you mean seed?"), ("trainer", "eval_start", "; did you mean eval_starts?"),
    ("environment", "nmae", "; did you mean name?"), ("trainer", "gpu", ".")])
def test_an_unknown_key_in_a_section_is_named_not_ignored(section, key, hint):
    config = small_config()
    config[section][key] = 1
    with pytest.raises(ValueError, match=rf"the '{section}' entry takes .*, but got the unknown key '{key}'"
                                         rf"{re.escape(hint)}$"):
        check_config(config)
    with pytest.raises(ValueError, match=f"unknown key '{key}'"):
        train(config, progress=False)


def test_an_unknown_entry_at_the_top_level_is_named():
    config = small_config()
    config["learnerr"] = {"gamma": 0.5}
    with pytest.raises(ValueError, match=r"but got the unknown entry 'learnerr'; did you mean learner\?$"):
        check_config(config)


@pytest.mark.parametrize(("section", "key", "value"), [
    ("trainer", "learn_steps_per_collect", 2**32 + 1), ("learner", "target_sync_period", 2**63),
    ("trainer", "learning_starts", 2**31), ("policy", "epsilon_decay_steps", 2**40)])
def test_an_int_setting_beyond_int32_is_refused_not_wrapped(section, key, value):
    config = small_config()
    config[section][key] = value
    with pytest.raises(ValueError,
                       match=rf"the '{section}.{key}' must be an int in \[[01], 2\*\*31\), but got {value}\."):
        check_config(config)
    config[section][key] = 2**31 - 1
    check_config(config)


def test_a_huge_nested_value_is_quoted_short_and_fast():
    bomb = ["lol"] * 10
    for _ in range(30):  # 10**31 leaves, shared: what a YAML alias bomb loads into
        bomb = [bomb] * 10
    for section, key in (("trainer", "max_steps"), ("policy", "hidden_sizes")):
        config = small_config()
        config[section][key] = bomb
        with pytest.raises(ValueError) as error:
            check_config(config)
        assert f"the '{section}.{key}' must be" in str(error.value) and len(str(error.value)) < 600


def test_hidden_layers_with_more_weights_than_one_widest_layer_are_refused():
    config = small_config()
    config["policy"]["hidden_sizes"] = [16384]
    check_config(config)
    config["policy"]["hidden_sizes"] = [16384, 16384]
    with pytest.raises(ValueError,
                       match=r"with at most 2\*\*28 weights in all layers together .*but got \[16384, 16384\]"):
        check_config(config)


@pytest.mark.slow
def test_sampling_without_replacement_needs_the_batch_stored_when_learning_starts():
    config = small_config(learning_starts=61)  # 4 environments: 64 transitions stored at the first learn step
    config["replay_buffer"]["replace"] = False
    check_config(config)  # sample_size 64
    config["replay_buffer"]["sample_size"] = 65
    with pytest.raises(ValueError, match=r"'sample_size' must be at most the 64 transitions stored when learning "
                                         r"starts \('trainer.learning_starts' 61, 4 environments\) .* but got 65"):
        check_config(config)
    config["trainer"]["learning_starts"] = 65
    assert not check_config(config).replace
    with pytest.raises(ValueError, match=r"the replay buffer's 'replace' must be True .* \(--buffer numpy\)"):
        build_agent(config, buffer_kind="numpy")
    result = train(config, progress=False, seed=0, max_steps=120)  # the device buffer samples without replacement
    assert result.learn_steps > 0
