"""Gradients of bf16 compute accumulate over micro-batches in fp32."""

import torch

from hydraulis.runtime.gradients import GradientBuffers


def _step(buffers: GradientBuffers, param: torch.nn.Parameter, inputs: list[torch.Tensor]) -> None:
    for x in inputs:
        (param * x).sum().backward()


def test_bf16_gradients_are_summed_in_fp32_and_cleared_between_steps():
    param = torch.nn.Parameter(torch.ones(64, dtype=torch.bfloat16))
    buffers = GradientBuffers([param], fp32_main=True)
    generator = torch.Generator().manual_seed(0)
    inputs = [(torch.rand(64, generator=generator) * 1e-2 + 1).to(torch.bfloat16) for _ in range(64)]
    _step(buffers, param, inputs)
    exact = torch.stack([x.float() for x in inputs]).sum(0)
    (main,) = buffers.grads()
    assert main.dtype == torch.float32 and param.grad is None
    assert torch.equal(main, exact)
    narrow = torch.zeros(64, dtype=torch.bfloat16)
    for x in inputs:
        narrow += x
    assert (narrow.float() - exact).abs().max() > 0.1
    buffers.clear()
    _step(buffers, param, inputs[:1])
    assert torch.equal(buffers.grads()[0], inputs[0].float())
    buffers.release()
    assert buffers.grads() == [None]


def test_fp32_compute_keeps_the_gradient_in_place():
    param = torch.nn.Parameter(torch.ones(4))
    buffers = GradientBuffers([param], fp32_main=False)
    _step(buffers, param, [torch.full((4,), 2.0), torch.full((4,), 3.0)])
    assert buffers.grads()[0] is param.grad and torch.equal(param.grad, torch.full((4,), 5.0))
    buffers.clear()
    assert param.grad is None
