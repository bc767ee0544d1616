"""``python -m mindspore_rl_buffer train``: the DQN main job's command line, :mod:`mindspore_rl_buffer.apps.dqn.cli`."""
from mindspore_rl_buffer.apps.dqn.cli import main

raise SystemExit(main())
