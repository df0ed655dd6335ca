#!/usr/bin/env python3
"""Decode speed of gpt-fast on a random-weight model, for a side-by-side run with `specd bench`.

gpt-fast (pure PyTorch + torch.compile) is not part of specd: pass the folder that holds its
model.py and quantize.py. The model is built from gpt-fast's own config table with random bf16
weights (speed does not depend on the values), a prompt of --prompt-len tokens is prefilled, and
--gen-len tokens are decoded greedily with gpt-fast's compiled one-token step (CUDA graphs through
mode="reduce-overhead"), as its generate.py does. Prints one JSON line per precision.

    python bench/gpt_fast_compare.py --gpt-fast-dir DIR [--model llama-3.1-8b] [--precisions bf16,int8]
"""
import argparse
import json
import sys
import time

import torch


def build(args, gpt_fast):
    model = gpt_fast.Transformer.from_name(args.model)
    model = model.to(device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    return model.eval()


def run(args, model, label):
    torch.manual_seed(0)
    vocab = model.config.vocab_size
    total = args.prompt_len + args.gen_len
    with torch.device("cuda"):
        model.setup_caches(max_batch_size=1, max_seq_length=total)

    def decode_one(x, input_pos):
        logits = model(x, input_pos)
        return torch.argmax(logits[:, -1], dim=-1, keepdim=True).to(torch.int)

    step = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True)
    prompt = torch.randint(0, vocab, (1, args.prompt_len), device="cuda", dtype=torch.int)

    def generate():
        with torch.no_grad():
            pos = torch.arange(0, args.prompt_len, device="cuda")
            logits = model(prompt, pos)
            token = torch.argmax(logits[:, -1], dim=-1, keepdim=True).to(torch.int)
            input_pos = torch.tensor([args.prompt_len], device="cuda", dtype=torch.int64)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.gen_len - 1):
                token = step(token.clone(), input_pos).clone()
                input_pos += 1
            torch.cuda.synchronize()
            return (args.gen_len - 1) / (time.perf_counter() - start)

    compile_start = time.perf_counter()
    generate()  # compiles and records the graphs
    compile_s = time.perf_counter() - compile_start
    rates = [generate() for _ in range(args.repeats)]
    weight_bytes = sum(t.numel() * t.element_size() for name, t in model.state_dict().items()
                       if "cache" not in name and name not in ("freqs_cis", "causal_mask"))
    print(json.dumps({
        "engine": "gpt-fast", "model": args.model, "precision": label,
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "prompt_len": args.prompt_len, "gen_len": args.gen_len,
        "decode_tok_s": max(rates), "decode_tok_s_runs": rates,
        "weight_bytes": weight_bytes, "compile_s": round(compile_s, 1),
    }), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpt-fast-dir", required=True, help="folder with gpt-fast's model.py")
    parser.add_argument("--model", default="llama-3.1-8b", help="a name in gpt-fast's config table")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-len", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precisions", default="bf16,int8",
                        help="comma-separated: bf16 and/or int8 (gpt-fast's weight-only int8)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpt_fast_compare: needs a CUDA GPU")
    sys.path.insert(0, args.gpt_fast_dir)
    import model as gpt_fast  # noqa: E402

    torch._inductor.config.coordinate_descent_tuning = True
    torch._inductor.config.triton.unique_kernel_names = True
    torch._inductor.config.fx_graph_cache = True

    precisions = args.precisions.split(",")
    model = build(args, gpt_fast)
    if "bf16" in precisions:
        run(args, model, "bf16")
    if "int8" in precisions:
        # quantize.py imports gpt-fast's tokenizer module only for its GPTQ path.
        import types
        sys.modules.setdefault("tokenizer", types.SimpleNamespace(get_tokenizer=None))
        import quantize  # noqa: E402
        handler = quantize.WeightOnlyInt8QuantHandler(model)
        state = handler.create_quantized_state_dict()
        model = handler.convert_for_runtime()
        model.load_state_dict(state, assign=True)
        model = model.to("cuda")
        torch._dynamo.reset()
        run(args, model, "int8")


if __name__ == "__main__":
    main()
