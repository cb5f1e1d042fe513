"""TRL's packed "tree" attention, computed on a CPU.

TRL's asynchronous GRPO trainer packs each training row's samples into a prefix trie and attends with a
CUDA flash-attention kernel it downloads from a model hub (``kernels``). On a machine without a GPU this
module computes the same attention with PyTorch's own ``scaled_dot_product_attention``, one trie segment at
a time: each segment's queries see the keys of their root-to-segment path, causally, aligned at its end
(flash-attention's varlen convention). Registered under TRL's attention name, it replaces the kernel only
where there is no CUDA device; TRL's own path is unchanged elsewhere.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_cpu_tree_attention", "varlen_attention"]


def varlen_attention(
    query: Any, key: Any, value: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, *, scale: float | None = None
) -> Any:
    """Attention over variable-length segments: ``query`` is ``(tokens, heads, dim)``, ``key`` and ``value``
    ``(path tokens, kv heads, dim)``; segment ``s`` is ``query[cu_q[s]:cu_q[s+1]]`` against
    ``key[cu_k[s]:cu_k[s+1]]``, query ``i`` seeing key ``j`` when ``j <= i + len_k - len_q``."""
    import torch
    import torch.nn.functional as F

    repeats = query.shape[1] // key.shape[1]  # grouped-query attention: each kv head serves this many heads
    outputs = []
    for segment in range(len(cu_seqlens_q) - 1):
        q_start, q_end = int(cu_seqlens_q[segment]), int(cu_seqlens_q[segment + 1])
        k_start, k_end = int(cu_seqlens_k[segment]), int(cu_seqlens_k[segment + 1])
        q = query[q_start:q_end].transpose(0, 1)
        k = key[k_start:k_end].transpose(0, 1).repeat_interleave(repeats, dim=0)
        v = value[k_start:k_end].transpose(0, 1).repeat_interleave(repeats, dim=0)
        mask = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device=q.device).tril(k.shape[1] - q.shape[1])
        outputs.append(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale).transpose(0, 1))
    return torch.cat(outputs, dim=0)


def _tree_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    *,
    tree_kv_index: Any,
    tree_cu_seqlens_q: Any,
    tree_cu_seqlens_k: Any,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **_: Any,
) -> tuple[Any, None]:
    """TRL's ``tree_attention`` contract (one packed row, ``(1, heads, tokens, dim)`` in), on the CPU."""
    if sliding_window or softcap:
        raise NotImplementedError("packed attention on a CPU supports neither sliding windows nor soft-capping")
    query, key, value = (x.transpose(1, 2)[0] for x in (query, key, value))
    out = varlen_attention(
        query,
        key.index_select(0, tree_kv_index),
        value.index_select(0, tree_kv_index),
        tree_cu_seqlens_q,
        tree_cu_seqlens_k,
        scale=scaling,
    )
    return out.unsqueeze(0), None


def register_cpu_tree_attention() -> None:
    """Put the CPU computation under TRL's tree-attention name (call it after TRL registered its own)."""
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION

    AttentionInterface.register(TREE_ATTENTION, _tree_attention)
