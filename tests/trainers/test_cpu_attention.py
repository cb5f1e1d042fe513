"""TRL's packed tree attention as computed on a CPU (verihub.trainers.cpu_attention) equals plain causal
attention over each sample on its own: shared prefixes, grouped-query heads, and the end-aligned mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verihub.trainers.cpu_attention import varlen_attention


def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(tokens, heads, dim) in and out; kv heads repeated for grouped-query attention."""
    repeats = q.shape[1] // k.shape[1]
    q, k, v = (
        q.transpose(0, 1),
        k.transpose(0, 1).repeat_interleave(repeats, 0),
        v.transpose(0, 1).repeat_interleave(repeats, 0),
    )
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(0, 1)


def test_a_packed_trie_attends_as_each_sample_alone() -> None:
    torch.manual_seed(0)
    heads, kv_heads, dim = 4, 2, 8
    # two samples sharing their first 3 tokens: A = 0 1 2 3 4 5, B = 0 1 2 6 7 (packed token numbers)
    q, k, v = torch.randn(8, heads, dim), torch.randn(8, kv_heads, dim), torch.randn(8, kv_heads, dim)
    cu_q = torch.tensor([0, 3, 6, 8])  # segments: the shared prefix, A's tail, B's tail
    paths = [[0, 1, 2], [0, 1, 2, 3, 4, 5], [0, 1, 2, 6, 7]]
    kv_index = torch.tensor([token for path in paths for token in path])
    cu_k = torch.tensor([0, 3, 9, 14])
    packed = varlen_attention(q, k.index_select(0, kv_index), v.index_select(0, kv_index), cu_q, cu_k)
    a, b = torch.tensor(paths[1]), torch.tensor(paths[2])
    alone_a = causal(q[a], k[a], v[a])
    alone_b = causal(q[b], k[b], v[b])
    torch.testing.assert_close(packed[:6], alone_a)
    torch.testing.assert_close(packed[6:], alone_b[3:])
    torch.testing.assert_close(packed[:3], alone_b[:3])


def test_gradients_flow_through_every_segment() -> None:
    q = torch.randn(5, 2, 4, requires_grad=True)
    k, v = torch.randn(5, 2, 4, requires_grad=True), torch.randn(5, 2, 4, requires_grad=True)
    out = varlen_attention(q, k, v, torch.tensor([0, 2, 5]), torch.tensor([0, 2, 5]))
    out.sum().backward()
    assert q.grad is not None and bool(q.grad.abs().sum() > 0) and k.grad is not None and v.grad is not None
