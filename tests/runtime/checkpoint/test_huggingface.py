"""Hugging Face Llama directories in and out: every rank reads exactly its share of the weights
into any optimizer layout, bad directories are refused with one line, and a ``transformers``
model survives ``train --init-from … --steps 0`` → ``export`` bit for bit."""

import json

import pytest
import safetensors
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import OptimizerLayout
from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.checkpoint.hf_directory import read_hf_directory
from hydraulis.runtime.checkpoint.hf_export import export_checkpoint
from hydraulis.runtime.checkpoint.hf_import import load_hf_weights
from hydraulis.runtime.checkpoint.llama_mapping import hf_name
from hydraulis.runtime.optimizer.master import OptimizerShard, assemble_canonical
from hydraulis.sharding.ownership import OptimizerOwnership
from tests.cli.helpers import hydraulis

CPU = torch.device("cpu")
CONFIG = dict(vocab_size=128, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, tie_word_embeddings=False)
LAYOUTS = [(OptimizerLayout(1, 1, 1), 1), (OptimizerLayout(4, 1, 1), 4), (OptimizerLayout(1, 2, 2), 4),
           (OptimizerLayout(2, 2, 1), 4), (OptimizerLayout(1, 4, 1), 4), (OptimizerLayout(3, 1, 1), 6)]
"""ZeRO-1 chunks, tp slices by rows and by columns, kv heads shared by tp ranks (2 heads, tp 4),
and a layout smaller than the world (ranks 3–5 own nothing)."""


def hf_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn_like(param))
    return model


def assert_loads_bitwise_equal(folder, original: LlamaForCausalLM) -> None:
    loaded = LlamaForCausalLM.from_pretrained(folder).state_dict()
    expected = original.state_dict()
    assert loaded.keys() == expected.keys()
    for name, value in expected.items():
        assert loaded[name].dtype == value.dtype and torch.equal(loaded[name], value), name


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The same random model saved as one fp32 file and as bf16 shards with an index."""
    model = hf_model()
    root = tmp_path_factory.mktemp("hf")
    model.save_pretrained(root / "fp32")
    model.to(torch.bfloat16).save_pretrained(root / "bf16-sharded", max_shard_size="20KB")
    assert (root / "bf16-sharded" / "model.safetensors.index.json").is_file()
    return root


@pytest.mark.parametrize("source", ["fp32", "bf16-sharded"])
@pytest.mark.parametrize("layout, world", LAYOUTS)
def test_every_rank_fills_its_buffer_with_exactly_the_hugging_face_weights(sources, source, layout, world):
    directory = read_hf_directory(sources / source)
    placement = OptimizerOwnership(directory.model, layout, world)
    shards = [OptimizerShard(placement, rank, RuntimeOptions(), CPU) for rank in range(world)]
    for shard in shards:
        load_hf_weights(directory, shard)
    loaded = assemble_canonical(placement, lambda rank: shards[rank].master)
    with safetensors.safe_open(str(sources / "fp32" / "model.safetensors"), framework="pt") as original:
        for name, value in loaded.items():
            expected = original.get_tensor(hf_name(name))
            if source.startswith("bf16"):
                expected = expected.to(torch.bfloat16).float()
            assert torch.equal(value, expected), name


def test_a_rank_reads_its_own_elements_and_at_most_a_partial_row_more_per_region(sources, monkeypatch):
    directory = read_hf_directory(sources / "fp32")
    placement = OptimizerOwnership(directory.model, OptimizerLayout(2, 2, 1), 4)
    read = []
    open_file = safetensors.safe_open

    class Counting:
        def __init__(self, handle):
            self.handle = handle

        def get_slice(self, name):
            part = self.handle.get_slice(name)

            class Sliced:
                def __getitem__(self, index):
                    values = part[index]
                    read.append(values.numel())
                    return values

            return Sliced()

    class CountingOpen:
        def __init__(self, *args, **kwargs):
            self.context = open_file(*args, **kwargs)

        def __enter__(self):
            return Counting(self.context.__enter__())

        def __exit__(self, *exc):
            return self.context.__exit__(*exc)

    monkeypatch.setattr(safetensors, "safe_open", CountingOpen)
    for rank in range(4):
        shard = OptimizerShard(placement, rank, RuntimeOptions(), CPU)
        read.clear()
        load_hf_weights(directory, shard)
        slack = sum(2 * (region.spec.shape[1] if not region.spec.tp_dim else region.length)
                    for region in shard.regions if len(region.spec.shape) == 2)
        assert shard.master.numel() <= sum(read) <= shard.master.numel() + slack


def _write(folder, config: dict | None, tensors: dict, weights: str) -> None:
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if weights == "file":
        save_file(tensors, str(folder / "model.safetensors"))
    elif weights == "index of a missing file":
        index = {name: "model-00001-of-00001.safetensors" for name in tensors}
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))


def _config(**changes) -> dict:
    return {**LlamaConfig(**CONFIG).to_dict(), **changes}


BAD = {
    "no config": (None, {}, "holds no config.json"),
    "not a llama": (_config(model_type="gpt2"), {}, "model_type: 'gpt2' must be 'llama'"),
    "tied head": (_config(tie_word_embeddings=True), {}, "tie_word_embeddings: True must be False"),
    "scaled rope": (_config(rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}), {},
                    "rope_parameters.rope_type: 'llama3' must be 'default'"),
    "heads do not divide": (_config(num_attention_heads=5), {}, "hidden_size: 32 must be a multiple"),
    "missing tensor": (_config(), {"drop": "lm_head.weight"}, "has no tensor lm_head.weight"),
    "mis-shaped tensor": (_config(), {"shape": "model.norm.weight"}, "model.norm.weight: [31] is the wrong shape"),
    "float64": (_config(), {"dtype": "model.norm.weight"}, "'F64' is a dtype we cannot hold"),
    "a bias": (_config(), {"add": "model.layers.0.self_attn.q_proj.bias"}, "is not a weight of a LlamaForCausalLM"),
    "no weights": (_config(), {"weights": "none"}, "holds neither model.safetensors nor"),
    "index of a missing file": (_config(), {"weights": "index of a missing file"}, "names a file that does not exist"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_directory_is_refused_naming_the_file_and_what_was_expected(tmp_path, case):
    config, change, words = BAD[case]
    tensors = {name: value.clone() for name, value in hf_model().state_dict().items()}
    if "drop" in change:
        del tensors[change["drop"]]
    if "shape" in change:
        tensors[change["shape"]] = tensors[change["shape"]][:-1]
    if "dtype" in change:
        tensors[change["dtype"]] = tensors[change["dtype"]].double()
    if "add" in change:
        tensors[change["add"]] = torch.zeros(32)
    folder = tmp_path / "model"
    _write(folder, config, tensors, change.get("weights", "file"))
    with pytest.raises(HydraulisError) as error:
        read_hf_directory(folder)
    assert words in str(error.value)


@pytest.mark.distributed
def test_transformers_model_survives_conversion_and_export_bitwise(sources, tmp_path):
    """The acceptance: save_pretrained → train --init-from --steps 0 → export → from_pretrained."""
    original = hf_model()
    checkpoint, output = tmp_path / "ckpt", tmp_path / "out"
    converted = hydraulis("train", "--init-from", str(sources / "fp32"), "--strategy", "1,2,1+1,1,2", "--steps", "0",
                          "--checkpoint-dir", str(checkpoint), "--device", "cpu")
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout.strip() == f"initial checkpoint: {checkpoint / 'step-00000000'}"
    exported = hydraulis("export", str(checkpoint / "step-00000000"), "-o", str(output))
    assert exported.returncode == 0, exported.stderr
    assert sorted(p.name for p in output.iterdir()) == ["config.json", "model.safetensors"]
    assert_loads_bitwise_equal(output, original)

    summary = export_checkpoint(checkpoint / "step-00000000", tmp_path / "sharded", max_shard_bytes=40_000)
    assert len(summary.files) > 2 and (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    assert all((tmp_path / "sharded" / file).stat().st_size <= 40_000 + 4096 for file in summary.files)
    assert_loads_bitwise_equal(tmp_path / "sharded", original)

    again = hydraulis("export", str(checkpoint / "step-00000000"), "-o", str(output))
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "exists and is not an empty directory" in again.stderr
    assert not (tmp_path / "out.partial").exists()

    resumed = hydraulis("train", "--resume", str(checkpoint), "--strategy", "1,1,2", "--steps", "1", "--nproc", "2",
                        "--token-budget", "128", "--device", "cpu")  # other data: a step-0 checkpoint allows it
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize("args, words", [
    (("train", "--init-from", "nowhere", "--strategy", "1,1,1", "--steps", "0", "--checkpoint-dir", "c"),
     "init_from: 'nowhere' is not a directory"),
    (("train", "--model", "tiny", "--init-from", ".", "--strategy", "1,1,1", "--steps", "1"),
     "comes from init_from's config.json"),
    (("export", "nowhere", "-o", "out"), "checkpoint: 'nowhere' holds no manifest.json"),
])
def test_bad_command_lines_exit_2_with_one_line(args, words):
    result = hydraulis(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr
