"""The ``mindspore-rl-buffer`` command: ``train`` runs DQN on CartPole (see :mod:`.trainer`)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

DEFAULT_CONFIG = "configs/dqn.py"


def _resolve_config(path: str) -> Path:
    """The config at ``path``; the default falls back to the copy installed with the package."""
    candidate = Path(path)
    if not candidate.is_file() and path == DEFAULT_CONFIG:
        from importlib import resources

        installed = Path(str(resources.files("mindspore_rl_buffer.configs").joinpath("dqn.py")))
        if installed.is_file():
            return installed
    return candidate


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mindspore-rl-buffer",
                                     description="Replay buffers compiled into MindSpore graphs.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train DQN on CartPole until solved or out of steps")
    train.add_argument("--config", default=DEFAULT_CONFIG,
                       help="algorithm config file (default: %(default)s)")
    train.add_argument("--out", default="runs/dqn", help="output directory (default: %(default)s)")
    train.add_argument("--buffer", choices=("device", "numpy"), default="device",
                       help="device: ReplayBuffer sampled inside the learn graph; numpy: host buffer "
                            "(default: %(default)s)")
    train.add_argument("--env", choices=("mindspore", "gymnasium"), default="mindspore",
                       help="mindspore: batched CartPole inside the collect graph; gymnasium: "
                            "CartPole-v1 on the host (default: %(default)s)")
    train.add_argument("--max-steps", type=int, default=None,
                       help="environment-step budget (default: config)")
    train.add_argument("--seed", type=int, default=None, help="random seed (default: config)")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 when the run finished, 2 on a usage error)."""
    args = _parser().parse_args(argv)
    import mindspore as ms

    from mindspore_rl_buffer import load_config
    from mindspore_rl_buffer.apps.dqn import trainer
    from mindspore_rl_buffer.apps.dqn.extras import MissingExtraError

    ms.set_context(mode=ms.GRAPH_MODE)
    config_path = _resolve_config(args.config)
    if not config_path.is_file():
        print(f"error: config file {args.config!r} not found; run from the repository root or pass "
              "--config PATH", file=sys.stderr)
        return 2
    config = load_config(config_path)
    if args.env == "gymnasium":
        try:
            import gymnasium  # noqa: F401
        except ImportError:
            print("error: --env gymnasium needs gymnasium: pip install gymnasium", file=sys.stderr)
            return 2
    try:
        result = trainer.train(config, args.out, buffer_kind=args.buffer, env_kind=args.env,
                               max_steps=args.max_steps, seed=args.seed, progress=not args.no_progress)
    except MissingExtraError as error:  # raised before any training
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{result.env_steps} environment steps, {result.learn_steps} learn steps in "
          f"{result.wall_time:.1f} s ({result.steps_per_second:.0f} environment steps/s)")
    print(f"learning curve: {result.curve_path}")
    print(f"checkpoint: {result.checkpoint_path}")
    verdict = "CartPole-v1 solved" if result.solved else "CartPole-v1 not solved"
    settings = config["trainer"]
    episodes, threshold = settings["eval_episodes"], settings.get("solve_threshold", 475.0)
    print(f"final evaluation return: {result.final_eval_return:.1f} (mean of {episodes} greedy episodes; "
          f"threshold {threshold:g}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
