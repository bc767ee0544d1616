"""``python -m mindspore_rl_buffer train``: see :mod:`mindspore_rl_buffer.cli`."""
import sys

from mindspore_rl_buffer.cli import main

sys.exit(main())
