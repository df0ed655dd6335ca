# Export to a Hugging Face model directory (Qwen3ForCausalLM, bf16 safetensors, sharded when large,
# classic config.json, generation_config.json, tokenizer files) and check transformers' logits against ours.
import shutil
from pathlib import Path

import torch

from common import log, write_json
from model import Qwen3LM


def classic_config(mcfg: dict, eos_id: int, transformers_version: str) -> dict:
    """config.json as published Qwen3 checkpoints write it (torch_dtype, rope_theta, rope_scaling null)."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "head_dim": mcfg["head_dim"],
        "hidden_act": "silu",
        "hidden_size": mcfg["hidden_size"],
        "initializer_range": mcfg["initializer_range"],
        "intermediate_size": mcfg["intermediate_size"],
        "max_position_embeddings": mcfg["max_position_embeddings"],
        "max_window_layers": mcfg["num_hidden_layers"],
        "model_type": "qwen3",
        "num_attention_heads": mcfg["num_attention_heads"],
        "num_hidden_layers": mcfg["num_hidden_layers"],
        "num_key_value_heads": mcfg["num_key_value_heads"],
        "rms_norm_eps": mcfg["rms_norm_eps"],
        "rope_scaling": None,
        "rope_theta": mcfg["rope_theta"],
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": transformers_version,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": mcfg["vocab_size"],
    }


def bf16_copy(model: Qwen3LM) -> Qwen3LM:
    """float32 model whose weights are the bf16-rounded ones that get shipped."""
    copy = Qwen3LM(model.cfg).to(next(model.parameters()).device)
    copy.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
    return copy.eval()


def export(model: Qwen3LM, out: Path, tok_dir: Path, eos_id: int, pad_id: int, max_shard_bytes: int,
           check_ids: torch.Tensor) -> dict:
    import transformers
    from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM
    transformers.logging.set_verbosity_error()
    shutil.rmtree(out, ignore_errors=True)
    cfg = classic_config(model.cfg, eos_id, transformers.__version__)
    hf = Qwen3ForCausalLM(Qwen3Config(**cfg))
    missing, unexpected = hf.load_state_dict({k: v.detach().cpu() for k, v in model.state_dict().items()},
                                             strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    hf = hf.to(torch.bfloat16)
    hf.save_pretrained(out, max_shard_size=max_shard_bytes)
    write_json(out / "config.json", cfg, sort_keys=True)
    write_json(out / "generation_config.json", {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": pad_id,
                                                "do_sample": False, "transformers_version": transformers.__version__})
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / name, out / name)
    for path in out.glob("*.safetensors"):
        assert path.stat().st_size <= 15 * 2 ** 20, f"{path} is larger than 15 MiB"

    # transformers (float32, eager) on the exported directory vs the training code on bf16-rounded weights.
    loaded, info = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager",
                                                        output_loading_info=True)
    assert not any(info.values()), f"loading {out} reported {info}"
    ours = bf16_copy(model)
    with torch.no_grad():
        theirs = loaded.to(check_ids.device).eval()(check_ids).logits
        mine = ours(check_ids)
    diff = (theirs - mine).abs().max().item()
    agree = (theirs.argmax(-1) == mine.argmax(-1)).float().mean().item()
    log(f"export {out.name}: max |logit diff| transformers vs training code = {diff:.2e}, argmax agreement {agree:.4f}")
    assert diff < 2e-3, f"exported {out.name} disagrees with the training code: {diff}"
    files = {p.name: p.stat().st_size for p in sorted(out.iterdir())}
    weights = sum(v for k, v in files.items() if k.endswith(".safetensors"))
    return {"dir": out.name, "files": files, "weight_bytes": weights, "max_abs_logit_diff_vs_transformers": diff,
            "argmax_agreement_vs_transformers": agree}
