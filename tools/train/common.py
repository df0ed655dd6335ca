# Shared helpers for the training pipeline: JSON configs with inheritance, seeding, logging, clocks.
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(path) -> dict:
    """Reads a JSON config; a top-level "base" names another config (same folder) that it overrides."""
    path = Path(path)
    if not path.exists():
        path = CONFIG_DIR / path
    cfg = json.loads(path.read_text())
    base = cfg.pop("base", None)
    return deep_merge(load_config(path.parent / base), cfg) if base else cfg


def seed_everything(seed: int):
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
    except ImportError:
        pass


def write_json(path, obj, sort_keys=False):
    Path(path).write_text(json.dumps(obj, indent=2, sort_keys=sort_keys) + "\n")


class Log:
    """Prints with the elapsed time since the pipeline started, and appends to a log file."""

    start = time.time()
    file = None

    @classmethod
    def open(cls, path):
        cls.file = open(path, "a", buffering=1)

    @classmethod
    def elapsed(cls) -> float:
        return time.time() - cls.start


def log(*parts):
    line = f"[{Log.elapsed():7.1f}s] " + " ".join(str(p) for p in parts)
    print(line, flush=True)
    if Log.file:
        Log.file.write(line + "\n")


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def die(msg: str):
    log("ERROR:", msg)
    sys.exit(1)
