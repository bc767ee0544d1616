"""The ``mindspore-rl-buffer`` command: ``train`` runs DQN on CartPole (see :mod:`.trainer`),
``evaluate`` plays a trained agent's greedy episodes (see :mod:`.play`)."""
from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from mindspore_rl_buffer.apps.dqn.schedule import MAX_STEPS

# The fastest held solve measured (docs/benchmarks.md): 3-step returns from a
# TransitionReplayBuffer, which only the device buffer and the MindSpore CartPoles can feed.
DEFAULT_CONFIG = "configs/dqn_nstep.py"
# One-step transitions in MindSpore Reinforcement's five-column layout: the host variants' default.
ONE_STEP_CONFIG = "configs/dqn.py"


def default_config(buffer: str, env: str) -> str:
    """The config ``train`` runs without ``--config``: :data:`DEFAULT_CONFIG`, or
    :data:`ONE_STEP_CONFIG` for the host buffer or the gymnasium environments."""
    return DEFAULT_CONFIG if (buffer, env) == ("device", "mindspore") else ONE_STEP_CONFIG


def _resolve_config(path: str) -> Path:
    """The config at ``path``; ``configs/<name>`` of a config shipped with the package (``dqn.py``,
    ``dqn.yaml``, ...) falls back to the installed copy, so the README's commands run from any folder."""
    candidate = Path(path)
    if not os.path.lexists(candidate) and candidate.parent == Path("configs"):  # a dangling link is refused
        from importlib import resources

        installed = Path(str(resources.files("mindspore_rl_buffer.configs").joinpath(candidate.name)))
        if installed.is_file():
            return installed
    return candidate


def _shipped_configs() -> list[str]:
    """The configs installed with the package, as ``--config`` names them."""
    from importlib import resources

    folder = resources.files("mindspore_rl_buffer.configs")
    return sorted(f"configs/{entry.name}" for entry in folder.iterdir()
                  if entry.name.endswith((".py", ".yaml")) and not entry.name.startswith("_"))


# At most 100,000 episodes: they are played in parallel, one CartPole each, so their memory grows with
# the count (10**8 ran out of memory); 100,000 pins a mean return far tighter than the 100 by default.
MAX_EPISODES = 100_000


def _shown(text: str) -> str:
    """``text`` as a message quotes it: cut to its first 20 characters and '...' if longer."""
    return text if len(text) <= 20 else f"{text[:20]}..."


def _parse_int(text: str, expected: str) -> int:
    try:
        return int(text)
    except ValueError:  # also a number too long for int() to read
        raise argparse.ArgumentTypeError(f"must be {expected}, but got {_shown(text)!r}") from None


def _positive(text: str) -> int:
    """An argparse type: an int > 0, or a usage error that says so."""
    value = _parse_int(text, "an int > 0")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an int > 0, but got {_shown(str(value))}")
    return value


def _at_most(limit: int, why: str):
    """An argparse type: an int > 0 and at most ``limit``, or a usage error that says so."""
    def parse(text: str) -> int:
        value = _positive(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit} ({why}), but got {_shown(str(value))}")
        return value
    return parse


def _seed(text: str) -> int:
    """An argparse type: an int in [0, 2**31), or a usage error that says so."""
    from mindspore_rl_buffer._validation import SEED_END  # here: the module imports MindSpore

    expected = "an int in [0, 2**31)"
    value = _parse_int(text, expected)
    if not 0 <= value < SEED_END:
        raise argparse.ArgumentTypeError(f"must be {expected}, but got {_shown(str(value))}")
    return value


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _existing_ancestor(path: Path) -> Path:
    """The nearest folder, file or symbolic link above ``path`` that exists."""
    ancestor = path.absolute().parent
    while not os.path.lexists(ancestor):
        ancestor = ancestor.parent
    return ancestor


def _dangling(path: Path) -> bool:
    """Whether ``path`` is a symbolic link to nothing: a missing target, or a loop."""
    return os.path.lexists(path) and not path.exists()


_DANGLING = "is a symbolic link to nothing (a missing target or a loop)"


def _read_problem(flag: str, text: str, path: Path, hint: str) -> str | None:
    """Why the file ``flag text`` (found at ``path``) cannot be read; ``None`` if it can or is missing (the
    caller words a missing file)."""
    if not text:
        return f"{flag} must name a file, but got ''"
    if path.is_dir():
        return f"{flag} {text!r} is a folder, not a file{hint}"
    if _dangling(path):
        return f"{flag} {text!r} {_DANGLING}"
    if path.exists() and not path.is_file():  # a device, a pipe: nothing to read a config or checkpoint from
        return f"{flag} {text!r} must be a regular file{hint}, but it is a special file (a device or a pipe)"
    return None


def _folder_problem(flag: str, out: str, path: Path) -> str | None:
    """Why ``train`` could not write to the folder ``flag out`` (``--out``, ``--compile-cache``), found at ``path``
    before training; ``None`` if it can."""
    if not out:
        return f"{flag} must name a folder, but got ''"
    if _dangling(path):
        return f"{flag} {out!r} {_DANGLING}"
    if path.exists():
        if not path.is_dir():
            return f"{flag} {out!r} is a file, not a folder"
        return None if _writable(path) else f"{flag} {out!r} is not writable"
    ancestor = _existing_ancestor(path)
    if _dangling(ancestor):
        return f"{flag} {out!r} cannot be created: {str(ancestor)!r} {_DANGLING}"
    if not ancestor.is_dir():
        return f"{flag} {out!r} cannot be created: {str(ancestor)!r} is a file, not a folder"
    return None if _writable(ancestor) else f"{flag} {out!r} cannot be created: {str(ancestor)!r} is not writable"


def _frames_problem(frames: str, overwrite: bool) -> str | None:
    """Why ``evaluate`` could not write its strip of frames to ``--frames frames``; ``None`` if it can."""
    if not frames:
        return "--frames must name a file, such as frames.png, but got ''"
    path = Path(frames)
    if path.is_dir() or frames.endswith(("/", os.sep)):  # Path() drops a trailing slash
        return f"--frames {frames!r} names a folder; name a file in it, such as {str(path / 'frames.png')!r}"
    if path.suffix.lower() != ".png":  # the strip is a PNG; matplotlib would add '.png' or pick another format
        return f"--frames must name a .png file, such as frames.png, but got {frames!r}"
    if os.path.lexists(path) and not overwrite:  # a training run's learning curve, an earlier strip
        return f"--frames {frames!r} exists; name a new file, or pass --overwrite to replace it"
    folder = path.absolute().parent
    if not folder.is_dir():
        ancestor = _existing_ancestor(path)
        if _dangling(ancestor):
            return f"--frames {frames!r} cannot be written: {str(ancestor)!r} {_DANGLING}"
        if not ancestor.is_dir():
            return f"--frames {frames!r} cannot be written: {str(ancestor)!r} is a file, not a folder"
        return f"--frames {frames!r} cannot be written: folder {str(folder)!r} does not exist"
    if not _writable(folder) or (path.exists() and not os.access(path, os.W_OK)):
        return f"--frames {frames!r} cannot be written: it or its folder is not writable"
    return None


def _failed(error: OSError, doing: str, path: str) -> int:
    """Report an error raised while reading or writing files, naming the path (``path`` if the error
    names none); exit status 1."""
    named = str(error.filename or path)
    where = "" if named in str(error) else f" ({named})"
    print(f"error: {doing}: {error}{where}", file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    """The ``mindspore-rl-buffer`` argument parser, with its ``train`` and ``evaluate`` subcommands
    (the documentation renders their ``--help`` from it)."""
    parser = argparse.ArgumentParser(prog="mindspore-rl-buffer",
                                     description="Replay buffers compiled into MindSpore graphs.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train DQN on CartPole until a held solve or out of steps")
    train.add_argument("--config", default=None,
                       help=f"algorithm config file, .py, .yaml or .json (default: {DEFAULT_CONFIG}, DQN with "
                            f"3-step returns; {ONE_STEP_CONFIG}, one-step transitions, with --buffer numpy or "
                            f"--env gymnasium)")
    train.add_argument("--out", default="runs/dqn",
                       help="output folder; one that holds an earlier run is refused (default: %(default)s)")
    train.add_argument("--overwrite", action="store_true", help="replace an earlier run in the output folder")
    train.add_argument("--loop", choices=("fused", "host"), default=None,
                       help="fused: many collect and learn steps per graph launch (the default where it can "
                            "run); host: one launch per collect, learn and evaluation step")
    train.add_argument("--buffer", choices=("device", "numpy"), default="device",
                       help="device: the config's buffer, sampled inside the learn graph; numpy: host buffer "
                            "(default: %(default)s)")
    train.add_argument("--env", choices=("mindspore", "gymnasium"), default="mindspore",
                       help="mindspore: batched CartPole inside the collect graph; gymnasium: "
                            "CartPole-v1 on the host (default: %(default)s)")
    train.add_argument("--max-steps", type=_at_most(MAX_STEPS, "environment steps"), default=None,
                       help=f"environment-step budget, > 0 and at most {MAX_STEPS}, rounded up to a multiple of "
                            f"the config's environment.num_envs (8 in the shipped configs), with a note; "
                            f"every collect steps all environments (default: config)")
    train.add_argument("--seed", type=_seed, default=None, help="random seed, in [0, 2**31) (default: config)")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    cache = train.add_mutually_exclusive_group()
    cache.add_argument("--compile-cache", default=None, metavar="DIR",
                       help="keep the compiled graphs in DIR, one folder per config and code (every seed shares "
                            "it), and load them in a later run of the same setting instead of compiling (default: "
                            "$MSRB_COMPILE_CACHE, or ~/.cache/mindspore_rl_buffer/compile; MSRB_COMPILE_CACHE=off "
                            "turns the default off)")
    cache.add_argument("--no-compile-cache", action="store_true", help="compile every graph, store none")
    evaluate = commands.add_parser("evaluate", help="play a trained agent's greedy episodes, print the mean return")
    evaluate.add_argument("--checkpoint", required=True,
                          help="a dqn_cartpole.ckpt written by train (or a .safetensors file of the same weights)")
    evaluate.add_argument("--episodes", type=_at_most(MAX_EPISODES, "episodes played in parallel"), default=100,
                          help=f"episodes, > 0 and at most {MAX_EPISODES} (default: %(default)s)")
    evaluate.add_argument("--seed", type=_seed, default=0,
                          help="seed of the start states, in [0, 2**31) (default: %(default)s)")
    evaluate.add_argument("--frames", default=None,
                          help="also write a PNG strip of frames of the first episode to this .png file (needs "
                               "matplotlib); an existing file is refused")
    evaluate.add_argument("--overwrite", action="store_true", help="replace an existing --frames file")
    return parser


def _train(args: argparse.Namespace) -> int:
    from mindspore_rl_buffer import load_config
    from mindspore_rl_buffer.apps.dqn import trainer
    from mindspore_rl_buffer.apps.dqn.agent import check_kinds
    from mindspore_rl_buffer.apps.dqn.config import check_config, setting
    from mindspore_rl_buffer.apps.dqn.extras import MissingExtraError

    problem = _folder_problem("--out", args.out, Path(args.out))
    if problem is None and args.compile_cache is not None:
        problem = _folder_problem("--compile-cache", args.compile_cache, Path(args.compile_cache).expanduser())
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    name = args.config if args.config is not None else default_config(args.buffer, args.env)
    config_path = _resolve_config(name)
    problem = _read_problem("--config", name, config_path, " (a .py, .yaml or .json config file)")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not config_path.is_file():
        print(f"error: config file {name!r} not found; pass --config PATH, or one of the shipped configs "
              f"{_shipped_configs()}", file=sys.stderr)
        return 2
    from mindspore_rl_buffer.apps.atari.cli import train_atari
    from mindspore_rl_buffer.apps.atari.trainer import is_atari_config

    try:  # read once: a Python config runs only here
        config = load_config(config_path)
    except (TypeError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if is_atari_config(config):  # an Atari config (its environment names a game): the Atari trainer
        return train_atari(config, config_path, args)
    if args.env == "gymnasium":
        try:
            import gymnasium  # noqa: F401
        except ImportError:
            print("error: --env gymnasium needs gymnasium: pip install gymnasium", file=sys.stderr)
            return 2
    try:  # the config, the loop and the budget are checked before anything is built
        entry = check_config(config)
        check_kinds(args.buffer, args.env, entry.transitions)
        loop = trainer.choose_loop(args.loop, args.buffer, args.env)
    except (TypeError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    _note_rounding(config, args.max_steps)
    from mindspore_rl_buffer import ShardedReplayBuffer
    from mindspore_rl_buffer.apps.dqn.compile_cache import default_root, use_compile_cache

    parallel = issubclass(entry.buffer_type, ShardedReplayBuffer)  # each rank seeds its environments apart
    if not parallel:  # ranks share the cores: one more thread each would compete
        from mindspore_rl_buffer.apps.dqn.runtime import pipeline_cpu_runtime

        pipeline_cpu_runtime()  # before the first graph: the small kernels launch in the runtime's pipeline
    if args.compile_cache is not None and parallel:
        print("error: --compile-cache is for single-process runs; the ranks of a ShardedReplayBuffer run "
              "compile graphs of their own", file=sys.stderr)
        return 2
    if args.no_compile_cache or parallel:
        root = None
    else:  # given, even as a relative path, or the default ('' is refused above)
        root = default_root() if args.compile_cache is None else args.compile_cache
    cache = None
    if root is not None:
        try:
            cache = use_compile_cache(root, config, args.buffer, args.env, loop)
        except OSError as error:  # a file by that name, a folder that cannot be written
            if args.compile_cache is None:  # the default cache is a convenience: compile instead
                print(f"note: compiling without a cache: could not use the compile cache {str(root)!r} "
                      f"({error.strerror or error})", file=sys.stderr)
            else:
                return _failed(error, f"could not keep compiled graphs in --compile-cache {args.compile_cache!r}",
                               args.compile_cache)
    # MindSpore collects garbage before compiling each graph (two in a run): the objects that exist now
    # (the imports', the config's) are left out of those collections while the run trains.
    gc.freeze()
    finished = False
    try:
        result = trainer.train(config, args.out, buffer_kind=args.buffer, env_kind=args.env, max_steps=args.max_steps,
                               seed=args.seed, progress=not args.no_progress, loop=loop, overwrite=args.overwrite)
        finished = True
    except (MissingExtraError, FileExistsError, IsADirectoryError) as error:  # raised before any training
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MemoryError as error:  # numpy's names the allocation, MindSpore's may be empty
        print(f"error: out of memory building the run ({error or type(error).__name__}): the replay buffer holds "
              f"'replay_buffer.capacity' ({entry.capacity}) transitions and the networks "
              f"'policy.hidden_sizes' ({setting(config, 'policy', 'hidden_sizes')}); lower them", file=sys.stderr)
        return 2
    except OSError as error:  # writing the checkpoint or the curve: a full disk, a folder changed meanwhile
        return _failed(error, f"could not write the run to --out {args.out!r}", args.out)
    finally:
        gc.unfreeze()  # collected again as before, in a process that goes on (tests call main)
        if cache is not None and not finished:
            cache.discard()  # a run refused or failed: it publishes nothing and leaves nothing
    if cache is not None:
        cache.publish()  # a finished run's graphs, the evaluation's included
    print(f"{result.env_steps} environment steps, {result.learn_steps} learn steps in {result.wall_time:.1f} s of "
          f"wall time, compilation and evaluations included ({result.steps_per_second:.0f} environment steps/s "
          f"over the whole run, {result.loop} loop)")
    print(f"learning curve: {result.curve_path}")
    print(f"checkpoint: {result.checkpoint_path}")
    if result.checkpoint_path.name != trainer.CHECKPOINT or result.curve_path.name != trainer.CURVE:
        print(f"note: another run wrote to --out {args.out!r} while this one trained; its files were left as they "
              f"are, and this run's keep the names above", file=sys.stderr)
    episodes, threshold = setting(config, "trainer", "eval_episodes"), setting(config, "trainer", "solve_threshold")
    evaluations = setting(config, "trainer", "solve_evaluations")
    if result.solved:
        verdict = (f"CartPole-v1 solved, held at {evaluations} consecutive evaluations by {result.solved_at} "
                   f"environment steps ({result.solve_time:.1f} s)")
    else:
        verdict = f"CartPole-v1 not solved (a solve must hold at {evaluations} consecutive evaluations)"
    print(f"final evaluation return: {result.final_eval_return:.1f} (mean of {episodes} greedy episodes; "
          f"threshold {threshold:g}): {verdict}")
    return 0


def _note_rounding(config: dict, max_steps: int | None) -> None:
    """Say so on stderr when the budget is not a multiple of the environments and the run does more steps."""
    from mindspore_rl_buffer.apps.dqn.config import setting
    from mindspore_rl_buffer.apps.dqn.schedule import rounded_budget

    budget = setting(config, "trainer", "max_steps") if max_steps is None else max_steps
    num_envs = setting(config, "environment", "num_envs")
    if budget % num_envs:
        source = "the config's trainer.max_steps" if max_steps is None else "--max-steps"
        print(f"note: {source} {budget} is rounded up to {rounded_budget(budget, num_envs)} environment steps, a "
              f"multiple of the {num_envs} environments (environment.num_envs): every collect steps all of them",
              file=sys.stderr)


def _evaluate(args: argparse.Namespace) -> int:
    from mindspore_rl_buffer.apps.dqn import play
    from mindspore_rl_buffer.apps.dqn.extras import MissingExtraError
    from mindspore_rl_buffer.apps.dqn.runtime import pipeline_cpu_runtime

    pipeline_cpu_runtime()

    problem = _read_problem("--checkpoint", args.checkpoint, Path(args.checkpoint),
                            " (train writes runs/dqn/dqn_cartpole.ckpt)")
    if problem is None and not Path(args.checkpoint).exists():
        problem = f"--checkpoint {args.checkpoint!r} not found (train writes runs/dqn/dqn_cartpole.ckpt)"
    if problem is None and args.frames is not None:
        problem = _frames_problem(args.frames, args.overwrite)
    if problem is not None:  # before the episodes are played
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        returns = play.evaluate_checkpoint(args.checkpoint, args.episodes, args.seed, frames=args.frames)
    except (MissingExtraError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # reading the checkpoint or writing the frames
        doing = "could not read --checkpoint" + ("" if args.frames is None else " or write --frames")
        return _failed(error, doing, args.checkpoint if args.frames is None else args.frames)
    if len(returns) == 1:
        print(f"1 greedy episode: return {returns[0]:.0f}")
    else:
        print(f"{len(returns)} greedy episodes: returns from {returns.min():.0f} to {returns.max():.0f}")
    if args.frames is not None:
        print(f"frames of the first episode: {args.frames}")
    print(f"mean return: {returns.mean():.1f}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 when the command finished, 1 when reading or
    writing a file failed, 2 on a usage error, 130 after Ctrl-C before the first graph compiles)."""
    args = build_parser().parse_args(argv)
    try:
        import mindspore as ms

        ms.set_context(mode=ms.GRAPH_MODE)
        return _train(args) if args.command == "train" else _evaluate(args)
    except KeyboardInterrupt:  # before MindSpore takes over SIGINT (it does once a graph compiles)
        return 130


if __name__ == "__main__":
    sys.exit(main())
