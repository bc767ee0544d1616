"""Install mindspore_rl_buffer; ``ops/`` is installed as ``mindspore_rl_buffer.ops`` and
``configs/`` as ``mindspore_rl_buffer.configs`` (so the main job finds its config anywhere).
The main job, ``mindspore_rl_buffer.apps.dqn``, needs the ``dqn`` extra; its Atari configuration
also the ``atari`` extra."""
from setuptools import setup

LONG_DESCRIPTION = """\
A replay buffer for MindSpore reinforcement learning that lives on the device and compiles into
your GRAPH_MODE training graph. MindSpore 2.8 removed the native buffer kernels that MindSpore
Reinforcement ran on (`BufferAppend`, `BufferGetItem`, `BufferSample`); this library rebuilds the
buffer from MindSpore 2.10's own graph operators, on CPU and GPU, with MindSpore Reinforcement's
and TF-Agents' APIs, prioritized, reservoir, sharded and Atari-scale buffers.

The documentation (getting started, user guides, migration guides and the API reference) is a
Sphinx site in the `docs/` folder of the project's repository.
"""

setup(
    name="mindspore_rl_buffer",
    version="0.1.0",
    description="A device-side replay buffer for MindSpore reinforcement learning, "
    "built from MindSpore graph ops.",
    # The package page gets this short text, not README.md: the README's links are relative to
    # the repository and break on a package index.
    long_description=LONG_DESCRIPTION,
    long_description_content_type="text/markdown",
    # MindSpore 2.10 has wheels for Python 3.10, 3.11 and 3.12 only (3.9 stops at MindSpore 2.9).
    python_requires=">=3.10,<3.13",
    classifiers=["Programming Language :: Python :: 3", "Programming Language :: Python :: 3.10",
                 "Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.12"],
    packages=["mindspore_rl_buffer", "mindspore_rl_buffer.ops", "mindspore_rl_buffer.configs",
              "mindspore_rl_buffer.apps", "mindspore_rl_buffer.apps.dqn", "mindspore_rl_buffer.apps.atari"],
    package_dir={"mindspore_rl_buffer": "mindspore_rl_buffer", "mindspore_rl_buffer.ops": "ops",
                 "mindspore_rl_buffer.configs": "configs"},
    package_data={"mindspore_rl_buffer.configs": ["*.yaml"]},
    install_requires=[
        "mindspore>=2.10,<2.11",
        # MindSpore 2.10 misbehaves with numpy 2 (see docs/platforms.md).
        "numpy>=1.24,<2",
        "optree>=0.11",
        "pyyaml>=6",
        # Checksums of checkpointed tensors: xxh3 reads a GiB in ~40 ms (zlib.crc32: ~260 ms).
        "xxhash>=3",
    ],
    extras_require={
        # The main job (`mindspore-rl-buffer train`, mindspore_rl_buffer.apps.dqn) draws its
        # learning curve and progress bar; the library itself needs neither.
        "dqn": ["matplotlib>=3.5", "tqdm>=4.60"],
        "test": ["pytest>=8", "hypothesis>=6.100", "ruff>=0.6", "scipy>=1.10",
                 # CartPole-v1 reference dynamics and `train --env gymnasium`.
                 "gymnasium>=0.29",
                 # Both test tiers on both cores, and the coverage floors CI enforces.
                 "pytest-xdist>=3.5", "pytest-cov>=5"],
        # The Atari main job (configs/dqn_atari.py): the Arcade Learning Environment (ale-py ships
        # the ROMs) behind gymnasium's AtariPreprocessing, which resizes frames with OpenCV.
        # OpenCV 4.11 and later require numpy 2, which MindSpore 2.10 does not run with.
        "atari": ["ale-py>=0.9", "gymnasium>=0.29", "opencv-python-headless>=4.6,<4.11"],
        # The documentation site: Sphinx (MindSpore's own documentation tool) with MyST Markdown
        # pages; furo gives the navigation sidebar without JavaScript build steps.
        "docs": ["sphinx>=8", "myst-parser>=4", "furo>=2024.8"],
    },
    entry_points={"console_scripts": ["mindspore-rl-buffer=mindspore_rl_buffer.apps.dqn.cli:main"]},
)
