"""The suite: programs taken from real model layers, at the models' own sizes (issue 19).

Each entry names the model and layer it comes from, its dtype and shape, and the search
settings a user passes following the README: no arguments for norm + linear and MLP programs
(``graph.superoptimize()``), ``"attention", search_seconds=30`` for attention (the README's
advice), ``"lora", search_seconds=30`` for LoRA (Mirage's LoRA preset). ``small`` scales a
program down with its structure kept (ranks, dtypes, ops, which dims are 1), for CPU tests.

    >>> p = by_name("gated_mlp_silu_llama3_8b_b1")
    >>> p.build().inputs[1].dims
    (4096, 14336)
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import mirage_lab as mi
from mirage_lab.errors import MirageLabError
from mirage_lab.ir.kernel_graph import KernelGraph

from .kinds import BUILDERS

ATTENTION = ("attention", 30.0)   # README: graph.superoptimize("attention", search_seconds=30)
LORA = ("lora", 30.0)
PLAIN = (None, None)              # README: graph.superoptimize()

# caps of the small (CPU test) variant: powers of two, so every divisibility of the full shape holds
SMALL_CAPS = {"rows": 4, "hidden": 64, "out": 64, "inter": 64, "rank": 8, "groups": 2, "q_rows": 8,
              "head_dim": 16, "kv_len": 64}


@dataclass(frozen=True)
class SuiteProgram:
    """One suite program: a real layer, its shape, its dtype and the user's search settings."""

    name: str
    kind: str                          # a key of kinds.BUILDERS
    source: str                        # model, layer and where the sizes come from
    dtype: str                         # "float16" | "bfloat16"
    shape: dict[str, Any]              # the builder's keyword arguments, full size
    settings: tuple[str | None, float | None] = PLAIN   # (config, search_seconds) as the README has them
    library: str | None = None         # kinds.LIBRARIES key: a library kernel computing the same function
    phase: str = "decode"              # decode | prefill
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> str | None:
        return self.settings[0]

    @property
    def search_seconds(self) -> float | None:
        return self.settings[1]

    def small_shape(self) -> dict[str, Any]:
        """The shape scaled down for a CPU test: each size capped (SMALL_CAPS), 1s stay 1, strings kept."""
        return {k: (min(v, SMALL_CAPS[k]) if isinstance(v, int) and k in SMALL_CAPS else v)
                for k, v in self.shape.items()}

    def build(self, small: bool = False) -> KernelGraph:
        """The program with the public API, at full size (or the small variant)."""
        shape = self.small_shape() if small else self.shape
        return BUILDERS[self.kind](**shape, dtype=getattr(mi, self.dtype))

    def shapes_text(self, small: bool = False) -> str:
        g = self.build(small)
        return " ".join("x".join(map(str, t.dims)) for t in g.inputs)


def _p(name: str, kind: str, source: str, dtype: str, phase: str, settings=PLAIN, library=None, **shape) -> SuiteProgram:
    return SuiteProgram(name, kind, source, dtype, shape, settings, library, phase)


F16, BF16 = "float16", "bfloat16"
PROGRAMS: tuple[SuiteProgram, ...] = (
    # ---- RMSNorm (no weight, Mirage's form) + linear
    _p("rmsnorm_linear_llama3_8b_qkv_b1", "norm_linear",
       "LLaMA-3 8B: attention RMSNorm + fused QKV projection 4096 -> 4096+2x1024 (Mirage README's example)",
       F16, "decode", rows=1, hidden=4096, out=6144, weight=False),
    _p("rmsnorm_linear_mistral7b_qkv_prefill512", "norm_linear",
       "Mistral-7B: attention RMSNorm + fused QKV projection 4096 -> 6144, a 512-token prefill",
       BF16, "prefill", rows=512, hidden=4096, out=6144, weight=False),
    # ---- RMSNorm with weight + linear
    _p("rmsnormw_linear_llama3_8b_gateup_b16", "norm_linear",
       "LLaMA-3 8B: post-attention RMSNorm (weight) + fused gate/up projection 4096 -> 2x14336",
       BF16, "decode", rows=16, hidden=4096, out=28672, weight=True),
    _p("rmsnormw_linear_qwen25_7b_qkv_b1", "norm_linear",
       "Qwen-2.5 7B: input RMSNorm (weight) + fused QKV 3584 -> 28x128+2x4x128 = 4608",
       BF16, "decode", rows=1, hidden=3584, out=4608, weight=True),
    _p("rmsnormw_linear_llama3_70b_qkv_b8", "norm_linear",
       "LLaMA-3 70B: input RMSNorm (weight) + fused QKV 8192 -> 64x128+2x8x128 = 10240",
       F16, "decode", rows=8, hidden=8192, out=10240, weight=True),
    _p("rmsnormw_linear_phi3_mini_qkv_prefill128", "norm_linear",
       "Phi-3-mini: input RMSNorm (weight) + qkv_proj 3072 -> 3x3072, a 128-token prefill",
       F16, "prefill", rows=128, hidden=3072, out=9216, weight=True),
    # ---- L2 norm + linear (nGPT)
    _p("l2norm_linear_ngpt_0_5b_qkv_b32", "l2_norm_linear",
       "nGPT at d_model 1024 (the paper's 0.5B size): L2-normalised hidden state + QKV projection 1024 -> 3x1024",
       F16, "decode", rows=32, hidden=1024, out=3072),
    _p("l2norm_linear_ngpt_4096_qkv_b32", "l2_norm_linear",
       "nGPT as in Mirage's end-to-end ngpt.py: d_model 4096, QKV 4096 -> 3x12x128 = 4608, 8 sequences x 4 tokens",
       BF16, "decode", rows=32, hidden=4096, out=4608),
    # ---- residual add + norm + linear
    _p("residual_rmsnorm_linear_llama3_8b_qkv_b16", "residual_norm_linear",
       "LLaMA-3 8B: residual add + input RMSNorm (weight) + fused QKV 4096 -> 6144",
       F16, "decode", rows=16, hidden=4096, out=6144),
    _p("residual_rmsnorm_linear_mistral7b_gateup_b4", "residual_norm_linear",
       "Mistral-7B: residual add + post-attention RMSNorm (weight) + gate projection 4096 -> 14336",
       BF16, "decode", rows=4, hidden=4096, out=14336),
    # ---- gated MLPs
    _p("gated_mlp_silu_llama3_8b_b1", "gated_mlp",
       "LLaMA-3 8B: SwiGLU gate/up projections 4096 -> 14336",
       F16, "decode", rows=1, hidden=4096, inter=14336, act="silu"),
    _p("gated_mlp_silu_qwen25_0_5b_b64", "gated_mlp",
       "Qwen-2.5 0.5B: SwiGLU gate/up projections 896 -> 4864",
       BF16, "decode", rows=64, hidden=896, inter=4864, act="silu"),
    _p("gated_mlp_silu_phi3_mini_b32", "gated_mlp",
       "Phi-3-mini: SwiGLU gate/up projections 3072 -> 8192",
       BF16, "decode", rows=32, hidden=3072, inter=8192, act="silu"),
    _p("gated_mlp_gelu_gemma_2b_b8", "gated_mlp",
       "Gemma 2B: GeGLU gate/up projections 2048 -> 16384",
       F16, "decode", rows=8, hidden=2048, inter=16384, act="gelu"),
    _p("gated_mlp_gelu_gemma_7b_prefill256", "gated_mlp",
       "Gemma 7B: GeGLU gate/up projections 3072 -> 24576, a 256-token prefill",
       BF16, "prefill", rows=256, hidden=3072, inter=24576, act="gelu"),
    _p("gated_mlp_relu_relullama_7b_b16", "gated_mlp",
       "ReluLLaMA-7B (LLaMA-2 7B relufied, 'ReLU Strikes Back'): ReGLU gate/up 4096 -> 11008",
       F16, "decode", rows=16, hidden=4096, inter=11008, act="relu"),
    # ---- attention (groups = batch x KV heads; q_rows = query heads per KV head x query tokens)
    _p("gqa_decode_llama3_8b_b1_kv4096", "attention",
       "LLaMA-3 8B decode: 32 query heads over 8 KV heads, head dim 128, KV 4096, batch 1",
       F16, "decode", ATTENTION, "sdpa", groups=8, q_rows=4, head_dim=128, kv_len=4096),
    _p("gqa_decode_llama3_70b_b4_kv8192", "attention",
       "LLaMA-3 70B decode: 64 query heads over 8 KV heads, head dim 128, KV 8192, batch 4",
       BF16, "decode", ATTENTION, "sdpa", groups=32, q_rows=8, head_dim=128, kv_len=8192),
    _p("gqa_decode_mistral7b_b64_kv1024", "attention",
       "Mistral-7B decode: 32 query heads over 8 KV heads, head dim 128, KV 1024, batch 64",
       F16, "decode", ATTENTION, "sdpa", groups=512, q_rows=4, head_dim=128, kv_len=1024),
    _p("gqa_decode_llama32_1b_b16_kv2048", "attention",
       "LLaMA-3.2 1B decode: 32 query heads over 8 KV heads, head dim 64, KV 2048, batch 16",
       BF16, "decode", ATTENTION, "sdpa", groups=128, q_rows=4, head_dim=64, kv_len=2048),
    _p("mqa_decode_falcon7b_b8_kv2048", "attention",
       "Falcon-7B decode: 71 query heads over 1 KV head (multi-query), head dim 64, KV 2048, batch 8",
       F16, "decode", ATTENTION, "sdpa", groups=8, q_rows=71, head_dim=64, kv_len=2048),
    _p("gqa_prefill_llama3_8b_512", "attention",
       "LLaMA-3 8B prefill of 512 tokens (no causal mask: the builder has no masking op), 32/8 heads, dim 128",
       F16, "prefill", ATTENTION, "sdpa", groups=8, q_rows=2048, head_dim=128, kv_len=512),
    _p("gqa_chunked_prefill_qwen25_1_5b_256_kv2048", "attention",
       "Qwen-2.5 1.5B chunked prefill: 256 new tokens over a 2048 KV cache, 12 query / 2 KV heads, dim 128",
       BF16, "prefill", ATTENTION, "sdpa", groups=2, q_rows=1536, head_dim=128, kv_len=2048),
    _p("gqa_chunked_prefill_qwen25_0_5b_b4_64_kv4096", "attention",
       "Qwen-2.5 0.5B chunked prefill: 64 new tokens over a 4096 KV cache, 14 query / 2 KV heads, dim 64, batch 4",
       F16, "prefill", ATTENTION, "sdpa", groups=8, q_rows=448, head_dim=64, kv_len=4096),
    # ---- QK-norm attention
    _p("qknorm_decode_qwen3_8b_b8_kv2048", "qknorm_decode_attention",
       "Qwen3-8B (Qwen-2.5's successor, QK-norm) decode: q RMSNorm (weight) then 32/8-head attention, dim 128, KV 2048",
       BF16, "decode", ATTENTION, None, groups=64, q_rows=4, head_dim=128, kv_len=2048),
    _p("qknorm_prefill_chameleon7b_256", "qknorm_attention",
       "QKNorm (Henry et al. 2020) as in Chameleon-7B's attention (Mirage's end-to-end model): 32 heads, dim 128, "
       "256-token prefill, q and k L2-normed, learned gain",
       F16, "prefill", ATTENTION, None, groups=32, q_rows=256, head_dim=128, kv_len=512),
    # ---- LoRA
    _p("lora_llama3_8b_q_r16_b16", "lora",
       "LLaMA-3 8B q_proj 4096 -> 4096 with a rank-16 LoRA adapter",
       F16, "decode", LORA, None, rows=16, hidden=4096, out=4096, rank=16),
    _p("lora_gpt3_q_r8_b4", "lora",
       "GPT-3 175B (LoRA paper, Hu et al. 2021) W_q 12288 -> 12288 with a rank-8 adapter",
       F16, "decode", LORA, None, rows=4, hidden=12288, out=12288, rank=8),
    _p("lora_mistral7b_v_r64_b32", "lora",
       "Mistral-7B v_proj 4096 -> 8x128 = 1024 with a rank-64 adapter",
       BF16, "decode", LORA, None, rows=32, hidden=4096, out=1024, rank=64),
    # ---- softmax over a linear layer
    _p("softmax_linear_mixtral_router_b64", "softmax_linear",
       "Mixtral-8x7B (Mistral AI) MoE router: softmax over 8 experts of a 4096 -> 8 linear",
       F16, "decode", PLAIN, None, rows=64, hidden=4096, out=8),
    _p("softmax_linear_qwen25_0_5b_lmhead_b1", "softmax_linear",
       "Qwen-2.5 0.5B LM head 896 -> 151936 (vocabulary), softmax for sampling, batch 1",
       BF16, "decode", PLAIN, None, rows=1, hidden=896, out=151936),
    # ---- nTrans (nGPT)
    _p("ntrans_ngpt_0_5b_b64", "ntrans",
       "nGPT at d_model 1024 (the paper's 0.5B size): the normalised residual update after attention",
       F16, "decode", PLAIN, None, rows=64, hidden=1024),
    _p("ntrans_ngpt_4096_b8", "ntrans",
       "nGPT update at Mirage's nTrans benchmark size (8 x 4096)",
       BF16, "decode", PLAIN, None, rows=8, hidden=4096),
)

_BY_NAME = {p.name: p for p in PROGRAMS}
assert len(_BY_NAME) == len(PROGRAMS), "suite program names must be unique"


def by_name(name: str) -> SuiteProgram:
    """The suite program called ``name`` (a MirageLabError listing the names otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise MirageLabError(f"no suite program {name!r}; `python benchmarks/suite_bench.py --list` lists them") from None


def select(patterns: str | None) -> list[SuiteProgram]:
    """The programs matching comma-separated names or shell globs (all of them for ``None``), in suite order."""
    if not patterns:
        return list(PROGRAMS)
    pats = [s.strip() for s in patterns.split(",") if s.strip()]
    out = [p for p in PROGRAMS if any(fnmatch.fnmatchcase(p.name, q) for q in pats)]
    missing = [q for q in pats if not any(fnmatch.fnmatchcase(p.name, q) for p in PROGRAMS)]
    if missing:
        raise MirageLabError(f"--only: {', '.join(missing)} matches no suite program; "
                             "`python benchmarks/suite_bench.py --list` lists them")
    return out
