"""Operator-level tests: one file per module of ``ops/``, each against numpy reference models."""
