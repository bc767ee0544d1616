"""The YAML reader of :func:`~mindspore_rl_buffer.config_files.load_config`: PyYAML's ``SafeLoader``, as
``yaml.safe_load`` reads a file, refusing what it would read silently otherwise.

- A key given twice in one mapping (``safe_load`` keeps the last value).
- A number written as YAML 1.1, the version PyYAML reads, does not spell one: a plain ``1e-3`` or
  ``1e5`` (an exponent needs a dot before it and a sign: ``1.0e-3``, ``1.0e+5``) is read as the
  text ``'1e-3'``, which a setting that needs a number would refuse without saying why. The
  error names the key and the line, and how to write the number (:func:`yaml_number_spelling`);
  a quoted ``'1e-3'`` stays text.
- A number YAML 1.1 reads other than Python, JSON and YAML 1.2 do (:func:`yaml_number_surprise`): a
  leading zero makes an octal int (``010`` is 8, and ``09`` text), colons a base-60 number (``1:30`` is 90).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

# What YAML 1.1 reads as text though it spells a number: an exponent without a dot before it or without a
# sign (1e-3, 1e5, 1.0e5). Its floats are [-+]?([0-9][0-9_]*)?\.[0-9.]*([eE][-+][0-9]+)?.
_NUMBER_AS_TEXT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def yaml_number_spelling(value: Any) -> str | None:
    """How a YAML 1.1 file writes the number that ``value`` spells, if ``value`` is a string YAML read as
    text though it spells a number; ``None`` for any other value.

    A whole number is given as digits too, for a setting that needs an int (a capacity).

    Examples:
        >>> from mindspore_rl_buffer.config_yaml import yaml_number_spelling
        >>> yaml_number_spelling('1e-3'), yaml_number_spelling('1e5'), yaml_number_spelling('2.5E-4')
        ('1.0e-3', '100000 (or 1.0e+5 for a float)', '2.5e-4')
        >>> yaml_number_spelling(0.001), yaml_number_spelling('fast')
        (None, None)
    """
    if not isinstance(value, str) or not _NUMBER_AS_TEXT.fullmatch(value):
        return None
    mantissa, exponent = re.split("[eE]", value)
    spelt = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{'' if exponent[0] in '+-' else '+'}{exponent}"
    number = float(value)
    return f"{int(number)} (or {spelt} for a float)" if number.is_integer() and abs(number) < 1e16 else spelt


# What YAML 1.1 reads as a number unlike Python, JSON and YAML 1.2, or as text: digits after a leading zero
# (an octal int, or text with an 8 or 9), and digits with colons (a base-60 int or float).
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]*[0-9]")
_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")


def yaml_number_surprise(text: str, value: Any) -> str | None:
    """What YAML 1.1 makes of the plain scalar ``text``, read as ``value``, if it spells a number that
    Python, JSON and YAML 1.2 read otherwise; ``None`` for any other scalar.

    Examples:
        >>> from mindspore_rl_buffer.config_yaml import yaml_number_surprise
        >>> yaml_number_surprise('010', 8), yaml_number_surprise('09', '09'), yaml_number_surprise('1:30', 90)
        ('the octal number 8', 'text', 'the base-60 number 90')
        >>> yaml_number_surprise('10', 10), yaml_number_surprise('0.5', 0.5), yaml_number_surprise('0', 0)
        (None, None, None)
    """
    if _LEADING_ZERO.fullmatch(text):
        return "text" if isinstance(value, str) else f"the octal number {value}"
    if _BASE_60.fullmatch(text):
        return "text" if isinstance(value, str) else f"the base-60 number {value}"
    return None


@functools.cache
def _loader() -> type:
    """PyYAML's ``SafeLoader``, refusing a mapping that gives a key twice and a number YAML 1.1 reads as text
    or otherwise than it is written."""
    import yaml

    # A merge key (`<<: *base`, whose own keys override the base's) is checked as the key '<<' (given
    # twice, the second merge won silently); a value key is not a key of the mapping.
    merge, value = "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"

    class UniqueKeyLoader(yaml.SafeLoader):
        def __init__(self, stream: str, path: Path) -> None:
            super().__init__(stream)
            self.path = path

        def compose_mapping_node(self, anchor: Any) -> Any:
            # Checked as composed: the constructor's merging later mixes the base's keys into the node.
            node = super().compose_mapping_node(anchor)
            first: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == value:
                    continue
                key = "<<" if key_node.tag == merge else self.construct_object(key_node, deep=True)
                if key in first:
                    was, mark = first[key].start_mark, key_node.start_mark
                    raise ValueError(f"For 'load_config', the key '{key_node.value}' must be given once in a mapping, "
                                     f"but '{self.path}' gives it at line {was.line + 1}, column {was.column + 1} "
                                     f"and again at line {mark.line + 1}, column {mark.column + 1}.")
                first[key] = key_node
            return node

        def compose_node(self, parent: Any, index: Any) -> Any:
            # `index` is the key node of a mapping's value, the position of a list's item, None for a key.
            tagged = getattr(self.peek_event(), "tag", None) not in (None, "!")  # an explicit tag: !!str 010
            node = super().compose_node(parent, index)
            if not isinstance(node, yaml.ScalarNode) or node.style is not None or tagged or index is None:
                return node
            where = (f"the key '{index.value}'" if isinstance(index, yaml.Node) else f"item {index} of a list") + \
                f" in '{self.path}' (line {node.start_mark.line + 1})"
            if node.tag.endswith(":str") and (spelling := yaml_number_spelling(node.value)) is not None:
                raise ValueError(f"For 'load_config', {where} must be a number as YAML 1.1 spells one, but got "
                                 f"{node.value}, which it reads as text: write {spelling}, or quote it if text is "
                                 f"meant.")
            if (read := yaml_number_surprise(node.value, self.construct_object(node))) is not None:
                raise ValueError(f"For 'load_config', {where} must be a number that YAML 1.1 reads as written, but got "
                                 f"{node.value}, which it reads as {read}: write the number without a leading zero or "
                                 f"colon, or quote it if text is meant.")
            return node

    return UniqueKeyLoader


def load_yaml(text: str, path: Path) -> Any:
    """The YAML config ``text`` of the file ``path``, read as ``yaml.safe_load`` reads it but refusing a key given
    twice in a mapping and a plain number YAML 1.1 reads as text (``1e-3``) or otherwise than it is written
    (``010``, ``1:30``), naming the key and the line.

    Raises:
        ValueError: For a key given twice, or a number read as text or otherwise than written.
        yaml.YAMLError: If ``text`` is not valid YAML.
    """
    loader = _loader()(text, path)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
