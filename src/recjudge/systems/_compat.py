"""Making RecBole 1.2.1 import and behave: NumPy-2 aliases, sys.argv, torch.load, tensorboard, logging.

Everything here is applied inside context managers or once before the first RecBole import, and
only by the training adapter: nothing else in recjudge imports torch or RecBole.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

from ..errors import MissingExtraError

# NumPy 2 removed these; RecBole 1.2.1 still uses np.float_ and friends (measured on an H200 stack).
_NUMPY_ALIASES = {
    "float_": "float64",
    "complex_": "complex128",
    "unicode_": "str_",
    "float": float,
    "int": int,
    "bool": bool,
    "object": object,
}


def numpy_alias_shim() -> list[str]:
    """Restore NumPy's removed aliases (only those missing). Returns the names restored."""
    import warnings

    import numpy as np

    restored = []
    for name, target in _NUMPY_ALIASES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            present = hasattr(np, name)
        if present:
            continue
        setattr(np, name, getattr(np, target) if isinstance(target, str) else target)
        restored.append(name)
    return restored


def import_recbole():
    """Import torch and the RecBole pieces the adapter uses; a missing package names the extra."""
    numpy_alias_shim()
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingExtraError("torch", "train", "Training recommender systems") from None
    try:
        import recbole  # noqa: F401
        from recbole.config import Config  # noqa: F401
        from recbole.data import create_dataset, data_preparation  # noqa: F401
        from recbole.utils import get_model, get_trainer, init_seed  # noqa: F401
    except ImportError as exc:
        if getattr(exc, "name", "") and not str(exc.name).startswith("recbole"):
            raise MissingExtraError(str(exc.name), "train", "Training recommender systems") from None
        raise MissingExtraError("recbole", "train", "Training recommender systems") from None
    _silence_tensorboard()
    import recbole as rb

    return rb


class _NullWriter:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _silence_tensorboard() -> None:
    # RecBole's Trainer opens a SummaryWriter under ./log_tensorboard in the working directory.
    import recbole.trainer.trainer as trainer_module

    trainer_module.get_tensorboard = lambda logger: _NullWriter()


@contextlib.contextmanager
def clean_argv() -> Iterator[None]:
    """RecBole's Config parses sys.argv (``--epochs=…``); hide our own command line from it."""
    saved = sys.argv
    sys.argv = [saved[0] if saved else "recjudge"]
    try:
        yield
    finally:
        sys.argv = saved


@contextlib.contextmanager
def trusted_torch_load() -> Iterator[None]:
    """torch >= 2.6 defaults to weights_only=True, which rejects RecBole checkpoints (they pickle
    the Config). Inside this block torch.load defaults to weights_only=False: use it only around
    loads of checkpoints this process wrote."""
    import torch

    original = torch.load

    def load(*args, **kwargs):
        kwargs.setdefault("weights_only", False)
        return original(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original


@contextlib.contextmanager
def quiet_recbole(verbose: bool) -> Iterator[None]:
    """RecBole logs through the root logger (epochs, notices); keep it out of our output unless verbose."""
    import warnings

    root = logging.getLogger()
    level = root.level
    if not verbose:
        root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            if not verbose:
                # pandas/torch deprecation notices raised inside RecBole's own code
                warnings.filterwarnings("ignore", category=FutureWarning)
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", category=UserWarning, module="recbole")
            yield
    finally:
        root.setLevel(level)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op threads (DGCF is bit-reproducible only single-threaded)."""
    import torch

    if n is None:
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def no_admmslim_noise() -> Iterator[None]:
    """ADMMSLIM adds 1e-5·U(0,1) noise to every prediction; score it without."""
    import recbole.model.general_recommender.admmslim as admmslim

    original = admmslim.add_noise
    admmslim.add_noise = lambda t, mag=1e-5: t
    try:
        yield
    finally:
        admmslim.add_noise = original
