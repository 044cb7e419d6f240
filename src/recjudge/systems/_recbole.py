"""The RecBole adapter: train a configuration on a split and score every item for given users.

We write the split ourselves as RecBole benchmark files (``.train/.valid/.test.inter``, user and
item tokens only), so RecBole never re-splits or sees float32 timestamps. Known RecBole defects
are fixed here rather than passed on: ADMMSLIM's prediction noise (scored without it), RaCT's
three stages (actor pretrain → critic pretrain → finetune, each loading the previous checkpoint
with ``weights_only=False``), NeuMF's missing ``full_sort_predict`` (pairs scored in batches
under a memory bound), DGCF's thread non-determinism (one thread), ``sys.argv`` parsing and
tensorboard folders in the working directory. Pop and Random do not come from RecBole (see
``baselines``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.splits import Split
from ..errors import ConfigError
from . import _compat
from .registry import TRAINING_KEYS, SystemConfig

# our RaCT options: epochs of the two pretraining stages, learning rate of the finetune stage
RACT_KEYS = frozenset({"actor_epochs", "critic_epochs", "finetune_learning_rate"})
DATASET = "recjudge"  # not a RecBole dataset name, so RecBole never loads a bundled config or downloads
PARTS = ("train", "valid", "test")
# NeuMF-style pairwise scoring: at most this many (user, item) pairs per forward pass (~200 MB for
# NeuMF's default sizes)
MAX_PAIRS = 1 << 17


@dataclass(frozen=True)
class Tokens:
    """Our ids ↔ the tokens written to RecBole's files.

    RecBole reads token columns with pandas' default missing values, so an id such as ``NA``,
    ``null``, ``None`` or ``nan`` would vanish or become a ``[None]`` token; ids with tabs or
    spaces would break its tab-separated files. We write ``u<n>`` / ``i<n>`` (n = position in the
    sorted ids) instead. RecBole numbers tokens in order of first appearance, which the row order
    fixes, so its internal ids — and the trained model — do not depend on the token spelling.
    """

    users: dict[str, str]
    items: dict[str, str]

    @classmethod
    def of(cls, split: Split) -> Tokens:
        from .baselines import catalogue

        frames = [split.train, split.test] + ([split.valid] if split.valid is not None else [])
        users = sorted({u for f in frames for u in f.user.tolist()})
        return cls({u: f"u{n}" for n, u in enumerate(users)},
                   {i: f"i{n}" for n, i in enumerate(catalogue(split).tolist())})

    def item_ids(self, tokens) -> np.ndarray:
        """Our item ids for RecBole item tokens."""
        back = {t: i for i, t in self.items.items()}
        return np.array([back[t] for t in tokens], dtype=object)


def write_benchmark_files(split: Split, folder: Path, tokens: Tokens | None = None) -> dict[str, int]:
    """Write the split as RecBole benchmark files (ids as ``tokens``); returns rows per part.

    A split without validation writes the test part as validation too: RecBole needs three
    files, we never validate on it (no early stopping), and RecBole's test-time history mask —
    all seen items minus the test items — is then exactly the training history.
    """
    tokens = tokens or Tokens.of(split)
    folder.mkdir(parents=True, exist_ok=True)
    parts = {"train": split.train, "valid": split.valid if split.valid is not None and len(split.valid) else split.test,
             "test": split.test}
    counts = {}
    for part, frame in parts.items():
        path = folder / f"{DATASET}.{part}.inter"
        us, it = tokens.users, tokens.items
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write("user_id:token\titem_id:token\n")
            fh.writelines(f"{us[u]}\t{it[i]}\n" for u, i in zip(frame.user.tolist(), frame.item.tolist()))
        counts[part] = len(frame)
    return counts


def _model_defaults(model: str) -> dict:
    import recbole
    import yaml

    path = Path(recbole.__file__).parent / "properties" / "model" / f"{model}.yaml"
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def check_params(config: SystemConfig) -> None:
    """Refuse hyperparameters the model does not have (RecBole would silently ignore them)."""
    known = set(_model_defaults(config.model)) | TRAINING_KEYS
    if config.model != "RaCT":
        known -= RACT_KEYS
    unknown = sorted(set(config.param_dict) - known)
    if unknown:
        raise ConfigError(f"system {config.name!r}: {config.model} has no parameter(s) {unknown}; "
                          f"it accepts {sorted(known)}")


def _device_options(device: str) -> dict:
    if device == "cpu":
        return {"use_gpu": False}
    if device == "cuda" or device.startswith("cuda:"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"device {device!r} requested but torch sees no CUDA device")
        return {"use_gpu": True, "gpu_id": device.split(":", 1)[1] if ":" in device else "0"}
    raise ConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")


@dataclass
class TrainedModel:
    """A trained RecBole model and what scoring needs. ``items`` is the catalogue (RecBole's item
    tokens without the padding token), in RecBole's internal id order."""

    config: SystemConfig
    model: object
    dataset: object
    items: np.ndarray
    device: str
    recbole_test: dict | None
    threads: int | None = 1
    tokens: Tokens | None = None

    def user_index(self, users: list[str]) -> np.ndarray:
        """RecBole's internal ids of our user ids."""
        ds = self.dataset
        names = [self.tokens.users[u] for u in users] if self.tokens is not None else list(users)
        return np.asarray(ds.token2id(ds.uid_field, names), dtype=np.int64).reshape(-1)

    def score(self, users: list[str]) -> np.ndarray:
        import torch
        from recbole.data.interaction import Interaction
        from recbole.model.abstract_recommender import AbstractRecommender

        ds = self.dataset
        uids = self.user_index(users)
        n_items = ds.item_num  # includes the padding id 0
        model = self.model
        with self._scoring_context(), torch.no_grad():
            model.eval()
            if type(model).full_sort_predict is not AbstractRecommender.full_sort_predict:
                inter = Interaction({ds.uid_field: torch.as_tensor(uids)}).to(model.device)
                scores = model.full_sort_predict(inter).view(len(uids), -1)
            else:
                scores = self._pairwise(uids, n_items)
            out = scores[:, 1:].detach().to("cpu").numpy()
        return out

    def _pairwise(self, uids: np.ndarray, n_items: int):
        import torch
        from recbole.data.interaction import Interaction

        ds, model = self.dataset, self.model
        per = max(1, MAX_PAIRS // n_items)
        items = torch.arange(n_items)
        rows = []
        for start in range(0, len(uids), per):
            chunk = torch.as_tensor(uids[start:start + per])
            inter = Interaction({ds.uid_field: chunk.repeat_interleave(n_items),
                                 ds.iid_field: items.repeat(len(chunk))}).to(model.device)
            rows.append(model.predict(inter).view(len(chunk), n_items).to("cpu"))
        return torch.cat(rows, dim=0)

    def _scoring_context(self):
        stack = contextlib.ExitStack()
        if self.config.model == "ADMMSLIM":
            stack.enter_context(_compat.no_admmslim_noise())
        stack.enter_context(_compat.torch_threads(self.threads))
        return stack


def _build(config: SystemConfig, options: dict, data_dir: Path, ckpt_dir: Path, device: str, epochs_override):
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import init_seed

    params = dict(config.param_dict)
    for key in RACT_KEYS:
        params.pop(key, None)
    if epochs_override is not None and config.family.kind == "neural":
        params["epochs"] = epochs_override
    if not config.family.negatives:
        params["train_neg_sample_args"] = None
    cd = {
        "data_path": str(data_dir),
        "checkpoint_dir": str(ckpt_dir),
        "benchmark_filename": list(PARTS),
        "load_col": {"inter": ["user_id", "item_id"]},
        "seed": config.seed,
        "reproducibility": True,
        "show_progress": False,
        "save_dataset": False,
        "save_dataloaders": False,
        "log_wandb": False,
        "worker": 0,
        "metrics": ["NDCG", "Recall"],
        "topk": [10],
        "valid_metric": "NDCG@10",
        "metric_decimal_place": 12,  # RecBole rounds metrics to 4 places by default
        "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "group_by": "user", "order": "RO", "mode": "full"},
        **_device_options(device),
        **params,
        **options,
    }
    with _compat.clean_argv():
        rb_config = Config(model=config.model, dataset=DATASET, config_dict=cd)
    init_seed(rb_config["seed"], rb_config["reproducibility"])
    dataset = create_dataset(rb_config)
    train_data, valid_data, test_data = data_preparation(rb_config, dataset)
    init_seed(rb_config["seed"] + rb_config["local_rank"], rb_config["reproducibility"])
    return rb_config, dataset, train_data, valid_data, test_data


def train(config: SystemConfig, split: Split, workdir: Path, device: str = "cpu",
          epochs_override: int | None = None, evaluate: bool = False, verbose: bool = False,
          threads: int | None = 1) -> TrainedModel:
    """Train ``config`` on ``split`` inside ``workdir`` (its own data and checkpoint folders).

    ``threads``: torch intra-op threads while training and scoring (None: torch's default). One
    is the default: on ML-100K NeuMF took 4–6 s with one thread and 61–72 s with two on a busy
    2-core machine (BPR: 1.3–5.3 s vs 4.4–10.6 s), and DGCF is reproducible only with one.
    """
    _compat.import_recbole()
    from recbole.utils import get_model, get_trainer

    check_params(config)
    data_dir = workdir / "data"
    tokens = Tokens.of(split)
    write_benchmark_files(split, data_dir / DATASET, tokens)
    has_valid = split.valid is not None and len(split.valid) > 0
    if config.model == "DGCF":
        threads = 1
    stack = contextlib.ExitStack()
    with stack:
        stack.enter_context(_compat.quiet_recbole(verbose))
        stack.enter_context(_compat.torch_threads(threads))
        stack.enter_context(_compat.trusted_torch_load())
        stages = _stages(config, epochs_override)
        prev_ckpt = None
        for stage_options, pretrain in stages:
            if prev_ckpt is not None:
                stage_options = {**stage_options, "pre_model_path": prev_ckpt}
            ckpt_dir = workdir / "checkpoints" / (stage_options.get("train_stage") or "model")
            rb_config, dataset, train_data, valid_data, test_data = _build(
                config, stage_options, data_dir, ckpt_dir, device, epochs_override)
            _check_counts(dataset, tokens, config)
            model = get_model(rb_config["model"])(rb_config, train_data._dataset).to(rb_config["device"])
            trainer = get_trainer(rb_config["MODEL_TYPE"], rb_config["model"])(rb_config, model)
            if pretrain:
                trainer.fit(train_data, None, verbose=verbose, saved=True, show_progress=False)
                prev_ckpt = trainer.saved_model_file
                continue
            use_valid = has_valid and config.family.kind == "neural"
            trainer.fit(train_data, valid_data if use_valid else None, verbose=verbose, saved=use_valid,
                        show_progress=False)
            if use_valid:
                import torch

                state = torch.load(trainer.saved_model_file, map_location=rb_config["device"], weights_only=False)
                model.load_state_dict(state["state_dict"])
                model.load_other_parameter(state.get("other_parameter"))
            recbole_test = None
            if evaluate:
                with _admmslim_quiet(config):
                    result = trainer.evaluate(test_data, load_best_model=False, show_progress=False)
                recbole_test = {k: float(v) for k, v in result.items()}
    items = tokens.item_ids(np.asarray(dataset.field2id_token[dataset.iid_field])[1:].astype(str).tolist())
    return TrainedModel(config, model, dataset, items, str(rb_config["device"]), recbole_test, threads, tokens)


def _check_counts(dataset, tokens: Tokens, config: SystemConfig) -> None:
    """RecBole must see exactly the split's users and catalogue (ids lost on the way would leave
    items unrankable or users unscored, silently)."""
    for what, field, ours in (("items", dataset.iid_field, tokens.items), ("users", dataset.uid_field, tokens.users)):
        got = set(np.asarray(dataset.field2id_token[field])[1:].astype(str).tolist())
        if got != set(ours.values()):
            lost, extra = len(set(ours.values()) - got), len(got - set(ours.values()))
            raise ConfigError(f"system {config.name!r}: RecBole read {len(got)} {what} from the split's files but "
                              f"the split has {len(ours)} ({lost} lost, {extra} unknown); the data files were not "
                              "read as written")


def _admmslim_quiet(config: SystemConfig):
    return _compat.no_admmslim_noise() if config.model == "ADMMSLIM" else contextlib.nullcontext()


def _stages(config: SystemConfig, epochs_override: int | None) -> list[tuple[dict, bool]]:
    """(extra RecBole options, is_pretrain) per stage; RaCT has three, every other model one."""
    if config.model != "RaCT":
        return [({}, False)]
    p = config.param_dict
    actor = epochs_override if epochs_override is not None else int(p.get("actor_epochs", 150))
    critic = epochs_override if epochs_override is not None else int(p.get("critic_epochs", 50))
    # the actor-critic finetune at the pretraining learning rate undid the actor on ML-100K
    # (nDCG@10 0.144 after pretraining, 0.05–0.13 after 10 finetune epochs depending on the seed)
    finetune = {"train_stage": "finetune"}
    if "finetune_learning_rate" in p:
        finetune["learning_rate"] = p["finetune_learning_rate"]
    return [
        ({"train_stage": "actor_pretrain", "pretrain_epochs": actor, "save_step": actor}, True),
        ({"train_stage": "critic_pretrain", "pretrain_epochs": critic, "save_step": critic}, True),
        (finetune, False),
    ]

