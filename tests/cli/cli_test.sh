#!/usr/bin/env bash
# Runs the specd command line on good and bad input: bad input must exit 1 with a clear
# "error: ..." line (never a crash), good input must produce the documented output.
# Usage: cli_test.sh SPECD_BINARY SOURCE_DIR
set -u
specd=$1
src=$2
fixture=$src/tests/data/golden/qwen3_f32
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

# expect_error NAME PATTERN ARGS...: exit status 1..2 or CLI11's, message matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  local out status
  out=$("$specd" "$@" 2>&1)
  status=$?
  if [ "$status" -eq 0 ] || [ "$status" -ge 128 ] || ! grep -qiE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: status $status, output: $out"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

# expect_ok NAME PATTERN ARGS...: exit status 0 and stdout+stderr matching PATTERN.
expect_ok() {
  local name=$1 pattern=$2
  shift 2
  local out status
  out=$("$specd" "$@" 2>&1)
  status=$?
  if [ "$status" -ne 0 ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: status $status, output: $out"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

expect_error no_subcommand "subcommand" 
expect_error no_prompt "give a prompt" generate -m "$fixture"
expect_error bad_ids "invalid token id 'x'" generate -m "$fixture" --prompt-ids "1,x"
expect_error negative_id "invalid token id" generate -m "$fixture" --prompt-ids "1,-5"
expect_error id_past_vocab "outside the vocabulary" generate -m "$fixture" --prompt-ids "1,99999"
expect_error missing_dir "directory" generate -m "$work/none" --prompt-ids 1
expect_error not_a_model "no config.json" generate -m "$work" --prompt-ids 1
expect_error bad_threads "threads: must be at least 0 \(got -2\)" generate -m "$fixture" --prompt-ids 1 --threads -2
expect_error bad_temperature "temperature must be >= 0" generate -m "$fixture" --prompt-ids 1 --temperature -1
expect_error bad_top_p "top_p must be in" generate -m "$fixture" --prompt-ids 1 --top-p 0
expect_error zero_tokens "max-tokens: must be at least 1 \(got 0\)" generate -m "$fixture" --prompt-ids 1 -n 0
expect_error tokens_not_a_number "max-tokens: not a number: ten" generate -m "$fixture" --prompt-ids 1 -n ten
expect_error negative_ctx "ctx-size: must be at least 0 \(got -4\)" generate -m "$fixture" --prompt-ids 1 -c -4
expect_error bad_kv_dtype "kv-dtype" generate -m "$fixture" --prompt-ids 1 --kv-dtype f8
expect_error bad_device "device" generate -m "$fixture" --prompt-ids 1 --device gpu
expect_error ctx_too_small "exceed --ctx-size" generate -m "$fixture" --prompt-ids 1,2,3 -n 8 -c 4
expect_error both_prompts "excludes" generate -m "$fixture" --prompt-ids 1 -p hi
expect_error unknown_flag "unexpected|not expected|extra" generate -m "$fixture" --prompt-ids 1 --bogus

# A model directory whose weights are truncated.
mkdir -p "$work/truncated"
cp "$fixture/config.json" "$work/truncated/"
head -c 5000 "$fixture/model.safetensors" >"$work/truncated/model.safetensors"
expect_error truncated_weights "truncated" generate -m "$work/truncated" --prompt-ids 1
# A config that does not match the weights.
mkdir -p "$work/mismatch"
cp "$fixture/model.safetensors" "$work/mismatch/"
sed 's/"hidden_size": 64/"hidden_size": 128/' "$fixture/config.json" >"$work/mismatch/config.json"
expect_error config_mismatch "has shape" generate -m "$work/mismatch" --prompt-ids 1

for key in prompt_tokens generated_tokens prefill_tok_s decode_tok_s drafted accepted acceptance_length; do
  expect_ok "generate_json_$key" "\"stats\":\\{.*\"$key\":" \
    generate -m "$fixture" --prompt-ids "1,2,3" -n 5 --ignore-eos --json
done
expect_ok generate_json_tokens '"tokens":\[[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+\]' \
  generate -m "$fixture" --prompt-ids "1,2,3" -n 5 --ignore-eos --json
expect_ok generate_summary "generated 4 tok" generate -m "$fixture" --prompt-ids "[1, 2]" -n 4 --ignore-eos
expect_ok sampled "finish: length" generate -m "$fixture" --prompt-ids 1 -n 4 --ignore-eos --temperature 0.8 --top-p 0.9 --seed 3
expect_ok info_json '"parameters": [0-9]+' info -m "$fixture" --json
expect_ok eval_logits "wrote logits \[3, 256\]" eval-logits -m "$fixture" --prompt-ids "1,2,3" -o "$work/l.npy"
echo "1 2 3 4 5 6 7 8 9 10" >"$work/ids.txt"
expect_ok perplexity '"perplexity": [0-9.]+' perplexity -m "$fixture" --ids-file "$work/ids.txt" --window 4
expect_ok help "generate" --help
# A generation shorter than the 9 rows of bench's verification timing still fits the context.
expect_ok bench_short_json '"decode_tok_s": [0-9.]+' \
  bench -m "$fixture" --prompt-len 4 --gen-len 2 --num-prompts 1 --modes none --json

# Load-time weight quantisation.
target=$src/models/pycoder-target
expect_error bad_quantize "quantize" generate -m "$fixture" --prompt-ids 1 --quantize int3
expect_error bad_draft_quantize "draft-quantize" generate -m "$fixture" --prompt-ids 1 \
  --draft "$fixture" --draft-quantize fp8
expect_error gguf_already_quantized "already q[0-9a-z_]+ \(a GGUF block quantisation\)" \
  generate -m "$src/tests/data/gguf/tiny_llama.gguf" --prompt-ids 1 --quantize int8
expect_ok info_quantize "--quantize int4: [0-9.]+ MiB of weights once loaded" \
  info -m "$target" --quantize int4
expect_ok info_quantize_json '"loaded_weight_bytes": [0-9]+' info -m "$target" --quantize int8 --json
expect_ok generate_int8 '"tokens":\[[0-9]+,[0-9]+,[0-9]+,[0-9]+\]' \
  generate -m "$target" --prompt-ids "10,20,30" -n 4 --ignore-eos --json --quantize int8
expect_ok perplexity_int4 '"perplexity": [0-9.]+' \
  perplexity -m "$target" --ids-file "$work/ids.txt" --window 8 --quantize int4

# bench through the serving engine: sequences decoded together, output equal to plain decoding.
expect_error bench_concurrency_range "--concurrency must be 0 to 256" \
  bench -m "$fixture" --concurrency -1 --modes none
expect_error bench_concurrency_oracle "no oracle" \
  bench -m "$fixture" --concurrency 2 --prompt-len 4 --gen-len 4 --modes oracle@2
expect_error bench_negative_temperature "temperature: must be at least 0 \(got -0.5\)" \
  bench -m "$fixture" --temperature -0.5
expect_error bench_unknown_mode "unknown mode 'bogus'" bench -m "$fixture" --modes ngram,bogus
expect_error bench_mode_length "'draft@x': K must be a draft length" \
  bench -m "$target" --draft "$src/models/pycoder-draft" --modes draft@x
expect_error bench_mode_needs_draft "'ngram\+draft' needs a draft model" \
  bench -m "$fixture" --modes ngram+draft
out=$("$specd" bench -m "$target" --draft "$src/models/pycoder-draft" --concurrency 3 \
  --num-prompts 5 --prompt-len 6 --gen-len 12 --modes draft,ngram+draft --json 2>&1)
if grep -q '"concurrency": 3' <<<"$out" && [ "$(grep -c '"identical_to_plain": true' <<<"$out")" -eq 3 ]; then
  passes=$((passes + 1))
else
  echo "FAIL bench_concurrency: $out"
  failures=$((failures + 1))
fi

# A draft model's cache holds a draft past the target's context: at the fixture's own
# max_position_embeddings (128) neither model is warned about, past it both are.
out=$("$specd" generate -m "$fixture" --draft "$fixture" --prompt-ids 1,2 -n 4 -c 128 2>&1)
if [ $? -eq 0 ] && ! grep -q "warning: context size" <<<"$out"; then
  passes=$((passes + 1))
else
  echo "FAIL draft_slack_not_warned: $out"
  failures=$((failures + 1))
fi
expect_ok context_past_positions_warned "context size 130 exceeds the max_position_embeddings" \
  generate -m "$fixture" --draft "$fixture" --prompt-ids 1,2 -n 4 -c 130

# bench one prompt at a time, the modes taking turns on each prompt: the oracle drafts each
# prompt's plain output, and every mode's output (none and the four) equals plain decoding.
out=$("$specd" bench -m "$target" --draft "$src/models/pycoder-draft" --num-prompts 3 \
  --prompt-len 6 --gen-len 12 --modes oracle@4,draft,ngram,draft@2 --json \
  --plot "$work/b.svg" -o "$work/b.json" 2>&1)
if [ "$(grep -c '"identical_to_plain": true' <<<"$out")" -eq 5 ] &&
  grep -q '"mode": "oracle@4"' <<<"$out" &&
  grep -q '"acceptance_rate_by_position": \[' <<<"$out" &&
  [ "$(grep -c 'class="bar"' "$work/b.svg")" -eq 5 ] && grep -q '</svg>' "$work/b.svg"; then
  passes=$((passes + 1))
else
  echo "FAIL bench_modes_interleaved: $out"
  failures=$((failures + 1))
fi

# specd plot draws a saved result exactly as bench --plot drew it.
expect_ok plot_saved "wrote $work/c.svg" plot "$work/b.json" -o "$work/c.svg"
if cmp -s "$work/b.svg" "$work/c.svg"; then
  passes=$((passes + 1))
else
  echo "FAIL plot_equals_bench_plot"
  failures=$((failures + 1))
fi
echo '{"modes": "none"}' >"$work/not_bench.json"
expect_error plot_not_bench "not a specd bench result" plot "$work/not_bench.json" -o "$work/d.svg"
expect_error plot_bad_json "invalid JSON" plot "$src/README.md" -o "$work/d.svg"
expect_error bench_plot_unwritable "cannot write $work/missing/b.svg" \
  bench -m "$fixture" --modes none --plot "$work/missing/b.svg"

# SentencePiece-style GGUF tokenizer (Gemma layout) without a chat template.
gemma=$src/tests/data/gguf/spm_gemma.gguf
echo '[{"role": "user", "content": "Hi"}]' >"$work/chat.json"
expect_ok gguf_spm_tokenize '^\[2,' tokenize -m "$gemma" --text "Hello world"
expect_error gguf_no_template "no chat template.*--chat-template FILE" \
  render-chat -m "$gemma" --messages "$work/chat.json"
expect_ok gguf_template_file '"<bos><start_of_turn>user\\nHi<end_of_turn>\\n<start_of_turn>model\\n"' \
  render-chat -m "$gemma" --messages "$work/chat.json" \
  --chat-template "$src/tests/data/chat/templates/gemma3.jinja"
expect_error chat_template_needs_chat "--chat-template requires --chat" \
  generate -m "$gemma" --prompt hi --chat-template "$src/tests/data/chat/templates/gemma3.jinja"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
