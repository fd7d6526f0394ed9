"""Model and device presets, read from ``resources/presets.json`` (figures live in data)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import DeviceSpec, ModelSpec


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(resources.files("hydraulis.resources").joinpath("presets.json").read_text())


def model_names() -> tuple[str, ...]:
    return tuple(_table()["models"])


def device_names() -> tuple[str, ...]:
    return tuple(_table()["devices"])


def model_preset(name: str, layers: int | None = None) -> ModelSpec:
    """The preset ``name``; ``layers`` overrides the layer count (e.g. to profile a few layers)."""
    entry = _table()["models"].get(name)
    if entry is None:
        raise HydraulisError("model", name, f"is not a preset; choose one of {', '.join(model_names())}")
    fields = dict(entry)
    if layers is not None:
        fields["layers"] = layers
    return ModelSpec(name=name, **fields)


def device_preset(name: str) -> DeviceSpec:
    entry = _table()["devices"].get(name)
    if entry is None:
        raise HydraulisError("device", name, f"is not a preset; choose one of {', '.join(device_names())}")
    return DeviceSpec(name=name, **entry)


FALLBACK_GPU = "h100-80g"
"""The preset that prices a GPU whose name matches none of ``gpu_names``."""


def gpu_preset(name: str) -> str | None:
    """The device preset of a CUDA device called ``name`` (``torch.cuda.get_device_name``): the
    first of the table's ``gpu_names`` patterns found in it, ignoring case (None: no pattern
    matches). E.g. ``NVIDIA H200`` → ``h200``, ``NVIDIA A100-SXM4-40GB`` → ``a100-40g``."""
    upper = name.upper()
    return next((preset for pattern, preset in _table()["gpu_names"] if pattern.upper() in upper), None)


BUNDLED_POOLS = ("7b", "13b")


def pool_location(text: str) -> str:
    """A pool path, or ``bundled:7b`` / ``bundled:13b`` for the original pools shipped with
    Hydraulis (measured by the original system on A800 nodes)."""
    if not text.startswith("bundled:"):
        return text
    name = text.removeprefix("bundled:")
    if name not in BUNDLED_POOLS:
        raise HydraulisError("pool", text, f"is not bundled; choose one of {', '.join('bundled:' + n for n in BUNDLED_POOLS)}")
    pool = resources.files("hydraulis.resources").joinpath("reference_pools", f"parallel_scheme_space_{name}.json")
    return str(pool)


def model_matching(hidden: int, layers: int, vocab: int) -> ModelSpec:
    """The preset with this hidden size and layer count, with ``vocab`` as given; an error
    naming the shape when none matches (used to import pools that state only H, L, V)."""
    for name, entry in _table()["models"].items():
        if entry["hidden"] == hidden and entry["layers"] == layers:
            return ModelSpec(name=name, **{**entry, "vocab": vocab})
    raise HydraulisError("model_config", {"H": hidden, "L": layers},
                         "matches no model preset; pass the model preset explicitly")
