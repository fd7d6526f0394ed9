"""A Hugging Face Llama directory, read and checked before any rank starts (no torch here: only
``config.json`` and the safetensors headers are read).

A directory as ``save_pretrained`` writes it::

    config.json                              a LlamaConfig (:mod:`.llama_mapping`)
    model.safetensors                        every weight, or
    model.safetensors.index.json             {"weight_map": {tensor name: shard file}, ...}
    model-00001-of-00002.safetensors …       the shards it names

:func:`read_hf_directory` turns it into an :class:`HfDirectory`: the model (from ``config.json``)
and, for each of our parameters, the file, name and dtype of its tensor — after checking that
every weight is there once, with the shape the config implies and a dtype the fp32 master
weights hold exactly (F32, BF16, F16), and that nothing else is (a bias, a tied head's missing
``lm_head.weight``). Each problem is one :class:`~hydraulis.base.errors.HydraulisError` naming the
file, the tensor or field, and what was expected. The ranks then read only their own slices
(:mod:`.hf_import`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.types import ModelSpec
from hydraulis.runtime.checkpoint.llama_mapping import IGNORED_SUFFIXES, hf_name, model_from_hf_config
from hydraulis.sharding.parameters import parameter_specs

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
HELD_DTYPES = ("F32", "BF16", "F16")
"""safetensors dtypes whose every value fp32 holds exactly."""


@dataclass(frozen=True)
class HfTensor:
    """Where one of our parameters is: tensor ``name`` of ``file`` (relative to the directory),
    stored as ``dtype`` (safetensors' name, e.g. ``BF16``)."""

    file: str
    name: str
    dtype: str


@dataclass(frozen=True)
class HfDirectory:
    """A checked Hugging Face Llama directory: its model and, by our parameter name, its tensors."""

    folder: Path
    model: ModelSpec
    tensors: dict[str, HfTensor]


def read_hf_directory(path: str | Path, field: str = "init_from") -> HfDirectory:
    """Read and check the directory ``path`` (module docstring); errors name ``field`` when
    the directory itself is wrong."""
    folder = Path(path)
    require(folder.is_dir(), field, str(path), "is not a directory (a Hugging Face model directory was expected)")
    config_path = folder / CONFIG_FILE
    require(config_path.is_file(), field, str(path), f"holds no {CONFIG_FILE} (a Hugging Face model directory has one)")
    model = model_from_hf_config(_read_json(config_path), folder.resolve().name, str(config_path))
    found = _headers(folder, field)
    tensors = {}
    for spec in parameter_specs(model):
        name = hf_name(spec.name, model)
        require(name in found, field, str(path), f"has no tensor {name} (shape {list(spec.shape)} was expected)")
        file, shape, dtype = found.pop(name)
        where = f"{folder / file}: {name}"
        require(tuple(shape) == spec.shape, where, list(shape),
                f"is the wrong shape: {list(spec.shape)} was expected from {CONFIG_FILE}")
        require(dtype in HELD_DTYPES, where, dtype, f"is a dtype we cannot hold: one of {', '.join(HELD_DTYPES)} was expected")
        tensors[spec.name] = HfTensor(file, name, dtype)
    for name, (file, shape, _) in sorted(found.items()):
        require(name.endswith(IGNORED_SUFFIXES), f"{folder / file}: {name}", list(shape),
                "is not a weight of a LlamaForCausalLM of this config (no biases, no other modules)")
    return HfDirectory(folder, model, tensors)


def _headers(folder: Path, field: str) -> dict[str, tuple[str, list[int], str]]:
    """``{tensor name: (file, shape, dtype)}`` of every weight file, from their headers."""
    from safetensors import safe_open

    files = _weight_files(folder, field)
    found: dict[str, tuple[str, list[int], str]] = {}
    for file, names in files.items():
        path = folder / file
        require(path.is_file(), str(folder / INDEX_FILE), file, "names a file that does not exist")
        try:
            with safe_open(str(path), framework="numpy") as handle:
                header = {name: handle.get_slice(name) for name in handle.keys()}
                entries = {name: (file, part.get_shape(), part.get_dtype()) for name, part in header.items()}
        except Exception as error:  # safetensors raises its own error types for any unreadable file
            raise HydraulisError(str(path), file, f"is not a readable safetensors file ({error})") from None
        for name in names if names is not None else entries:
            require(name in entries, str(path), name, f"is missing: {INDEX_FILE} places it in this file")
            require(name not in found, str(path), name, f"is in {found[name][0] if name in found else ''} too")
            found[name] = entries[name]
    return found


def _weight_files(folder: Path, field: str) -> dict[str, list[str] | None]:
    """Each weight file and the tensors the index places in it (None: a single file, all of it)."""
    index = folder / INDEX_FILE
    if index.is_file():
        document = _read_json(index)
        weight_map = document.get("weight_map") if isinstance(document, dict) else None
        require(isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values()),
                f"{index}: weight_map", type(weight_map).__name__, "must map tensor names to file names")
        files: dict[str, list[str] | None] = {}
        for name, file in weight_map.items():
            require(Path(file).name == file, f"{index}: weight_map.{name}", file,
                    "must name a file in the directory itself")
            files.setdefault(file, []).append(name)
        return files
    require((folder / WEIGHTS_FILE).is_file(), field, str(folder),
            f"holds neither {WEIGHTS_FILE} nor {INDEX_FILE} (the weights in safetensors were expected)")
    return {WEIGHTS_FILE: None}


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HydraulisError(str(path), path.name, f"is not readable JSON ({error})") from None
