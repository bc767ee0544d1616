"""``mindspore-rl-buffer train`` with an Atari config: the options it reads, the run's files and summary.

``mindspore_rl_buffer.apps.dqn.cli`` hands a config whose ``environment`` section names a
``game`` (see :func:`~.trainer.is_atari_config`) to :func:`train_atari`. It reads ``--out``,
``--overwrite``, ``--max-steps``, ``--seed`` and ``--no-progress``; the CartPole variants'
``--buffer numpy``, ``--env gymnasium``, ``--loop``, ``--compile-cache`` and ``--no-compile-cache`` are
refused.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mindspore_rl_buffer.apps.atari.trainer import CHECKPOINT


def _refused(args: argparse.Namespace) -> str | None:
    for flag, value, default in (("--buffer", args.buffer, "device"), ("--env", args.env, "mindspore"),
                                 ("--loop", args.loop, None), ("--compile-cache", args.compile_cache, None),
                                 ("--no-compile-cache", args.no_compile_cache, False)):
        if value != default:
            return f"{flag} is for the CartPole configs; an Atari config runs its own trainer"
    return None


def train_atari(config: Mapping[str, Any], config_path: Path, args: argparse.Namespace) -> int:
    """Train on the Atari ``config`` (loaded from ``config_path``) with the ``train`` arguments ``args``;
    the exit status. The config is checked before anything is built (:func:`.trainer.check_config`)."""
    from mindspore_rl_buffer.apps.atari import trainer
    from mindspore_rl_buffer.apps.atari.env import MissingAtariError

    problem = _refused(args)
    if problem is None:
        try:
            trainer.check_config(config)
        except (TypeError, ValueError) as error:
            problem = f"{str(error).rstrip('.')} (in the config file {str(config_path)!r})."
    out = Path(args.out)
    if problem is None and (out / CHECKPOINT).exists() and not args.overwrite:
        problem = f"--out {args.out!r} holds an earlier run; name a new folder, or pass --overwrite to replace it"
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    log = None if args.no_progress else (lambda line: print(line, flush=True))
    try:
        result, agent = trainer.train(config, max_steps=args.max_steps, seed=args.seed, log=log)
    except MissingAtariError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        checkpoint = trainer.save_run(result, agent, out)
    except OSError as error:
        print(f"error: could not write the run to --out {args.out!r}: {error}", file=sys.stderr)
        return 1
    scores = [score for _, score in result.returns]
    last = scores[-10:]
    mean = f"{sum(last) / len(last):.1f}" if last else "-"
    print(f"{result.env_steps} agent steps, {result.learn_steps} learn steps in {result.wall_time:.1f} s "
          f"({result.steps_per_second:.0f} agent steps/s, compilation included)")
    print(f"{len(scores)} games finished; mean score of the last {len(last)}: {mean}")
    print(f"checkpoint: {checkpoint}")
    print(f"scores: {out / trainer.RETURNS}")
    return 0
