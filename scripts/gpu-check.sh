#!/usr/bin/env bash
# Builds specd with CUDA, runs the CUDA tests and the GPU benchmarks in one go, and prints a short
# table. Meant for a machine with an NVIDIA GPU (sm_80 or newer) and nvcc.
#
# Usage: scripts/gpu-check.sh [phase...]
#   phases: build test sanitize kernels bench quant (default: these six; quant = int8/int4 and GGUF
#   block-format weight kernels and decode with --quantize), profile (per-kernel times of the
#   decode step with ncu), phases (what a boundary between dependent phases of a decode step
#   costs: one kernel per phase against one persistent kernel with grid barriers), serve (`specd
#   serve` on the GPU with the demo pair: batch-1 latency beside `specd generate`, then 1 and 8
#   concurrent streams with and without speculation), peers (gpt-fast side by side; needs
#   SPECD_GPT_FAST_DIR, a folder with gpt-fast's model.py and quantize.py, and PyTorch)
# Env: SPECD_GPU_OUT (results folder, default build-gpu/results), SPECD_GPU_MODEL_DIR (where the
# random-weight benchmark models are written, default /tmp/specd-gpu-models), SPECD_GPU_CMAKE_ARGS
# (extra configure arguments, e.g. -DSPECD_BLAS=OFF where OpenBLAS is not installed, or
# -DSPECD_CUBLASLT_ROOT=DIR for a cuBLASLt outside the CUDA toolkit, such as the one of a PyTorch
# installation in site-packages/nvidia/cu13; add DIR/lib to LD_LIBRARY_PATH to run).
set -euo pipefail
cd "$(dirname "$0")/.."
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(build test sanitize kernels bench quant)
has() { [[ " ${phases[*]} " == *" $1 "* ]]; }
out=${SPECD_GPU_OUT:-build-gpu/results}
models=${SPECD_GPU_MODEL_DIR:-/tmp/specd-gpu-models}
mkdir -p "$out" "$models"
jobs=$(nproc)
bin=build-gpu/src/cli/specd

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

if has build; then
  # shellcheck disable=SC2086
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECD_CUDA=ON \
    ${SPECD_GPU_CMAKE_ARGS:-} >"$out/configure.txt"
  targets=(specd make_random_model specd_cuda_kernel_bench specd_cuda_phase_bench
    backend_cuda_ops_test backend_cuda_sampling_test
    golden_model_test batch_invariance_test
    speculative_test speculative_sampling_test queued_decoding_test demo_models_test
    backend_cuda_int_quant_test
    backend_cuda_gguf_quant_test backend_cuda_folded_norm_test backend_cuda_qkv_rope_test quantized_model_test
    gguf_model_test gguf_gemma3_test batch_engine_test)
  start=$(date +%s)
  cmake --build build-gpu -j "$jobs" --target "${targets[@]}" >"$out/build.txt" 2>&1 ||
    { tail -n 40 "$out/build.txt"; exit 1; }
  echo "build: $(($(date +%s) - start)) s"
  grep -h "prefill GEMM" "$out/configure.txt" || true
fi

if has test; then
  # The CUDA op suite, then the model-level tests on the GPU (lossless speculation, golden logits,
  # batch invariance; the GGUF models need tools/gguf/fetch_models.sh, else they skip).
  (cd build-gpu && ctest -L cuda --output-on-failure) >"$out/test_cuda_ops.txt" 2>&1 || true
  (cd build-gpu && SPECD_TEST_DEVICE=cuda ctest -j 4 --output-on-failure \
    -R "GoldenModel|BatchInvariance|Lossless|Speculative|QueuedDecoding|DemoModels|QuantizedModel|GgufSmolLm2|GgufGemma3Model|BatchEngine|PrefixCache") \
    >"$out/test_cuda_models.txt" 2>&1 || true
  grep -E "tests passed|FAILED|Failed|\*\*\*" "$out/test_cuda_ops.txt" "$out/test_cuda_models.txt" |
    head -n 30
fi

if has sanitize; then
  for tool in memcheck racecheck; do
    # racecheck reports hazards inside cuBLASLt's own GEMM kernels (nvjet_*, closed source), so
    # under it the prefill GEMMs run specd's kernel (gemm.cu) instead, which it then checks.
    export SPECD_CUBLASLT=$([ "$tool" = racecheck ] && echo 0 || echo 1)
    compute-sanitizer --tool "$tool" --error-exitcode 9 build-gpu/tests/backend/backend_cuda_ops_test \
      --gtest_filter='*Elementwise*:*Attention*:*Recorded*' >"$out/sanitize_$tool.txt" 2>&1 &&
      echo "compute-sanitizer $tool (ops): clean" || echo "compute-sanitizer $tool: FAILED (see $out)"
    tail -n 3 "$out/sanitize_$tool.txt"
    for suite in int_quant:int8/int4 folded_norm:"folded norms" qkv_rope:"q/k/v with RoPE" \
      gguf_quant:"GGUF blocks"; do
      name=${suite%%:*} label=${suite#*:}
      compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "build-gpu/tests/backend/backend_cuda_${name}_test" >"$out/sanitize_${name}_$tool.txt" 2>&1 &&
        echo "compute-sanitizer $tool ($label): clean" ||
        echo "compute-sanitizer $tool ($label): FAILED (see $out)"
      tail -n 3 "$out/sanitize_${name}_$tool.txt"
    done
  done
  unset SPECD_CUBLASLT
fi

if has kernels; then
  build-gpu/bench/kernels/specd_cuda_kernel_bench | tee "$out/cuda_kernels.txt"
fi

if has phases; then
  build-gpu/bench/kernels/specd_cuda_phase_bench | tee "$out/cuda_phases.txt"
fi

if has bench; then
  date=$(date -u +%Y-%m-%d)
  [ -f "$models/llama-3.1-8b/config.json" ] ||
    build-gpu/tools/make_random_model --preset llama-3.1-8b -o "$models/llama-3.1-8b"
  # Decode vs roofline, verification cost, oracle speculation: 128-token prompts, 256 tokens.
  "$bin" bench -m "$models/llama-3.1-8b" --device cuda --prompt-len 128 --gen-len 256 \
    --num-prompts 2 --modes oracle@4,oracle@8 -o "$out/cuda_llama-3.1-8b-random_$date.json" \
    --plot "$out/cuda_llama-3.1-8b-random_$date.svg"
  # Sampled decoding (T = 0.8): tokens drawn on the device, then (SPECD_CUDA_SAMPLING=0) on the
  # host from copied logits.
  for sampling in 1 0; do
    SPECD_CUDA_SAMPLING=$sampling "$bin" bench -m "$models/llama-3.1-8b" --device cuda \
      --temperature 0.8 --prompt-len 128 --gen-len 256 --num-prompts 2 --modes oracle@4,oracle@8 \
      -o "$out/cuda_llama-3.1-8b-random-t0.8-sampling${sampling}_$date.json" | grep -E "^(none|oracle)" |
      sed "s/^/T=0.8, device sampling $sampling: /"
  done
  # Prefill of a 2,048-token prompt.
  "$bin" bench -m "$models/llama-3.1-8b" --device cuda --prompt-len 2048 --gen-len 8 \
    --num-prompts 2 --modes oracle@4 -o "$out/cuda_llama-3.1-8b-prefill2048_$date.json" |
    grep -E "prefill"
  if grep -q "cuBLASLt prefill" "$out/cuda_llama-3.1-8b-prefill2048_$date.json"; then
    # The same prefill with specd's own GEMM (SPECD_CUBLASLT=0), for comparison.
    SPECD_CUBLASLT=0 "$bin" bench -m "$models/llama-3.1-8b" --device cuda --prompt-len 2048 \
      --gen-len 8 --num-prompts 2 --modes oracle@4 \
      -o "$out/cuda_llama-3.1-8b-prefill2048-own-gemm_$date.json" | grep -E "prefill" |
      sed 's/^/own GEMM: /'
  fi
  # And with prompt chunks on the decode attention kernel (SPECD_PREFILL_ATTENTION=0).
  SPECD_PREFILL_ATTENTION=0 "$bin" bench -m "$models/llama-3.1-8b" --device cuda \
    --prompt-len 2048 --gen-len 8 --num-prompts 2 --modes oracle@4 \
    -o "$out/cuda_llama-3.1-8b-prefill2048-decode-attention_$date.json" | grep -E "prefill" |
    sed 's/^/decode-kernel attention: /'
fi

if has quant; then
  # int8/int4 and GGUF block-format weights: matmul kernels against the copy rate, then decode
  # with --quantize (int8/int4).
  for q in int8 int4 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k; do
    build-gpu/bench/kernels/specd_cuda_kernel_bench cuda "$q" matmul | grep matmul |
      tee "$out/cuda_kernels_$q.txt"
  done
  date=$(date -u +%Y-%m-%d)
  [ -f "$models/llama-3.1-8b/config.json" ] ||
    build-gpu/tools/make_random_model --preset llama-3.1-8b -o "$models/llama-3.1-8b"
  for q in int8 int4; do
    "$bin" bench -m "$models/llama-3.1-8b" --device cuda --quantize "$q" --prompt-len 128 \
      --gen-len 256 --num-prompts 2 --modes oracle@4 \
      -o "$out/cuda_llama-3.1-8b-random-${q}_$date.json" | grep -E "plain decode|prefill"
  done
fi

if has profile; then
  # Per-kernel device times of one decode step (ncu replays each kernel alone: no overlap, so the
  # sum is an upper bound), skipping prefill and the first steps.
  [ -f "$models/llama-3.1-8b/config.json" ] ||
    build-gpu/tools/make_random_model --preset llama-3.1-8b -o "$models/llama-3.1-8b"
  SPECD_CUDA_GRAPHS=0 ncu --csv --metrics gpu__time_duration.sum --launch-skip 3000 \
    --launch-count 26 "$bin" bench -m "$models/llama-3.1-8b" --device cuda --prompt-len 128 \
    --gen-len 16 --num-prompts 1 --modes none >"$out/profile_kernels.csv" 2>"$out/profile_log.txt"
  python3 - "$out/profile_kernels.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
for r in rows:
    unit = r["Metric Unit"]
    us = float(r["Metric Value"].replace(",", "")) / (1000.0 if unit == "nsecond" else 1.0)
    print(f"{us:8.2f} us  {r['Kernel Name'][:90]}")
PY
fi

if has serve; then
  for spec in none draft; do
    SPECD=$bin DEVICE=cuda OUT_DIR=$out MODE=latency bash bench/server_load.sh "$spec"
  done
  for spec in none draft ngram ngram+draft; do
    for c in 1 8; do SPECD=$bin DEVICE=cuda OUT_DIR=$out bash bench/server_load.sh "$spec" "$c" 15; done
  done
fi

if has peers; then
  if [ -n "${SPECD_GPT_FAST_DIR:-}" ]; then
    python3 bench/gpt_fast_compare.py --gpt-fast-dir "$SPECD_GPT_FAST_DIR" \
      --precisions "${SPECD_GPT_FAST_PRECISIONS:-bf16,int8}" \
      --prompt-len 128 --gen-len 256 2>"$out/gpt_fast_log.txt" | tee "$out/gpt_fast.jsonl" ||
      tail -n 20 "$out/gpt_fast_log.txt"
  else
    echo "peers: set SPECD_GPT_FAST_DIR to run gpt-fast side by side"
  fi
fi
