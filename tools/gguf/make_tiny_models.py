#!/usr/bin/env python3
"""Writes tiny random-weight GGUF models (llama with every block format, qwen3 with q/k norms and
tied embeddings, qwen2 with attention biases, gemma3 with sliding-window layers, and llama with
RoPE scaling: llama3 per-frequency factors in rope_freqs.weight, and linear scaling in metadata)
with gguf-py, and the logits that Hugging Face transformers computes when it loads each file, for
specd's GGUF architecture tests.

transformers' GGUF loader reads neither rope_freqs.weight nor llama's rope.scaling keys, so for
the two scaled variants the golden model is a LlamaForCausalLM whose config carries the scaling
(as the original Hugging Face checkpoint would), with the weights transformers loaded from the
file. The llama3 factors are computed as llama.cpp's converter does: 1 for wavelengths shorter
than original_context / high_freq_factor, `factor` for those longer than
original_context / low_freq_factor, and 1 / ((1 - s) / factor + s) in between, with
s = (original_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor).

    python tools/gguf/make_tiny_models.py tests/data/gguf [ARCH ...]

Writes OUT/tiny_<arch>.gguf and OUT/tiny_<arch>_logits.npy ([len(IDS), vocab] float32); for
gemma3 also OUT/tiny_gemma3_greedy.json (GREEDY_NEW greedy tokens after IDS[:GREEDY_PROMPT]).
Q and K of llama are permuted as llama.cpp's converter does (transformers undoes it at load);
k-quant tensors are random blocks (gguf-py cannot quantise to them), so their permutation is
moot for the comparison: both sides read the same blocks.
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize
from transformers import AutoModelForCausalLM, LlamaForCausalLM

VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 256, 256, 2, 4, 2, 64
IDS = [1, 17, 200, 3, 99, 45, 45, 128, 7, 255, 0, 64]
GREEDY_PROMPT, GREEDY_NEW = 6, 16

# Tensor type of each weight per architecture (1-D norms and biases stay F32).
LLAMA_TYPES = {"token_embd": T.Q8_0, "attn_q": T.Q4_K, "attn_k": T.Q5_K, "attn_v": T.Q6_K,
               "attn_output": T.Q5_0, "ffn_gate": T.Q4_0, "ffn_up": T.Q4_1,
               "ffn_down": T.Q5_1, "output": T.F16}
QWEN3_TYPES = {"token_embd": T.BF16, "attn_q": T.Q8_0, "attn_k": T.Q8_0, "attn_v": T.F16,
               "attn_output": T.Q4_K, "ffn_gate": T.Q6_K, "ffn_up": T.F16, "ffn_down": T.Q8_0}
# Gemma 3: 6 layers so that transformers' fixed pattern (every 6th layer global) has both kinds;
# a sliding window of 4 positions masks inside the 12-token test sequence; head_dim 256 equals
# transformers' default query_pre_attn_scalar (GGUF has no key for it).
GEMMA3_TYPES = {"token_embd": T.Q8_0, "attn_q": T.Q5_0, "attn_k": T.Q8_0, "attn_v": T.Q6_K,
                "attn_output": T.Q4_K, "ffn_gate": T.Q4_K, "ffn_up": T.Q5_0, "ffn_down": T.Q6_K}
GEMMA3_LAYERS, GEMMA3_WINDOW = 6, 4
# Gemma scales embeddings by sqrt(hidden) = 16 and adds post-normed layer outputs: small
# embeddings and large post-norms keep the greedy path from repeating the last token.
EMB, POST = 0.15, 4.0
QWEN2_TYPES = {"token_embd": T.F16, "attn_q": T.Q8_0, "attn_k": T.Q8_0, "attn_v": T.Q8_0,
               "attn_output": T.Q8_0, "ffn_gate": T.Q4_K, "ffn_up": T.Q4_K, "ffn_down": T.Q4_K,
               "output": T.Q6_K}


# RoPE scaling of the scaled llama variants. A short original context (8) puts most
# frequencies in the scaled and smoothed bands, so the 12-token test sees the difference.
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8}
LINEAR_ROPE = {"rope_type": "linear", "factor": 4.0}


def llama3_rope_factors(base, dim, s):
    """Per-frequency divisors of the inverse frequencies (rope_freqs.weight)."""
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / s["low_freq_factor"], old / s["high_freq_factor"]
    factors = []
    for freq in inv_freq:
        wavelen = 2 * np.pi / freq
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(s["factor"])
        else:
            smooth = (old / wavelen - s["low_freq_factor"]) / (
                s["high_freq_factor"] - s["low_freq_factor"])
            factors.append(1.0 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def permute(w, n_head):
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


# gguf-py cannot quantise to k-quants: their weights are random blocks with scales that give
# values of about the same size as the other weights. (d, dmin) offsets and magnitudes.
K_SCALES = {T.Q4_K: ([0, 2], [3e-4, 3e-4]), T.Q5_K: ([0, 2], [1.5e-4, 1.5e-4]),
            T.Q6_K: ([208], [8e-5])}


def random_k_quant(rng, shape, qtype):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    rows, n_blocks = shape[0], shape[1] // block_elems
    raw = rng.integers(0, 256, size=(rows, n_blocks, block_bytes), dtype=np.uint8)
    for offset, scale in zip(*K_SCALES[qtype]):
        half = (rng.uniform(0.5, 1.5, size=(rows, n_blocks)) * scale).astype(np.float16)
        raw[:, :, offset:offset + 2] = half.view(np.uint8).reshape(rows, n_blocks, 2)
    return raw.reshape(rows, n_blocks * block_bytes)


def add(writer, name, w, qtype, rng=None):
    w = w.astype(np.float32)
    if qtype in K_SCALES:
        writer.add_tensor(name, random_k_quant(rng, w.shape, qtype), raw_dtype=qtype)
    elif w.ndim == 1 or qtype == T.F32:
        writer.add_tensor(name, w)
    elif qtype == T.F16:
        writer.add_tensor(name, w.astype(np.float16))
    else:
        writer.add_tensor(name, quantize(w, qtype), raw_dtype=qtype)


def write_model(path, arch, types, rng, rope=None):
    # transformers reads no key_length for qwen3 and takes Qwen3's default head_dim of 128.
    global HEADS, KV_HEADS, HEAD_DIM
    HEADS, KV_HEADS, HEAD_DIM = {"qwen3": (2, 1, 128), "gemma3": (2, 1, 256)}.get(arch, (4, 2, 64))
    gemma = arch == "gemma3"
    layers = GEMMA3_LAYERS if gemma else LAYERS
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(layers)
    if gemma:
        writer.add_sliding_window(GEMMA3_WINDOW)
    writer.add_context_length(128)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(HEAD_DIM)
    if rope is LINEAR_ROPE:
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["factor"])
    writer.add_vocab_size(VOCAB)
    writer.add_file_type(1)
    def w(*shape, scale=0.08):
        return rng.standard_normal(shape).astype(np.float32) * scale
    add(writer, "token_embd.weight", w(VOCAB, HIDDEN, scale=EMB if gemma else 1.0),
        types["token_embd"], rng)
    # Gemma norms are stored as 1 + w (llama.cpp's converter adds the 1); post-norms larger.
    def norm(n, base=1.0):
        return base + w(n, scale=0.1)
    for l in range(layers):
        p = f"blk.{l}."
        q, k = w(HEADS * HEAD_DIM, HIDDEN), w(KV_HEADS * HEAD_DIM, HIDDEN)
        if arch == "llama":
            q, k = permute(q, HEADS), permute(k, KV_HEADS)
        add(writer, p + "attn_norm.weight", 1 + w(HIDDEN, scale=0.1), None)
        add(writer, p + "attn_q.weight", q, types["attn_q"], rng)
        add(writer, p + "attn_k.weight", k, types["attn_k"], rng)
        add(writer, p + "attn_v.weight", w(KV_HEADS * HEAD_DIM, HIDDEN), types["attn_v"], rng)
        add(writer, p + "attn_output.weight", w(HIDDEN, HEADS * HEAD_DIM), types["attn_output"], rng)
        if arch == "qwen2":
            add(writer, p + "attn_q.bias", w(HEADS * HEAD_DIM, scale=0.5), None)
            add(writer, p + "attn_k.bias", w(KV_HEADS * HEAD_DIM, scale=0.5), None)
            add(writer, p + "attn_v.bias", w(KV_HEADS * HEAD_DIM, scale=0.5), None)
        if arch in ("qwen3", "gemma3"):
            add(writer, p + "attn_q_norm.weight", 1 + w(HEAD_DIM, scale=0.1), None)
            add(writer, p + "attn_k_norm.weight", 1 + w(HEAD_DIM, scale=0.1), None)
        if gemma:
            add(writer, p + "post_attention_norm.weight", norm(HIDDEN, POST), None)
            add(writer, p + "post_ffw_norm.weight", norm(HIDDEN, POST), None)
        add(writer, p + "ffn_norm.weight", 1 + w(HIDDEN, scale=0.1), None)
        add(writer, p + "ffn_gate.weight", w(FFN, HIDDEN), types["ffn_gate"], rng)
        add(writer, p + "ffn_up.weight", w(FFN, HIDDEN), types["ffn_up"], rng)
        add(writer, p + "ffn_down.weight", w(HIDDEN, FFN), types["ffn_down"], rng)
    add(writer, "output_norm.weight", 1 + w(HIDDEN, scale=0.1), None)
    if rope is LLAMA3_ROPE:
        add(writer, "rope_freqs.weight", llama3_rope_factors(10000.0, HEAD_DIM, rope), None)
    if "output" in types:
        add(writer, "output.weight", w(VOCAB, HIDDEN), types["output"], rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@torch.no_grad()
def greedy(model, prompt, n):
    """Argmax decoding with a full forward per step (no KV cache)."""
    ids, margin = list(prompt), float("inf")
    for _ in range(n):
        last = model(torch.tensor([ids])).logits[0, -1]
        top = torch.topk(last, 2).values
        margin = min(margin, float(top[0] - top[1]))
        ids.append(int(last.argmax()))
    return ids[len(prompt):], margin


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/gguf")
    only = set(sys.argv[2:])
    out.mkdir(parents=True, exist_ok=True)
    variants = [("llama", "llama", LLAMA_TYPES, None), ("qwen3", "qwen3", QWEN3_TYPES, None),
                ("qwen2", "qwen2", QWEN2_TYPES, None), ("gemma3", "gemma3", GEMMA3_TYPES, None),
                ("llama3", "llama", LLAMA_TYPES, LLAMA3_ROPE),
                ("llama_linear", "llama", LLAMA_TYPES, LINEAR_ROPE)]
    for seed, (name, arch, types, rope) in enumerate(variants):
        if only and name not in only:
            continue
        path = out / f"tiny_{name}.gguf"
        write_model(path, arch, types, np.random.default_rng(1000 + seed), rope)
        model, info = AutoModelForCausalLM.from_pretrained(
            str(out), gguf_file=path.name, torch_dtype=torch.float32, output_loading_info=True)
        assert not any(info.values()), f"{name}: transformers reported {info}"
        if rope is not None:
            config = model.config
            config.rope_parameters = dict(rope, rope_theta=config.rope_parameters["rope_theta"])
            scaled = LlamaForCausalLM(config).eval()
            scaled.load_state_dict(model.state_dict())
            model = scaled
        with torch.no_grad():
            logits = model(torch.tensor([IDS])).logits[0].float().numpy()
        np.save(out / f"tiny_{name}_logits.npy", logits.astype(np.float32))
        if arch == "gemma3":
            assert model.config.layer_types[5] == "full_attention"
            assert model.config.sliding_window == GEMMA3_WINDOW
            tokens, margin = greedy(model, IDS[:GREEDY_PROMPT], GREEDY_NEW)
            (out / "tiny_gemma3_greedy.json").write_text(json.dumps(
                {"prompt": IDS[:GREEDY_PROMPT], "tokens": tokens,
                 "min_top2_margin": margin}) + "\n")
            print("greedy", tokens, "min top-2 margin", margin)
        print(name, path.stat().st_size, "bytes; logits", logits.shape, float(abs(logits).max()))


if __name__ == "__main__":
    main()
