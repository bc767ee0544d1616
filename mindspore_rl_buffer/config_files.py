"""Algorithm config files: :func:`load_config` reads a Python, YAML or JSON file into the
``algorithm_config`` dict whose buffer entries :mod:`.config` turns into buffers."""
from __future__ import annotations

import ast
import functools
import json
import runpy
from pathlib import Path
from typing import Any

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer.config_yaml import load_yaml
from mindspore_rl_buffer.files import check_regular_file
from mindspore_rl_buffer.specs import DTYPES

MAX_CONFIG_BYTES = 2**20  # an algorithm config is a few KB; PyYAML took 10 s and 0.4 GB for 5 MB


def _unknown_mindspore_attribute(path: Path, attribute: str) -> str:
    """Where a config file names a misspelt ``ms.<attribute>``, e.g. ``data_type[2]``."""
    tree = ast.parse(path.read_bytes(), str(path))  # the bytes: their coding line is honoured
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(value, (ast.List, ast.Tuple))):
                continue
            for i, element in enumerate(value.elts):
                if isinstance(element, ast.Attribute) and element.attr == attribute:
                    return f"{key.value}[{i}]"
    return "attribute"


def _read_text(path: Path) -> str:
    """The text of a YAML or JSON config file, which must be UTF-8 (as both formats' files are)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"For 'load_config', the config file '{path}' must be UTF-8 text, but got the byte "
                         f"0x{error.object[error.start]:02x} at offset {error.start}, which is not UTF-8.") from None


def _check_unique_dict_keys(path: Path) -> None:
    """Refuse a dict display in a Python config that gives a constant key twice (Python keeps the last).

    Read from the source before it runs (``ast.parse`` of the bytes honours a coding line); keys
    that are not literals (``{ReplayBuffer: ...}``) and the modules the file imports are not checked.
    """
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError) as error:  # ValueError: NUL bytes, on the Pythons that do not say SyntaxError
        raise ValueError(f"For 'load_config', '{path}' must be a valid Python file, but parsing it raised "
                         f"{type(error).__name__}: {error}") from error
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        first: dict[Any, ast.expr] = {}
        for key in node.keys:
            if not isinstance(key, ast.Constant):  # None for `**other`, or an expression
                continue
            if key.value in first:
                was = first[key.value]
                raise ValueError(f"For 'load_config', the key {key.value!r} must be given once in a dict, but "
                                 f"'{path}' gives it at line {was.lineno}, column {was.col_offset + 1} and again "
                                 f"at line {key.lineno}, column {key.col_offset + 1}.")
            first[key.value] = key


def _unique_json_keys(path: Path, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (``json.loads`` keeps the last)."""
    config: dict[str, Any] = {}
    for key, value in pairs:
        if key in config:
            raise ValueError(f"For 'load_config', the key {key!r} must be given once in an object, but '{path}' "
                             f"gives it twice in one object.")
        config[key] = value
    return config


def _run_error(path: Path, error: Exception) -> ValueError:
    return ValueError(f"For 'load_config', '{path}' must run without error, but running it raised "
                      f"{type(error).__name__}: {error}")


def load_config(path: str | Path) -> dict[str, Any]:
    """Read an algorithm config file.

    Args:
        path (str): A Python file that defines ``algorithm_config`` (as ``configs/dqn.py``),
            or a YAML (``.yaml``/``.yml``) or JSON file with the same keys.

    Returns:
        dict, the algorithm config; ``create_buffer(load_config(path)['replay_buffer'])``
        builds its buffer.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file defines no ``algorithm_config`` dict, has an unknown
            extension, is a YAML or JSON file that is not UTF-8 text or not valid YAML or JSON,
            gives a key twice in one YAML mapping, JSON object or Python dict display, writes a
            number YAML 1.1 reads as text (``1e-3``: ``1.0e-3``; ``1e5``: ``100000``), names
            an unknown MindSpore dtype (``ms.foat32``), or is a Python file that does not parse
            (a syntax error, NUL bytes, binary content) or raises when run (the message names the
            file and the error's type and message).
    """
    path = Path(path)
    check_regular_file("load_config", "config", path, MAX_CONFIG_BYTES)
    try:
        config = _parse(path)
    except RecursionError:  # ast, json and PyYAML recurse into nested structures
        raise ValueError(f"For 'load_config', '{path}' nests too deep to read (past Python's recursion "
                         f"limit).") from None
    except OSError as error:  # the file went away, or cannot be read, after the check
        raise ValueError(f"For 'load_config', the config file '{path}' could not be read: {error}.") from None
    if not isinstance(config, dict):
        raise ValueError(f"For 'load_config', '{path}' must define a dict 'algorithm_config', "
                         f"but got {type(config).__name__}.")
    return config


def _parse(path: Path) -> Any:
    """What a config file defines: ``algorithm_config`` of a Python file, or a YAML or JSON file's document."""
    suffix = path.suffix.lower()
    if suffix == ".py":
        _check_unique_dict_keys(path)
        try:
            namespace = runpy.run_path(str(path))
        except AttributeError as error:
            import mindspore

            if getattr(error, "obj", None) is mindspore and error.name:
                where = _unknown_mindspore_attribute(path, error.name)
                raise ValueError(f"In '{path}': unknown {where} {error.name}"
                                 f"{_errors.did_you_mean(error.name, DTYPES)}") from error
            raise _run_error(path, error) from error
        except (Exception, SystemExit) as error:  # the file's own error (a missing module, a raise, an exit)
            raise _run_error(path, error) from error
        config = namespace.get("algorithm_config")
    elif suffix in (".yaml", ".yml"):
        import yaml

        try:
            config = load_yaml(_read_text(path), path)
        except yaml.YAMLError as error:  # a truncated or malformed file: name it, and where it breaks
            raise ValueError(f"For 'load_config', '{path}' must be valid YAML, but: {error}") from None
        except ValueError as error:  # Python's own (an int of 5,000 digits) does not name the file; ours do
            if str(path) in str(error):
                raise
            raise ValueError(f"For 'load_config', '{path}' could not be read: {error}") from None
    elif suffix == ".json":
        try:
            config = json.loads(_read_text(path), object_pairs_hook=functools.partial(_unique_json_keys, path))
        except ValueError as error:  # not JSON (JSONDecodeError), or Python's own limit (an int of 5,000 digits)
            if str(path) in str(error):  # a key given twice: named already
                raise
            raise ValueError(f"For 'load_config', '{path}' must be valid JSON, but: {error}") from None
    else:
        raise ValueError(f"For 'load_config', the config file must end in .py, .yaml, .yml or .json, "
                         f"but got '{path.name}'.")
    return config
