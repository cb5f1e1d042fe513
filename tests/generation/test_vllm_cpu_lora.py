"""verihub's vLLM plugin for the CPU engine (engines/vllm-cpu/verihub_vllm_cpu): LoRA applied per adapter
instead of vLLM's per-token copy of the adapter's matrices. It must be what the installed engine loads, give
vLLM's own sums for every op (one adapter, several, the last slot's ``-1``, prefill and decode), and make the
server's answers with an adapter the trainer's own (tests/trainers/test_async_grpo.py checks that end to end)."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

pytestmark = pytest.mark.slow


def run_in_engine(vllm_python: str, code: str) -> dict[str, object]:
    done = subprocess.run(
        [vllm_python, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_engine_loads_the_plugin_in_place_of_its_per_token_ops(vllm_python: str) -> None:
    found = run_in_engine(
        vllm_python,
        """
        import json
        from vllm.plugins import load_general_plugins
        from vllm.lora.punica_wrapper import punica_cpu
        before = punica_cpu.bgmv_shrink.__module__
        load_general_plugins()
        ops = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice", "sgmv_shrink", "sgmv_expand", "sgmv_expand_slice")
        print(json.dumps({"before": before, "after": {name: getattr(punica_cpu, name).__module__ for name in ops}}))
        """,
    )
    assert found["before"].startswith("vllm.")
    assert set(found["after"].values()) == {"verihub_vllm_cpu"}, found


def test_each_op_gives_vllms_own_sums(vllm_python: str) -> None:
    worst = run_in_engine(
        vllm_python,
        """
        import json, torch
        import verihub_vllm_cpu as ours
        from vllm.lora.ops.torch_ops import lora_ops as theirs
        torch.manual_seed(0)
        lengths = torch.tensor([3, 1, 4])  # prefill: three sequences of these many tokens
        cases = {
            "one adapter": (torch.full((8,), 2), torch.tensor([2, 2, 2])),
            "several, and the last slot": (torch.tensor([0, 1, 1, -1, 2, 0, -1, 1]), torch.tensor([1, -1, 0])),
        }
        worst = {}
        for dtype in (torch.float32, torch.bfloat16):
            for case, (tokens, sequences) in cases.items():
                x = torch.randn(8, 48, dtype=dtype)
                a, b = torch.randn(4, 1, 16, 48, dtype=dtype), torch.randn(4, 1, 40, 16, dtype=dtype)
                runs = {}
                for name, ops in (("theirs", theirs), ("ours", ours)):
                    shrunk, grown = torch.zeros(8, 16), torch.ones(8, 64, dtype=dtype)
                    ops.bgmv_shrink(x, a, shrunk, tokens, 0.5)
                    ops.bgmv_expand(shrunk, b, grown, tokens, True)
                    ops.bgmv_expand_slice(shrunk, b, grown, tokens, 20, 40, True)
                    prefill, spread = torch.zeros(8, 16), torch.zeros(8, 64, dtype=dtype)
                    ops.sgmv_shrink(x, a, prefill, None, lengths, sequences, 3, 4, 8, 2.0)
                    ops.sgmv_expand(prefill, b, spread, None, lengths, sequences, 3, 4, 8, False)
                    ops.sgmv_expand_slice(prefill, b, spread, None, lengths, sequences, 3, 4, 8, 10, 40, True)
                    runs[name] = (shrunk, grown, prefill, spread)
                scale = max(float(t.abs().max()) for t in runs["theirs"])
                worst[f"{dtype} {case}"] = max(
                    float((mine.float() - want.float()).abs().max()) / scale
                    for mine, want in zip(runs["ours"], runs["theirs"])
                )
        print(json.dumps(worst))
        """,
    )
    assert len(worst) == 4
    for case, difference in worst.items():  # float sums in another order; bf16 rounds the same products
        assert difference < 1e-5, (case, difference)
