"""Reading checkpoint files: every tensor checked against its bytes before it is built, and
the buffer records of every format read into the current one (:func:`upgrade`).

MindSpore 2.10's ``.ckpt`` reader builds each tensor from the dims the file declares without
checking that its bytes agree. Measured here: a file whose dims disagreed with its data (a
flipped bit in a dim), or whose tensor name was flipped into its neighbour's (the reader joins
consecutive tensors of one name as slices of one), corrupted the heap and killed the process,
inside the load or at a later call; a file of 800 bytes declaring a ``[2**28, 3]`` tensor
allocated 3.4 GiB before it was refused. :func:`read_ckpt` parses the file with MindSpore's own
protobuf message and checks each tensor's type, dims and byte count before building it.
``.safetensors`` headers give each tensor's byte range, which MindSpore's reader checks; it is
asked for the tensors wanted only, so a tensor the network does not hold is never read.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from google.protobuf.message import DecodeError
from mindspore.train.checkpoint_pb2 import Checkpoint

from mindspore_rl_buffer.files import saved_world_sizes, shard_path

FORMAT = "mindspore_rl_buffer-checkpoint-2"
FORMAT_1 = "mindspore_rl_buffer-checkpoint-1"
RECORD = "mindspore_rl_buffer.record"
# The name of the buffer a checkpoint is saved from or loaded into itself (not held in a network).
ROOT = "."
# The keys of every buffer's record in format 2: a record without one would skip its check.
RECORD_KEYS = ("type", "capacity", "specs", "settings")
SHARDED_1 = ("metadata", "head", "count")  # with column/<name>: a ShardedReplayBuffer's first format

# The numpy dtype of each tensor type MindSpore writes; bfloat16 is read through its 16 bits.
_NUMPY = {"Int8": np.int8, "UInt8": np.uint8, "Int16": np.int16, "UInt16": np.uint16, "Int32": np.int32,
          "UInt32": np.uint32, "Int64": np.int64, "UInt64": np.uint64, "Float16": np.float16,
          "Float32": np.float32, "Float64": np.float64, "Bool": np.bool_, "BFloat16": np.uint16}
# MindSpore's optional trailer: b"crc_num", then 10 bytes of a CRC-32 (checked only on request).
_CRC_MARK, _CRC_TRAILER = b"crc_num", 17


def read_tensors(op: str, path: Path, file_format: str, wanted: Callable[[str], bool]) -> dict[str, Any]:
    """The tensors of a ``.ckpt`` or ``.safetensors`` file whose names ``wanted`` accepts.

    Raises:
        OSError: If the file cannot be opened (no permission to read it, say).
        ValueError: If the file cannot be read as a checkpoint of its format (the message says why).
    """
    try:  # a file that cannot be opened is no corrupt checkpoint: say what the system said
        os.close(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))  # a FIFO swapped in never blocks
    except OSError as error:
        raise OSError(error.errno, f"For '{op}', the checkpoint could not be read ({type(error).__name__}: "
                                   f"{error.strerror})", str(path)) from None
    failure = None
    with warnings.catch_warnings():
        # MindSpore 2.10's safetensors reader leaves the file open when it cannot parse it; the
        # file is closed when the failed reader's frames are freed, at the end of the except
        # clause below, inside this block: without a warning, and with no garbage collection.
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            if file_format == "ckpt":
                return read_ckpt(path, wanted)
            return ms.load_checkpoint(str(path), format=file_format, choice_func=wanted)
        except Exception as error:
            if isinstance(error, ValueError) and "empty after filter" in str(error):  # MindSpore: none wanted
                return {}
            failure = f"{type(error).__name__}: {error}"
    raise ValueError(f"For '{op}', '{path}' is not a readable checkpoint (corrupt or truncated?): {failure}")


def read_ckpt(path: Path, wanted: Callable[[str], bool]) -> dict[str, Any]:
    """The tensors of a ``.ckpt`` file whose names ``wanted`` accepts, each checked against its bytes.

    A tensor larger than 512 MiB is written as consecutive slices of one name; a name found in
    two places is refused. Strings are read as MindSpore reads them; map parameters are skipped.

    Raises:
        ValueError: If the file does not parse, a name is stored in two places, or a wanted
            tensor's type is unknown or its dims disagree with its bytes.
    """
    content = path.read_bytes()
    if content[-_CRC_TRAILER:-_CRC_TRAILER + len(_CRC_MARK)] == _CRC_MARK:
        content = content[:-_CRC_TRAILER]
    message = Checkpoint()
    try:
        message.ParseFromString(content)
    except DecodeError as error:
        raise ValueError(f"it does not parse as a MindSpore checkpoint ({error})") from None
    del content
    if not message.value:  # an empty file parses as an empty message
        raise ValueError("it holds no tensors")
    tensors: dict[str, Any] = {}
    seen: set[str] = set()
    for tag, group in itertools.groupby(message.value, key=lambda value: value.tag):
        if tag in seen:
            raise ValueError(f"the tensor '{tag}' is stored in two places")
        seen.add(tag)
        slices = [value.tensor for value in group if value.HasField("tensor")]
        if wanted(tag) and slices:
            tensors[tag] = _text(tag, slices) if slices[0].tensor_type == "str" else _tensor(tag, slices)
    return tensors


def _text(tag: str, slices: list[Any]) -> str:
    """A string entry (``mindspore.save_checkpoint``'s ``append_dict``), as MindSpore reads it: UTF-32."""
    data = b"".join(piece.tensor_content for piece in slices)
    if len(data) % 4:
        raise ValueError(f"the string '{tag}' holds {len(data)} bytes, not a whole number of UTF-32 characters")
    return str(np.frombuffer(data, f"U{len(data) // 4}")[0]) if data else ""


def _tensor(tag: str, slices: list[Any]) -> ms.Tensor:
    kind, dims = slices[0].tensor_type, list(slices[0].dims)
    if any(piece.tensor_type != kind or list(piece.dims) != dims for piece in slices[1:]):
        raise ValueError(f"the slices of the tensor '{tag}' disagree on its dims or type")
    if kind not in _NUMPY:
        raise ValueError(f"the tensor '{tag}' has type {kind!r}, which is not one of {sorted(_NUMPY)}")
    if any(dim < 0 for dim in dims):
        raise ValueError(f"the tensor '{tag}' declares negative dims {dims}")
    data = b"".join(piece.tensor_content for piece in slices)
    itemsize = np.dtype(_NUMPY[kind]).itemsize
    if dims == [0] and len(data) == itemsize:  # how earlier MindSpore versions wrote a scalar
        dims = []
    if math.prod(dims) * itemsize != len(data):
        raise ValueError(f"the tensor '{tag}' declares shape {tuple(dims)} of {kind} "
                         f"({math.prod(dims) * itemsize} bytes), but holds {len(data)} bytes")
    array = np.frombuffer(data, _NUMPY[kind])
    if kind == "BFloat16":  # its bits are a float32's upper half; viewed flat (a 0-d array cannot be)
        return ms.Tensor((array.astype(np.uint32) << 16).view(np.float32).reshape(dims), ms.bfloat16)
    return ms.Tensor(array.reshape(dims))  # a copy: the file's bytes are freed


def refuse_missing_beside_shards(op: str, path: Path) -> None:
    """Name the sharded buffer's file that lies beside the missing ``path``, if one does."""
    sizes = sorted(saved_world_sizes(path))
    if sizes:
        beside = shard_path(path, 0, sizes[0])
        raise FileNotFoundError(f"For '{op}', no checkpoint file at '{path}', but '{beside}' lies beside it: "
                                f"a ShardedReplayBuffer's file of rank 0 of {sizes[0]}. Load it with that "
                                f"buffer's load('{path}') on every rank, or give the rank file's own path.")


def same_setting(ours: Any, theirs: Any) -> bool:
    """Whether two values of a binding setting agree; floats as the graphs use them, in float32."""
    if isinstance(ours, float) and isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        return bool(np.float32(ours) == np.float32(theirs))
    return theirs == ours


def unprefixed(loaded: dict[str, Any], state: Mapping[str, Any]) -> dict[str, Any]:
    """``loaded`` by the names of ``state``: a file whose names all carry one common prefix
    (``buffer.column_0``: ``mindspore.save_checkpoint`` of a buffer a network holds) is read
    without it. Other files are returned as they are."""
    if all(name in loaded for name in state):
        return loaded
    prefixes = {key[: -len(name)] for key in loaded for name in state
                if key.endswith(name) and key[: -len(name)].endswith(".")}
    found = [prefix for prefix in prefixes if all(prefix + name in loaded for name in state)]
    if len(found) != 1:
        return loaded
    return {name: loaded[found[0] + name] for name in state}


def upgrade(op: str, path: Path, loaded: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None,
                                                                  dict[str, str]]:
    """Read a file of any format into ``(tensors, {buffer path: record}, {tensor: checksum})``."""
    raw = loaded.pop(RECORD, None)
    if raw is None:
        if set(SHARDED_1) <= set(loaded) and any(key.startswith("column/") for key in loaded):
            return (*_upgrade_sharded_1(op, path, loaded), {})  # format 1 of ShardedReplayBuffer
        return loaded, None, {}
    try:
        meta = json.loads(raw.asnumpy().tobytes())
        version = meta.get("format")
        checksums = {}
        if version == FORMAT:
            records, checksums = meta["buffers"], meta.get("checksums", {})
        elif version == FORMAT_1:  # records were reprs: only the type (and alpha) are read back
            records = {name: _record_1(text) for name, text in meta["buffers"].items()}
        else:
            raise ValueError(f"unknown format {version!r}")
        if not isinstance(records, dict) or not all(isinstance(r, dict) for r in records.values()) \
                or not isinstance(checksums, dict):
            raise ValueError("the records are not a dict of dicts")
        if version == FORMAT:
            for name, record in records.items():
                missing = [key for key in RECORD_KEYS if key not in record]
                if missing:
                    raise ValueError(f"the record of '{name}' must hold 'type', 'capacity', 'specs' and 'settings', "
                                     f"as every record of format 2 does, but it has no {missing[0]!r}")
                if not isinstance(record["settings"], dict):
                    raise ValueError(f"the settings in the record of '{name}' must be a dict, but got "
                                     f"{type(record['settings']).__name__}")
    except RecursionError:  # JSON nested past Python's recursion limit
        raise ValueError(f"For '{op}', '{path}' has an unreadable buffer record: it nests too deep to parse") from None
    except (ValueError, KeyError, AttributeError, TypeError, UnicodeDecodeError) as error:
        raise ValueError(f"For '{op}', '{path}' has an unreadable buffer record: {error}") from error
    return loaded, records, checksums


def _record_1(text: str) -> dict[str, Any]:
    """A record of format 1 (a repr): its type and, for a priority buffer, the ``alpha`` that
    text always held; no other setting of that text is read back."""
    record: dict[str, Any] = {"type": text.split("(", 1)[0]}
    alpha = re.search(r"\balpha=([0-9.eE+-]+)", text)
    if alpha:
        record["settings"] = {"alpha": float(alpha.group(1))}
    elif record["type"] == "PriorityReplayBuffer":
        raise ValueError("the record of a PriorityReplayBuffer must hold its alpha, as every record of format 1 "
                         f"does, but got {text!r}")
    return record


def _upgrade_sharded_1(op: str, path: Path, loaded: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        meta = json.loads(str(loaded.pop("metadata")))
        names = [column[0] for column in meta["columns"]]
        tensors = {f"storage.{name}": loaded.pop(f"column/{name}") for name in names}
        tensors["storage.head"], tensors["storage.count"] = loaded.pop("head"), loaded.pop("count")
        settings = {key: meta[key] for key in ("world_size", "rank", "local_capacity")}
        records = {ROOT: {"type": "ShardedReplayBuffer", "capacity": meta["capacity"], "settings": settings},
                   "storage": {"type": "ReplayBuffer", "capacity": meta["local_capacity"]}}
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"For '{op}', '{path}' has an unreadable buffer record: {error}") from error
    return tensors, records
