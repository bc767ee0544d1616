"""One checkpoint protocol for every buffer, and networks holding buffers.

A buffer states what it is as a **record**, structured data (:meth:`Checkpointable.checkpoint_record`):
its type, capacity, column specs and the settings that give its stored data their meaning
(``alpha`` of a priority buffer, the world size and rank of a shard). ``save_checkpoint(net,
path)`` writes every tensor of ``net`` with ``mindspore.save_checkpoint`` and the records of
every buffer in it as JSON, in a uint8 tensor named :data:`RECORD` (the safetensors writer
takes no strings), as ``.safetensors`` (streamed: almost no memory beyond the buffer) or
``.ckpt`` (MindSpore's protobuf format, which holds 2-3 copies in memory). It writes a
temporary file beside ``path``, fsyncs it and renames it over ``path``, so a crash mid-save
leaves the previous checkpoint intact.

``load_checkpoint(path, net)`` is the one restore path. It validates everything first: the
file, each buffer's record against the buffer's own, every tensor's presence, shape and
dtype, each buffer's cursor contract (:meth:`Checkpointable.checkpoint_cursors`) and the
rest of its state (:meth:`Checkpointable.checkpoint_state`: a priority buffer's trees). Only
then does it restore, **in place** (``Parameter.copy_``): MindSpore's own
``load_checkpoint(path, net)`` replaces Parameter storage with ``set_data``, which graphs
compiled before the restore do not see. Every mismatch found is reported in one error, and
nothing is changed.

Every tensor's checksum (xxh3, 64 bits; about 40 ms per GiB) is kept in the record and
verified on load, so a flipped byte anywhere is refused, naming the tensor.

Files of format 1 still load (:func:`_upgrade`), and a buffer supplies the tensors older files
lack (an add counter, a random state) in :meth:`Checkpointable.checkpoint_defaults`.
"""
from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import xxhash
from mindspore import nn

from mindspore_rl_buffer._graph import DIRECT_CALLS, refuse_destroyed
from mindspore_rl_buffer.checkpoint_files import (
    FORMAT,
    RECORD,
    ROOT,
    SHARDED_1,
    read_tensors,
    refuse_missing_beside_shards,
    same_setting,
    unprefixed,
    upgrade,
)
from mindspore_rl_buffer.files import FORMATS, check_path, check_regular_file, fsync_folder
from mindspore_rl_buffer.specs import TensorSpec, mindspore_dtype


def checksum(value: Any) -> str:
    """The xxh3-64 checksum of a tensor's (or array's) bytes, as 16 hex digits."""
    array = value.asnumpy() if isinstance(value, ms.Tensor) else np.asarray(value)
    return xxhash.xxh3_64_hexdigest(memoryview(np.ascontiguousarray(array)).cast("B"))


def spec_record(specs: tuple[TensorSpec, ...]) -> list[list[Any]]:
    """The columns of a record: ``[name, shape, dtype]`` each."""
    return [[spec.name, list(spec.shape), str(spec.dtype)] for spec in specs]


class Checkpointable:
    """The checkpoint protocol every buffer implements; ``save``/``load`` go through it.

    A Cell buffer's tensors are its Parameters, restored by the one path in
    :func:`load_checkpoint`; a host buffer overrides :meth:`checkpoint_tensors` and
    :meth:`restore_checkpoint`.
    """

    # Settings of the record that must match for a checkpoint to load (they give the stored
    # data their meaning); the others are recorded for information.
    BINDING_SETTINGS: tuple[str, ...] = ()

    def checkpoint_record(self) -> dict[str, Any]:
        """``{'type', 'capacity', 'specs', 'settings'}``: what this buffer is, as JSON-ready data."""
        raise NotImplementedError

    def checkpoint_cursors(self, read: Any) -> list[str]:
        """Problems with the cursors that ``read(parameter)`` gives for this buffer's Parameters."""
        return []

    def checkpoint_state(self, read: Any) -> list[str]:
        """Problems with the state beyond the cursors (a priority buffer's trees) that
        ``read(parameter)`` gives, each naming its Parameter; asked only when the cursors keep
        their contract."""
        return []

    def checkpoint_random(self, read: Any) -> list[str]:
        """Problems with the random generator's state that ``read(parameter)`` gives."""
        return []

    def checkpoint_defaults(self, read: Any) -> dict[Any, np.ndarray]:
        """Values for tensors that files of an earlier version lack, derived from what they hold.

        ``read(key)`` gives the file's value for one of this buffer's tensors (a Parameter, or
        a host buffer's tensor name), or ``None`` if the file has none. Returns ``{key: value}``;
        a value the file holds is never replaced, and derived values are validated like the rest.
        """
        return {}

    def checkpoint_lock(self) -> contextlib.AbstractContextManager[Any]:
        """The lock this buffer's own methods hold, held by ``save`` and ``load`` around reading and
        restoring its tensors: a host buffer's own (a Cell's direct calls all hold the library's
        lock, ``mindspore_rl_buffer.lock``)."""
        return contextlib.nullcontext()

    def checkpoint_tensors(self) -> dict[str, Any]:
        """The tensors to write, by name (a Cell's Parameters by default)."""
        return {param.name: param for param in self.get_parameters()}

    def restore_checkpoint(self, values: Mapping[str, Any]) -> None:
        """Copy validated ``values`` into a host buffer (Cells are restored by :func:`load_checkpoint`)."""
        raise NotImplementedError

    def save(self, path: str | os.PathLike) -> Any:
        """Write this buffer (every column, its cursors, its record) to ``path``, atomically.

        ``path`` ends in ``.safetensors`` (recommended: streamed) or ``.ckpt``. See
        :func:`mindspore_rl_buffer.save_checkpoint`.

        Returns:
            The path written.
        """
        return save_checkpoint(self, path)

    def load(self, path: str | os.PathLike) -> None:
        """Restore this buffer from ``path`` in place; refuses a checkpoint of another type,
        capacity, shape, dtype or binding setting (or whose record lacks one), or whose cursors
        break the contract, or whose trees (of a priority buffer) are not ones it builds, and
        then leaves the buffer unchanged. See :func:`mindspore_rl_buffer.load_checkpoint`."""
        load_checkpoint(path, self)


def _path(op: str, path: str | os.PathLike) -> tuple[Path, str]:
    path = check_path(op, "checkpoint", path)
    if path.suffix not in FORMATS:
        raise ValueError(f"For '{op}', the checkpoint path must end in .safetensors or .ckpt, but got '{path}'.")
    return path, FORMATS[path.suffix]


def _buffers(net: Any) -> dict[str, Checkpointable]:
    if isinstance(net, nn.Cell):
        return {name or ROOT: cell for name, cell in net.cells_and_names() if isinstance(cell, Checkpointable)}
    return {ROOT: net}


def _held(net: Any) -> contextlib.AbstractContextManager[Any]:
    """``net``'s own lock (see :meth:`Checkpointable.checkpoint_lock`), taken before :data:`DIRECT_CALLS`,
    in the order its methods take them."""
    return net.checkpoint_lock() if isinstance(net, Checkpointable) else contextlib.nullcontext()


def _state(op: str, net: Any) -> dict[str, Any]:
    refuse_destroyed(op, net)
    if isinstance(net, nn.Cell):
        return dict(net.parameters_and_names())
    if isinstance(net, Checkpointable):
        return net.checkpoint_tensors()
    raise TypeError(f"For '{op}', the object must be a mindspore.nn.Cell or a buffer, but got {type(net).__name__}.")


def save_checkpoint(net: Any, path: str | os.PathLike) -> Path:
    """Write every tensor of ``net`` and the records of its buffers to ``path``, atomically.

    Args:
        net (Union[nn.Cell, PyUniformReplayBuffer]): A buffer, or a network holding buffers.
        path (str): The checkpoint file, ending in ``.safetensors`` (recommended) or ``.ckpt``.

    Returns:
        The path written.

    Raises:
        TypeError: If ``net`` is neither a Cell nor a buffer.
        ValueError: If ``path`` ends in neither ``.safetensors`` nor ``.ckpt``.
    """
    op = "save"
    state = _state(op, net)
    path, file_format = _path(op, path)
    # Else mkdir or the rename fails with a bare OSError, after the record is built.
    if path.is_dir():
        raise ValueError(f"For '{op}', the checkpoint path '{path}' cannot be written: it is a folder, not a file.")
    blocking = next((parent for parent in path.parents if parent.exists() and not parent.is_dir()), None)
    if blocking is not None:
        raise ValueError(f"For '{op}', the checkpoint path '{path}' cannot be written: '{blocking}' is a file, "
                         f"not a folder.")
    dangling = next((parent for parent in path.parents if parent.is_symlink() and not parent.exists()), None)
    if dangling is not None:
        raise ValueError(f"For '{op}', the checkpoint path '{path}' cannot be written: '{dangling}' is a symbolic "
                         f"link that leads nowhere (to nothing, or in a loop).")
    records = {name: buffer.checkpoint_record() for name, buffer in _buffers(net).items()}
    with _held(net), DIRECT_CALLS:  # no call changes a tensor between its checksum and its write
        # Again under the locks: a destroy() that took them first emptied the buffer, and an
        # empty buffer never replaces a good checkpoint.
        state = _state(op, net)
        checksums = {name: checksum(value) for name, value in state.items()}
        record = json.dumps({"format": FORMAT, "buffers": records, "checksums": checksums}).encode()
        # The record first: a .ckpt is a sequence of tensors, and one cut short at a tensor's end still
        # parses. Its record then lists what is missing (load_checkpoint). Parameters go to the writer
        # as they are: no copy of the data is made here.
        params = [{"name": RECORD, "data": ms.Tensor(np.frombuffer(record, np.uint8).copy())}]
        params += [{"name": name, "data": value if isinstance(value, ms.Tensor) else ms.Tensor(value)}
                   for name, value in state.items()]
        return write_atomically(params, path, file_format)


def _labelled(name: str, record: Any) -> str:
    """A buffer's record in an error, after its name in the network (none for the buffer itself, ``'.'``)."""
    return str(record) if name == ROOT else f"{name}: {record}"


_WRITES = itertools.count()  # numbers the temporary files of this process's writes


def write_atomically(params: list[dict[str, Any]], path: Path, file_format: str = "ckpt") -> Path:
    """``mindspore.save_checkpoint(params, ...)`` to a temporary file beside ``path``, fsynced and
    renamed over ``path``: a crash mid-write leaves the previous file intact."""
    # Unique to this write (two threads may save to one path) and short: the path's own name may
    # be as long as the file system allows.
    temporary = path.with_name(f".{path.stem[:40]}.{os.getpid()}.{next(_WRITES)}.tmp{path.suffix}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with DIRECT_CALLS:
            ms.save_checkpoint(params, str(temporary), format=file_format)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
        fsync_folder(path.parent)
    except BaseException as error:  # also MindSpore's own temporary of a .ckpt (its suffix .tmp), left by a full disk
        for leftover in (temporary, temporary.with_suffix(".tmp")):
            leftover.unlink(missing_ok=True)
        if isinstance(error, (OSError, RuntimeError)) or type(error).__name__ == "SafetensorError":
            # They name the temporary file, or (safetensors' writer) are no OSError at all: name the target.
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise OSError(getattr(error, "errno", None) or errno.EIO,
                          f"the checkpoint could not be written ({type(error).__name__}: {reason})",
                          str(path)) from error
        raise
    return path


def read_checkpoint(op: str, path: str | os.PathLike, wanted: Callable[[str], bool] | None = None,
                    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, str]]:
    """The tensors of a checkpoint file (those ``wanted`` names, and the records), its records
    (``None`` for a file without them) and the checksums of its tensors (empty for a file
    written before they were kept).

    Raises:
        FileNotFoundError: If there is no file at ``path``.
        ValueError: If ``path`` is not a regular file, the file is not a readable checkpoint
            or its record is unreadable.
    """
    path, file_format = _path(op, path)
    if not os.path.lexists(path):
        refuse_missing_beside_shards(op, path)
    check_regular_file(op, "checkpoint", path)
    keep = (lambda name: True) if wanted is None else (lambda name: name == RECORD or wanted(name))
    return upgrade(op, path, read_tensors(op, path, file_format, keep))


def _record_problems(path: Path, name: str, ours: dict[str, Any], theirs: dict[str, Any] | None,
                     binding: tuple[str, ...]) -> list[str]:
    if theirs is None or theirs.get("type") != ours["type"]:
        return [f"'{path}' records no {ours['type']} at '{name}'"]
    problems = []
    # A buffer inside the network (a shard's storage) is named: its capacity is not the network's.
    of = "" if name == ROOT else f" of '{name}'"
    # Records of format 2 hold every key (checked by _upgrade); those of format 1 hold some (no
    # specs, no capacity but a shard's, no settings but a priority buffer's alpha and a shard's).
    # leaf_paths (the TF-Agents buffers' nests) since 2026-11-26: files written before load unchecked.
    for key in ("capacity", "specs", "leaf_paths"):
        if key in theirs and key in ours and theirs[key] != ours[key]:
            problems.append(f"the {key}{of} in '{path}' must be {ours[key]!r} to match this buffer, "
                            f"but got {theirs[key]!r}")
    if "settings" in theirs:
        for key in binding:
            if key not in theirs["settings"]:
                problems.append(f"the {key}{of} in '{path}' must be {ours['settings'][key]!r} to match this buffer, "
                                f"but the record of '{name}' has no {key}")
            elif not same_setting(ours["settings"][key], theirs["settings"][key]):
                problems.append(f"the {key}{of} in '{path}' must be {ours['settings'][key]!r} to match this "
                                f"buffer, but got {theirs['settings'][key]!r}")
    return problems


def load_checkpoint(path: str | os.PathLike, net: Any, *, restore: bool = True) -> dict[str, Any]:
    """Restore every tensor of ``net`` from ``path`` in place, after checking all of them.

    Works for a file written by :func:`save_checkpoint` (of this or an earlier version) and
    for one written by ``mindspore.save_checkpoint(net, path)`` (then without records, so
    only shapes, dtypes and cursors are checked). Tensors of the file that ``net`` does not
    have are not read. A ``.ckpt`` file's tensors are checked against their bytes before
    they are built (see ``mindspore_rl_buffer.checkpoint_files``).

    Args:
        path (str): The checkpoint file (``.safetensors`` or ``.ckpt``).
        net (Union[nn.Cell, PyUniformReplayBuffer]): The buffer, or the network holding
            buffers, to restore.
        restore (bool): ``False`` validates only; ``restore_validated`` then restores
            (a sharded load, once every rank has validated its file). Default: ``True``.

    Returns:
        dict, the file's tensors that ``net`` holds, by name (as ``mindspore.load_checkpoint``).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        TypeError: If ``net`` is neither a Cell nor a buffer.
        ValueError: If the file is corrupt or truncated, records a buffer of another type,
            capacity, columns or binding setting, has a record that lacks one of them (a
            file without records is checked without them), lacks a tensor of ``net``, holds one of
            another shape or dtype, or holds cursors that break the contract or a state the
            buffer cannot reach (a priority buffer's trees and ``max_priority``, see
            :func:`~mindspore_rl_buffer.contracts.priority_contract`). Every problem found is
            named; ``net`` is left unchanged.
    """
    op = "load"
    state = _state(op, net)
    buffers = _buffers(net)
    # Only the tensors of net (and of a sharded buffer's first format) are read: any others cost nothing.
    def wanted(name: str) -> bool:
        return (name in state or name in SHARDED_1 or name.startswith("column/")
                or any(name.endswith(f".{own}") for own in state))

    loaded, records, checksums = read_checkpoint(op, path, wanted)
    # A tensor the record kept a checksum of is in the file, unless the file was cut short.
    absent = [name for name in checksums if wanted(name) and name not in loaded]
    if absent:
        raise ValueError(f"For '{op}', the checkpoint '{path}' is truncated or corrupt: its record lists "
                         f"{len(absent)} tensors it does not hold, such as '{absent[0]}'.")
    other = next(((name, value) for name, value in loaded.items() if not isinstance(value, ms.Tensor)), None)
    if other is not None:  # MindSpore's writer also takes strings and numbers (its append_dict)
        name, value = other
        raise ValueError(f"For '{op}', the checkpoint '{path}' must hold a tensor under every name the buffer reads, "
                         f"but it holds a {type(value).__name__} under '{name}'.")
    loaded = unprefixed(loaded, state)
    path = Path(path)
    names = {id(tensor): name for name, tensor in state.items()}

    def key(tensor: Any) -> str:
        return tensor if isinstance(tensor, str) else names[id(tensor)]

    def held(tensor: Any) -> np.ndarray | None:
        return loaded[key(tensor)].asnumpy() if key(tensor) in loaded else None

    for buffer in buffers.values():
        for tensor, value in buffer.checkpoint_defaults(held).items():
            loaded.setdefault(key(tensor), ms.Tensor(value))
    problems: list[str] = []
    if records is not None:
        for name, buffer in buffers.items():
            problems += _record_problems(path, name, buffer.checkpoint_record(), records.get(name),
                                         buffer.BINDING_SETTINGS)
    for name, tensor in state.items():
        if name not in loaded:
            problems.append(f"'{path}' has no value for Parameter '{name}'")
            continue
        value, dtype = loaded[name], mindspore_dtype(tensor)
        if tuple(value.shape) != tuple(tensor.shape) or value.dtype != dtype:
            problems.append(f"Parameter '{name}' has shape {tuple(value.shape)} and dtype {value.dtype} in "
                            f"'{path}', but shape {tuple(tensor.shape)} and dtype {dtype} in the network")
        elif name in checksums and checksum(value) != checksums[name]:
            problems.append(f"the data of Parameter '{name}' in '{path}' is corrupt: its checksum is "
                            f"{checksum(value)}, but the file recorded {checksums[name]} when it was saved")
    if not problems:
        host = {name: loaded[name].asnumpy() for name in state} if not isinstance(net, nn.Cell) else None

        def read(tensor: Any) -> np.ndarray:
            return host[key(tensor)] if host is not None else loaded[key(tensor)].asnumpy()

        for name, buffer in buffers.items():
            problems += [f"the random state of '{name}' in '{path}': {p}" for p in buffer.checkpoint_random(read)]
            problems += [f"the cursors of '{name}' in '{path}' break the contract: {problem}"
                         for problem in buffer.checkpoint_cursors(read)]
        # The rest of the state is read through the cursors (a composite buffer's through its storage's):
        # only cursors that keep every contract bound what it reads and allocates.
        if not problems:
            for name, buffer in buffers.items():
                problems += [f"the state of '{name}' in '{path}' is not one the buffer can reach: {problem}"
                             for problem in buffer.checkpoint_state(read)]
    if problems:
        ours = "; ".join(_labelled(name, buffer.checkpoint_record()) for name, buffer in buffers.items())
        theirs = "; ".join(_labelled(name, record) for name, record in (records or {}).items()) or "no buffer record"
        raise ValueError(f"For '{op}', {'; '.join(problems)}. The checkpoint holds {theirs}; the network holds "
                         f"{ours}.")
    if restore:
        restore_validated(net, loaded)
    return loaded


def restore_validated(net: Any, loaded: Mapping[str, Any]) -> None:
    """Copy the tensors :func:`load_checkpoint` validated with ``restore=False`` into ``net``, in place."""
    with _held(net), DIRECT_CALLS:  # a load that waited on destroy() is refused, not restored into it
        state = _state("load", net)
        if not isinstance(net, nn.Cell):
            return net.restore_checkpoint({name: loaded[name].asnumpy() for name in state})
        for name, param in state.items():
            param.copy_(loaded[name])
    return None
