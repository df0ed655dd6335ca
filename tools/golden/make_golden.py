# Builds tiny random-weight Hugging Face causal LMs plus transformers' own golden logits for specd's tests.
"""(Re)creates every case directory under tests/data/golden/ deterministically.

Usage: python3 tools/golden/make_golden.py [--out tests/data/golden]

Each case is a hub-style model directory (config.json in the classic published format,
model.safetensors or shards + index, generation_config.json) plus golden.json, logits.npy,
hidden_states.npy and last_layer_prenorm.npy, all computed by reloading the saved directory
with from_pretrained(dtype=float32, attn_implementation="eager").
"""

import argparse
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

SEQ_LEN = 24
PROMPT_LEN = 8
NEW_TOKENS = 16
# Seeds are bumped until the greedy path has a clear top1-top2 logit gap and does not collapse into
# repeating one token (random tied models love fixed points).
MIN_MARGIN = 0.05
MIN_DISTINCT_GREEDY = 8
MAX_SEED_TRIES = 50
WEIGHT_STD = 0.2  # projection matrices (HF's default 0.02 gives flat logits and repetitive greedy paths)
EMBED_STD = 0.3  # embed_tokens and lm_head
NORM_STD = 0.1  # RMSNorm weights = 1 + NORM_STD * randn
BIAS_STD = 0.1
GEMMA_POST_NORM = 2.0  # Gemma 3 post-attention / post-feedforward norm weights (effective 3 + noise)
BOS, EOS = 1, 2

ARCHS = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    "mistral": (MistralConfig, MistralForCausalLM),
    "gemma3": (Gemma3TextConfig, Gemma3ForCausalLM),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
COMMON = dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128, max_position_embeddings=128,
              hidden_act="silu", bos_token_id=BOS, eos_token_id=EOS)


@dataclass
class Case:
    name: str
    arch: str
    dtype: str
    seed: int
    about: str
    config: dict
    generation: dict = field(default_factory=dict)  # extra generation_config.json keys
    shards: int = 1


CASES = [
    Case("llama_gqa_f32", "llama", "float32", 1000,
         "Llama, f32, GQA 4q/2kv heads, head_dim 16, untied lm_head, default RoPE theta 1e4",
         dict(vocab_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None, rms_norm_eps=1e-5)),
    Case("llama3_rope_bf16_mqa", "llama", "bfloat16", 2000,
         "Llama-3.1 style: bf16, MQA 4q/1kv, tied embeddings, llama3 RoPE scaling (all three "
         "frequency bands: kept, smoothed, divided), theta 5e5, eos list [2, 3] in generation_config",
         dict(vocab_size=512, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
              tie_word_embeddings=True, rope_theta=500000.0, rms_norm_eps=1e-5,
              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
         generation={"eos_token_id": [EOS, 3], "do_sample": True, "temperature": 0.6, "top_p": 0.9}),
    Case("llama_linear_f16", "llama", "float16", 3000,
         "Llama, f16, MHA 4q/4kv, attention_bias (q/k/v/o biases), linear RoPE scaling x2, "
         "vocab 320 (not a power of two), untied",
         dict(vocab_size=320, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
              tie_word_embeddings=False, rope_theta=10000.0, attention_bias=True, rms_norm_eps=1e-6,
              rope_scaling={"rope_type": "linear", "factor": 2.0})),
    Case("llama_yarn_f32", "llama", "float32", 4000,
         "Llama, f32, YaRN RoPE (factor 4, original ctx 32, default beta_fast/slow, truncate, "
         "attention_factor 0.1*ln(4)+1 applied to cos/sin), tied, intermediate 96",
         dict(vocab_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=96,
              tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5,
              rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32})),
    Case("qwen2_tied_f32", "qwen2", "float32", 5000,
         "Qwen2, f32, q/k/v biases (no o bias), tied embeddings, 2q/1kv heads of head_dim 32, theta 1e6, "
         "vocab 384, intermediate 96",
         dict(vocab_size=384, num_attention_heads=2, num_key_value_heads=1, intermediate_size=96,
              tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6)),
    Case("qwen2_untied_bf16", "qwen2", "bfloat16", 6000,
         "Qwen2, bf16, q/k/v biases, untied lm_head, 4q/2kv heads of head_dim 16",
         dict(vocab_size=256, num_attention_heads=4, num_key_value_heads=2,
              tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6)),
    Case("qwen3_f32", "qwen3", "float32", 7000,
         "Qwen3, f32, explicit head_dim 32 with 4 heads (heads*head_dim=128 != hidden 64), 2 kv heads, "
         "per-head q_norm/k_norm RMSNorm, tied embeddings, intermediate 96",
         dict(vocab_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=96,
              tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6)),
    Case("qwen3_sharded_bf16", "qwen3", "bfloat16", 8000,
         "Qwen3, bf16, untied, head_dim 16, saved as 3 safetensors shards + model.safetensors.index.json",
         dict(vocab_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6),
         shards=3),
    Case("mistral_f32", "mistral", "float32", 9000,
         "Mistral, f32, sliding_window null, 4q/2kv heads of head_dim 16, untied, theta 1e6, intermediate 96",
         dict(vocab_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=96,
              tie_word_embeddings=False, rope_theta=1000000.0, sliding_window=None, rms_norm_eps=1e-5)),
    Case("gemma3_f32", "gemma3", "float32", 10000,
         "Gemma 3, f32, 4 layers (sliding, full, sliding, sliding; window 6 < 24 tokens), "
         "local RoPE base 1e4 and global 1e6 with linear scaling x2, q/k norms, Gemma (1 + w) "
         "RMSNorms incl. post-attention / pre- and post-feedforward, GELU-tanh MLP, embeddings "
         "times sqrt(64), query_pre_attn_scalar 24, 4q/2kv heads of head_dim 16, tied",
         dict(vocab_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, intermediate_size=96, tie_word_embeddings=True, rms_norm_eps=1e-6,
              hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24, sliding_window=6,
              layer_types=["sliding_attention", "full_attention", "sliding_attention",
                           "sliding_attention"],
              rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0,
                                                  "rope_theta": 1000000.0},
                               "sliding_attention": {"rope_type": "default",
                                                     "rope_theta": 10000.0}})),
]


# ---------------------------------------------------------------- building

def build_model(case: Case, seed: int):
    config_cls, model_cls = ARCHS[case.arch]
    kwargs = {**COMMON, **case.config, "initializer_range": WEIGHT_STD}
    if case.arch == "gemma3":
        kwargs.pop("hidden_act")  # Gemma 3 names it hidden_activation
    config = config_cls(**kwargs)
    config.architectures = [model_cls.__name__]
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    randomize_(model, seed, gemma=case.arch == "gemma3")
    return model


@torch.no_grad()
def randomize_(model, seed: int, gemma: bool = False):
    """Overwrites every parameter from one generator, independent of transformers' own init order."""
    gen = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters()):  # tied lm_head appears once (as embed_tokens)
        noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
        if "embed_tokens" in name or "lm_head" in name:
            value = EMBED_STD * noise
        elif gemma and ("post_attention_layernorm" in name or "post_feedforward_layernorm" in name):
            # Gemma's norm is x * (1 + w): larger post-norms keep the scaled embedding from
            # dominating the residual (greedy paths otherwise repeat the input token).
            value = GEMMA_POST_NORM + NORM_STD * noise
        elif name.endswith("norm.weight"):
            value = 1.0 + NORM_STD * noise
        elif name.endswith(".bias"):
            value = BIAS_STD * noise
        else:
            value = WEIGHT_STD * noise
        param.copy_(value)


def save_checkpoint(model, case: Case, out: Path):
    model = model.to(DTYPES[case.dtype])
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for step in range(100):  # grow max_shard_size until the greedy packer makes exactly `shards` files
        shutil.rmtree(out, ignore_errors=True)
        max_shard = total // case.shards + step * total // 100 if case.shards > 1 else "50GB"
        model.save_pretrained(out, max_shard_size=max_shard)
        if len(list(out.glob("*.safetensors"))) == case.shards:
            break
    else:
        raise RuntimeError(f"{case.name}: could not split into {case.shards} shards")
    write_json(out / "generation_config.json", generation_config(case))
    for path in out.glob("*.safetensors"):
        path.chmod(0o644)  # save_pretrained creates them 0600
    return model


def generation_config(case: Case) -> dict:
    return {"bos_token_id": BOS, "eos_token_id": EOS, **case.generation,
            "transformers_version": transformers.__version__}


# ---------------------------------------------------------------- classic config.json

def classic_config(cfg: dict, case: Case) -> dict:
    """Rewrites transformers-5 config keys into the form published hub checkpoints use."""
    cfg = dict(cfg)
    if case.arch == "gemma3":
        return classic_gemma3_config(cfg, case)
    rope = dict(cfg.pop("rope_parameters", None) or {})
    cfg["rope_theta"] = rope.pop("rope_theta", cfg.get("rope_theta"))
    scaled = rope.get("rope_type", "default") != "default"
    if scaled:
        cfg["rope_scaling"] = rope
    elif case.arch != "mistral":  # Llama/Qwen checkpoints say "rope_scaling": null, Mistral's omit it
        cfg["rope_scaling"] = None
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = case.dtype
    if cfg.get("head_dim", 0) is None:
        del cfg["head_dim"]
    if set(cfg.get("layer_types") or ["x"]) == {"full_attention"}:
        del cfg["layer_types"]  # implied when use_sliding_window is false
    return cfg


def classic_gemma3_config(cfg: dict, case: Case) -> dict:
    """Gemma 3 as google/gemma-3-270m publishes it: rope_theta (global), rope_local_base_freq
    (sliding layers), rope_scaling (global layers only) instead of per-layer-type rope_parameters."""
    rope = cfg.pop("rope_parameters")
    full, local = dict(rope["full_attention"]), dict(rope["sliding_attention"])
    cfg["rope_theta"] = full.pop("rope_theta")
    cfg["rope_local_base_freq"] = local.pop("rope_theta")
    assert local.get("rope_type", "default") == "default"
    cfg["rope_scaling"] = full if full.get("rope_type", "default") != "default" else None
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = case.dtype
    return cfg


def rewrite_config_classic(case: Case, out: Path):
    path = out / "config.json"
    write_json(path, classic_config(json.loads(path.read_text()), case), sort_keys=True)


# ---------------------------------------------------------------- goldens

def load_f32(out: Path):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    assert not problems, f"loading {out} reported {problems}"
    return model.eval()


@torch.no_grad()
def forward(model, token_ids):
    captured = {}
    hook = model.model.layers[-1].register_forward_hook(
        lambda _m, _i, output: captured.update(prenorm=output[0] if isinstance(output, tuple) else output))
    try:
        out = model(torch.tensor([token_ids]), output_hidden_states=True, use_cache=False)
    finally:
        hook.remove()
    prenorm = captured["prenorm"]
    assert torch.equal(model.model.norm(prenorm), out.hidden_states[-1]), "HF hidden_states[-1] convention changed"
    hidden = torch.stack(out.hidden_states)[:, 0]
    return out.logits[0].numpy(), hidden.numpy(), prenorm[0].numpy()


def top2_margin(logits: torch.Tensor) -> float:
    top = torch.topk(logits.float(), 2, dim=-1).values
    return float((top[..., 0] - top[..., 1]).min())


@torch.no_grad()
def greedy_reference(model, prompt):
    """Argmax decoding with a full forward per step (no KV cache, no eos handling)."""
    ids, margins = list(prompt), []
    for _ in range(NEW_TOKENS):
        last = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
        margins.append(top2_margin(last))
        ids.append(int(last.argmax()))
    return ids[len(prompt):], min(margins)


@torch.no_grad()
def greedy_generate(model, prompt):
    """model.generate(do_sample=False) with eos disabled so exactly NEW_TOKENS come out."""
    model.generation_config.eos_token_id = None
    input_ids = torch.tensor([prompt])
    out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                         max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0,
                         output_logits=True, return_dict_in_generate=True)
    tokens = out.sequences[0, len(prompt):].tolist()
    margin = min(top2_margin(step[0]) for step in out.logits)
    return tokens, margin


def token_ids_for(case: Case, seed: int):
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, case.config["vocab_size"], (SEQ_LEN,), generator=gen).tolist()


def compute_goldens(case: Case, seed: int, out: Path):
    model = load_f32(out)
    token_ids = token_ids_for(case, seed)
    logits, hidden, prenorm = forward(model, token_ids)
    prompt = token_ids[:PROMPT_LEN]
    tokens, gen_margin = greedy_generate(model, prompt)
    ref_tokens, ref_margin = greedy_reference(model, prompt)
    assert len(tokens) == NEW_TOKENS, f"{case.name}: generate stopped early: {tokens}"
    assert tokens == ref_tokens, f"{case.name}: generate {tokens} != full-forward argmax {ref_tokens}"
    golden = golden_json(case, seed, model, token_ids, tokens, min(gen_margin, ref_margin),
                         top2_margin(torch.from_numpy(logits)))
    return golden, {"logits.npy": logits, "hidden_states.npy": hidden, "last_layer_prenorm.npy": prenorm}


def golden_json(case, seed, model, token_ids, tokens, margin, tf_margin) -> dict:
    n_layers = model.config.num_hidden_layers
    return {
        "case": case.name,
        "architecture": type(model).__name__,
        "checkpoint_dtype": case.dtype,
        "compute_dtype": "float32",
        "attn_implementation": "eager",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": seed,
        "vocab_size": model.config.vocab_size,
        "hidden_size": model.config.hidden_size,
        "num_hidden_layers": n_layers,
        "token_ids": token_ids,
        "prompt_len": PROMPT_LEN,
        "greedy_tokens": tokens,
        "min_top2_margin": margin,
        "teacher_forced_min_top2_margin": tf_margin,
        "logits": {"file": "logits.npy", "shape": [SEQ_LEN, model.config.vocab_size]},
        "hidden_states": {
            "file": "hidden_states.npy",
            "shape": [n_layers + 1, SEQ_LEN, model.config.hidden_size],
            "convention": "index 0 = token embeddings; index i in 1..n_layers-1 = residual stream after "
                          "decoder layer i; index n_layers = final RMSNorm(output of last layer) "
                          "(HF last_hidden_state)",
            "last_entry": "after_final_norm",
        },
        "last_layer_prenorm": {"file": "last_layer_prenorm.npy", "shape": [SEQ_LEN, model.config.hidden_size],
                               "convention": f"residual stream after decoder layer {n_layers}, before final norm"},
    }


# ---------------------------------------------------------------- driver

@torch.no_grad()
def check_classic_equivalent(case: Case, out: Path):
    """Saved (transformers-native) config vs rewritten classic config must give identical logits."""
    token_ids = token_ids_for(case, 0)
    before = load_f32(out)(torch.tensor([token_ids])).logits
    rewrite_config_classic(case, out)
    after = load_f32(out)(torch.tensor([token_ids])).logits
    assert torch.equal(before, after), f"{case.name}: classic config.json changed the logits"


@torch.no_grad()
def check_weights_roundtrip(model, out: Path):
    loaded = load_f32(out).state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded[name], tensor.float()), f"{out.name}: {name} differs after reload"


def make_case(case: Case, root: Path) -> dict:
    for seed in range(case.seed, case.seed + MAX_SEED_TRIES):
        out = root / case.name
        shutil.rmtree(out, ignore_errors=True)
        model = save_checkpoint(build_model(case, seed), case, out)
        check_classic_equivalent(case, out)
        check_weights_roundtrip(model, out)
        golden, arrays = compute_goldens(case, seed, out)
        if golden["min_top2_margin"] >= MIN_MARGIN and len(set(golden["greedy_tokens"])) >= MIN_DISTINCT_GREEDY:
            for filename, array in arrays.items():
                np.save(out / filename, np.ascontiguousarray(array, dtype=np.float32))
            write_json(out / "golden.json", golden)
            return golden
    raise RuntimeError(f"{case.name}: no seed met MIN_MARGIN / MIN_DISTINCT_GREEDY")


def write_json(path: Path, obj: dict, sort_keys: bool = False):
    path.write_text(json.dumps(obj, indent=2, sort_keys=sort_keys) + "\n")


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_readme(root: Path, rows):
    lines = [
        "# Golden test models",
        "",
        "Generated by `python3 tools/golden/make_golden.py` (see tools/golden/README.md); do not edit by hand.",
        f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}.",
        "",
        "Each directory is a hub-style checkpoint (classic config.json, safetensors, generation_config.json)",
        "with goldens from transformers in float32, eager attention: golden.json, logits.npy [24, vocab],",
        "hidden_states.npy [n_layers+1, 24, hidden] (last entry is after the final norm),",
        "last_layer_prenorm.npy [24, hidden]. golden.json: token_ids (24 random ids), greedy_tokens (16-token",
        "greedy continuation of token_ids[:8], eos disabled), min_top2_margin along that greedy path.",
        "Tied checkpoints (tie_word_embeddings true) store no lm_head.weight: the head is embed_tokens.",
        "Weights are random (std 0.2 projections, 0.3 embeddings, RMSNorm 1+0.1*randn, biases 0.1*randn).",
        "",
        "| case | dtype | vocab | min_top2_margin | bytes | exercises |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case, golden, size in rows:
        lines.append(f"| `{case.name}` | {case.dtype} | {golden['vocab_size']} | "
                     f"{golden['min_top2_margin']:.4f} | {size} | {case.about} |")
    (root / "README.md").write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "tests/data/golden")
    args = parser.parse_args()
    torch.set_num_threads(1)  # fixed reduction order -> byte-identical output
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in CASES:
        golden = make_case(case, args.out)
        rows.append((case, golden, dir_bytes(args.out / case.name)))
    write_readme(args.out, rows)
    print(f"{'case':24} {'dtype':9} {'vocab':>5} {'seed':>5} {'min_top2_margin':>16} {'bytes':>8}")
    for case, golden, size in rows:
        print(f"{case.name:24} {case.dtype:9} {golden['vocab_size']:5} {golden['seed']:5} "
              f"{golden['min_top2_margin']:16.5f} {size:8}")
    print(f"total bytes: {dir_bytes(args.out)}")


if __name__ == "__main__":
    main()
