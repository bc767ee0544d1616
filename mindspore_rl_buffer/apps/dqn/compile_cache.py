"""MindSpore's compile cache for ``mindspore-rl-buffer train --compile-cache DIR``: one folder per run setting.

MindSpore's compile cache (``enable_compile_cache``) stores a process's compiled graphs and loads
them, in a later process, in place of compiling. A stored graph keeps what was fixed when it was
compiled: the seeds of its random operators (from ``mindspore.set_seed``) and every shape of the
config. A later run with another seed would then replay the first run's random streams. So each
run setting gets a folder of its own inside ``DIR``, named by a hash of all that shapes the graphs:

* the config (every section, as read);
* the seed, the buffer and environment kinds and the loop;
* the source of the installed package (``mindspore_rl_buffer`` and its ``ops``) and MindSpore's version.

A run loads the graphs only from a run with the same setting, which trains exactly as it would
compile them (``tests/apps/dqn/test_compile_cache.py`` checks the weights bit for bit).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mindspore as ms


def _package_sources() -> list[Path]:
    """The package's Python files, ``ops`` included (installed from its own folder)."""
    import mindspore_rl_buffer
    import mindspore_rl_buffer.ops

    folders = {Path(mindspore_rl_buffer.__file__).parent, Path(mindspore_rl_buffer.ops.__file__).parent}
    return sorted({path.resolve() for folder in folders for path in folder.rglob("*.py")})


def setting_key(config: dict[str, Any], seed: int, buffer_kind: str, env_kind: str, loop: str) -> str:
    """A hash of everything that shapes a run's graphs (see the module's text): 16 hex digits."""
    digest = hashlib.sha256()
    setting = {"config": config, "seed": int(seed), "buffer": buffer_kind, "env": env_kind, "loop": loop,
               "mindspore": ms.__version__}
    digest.update(json.dumps(setting, sort_keys=True, default=repr).encode())
    for path in _package_sources():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def use_compile_cache(root: str | Path, config: dict[str, Any], seed: int, buffer_kind: str, env_kind: str,
                      loop: str) -> Path:
    """Turn on MindSpore's compile cache in this process, in the folder of this run setting inside ``root``.

    Call it before the first graph compiles; it holds for the rest of the process.

    Returns:
        Path, the setting's folder.
    """
    folder = Path(root) / setting_key(config, seed, buffer_kind, env_kind, loop)
    folder.mkdir(parents=True, exist_ok=True)
    # MindSpore lists the entry script's imports as the cache's dependencies, from the path sys.argv[0] had when
    # it was imported: '-m' under `python -m mindspore_rl_buffer`, which fails to open at the first compile. The
    # setting's folder already tells the package's code apart (MindSpore skips every module named mindspore*).
    from mindspore.graph import api

    if not Path(str(getattr(api, "entry_script_path", None))).is_file():
        api.entry_script_path = str(Path(__file__).resolve())
    ms.set_context(enable_compile_cache=True, compile_cache_path=str(folder))
    return folder
