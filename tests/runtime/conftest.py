"""In-process runtime tests run on one intra-op thread, as every rank does (``--threads 1``):
on a loaded machine two spinning threads per process make a kernel many times slower."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
