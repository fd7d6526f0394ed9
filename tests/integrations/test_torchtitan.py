"""BalancedTitanDataLoader: torchtitan's item format, every global batch's documents once over the
ranks in exactly ``g`` rows each, balanced by the cost model, resumed from its state; the docs'
code run (its torchtitan part where torchtitan is installed)."""

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import TimeCoefficients
from hydraulis.integrations.torchtitan import IGNORE_INDEX, BalancedTitanDataLoader, packed_row
from tests.integrations.helpers import long_tailed

TIME = TimeCoefficients(1e-6, 0.05, 30.0)
C = 4_096
DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def corpus(count=96, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 30_000, int(s) + 1).tolist() for s in long_tailed(count, C, seed)]


def loaders(documents, ranks=4, g=4, batch_size=16, **kwargs):
    return [BalancedTitanDataLoader(documents, batch_size=batch_size, time=TIME, max_tokens=C, micro_batches=g,
                                    dp_rank=r, dp_world_size=ranks, **kwargs) for r in range(ranks)]


def unpack(item):
    """The documents of a packed row: segments where positions restart, the padding dropped."""
    inputs, labels = item[0]["input"][0].tolist(), item[1][0].tolist()
    positions = item[0]["positions"][0].tolist()
    starts = [i for i, p in enumerate(positions) if p == 0] + [len(inputs)]
    return [inputs[a:b] + [labels[b - 1]] for a, b in itertools.pairwise(starts) if labels[a] != IGNORE_INDEX]


def test_worked_example_of_the_docstring():
    inputs, labels, positions = packed_row([[5, 6, 7], [8, 9]], 8)
    assert inputs.tolist() == [5, 6, 8, 0, 0, 0, 0, 0]
    assert labels.tolist() == [6, 7, 9] + [-100] * 5
    assert positions.tolist() == [0, 1, 0, 0, 1, 2, 3, 4]


@pytest.mark.parametrize("pad_rows", [False, True])
def test_items_have_torchtitans_format(pad_rows):
    loader = loaders(corpus(), pad_rows=pad_rows)[0]
    input_dict, labels = next(iter(loader))
    tokens = sum(int(loader.sampler.lengths[i]) for i in loader.sampler.plans()[0][0][0])
    assert set(input_dict) == {"input", "positions"}
    for tensor in (input_dict["input"], input_dict["positions"], labels):
        assert tuple(tensor.shape) == (1, C if pad_rows else tokens) and str(tensor.dtype) == "torch.int64"
    assert int((labels != IGNORE_INDEX).sum()) == tokens


@pytest.mark.parametrize("ranks, g", [(2, 4), (4, 4), (8, 4)])
def test_each_global_batch_is_dealt_once_over_the_ranks_in_g_rows_each(ranks, g):
    documents = corpus()
    ranks_loaders = loaders(documents, ranks=ranks, g=g, batch_size=g * ranks)
    streams = [iter(loader) for loader in ranks_loaders]
    for batch in ranks_loaders[0].sampler.global_batches():
        seen = [doc for stream in streams for _ in range(g) for doc in unpack(next(stream))]
        assert sorted(seen) == sorted(documents[int(i)] for i in batch)


def test_balanced_by_the_cost_model_against_round_robin():
    lengths = np.array([4_000, 100, 3_900, 100] + [100] * 28)
    documents = [[1] * int(s + 1) for s in lengths]
    ranks, g = 2, 2
    streams = [iter(loader) for loader in loaders(documents, ranks=ranks, g=g, batch_size=32)]

    def ms(sizes):
        return g * TIME.c + sum(TIME.a * s * s + TIME.b * s for s in sizes)

    ours = [ms([len(d) - 1 for _ in range(g) for d in unpack(next(stream))]) for stream in streams]
    round_robin = [ms(lengths[r::ranks].tolist()) for r in range(ranks)]
    assert max(ours) < max(round_robin)
    assert max(ours) / min(ours) < max(round_robin) / min(round_robin)


@pytest.mark.parametrize("taken", [1, 5, 18, 25])
def test_state_dict_resumes_at_the_same_batch(taken):
    documents = corpus()
    first = loaders(documents, ranks=2, g=6, batch_size=12)[1]
    stream = iter(first)
    for _ in range(taken):
        next(stream)
    state = first.state_dict()
    expected = [unpack(next(stream)) for _ in range(4)]
    resumed = loaders(documents, ranks=2, g=6, batch_size=12)[1]
    resumed.load_state_dict(state)
    assert set(state) == {"dp_rank_1", "world_size"}
    assert [unpack(item) for item in itertools.islice(resumed, 4)] == expected


def test_finite_loader_stops_after_one_epoch():
    loader = loaders(corpus(), ranks=2, g=6, batch_size=12, infinite=False)[0]
    assert sum(1 for _ in loader) == 6 * len(loader.sampler.global_batches())


def test_an_empty_state_is_a_fresh_run():
    loader = loaders(corpus(), ranks=2, g=6, batch_size=12)[0]
    loader.load_state_dict({})
    assert loader.sampler.state_dict()["done"] == 0


@pytest.mark.parametrize("build, field", [
    (lambda: next(iter(loaders(corpus(), g=1)[0])), "micro_batches"),
    (lambda: loaders([[1]] * 32), "lengths"),
    (lambda: loaders(corpus(), lengths=[5] * 3), "lengths"),
    (lambda: next(iter(loaders(corpus(), lengths=[len(d) - 1 for d in corpus()])[0])), "documents["),
    (lambda: loaders(corpus(), ranks=2, g=6, batch_size=12)[0].load_state_dict({"world_size": 4, "dp_rank_0": {}}), "state.world_size"),
    (lambda: loaders(corpus(), ranks=2, g=6, batch_size=12)[0].load_state_dict({"world_size": 2, "dp_rank_1": {}}), "state"),
    (lambda: packed_row([[1] * 10], 8), "micro-batch tokens"),
])
def test_bad_input_names_the_field(build, field):
    with pytest.raises(HydraulisError, match=field.replace("[", r"\[")):
        build()


def docs_code() -> tuple[str, str]:
    """The docs' torchtitan blocks: the loader on its own, and the ``BaseDataLoader`` of one's own."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    alone = next(b for b in blocks if "BalancedTitanDataLoader(" in b and "(BaseDataLoader)" not in b)
    return alone, next(b for b in blocks if "(BaseDataLoader)" in b)


def test_docs_code_gives_this_ranks_first_row():
    namespace: dict = {}
    exec(compile(docs_code()[0], str(DOCS), "exec"), namespace)
    loader, documents = namespace["loader"], namespace["documents"]
    first = loader.sampler.plans()[0][loader.dp_rank][0]
    assert unpack((namespace["input_dict"], namespace["labels"])) == [documents[i] for i in first]


def test_docs_loader_in_torchtitan(tmp_path):
    """Built as torchtitan's ``Trainer`` builds its loader; a row through the debug model's
    forward (FlexAttention has no backward on the CPU); its state through DCP."""
    dataloader = pytest.importorskip("torchtitan.components.dataloader")
    llama3 = pytest.importorskip("torchtitan.models.llama3")
    import torch
    import torch.distributed.checkpoint as dcp

    namespace: dict = {}
    exec(compile("\n".join(docs_code()), str(DOCS), "exec"), namespace)
    kinds = namespace["HydraulisTitanLoader"].Config()

    def build():
        return kinds.build(dp_world_size=2, dp_rank=1, tokenizer=None, seq_len=1_024, local_batch_size=1,
                           snapshot_every_n_steps=None)

    loader = build()
    assert isinstance(loader, dataloader.BaseDataLoader)
    stream = iter(loader)
    input_dict, labels = next(stream)
    model = llama3.model_registry("debugmodel").model.build()
    model.init_weights(buffer_device=None)
    with torch.no_grad():
        logits = model(input_dict["input"], positions=input_dict["positions"],
                       attention_masks=model.get_attention_masks(positions=input_dict["positions"]))
    assert logits.shape[:2] == input_dict["input"].shape
    assert torch.isfinite(torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten()))
    next(stream)
    dcp.save({"dataloader": loader}, checkpoint_id=str(tmp_path))
    expected = next(stream)
    resumed = build()
    dcp.load({"dataloader": resumed}, checkpoint_id=str(tmp_path))
    assert unpack(next(iter(resumed))) == unpack(expected)
