# Minimal Qwen3 decoder (q/k RMSNorm, GQA, RoPE, SwiGLU, tied embeddings) used for training;
# parameter names match transformers' Qwen3ForCausalLM so export is a plain rename-free copy.
import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)  # same order of operations as transformers' Qwen3RMSNorm


def rope_tables(seq_len: int, head_dim: int, theta: float, device):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos) + (rotated * sin)


class Attention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h, d = cfg["hidden_size"], cfg["head_dim"]
        self.n_heads, self.n_kv, self.head_dim = cfg["num_attention_heads"], cfg["num_key_value_heads"], d
        self.q_proj = nn.Linear(h, self.n_heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.n_kv * d, bias=False)
        self.v_proj = nn.Linear(h, self.n_kv * d, bias=False)
        self.o_proj = nn.Linear(self.n_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, cfg["rms_norm_eps"])
        self.k_norm = RMSNorm(d, cfg["rms_norm_eps"])

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.n_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, self.n_kv, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin).to(v.dtype), apply_rope(k, cos, sin).to(v.dtype)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                             scale=1.0 / math.sqrt(self.head_dim))
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class Qwen3LM(nn.Module):
    """model.* / lm_head.* naming as in transformers; lm_head shares embed_tokens' weight."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        std = self.cfg["initializer_range"]
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                p.normal_(0.0, std / math.sqrt(2 * self.cfg["num_hidden_layers"]))  # GPT-2 residual scaling
            else:
                p.normal_(0.0, std)

    def hidden(self, ids):
        cos, sin = rope_tables(ids.shape[1], self.cfg["head_dim"], self.cfg["rope_theta"], ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def forward(self, ids):
        return self.lm_head(self.hidden(ids))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weight counted once
