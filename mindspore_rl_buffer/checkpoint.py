"""Checkpoints of buffers, and of networks holding them, that survive compiled graphs.

``save_checkpoint(net, path)`` writes every Parameter of ``net`` (a buffer, or a training
network holding buffers) with ``mindspore.save_checkpoint``, plus a record of each buffer
it holds (type, capacity, columns), as ``.safetensors`` (streamed: almost no memory beyond
the buffer) or ``.ckpt`` (MindSpore's protobuf format, which holds 2-3 copies in memory).
It writes a temporary file beside ``path`` and renames
it over ``path``, so a crash mid-save leaves the previous checkpoint intact.

``load_checkpoint(path, net)`` validates the whole file against ``net`` first (every
Parameter present, same shape and dtype, same buffer types) and only then restores every
Parameter **in place** (``Parameter.copy_``). MindSpore's own ``load_checkpoint(path, net)``
replaces Parameter storage with ``set_data``, which graphs compiled before the restore do
not see; restoring in place keeps them right.
"""
from __future__ import annotations

import gc
import json
import os
import warnings
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn

from mindspore_rl_buffer._graph import DIRECT_CALLS, BufferCell
from mindspore_rl_buffer.specs import mindspore_dtype

FORMAT = "mindspore_rl_buffer-checkpoint-1"
# The buffer record travels as a uint8 tensor of JSON bytes: the safetensors writer takes no strings.
RECORD = "mindspore_rl_buffer.record"
# File formats of mindspore.save_checkpoint, by suffix. safetensors streams: saving and
# loading a 1 GiB buffer needs almost no memory beyond the buffer; ckpt needs 2-3 copies.
FORMATS = {".safetensors": "safetensors", ".ckpt": "ckpt"}


def _path(op: str, path: str | os.PathLike) -> tuple[Path, str]:
    path = Path(path)
    if path.suffix not in FORMATS:
        raise ValueError(f"For '{op}', the checkpoint path must end in .safetensors or .ckpt, but got '{path}'.")
    return path, FORMATS[path.suffix]


def _buffers(net: nn.Cell) -> dict[str, BufferCell]:
    return {name or ".": cell for name, cell in net.cells_and_names() if isinstance(cell, BufferCell)}


def describe(buffer: BufferCell) -> str:
    """``ReplayBuffer(capacity=..., columns=[...])``: what a checkpoint records of a buffer."""
    return f"{type(buffer).__name__}({buffer.extend_repr()})"


def _state(op: str, obj: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The named Parameters (or host arrays) of ``obj`` and the record of the buffers in it."""
    if isinstance(obj, nn.Cell):
        return dict(obj.parameters_and_names()), {name: describe(b) for name, b in _buffers(obj).items()}
    if hasattr(obj, "_host_state"):  # PyUniformReplayBuffer: numpy arrays on the host
        return obj._host_state(), {".": obj._describe()}
    raise TypeError(f"For '{op}', the object must be a mindspore.nn.Cell or a PyUniformReplayBuffer, "
                    f"but got {type(obj).__name__}.")


def save_checkpoint(net: Any, path: str | os.PathLike) -> Path:
    """Write every Parameter of ``net`` and a record of its buffers to ``path``, atomically.

    Args:
        net (Union[nn.Cell, PyUniformReplayBuffer]): A buffer, or a network holding buffers.
        path (str): The checkpoint file, ending in ``.safetensors`` (recommended) or ``.ckpt``.

    Returns:
        The path written.

    Raises:
        TypeError: If ``net`` is neither a Cell nor a PyUniformReplayBuffer.
        ValueError: If ``path`` ends in neither ``.safetensors`` nor ``.ckpt``.
    """
    op = "save"
    state, buffers = _state(op, net)
    path, file_format = _path(op, path)
    record = json.dumps({"format": FORMAT, "buffers": buffers}).encode()
    # Parameters go to the writer as they are: no copy of the data is made here.
    params = [{"name": name, "data": value if isinstance(value, ms.Tensor) else ms.Tensor(value)}
              for name, value in state.items()]
    params.append({"name": RECORD, "data": ms.Tensor(np.frombuffer(record, np.uint8).copy())})
    return write_atomically(params, path, file_format)


def write_atomically(params: list[dict[str, Any]], path: Path, file_format: str = "ckpt",
                     append_dict: dict[str, Any] | None = None) -> Path:
    """``mindspore.save_checkpoint(params, ...)`` to a temporary file beside ``path``, fsynced and
    renamed over ``path``: a crash mid-write leaves the previous file intact."""
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        with DIRECT_CALLS:
            ms.save_checkpoint(params, str(temporary), format=file_format, append_dict=append_dict)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _read(op: str, path: Path, file_format: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if not path.is_file():
        raise FileNotFoundError(f"For '{op}', no checkpoint file at '{path}'.")
    failure = None
    with warnings.catch_warnings():
        # MindSpore 2.10's safetensors reader leaves the file open when it cannot parse it; the
        # file is closed when the failed reader's frames are freed, here, without a warning.
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            loaded = ms.load_checkpoint(str(path), format=file_format)
        except (ValueError, RuntimeError, OSError) as error:
            failure = str(error)
        if failure is not None:
            gc.collect()
    if failure is not None:
        raise ValueError(f"For '{op}', '{path}' is not a readable checkpoint (corrupt or truncated?): {failure}")
    meta = loaded.pop(RECORD, None)
    if meta is None:
        return loaded, None
    try:
        meta = json.loads(meta.asnumpy().tobytes())
        if meta.get("format") != FORMAT:
            raise ValueError(f"unknown format {meta.get('format')!r}")
    except (ValueError, AttributeError, TypeError) as error:
        raise ValueError(f"For '{op}', '{path}' has an unreadable buffer record: {error}") from error
    return loaded, meta


def load_checkpoint(path: str | os.PathLike, net: Any) -> dict[str, Any]:
    """Restore every Parameter of ``net`` from ``path`` in place, after checking all of them.

    Works for a file written by :func:`save_checkpoint` and for one written by
    ``mindspore.save_checkpoint(net, path)`` (then without the buffer record, so only shapes
    and dtypes are checked). Parameters of the file that ``net`` does not have are ignored.

    Args:
        path (str): The checkpoint file (``.safetensors`` or ``.ckpt``).
        net (Union[nn.Cell, PyUniformReplayBuffer]): The buffer, or the network holding
            buffers, to restore.

    Returns:
        dict, the checkpoint's Parameters by name (as ``mindspore.load_checkpoint``).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        TypeError: If ``net`` is neither a Cell nor a PyUniformReplayBuffer.
        ValueError: If the file is corrupt or truncated, lacks a Parameter of ``net``, holds
            one of another shape or dtype (a buffer of another capacity, shape or dtype), or
            records a buffer of another type. ``net`` is left unchanged.
    """
    op = "load"
    params, buffers = _state(op, net)
    path, file_format = _path(op, path)
    loaded, meta = _read(op, path, file_format)
    recorded = (meta or {}).get("buffers", {})

    def mismatch(what: str) -> ValueError:
        ours = "; ".join(f"{name}: {text}" for name, text in buffers.items())
        theirs = "; ".join(f"{name}: {text}" for name, text in recorded.items()) or "no buffer record"
        return ValueError(f"For '{op}', {what}. The checkpoint holds {theirs}; the network holds {ours}.")

    for name, text in buffers.items():
        kind = text.split("(")[0]
        if meta is not None and recorded.get(name, "").split("(")[0] != kind:
            raise mismatch(f"'{path}' records no {kind} at '{name}'")
    for name, param in params.items():
        if name not in loaded:
            raise mismatch(f"'{path}' has no value for Parameter '{name}'")
        value, dtype = loaded[name], mindspore_dtype(param)
        if tuple(value.shape) != tuple(param.shape) or value.dtype != dtype:
            raise mismatch(f"Parameter '{name}' has shape {tuple(value.shape)} and dtype {value.dtype} in "
                           f"'{path}', but shape {tuple(param.shape)} and dtype {dtype} in the network")
    if not isinstance(net, nn.Cell):
        net._restore_host_state({name: loaded[name].asnumpy() for name in params})
        return loaded
    with DIRECT_CALLS:
        for name, param in params.items():
            param.copy_(loaded[name])
    return loaded
