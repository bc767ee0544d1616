"""Benchmarks of mindspore_rl_buffer: run ``python -m benchmarks --help`` from the repository root."""
