"""Data specs as nests of :class:`TensorSpec`: flatten, check and rebuild items.

On the host, nests are handled by ``optree`` (tuples, lists, dicts, namedtuples, nested).
Inside a graph, where optree cannot run, items are flattened by following the static leaf
paths (:func:`leaf_at`) and rebuilt from a template of leaf numbers (:func:`rebuild`).
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import optree
from mindspore import Tensor

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._validation import check_leaves, native
from mindspore_rl_buffer.specs import DTYPES, TensorSpec, name_problem

_NONE_IS_LEAF = False


def _path_text(path: tuple[Any, ...]) -> str:
    return "items" + "".join(f"[{key!r}]" if isinstance(key, str) else f"[{key}]" for key in path)


@dataclass(frozen=True)
class FlatSpec:
    """A data spec flattened once: its leaves, their paths, and how to rebuild the nest."""

    specs: tuple[TensorSpec, ...]
    paths: tuple[tuple[Any, ...], ...]
    treespec: Any
    template: Any

    @classmethod
    def of(cls, data_spec: Any) -> FlatSpec:
        """Flatten ``data_spec``; every leaf must be a :class:`TensorSpec`."""
        paths, leaves, treespec = optree.tree_flatten_with_path(data_spec, none_is_leaf=_NONE_IS_LEAF)
        if not leaves:
            raise ValueError("'data_spec' must hold at least one TensorSpec, but it holds none.")
        for path, leaf in zip(paths, leaves):
            if not isinstance(leaf, TensorSpec):
                where = "data_spec" + _path_text(path)[len("items"):]
                raise TypeError(f"{where} must be a TensorSpec, but got {type(leaf).__name__}.")
        template = optree.tree_unflatten(treespec, list(range(len(leaves))))
        return cls(tuple(leaves), tuple(tuple(p) for p in paths), treespec, template)

    def describe(self, i: int) -> str:
        """``items[1][0] 'lidar'``: how errors name leaf ``i``."""
        name = f" '{self.specs[i].name}'" if self.specs[i].name else ""
        return _path_text(self.paths[i]) + name

    def column_names(self, taken: Collection[str] = (), prefix: str = "") -> list[str]:
        """Unique column names: the spec names, else the leaf paths (``items_a_b``), else the leaf
        indices (``items_0``): the first of them that are unique and can name a column on a
        buffer Cell with attributes ``taken`` whose Parameters MindSpore names ``prefix + name``
        (:func:`~mindspore_rl_buffer.specs.name_problem`)."""
        for names in ([spec.name for spec in self.specs],
                      ["items" + "".join(f"_{key}" for key in path) for path in self.paths]):
            if len(set(names)) == len(names) and all(name and name_problem(name, taken, prefix) is None
                                                     for name in names):
                return names
        return [f"items_{i}" for i in range(len(self.paths))]

    def flatten(self, op: str, items: Any, outer: tuple[int | None, ...]) -> list[Tensor]:
        """Check ``items`` against the spec on the host and return its leaves as tensors.

        Every leaf must have shape ``outer + spec.shape`` and the spec's dtype; a ``None`` in
        ``outer`` takes any size that is the same across the leaves.

        Raises:
            ValueError: If the structure, a shape or a dtype does not match; the message names
                the leaf path, e.g. ``the shape of items[1][0] 'lidar' must be (32, 5), but got (32, 4)``.
            TypeError: If a leaf is not a tensor or numpy array.
        """
        try:
            leaves = self.treespec.flatten_up_to(items)
        except ValueError as error:
            got = optree.tree_structure(items, none_is_leaf=_NONE_IS_LEAF)
            raise ValueError(f"For '{op}', items must have the structure of the data spec "
                             f"{self.treespec}, but got {got}.") from error
        tensors = []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, (np.ndarray, np.generic)):
                if isinstance(leaf, np.ma.MaskedArray):  # its mask would be dropped without a word
                    raise _errors.leaf_error(op, self.describe(i), "type", "an array without a mask",
                                             "a numpy masked array")
                if DTYPES.get(np.asarray(leaf).dtype.name) is None:
                    raise _errors.leaf_error(op, self.describe(i), "dtype", self.specs[i].dtype,
                                             np.asarray(leaf).dtype)
                leaf = Tensor(native(np.asarray(leaf)))  # a big-endian array is taken as its values
            elif not isinstance(leaf, Tensor):
                raise _errors.leaf_not_an_array_error(op, self.describe(i), leaf)
            tensors.append(leaf)
        if None in outer:
            outer = tuple(tensors[0].shape[j] if size is None and len(tensors[0].shape) > j else size
                          for j, size in enumerate(outer))
        if None in outer:  # the first leaf lacks the batch dimension: say so in words
            dims = [*("n" if size is None else str(size) for size in outer), *map(str, self.specs[0].shape)]
            expected = f"({', '.join(dims)}{',' if len(dims) == 1 else ''}), with a leading batch dimension n"
            raise _errors.leaf_error(op, self.describe(0), "shape", expected, tuple(tensors[0].shape))
        check_leaves(op, self.descriptions(), self.shapes(outer), self.dtypes(),
                     [t.shape for t in tensors], [t.dtype for t in tensors])
        return tensors

    def descriptions(self) -> tuple[str, ...]:
        return tuple(self.describe(i) for i in range(len(self.specs)))

    def shapes(self, outer: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], ...]:
        return tuple(tuple(outer) + spec.shape for spec in self.specs)

    def dtypes(self) -> tuple[Any, ...]:
        return tuple(spec.dtype for spec in self.specs)

    def leaves(self, items: Any) -> list[Any]:
        """The leaves of ``items`` (a nest shaped like the spec), in spec order."""
        return self.treespec.flatten_up_to(items)

    def unflatten(self, leaves: Any) -> Any:
        """Rebuild the nest of the spec from its leaves (host side)."""
        return optree.tree_unflatten(self.treespec, list(leaves))

    def restore(self, nest: Any) -> Any:
        """A nest with the spec's leaves, rebuilt with the spec's own types (host side).

        A graph's outputs keep dicts and lists but may turn a namedtuple into a tuple: this
        gives a compiled call's output the exact structure of the spec again.
        """
        return self.unflatten(optree.tree_leaves(nest, none_is_leaf=_NONE_IS_LEAF))


def leaf_at(items, path):
    """The leaf of ``items`` at ``path``; runs on the host and inside a graph."""
    for key in path:
        items = items[key]
    return items


def rebuild(template, leaves):
    """Rebuild a nest from ``template`` (the spec's structure with leaf numbers at its leaves).

    Runs on the host and inside a graph, where ``template`` is a compile-time constant.
    """
    if isinstance(template, int):
        return leaves[template]
    if isinstance(template, dict):
        return {key: rebuild(value, leaves) for key, value in template.items()}
    if isinstance(template, list):
        return [rebuild(value, leaves) for value in template]
    if hasattr(template, "_fields"):
        return type(template)(*[rebuild(value, leaves) for value in template])
    return tuple(rebuild(value, leaves) for value in template)


def structure(nest: Any) -> tuple[list[Any], Any]:
    """``(leaves, treespec)`` of any nest (tuples, lists, dicts, namedtuples); the treespec is hashable."""
    return optree.tree_flatten(nest, none_is_leaf=_NONE_IS_LEAF)


def template(treespec: Any) -> Any:
    """The nest of ``treespec`` with the leaf numbers in place of its leaves, for :func:`rebuild`.

    Examples:
        >>> template(structure({'a': 'x', 'b': ('y', 'z')})[1])
        {'a': 0, 'b': (1, 2)}
    """
    return optree.tree_unflatten(treespec, list(range(treespec.num_leaves)))
