"""Recommender systems: a registry of configurations, named grids and the RecBole adapter.

Importing this package does not import torch or RecBole; training does, and fails with a message
naming the ``train`` extra when they are missing.
"""

from .registry import (
    DEFAULT_SEED,
    FAMILIES,
    GRIDS,
    SYSTEMS,
    Family,
    SystemConfig,
    register_grid,
    register_system,
    resolve_systems,
)
from .train import TrainResult, cache_key, export_run, results_table, split_fingerprint, train_systems

__all__ = [
    "DEFAULT_SEED",
    "FAMILIES",
    "GRIDS",
    "SYSTEMS",
    "Family",
    "SystemConfig",
    "register_grid",
    "register_system",
    "resolve_systems",
    "TrainResult",
    "train_systems",
    "export_run",
    "results_table",
    "split_fingerprint",
    "cache_key",
]
