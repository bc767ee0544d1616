"""MindSpore's compile cache for ``mindspore-rl-buffer train``: one folder per run setting, on by default.

MindSpore's compile cache (``enable_compile_cache``) stores a process's compiled graphs and loads
them, in a later process, in place of compiling. A stored graph keeps what was fixed when it was
compiled: every shape and constant of the config, and the seeds of MindSpore's own random
operators. The main job's graphs hold no seed: every draw comes from a generator whose key is a
Parameter (:mod:`.draws`, the buffers' ``rng_key``), and the cache restores no Parameter value.
So one stored setting serves every seed, and each setting gets a folder of its own inside the
cache's root, named by a hash of all that shapes the graphs:

* the config (every section, as read);
* the buffer and environment kinds and the loop;
* the source of the installed package (``mindspore_rl_buffer`` and its ``ops``) and MindSpore's version.

A run whose setting has no folder yet compiles into a pending folder of its own and publishes it
under the setting's name when it ends (a rename: a run that starts meanwhile never reads a
half-written folder, and of two runs that race, the first to finish publishes).
``tests/apps/dqn/test_compile_cache.py`` checks that a run loading another seed's graphs trains
the same weights, bit for bit, as the same run compiling its own.

The root is ``--compile-cache DIR``; by default ``$MSRB_COMPILE_CACHE``, or
``$XDG_CACHE_HOME/mindspore_rl_buffer/compile`` (``~/.cache/...``); ``MSRB_COMPILE_CACHE=off`` or
``--no-compile-cache`` compiles every run.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mindspore as ms

#: The environment variable naming the default root; ``off`` turns the default cache off.
ROOT_VARIABLE = "MSRB_COMPILE_CACHE"
OFF = "off"


def default_root() -> Path | None:
    """The cache's root when ``--compile-cache`` is not given; ``None`` when it is turned off."""
    chosen = os.environ.get(ROOT_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in (OFF, "") else Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mindspore_rl_buffer" / "compile"


def _package_sources() -> list[Path]:
    """The package's Python files, ``ops`` included (installed from its own folder)."""
    import mindspore_rl_buffer
    import mindspore_rl_buffer.ops

    folders = {Path(mindspore_rl_buffer.__file__).parent, Path(mindspore_rl_buffer.ops.__file__).parent}
    return sorted({path.resolve() for folder in folders for path in folder.rglob("*.py")})


def setting_key(config: dict[str, Any], buffer_kind: str, env_kind: str, loop: str) -> str:
    """A hash of everything that shapes a run's graphs (see the module's text): 16 hex digits."""
    digest = hashlib.sha256()
    setting = {"config": config, "buffer": buffer_kind, "env": env_kind, "loop": loop, "mindspore": ms.__version__}
    digest.update(json.dumps(setting, sort_keys=True, default=repr).encode())
    for path in _package_sources():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CacheFolder:
    """Where a run keeps its graphs: ``path``, and the setting's folder ``final`` it publishes them to."""

    path: Path
    final: Path

    @property
    def loads(self) -> bool:
        """Whether the run loads a published setting's graphs (else it compiles and stores them)."""
        return self.path == self.final

    def publish(self) -> None:
        """Publish the graphs a pending folder holds under the setting's name (once the run ends).

        The first run of a setting to finish publishes; a later one's pending folder is removed.
        """
        if self.loads or not self.path.is_dir():
            return
        try:
            self.path.rename(self.final)
        except OSError:  # published meanwhile by another run (or not renameable): keep that one
            self.discard()

    def discard(self) -> None:
        """Remove a pending folder without publishing it (a run refused or failed before it ended)."""
        if not self.loads:
            shutil.rmtree(self.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (one of another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: it runs
        return True
    return True


def use_compile_cache(root: str | Path, config: dict[str, Any], buffer_kind: str, env_kind: str,
                      loop: str) -> CacheFolder:
    """Turn on MindSpore's compile cache in this process, for this run setting inside ``root``.

    Call it before the first graph compiles; it holds for the rest of the process. Call
    :meth:`CacheFolder.publish` when the run ends.

    Returns:
        CacheFolder.
    """
    final = Path(root).expanduser() / setting_key(config, buffer_kind, env_kind, loop)
    if final.is_dir():
        path = final
    else:
        final.parent.mkdir(parents=True, exist_ok=True)
        path = final.with_name(f"{final.name}.pending-{os.getpid()}")
        for pending in final.parent.glob(f"{final.name}.pending-*"):  # of killed runs, this one's number included
            pid = pending.name.rpartition("-")[2]
            if pending == path or not pid.isdigit() or not _alive(int(pid)):
                shutil.rmtree(pending, ignore_errors=True)
        path.mkdir()
    # MindSpore lists the entry script's imports as the cache's dependencies, from the path sys.argv[0] had when
    # it was imported: '-m' under `python -m mindspore_rl_buffer`, which fails to open at the first compile. The
    # setting's folder already tells the package's code apart (MindSpore skips every module named mindspore*).
    from mindspore.graph import api

    if not Path(str(getattr(api, "entry_script_path", None))).is_file():
        api.entry_script_path = str(Path(__file__).resolve())
    ms.set_context(enable_compile_cache=True, compile_cache_path=str(path))
    return CacheFolder(path, final)
