// Prices the boundaries between the dependent phases of a batch-1 decode step on the GPU.
//
// A step of the Llama-3.1-8B shape is modelled as its weight streams (per layer q/k/v, o,
// gate/up, down; then the LM head) with the small ops between them (attention's two kernels, and
// x's quantisation before each int8/int4 matmul) as phases that each depend on the one before:
// a phase's blocks read a value written by the phase before (as a matmul reads x) once they may.
// The same phases run
//   - as one kernel per phase in a CUDA graph, plain or with programmatic dependent launch (each
//     kernel loads its first weights before it waits, as specd's matmuls do), the latter also
//     with at most two weight-stream blocks a multiprocessor (as specd's matmuls have);
//   - as one persistent kernel whose phases are separated by a grid-wide barrier, with or without
//     each block loading its first weights of the next phase before the barrier;
//   - as one kernel streaming all the bytes with no dependencies (the loop's own ceiling);
// against the device-to-device copy rate. The difference to the ceiling, divided by the number
// of boundaries, is what one boundary costs; the persistent kernel's is what a decode step
// fused into one kernel would pay instead. No output of specd's is involved: this measures
// the GPU's scheduling, not specd's kernels.
//
// Usage: specd_cuda_phase_bench [bf16|int8|int4]... (default: all three)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kThreads = 256;
constexpr int kBatch = 8;         // 16-byte loads per thread in one batch (two batches in flight)
constexpr int kSmallBlocks = 32;  // blocks of a small op (attention's combine: one per head)
constexpr int kPasses = 20;
constexpr size_t kMaxPhases = 4095;  // outputs are kept for this many phases (+ one before them)
// Shared memory a weight-stream kernel may reserve (unused) so that at most two of its blocks fit
// a multiprocessor, as with specd's matmuls: the next kernel's blocks then start only as this
// one's leave, not beside them.
constexpr int kReservedShared = 100 * 1024;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// One phase: a weight stream of n16 16-byte words, or a small op (n16 == 0) on `blocks` blocks.
struct Phase {
  const uint4* w;
  int64_t n16;
  int blocks;  // blocks that work in this phase (and write its outputs)
};

struct Batch {
  uint4 v[kBatch];
};

__device__ __forceinline__ Batch load_batch(const Phase& p, int64_t first, int64_t stride) {
  Batch b;
#pragma unroll
  for (int u = 0; u < kBatch; ++u) {
    const int64_t i = first + u * stride;
    b.v[u] = i < p.n16 ? __ldcs(p.w + i) : make_uint4(0, 0, 0, 0);
  }
  return b;
}

__device__ __forceinline__ uint32_t fold(const Batch& b) {
  uint32_t acc = 0;
#pragma unroll
  for (int u = 0; u < kBatch; ++u) acc ^= b.v[u].x ^ b.v[u].y ^ b.v[u].z ^ b.v[u].w;
  return acc;
}

// The rest of this thread's words of p after its `first` batch (thread g of `threads`), with
// the next batch in flight while one is folded.
__device__ uint32_t stream(const Phase& p, Batch first, int64_t g, int64_t threads) {
  uint32_t acc = 0;
  const int64_t step = threads * kBatch;
  for (int64_t base = g + step; base < p.n16; base += step) {
    const Batch next = load_batch(p, base, threads);
    acc ^= fold(first);
    first = next;
  }
  return acc ^ fold(first);
}

// The phase's work once its inputs are ready: `dep` (the value read from the phase before) is
// folded in and the block writes its output; `sink` keeps the loads from being optimised away.
__device__ void finish(const Phase& p, const Batch& first, int64_t g, int64_t threads, uint32_t dep,
                       uint32_t* out, uint32_t* sink) {
  const uint32_t acc = stream(p, first, g, threads) ^ dep;
  if (acc == 0x9E3779B9u) sink[0] = acc;
  if (threadIdx.x == 0) out[blockIdx.x] = dep + 1;
}

__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// One phase as a kernel: weights first, then the wait (a no-op without programmatic launch).
__global__ void __launch_bounds__(kThreads, 2)
    phase_kernel(Phase p, const uint32_t* prev, int prev_blocks, uint32_t* out, uint32_t* sink) {
  const int64_t threads = int64_t{gridDim.x} * kThreads;
  const int64_t g = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  const Batch first = load_batch(p, g, threads);
  wait_for_previous_kernel();
  const uint32_t dep = prev[blockIdx.x % prev_blocks];
  finish(p, first, g, threads, dep, out, sink);
}

// Every block arrives, then waits for all of them. kRelease: thread 0 arrives with a release
// reduction instead of a fence and an atomic add (the writes its block made before the
// __syncthreads are ordered before it either way).
template <bool kRelease>
__device__ void grid_barrier(unsigned* arrived, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    if constexpr (kRelease) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(arrived) : "memory");
    } else {
      __threadfence();
      atomicAdd(arrived, 1u);
    }
    unsigned seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(arrived) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

// All phases in one kernel (every block resident), a grid barrier between two phases. With
// `early`, a block loads its first batch of the next phase before the barrier.
template <bool kRelease>
__global__ void __launch_bounds__(kThreads, 2)
    persistent_kernel(const Phase* phases, int n, uint32_t* outs, unsigned* arrived, uint32_t* sink,
                      bool early) {
  const int64_t grid = gridDim.x;
  Batch next{};
  int prev_blocks = 1;  // blocks that wrote the phase before's outputs
  for (int k = 0; k < n; ++k) {
    const Phase p = phases[k];
    const int64_t threads = int64_t{p.blocks} * kThreads;
    const int64_t g = int64_t{blockIdx.x} * kThreads + threadIdx.x;
    const bool works = static_cast<int>(blockIdx.x) < p.blocks;
    if (k > 0) grid_barrier<kRelease>(arrived, static_cast<unsigned>(k * grid));
    Batch first = early && k > 0 ? next : (works ? load_batch(p, g, threads) : Batch{});
    if (works) {
      const uint32_t* prev = outs + (k > 0 ? (k - 1) * grid : n * grid);
      finish(p, first, g, threads, prev[blockIdx.x % prev_blocks], outs + k * grid, sink);
    }
    if (early && k + 1 < n) {
      const Phase q = phases[k + 1];
      next = static_cast<int>(blockIdx.x) < q.blocks
                 ? load_batch(q, g, int64_t{q.blocks} * kThreads)
                 : Batch{};
    }
    prev_blocks = p.blocks;
  }
}

struct Format {
  const char* name;
  double bytes_per_weight;  // codes and their block headers
  bool quantised;           // x is quantised before q/k/v, gate/up and down (int8, int4)
  int small_ops_per_layer() const { return quantised ? 5 : 2; }  // attention's two, + 3
};

// The phases of one decode step of the Llama-3.1-8B shape, carved out of `w` in order.
std::vector<Phase> step_phases(const Format& f, const uint8_t* w, int grid, int64_t* bytes) {
  const int64_t hidden = 4096, ffn = 14336, kv = 1024, vocab = 128256;
  std::vector<Phase> out;
  int64_t at = 0;
  auto stream = [&](int64_t weights) {
    const int64_t n16 = static_cast<int64_t>(weights * f.bytes_per_weight) / 16;
    out.push_back({reinterpret_cast<const uint4*>(w + at), n16, grid});
    at += n16 * 16;
  };
  auto small = [&] { out.push_back({nullptr, 0, kSmallBlocks}); };
  for (int layer = 0; layer < 32; ++layer) {
    if (f.quantised) small();            // x's quantisation (q/k/v)
    stream((hidden + 2 * kv) * hidden);  // q/k/v
    small();                             // attention: chunks
    small();                             // attention: combine
    stream(hidden * hidden);             // o
    if (f.quantised) small();            // x's quantisation (gate/up)
    stream(2 * ffn * hidden);            // gate/up
    if (f.quantised) small();            // x's quantisation with SwiGLU (down)
    stream(ffn * hidden);                // down
  }
  stream(vocab * hidden);  // LM head
  *bytes = at;
  return out;
}

struct Device {
  int sms = 0;
  uint8_t* weights = nullptr;
  size_t weight_bytes = 0;
  uint32_t* outs = nullptr;  // [phases + 1][grid]
  unsigned* arrived = nullptr;
  uint32_t* sink = nullptr;
  cudaStream_t stream{};
  cudaEvent_t start{}, stop{};
};

template <typename Fn>
double seconds_per_pass(Device& d, Fn&& pass) {
  pass();  // warm-up
  check(cudaEventRecord(d.start, d.stream), "cudaEventRecord");
  for (int i = 0; i < kPasses; ++i) pass();
  check(cudaEventRecord(d.stop, d.stream), "cudaEventRecord");
  check(cudaEventSynchronize(d.stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, d.start, d.stop), "cudaEventElapsedTime");
  return ms * 1e-3 / kPasses;
}

void launch_phase(Device& d, const Phase& p, const uint32_t* prev, int prev_blocks, uint32_t* out,
                  bool programmatic, bool two_blocks) {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute[1];
  config.gridDim = dim3(static_cast<unsigned>(p.blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = two_blocks && p.n16 > 0 ? kReservedShared : 0;
  config.stream = d.stream;
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 1 : 0;
  check(cudaLaunchKernelEx(&config, phase_kernel, p, prev, prev_blocks, out, d.sink),
        "phase_kernel");
}

// Seconds per step with one kernel per phase, recorded as one CUDA graph. `two_blocks`: weight
// streams reserve kReservedShared.
double chained(Device& d, const std::vector<Phase>& phases, int grid, bool programmatic,
               bool two_blocks) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeGlobal), "capture");
  const int n = static_cast<int>(phases.size());
  for (int k = 0; k < n; ++k) {
    const uint32_t* prev = d.outs + (k > 0 ? (k - 1) * int64_t{grid} : n * int64_t{grid});
    launch_phase(d, phases[k], prev, k > 0 ? phases[k - 1].blocks : 1, d.outs + k * int64_t{grid},
                 programmatic, two_blocks);
  }
  check(cudaStreamEndCapture(d.stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  const double t = seconds_per_pass(d, [&] { check(cudaGraphLaunch(exec, d.stream), "launch"); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return t;
}

template <bool kRelease>
double persistent(Device& d, const std::vector<Phase>& phases, int grid, bool early) {
  Phase* on_device = nullptr;
  const size_t bytes = phases.size() * sizeof(Phase);
  check(cudaMalloc(&on_device, bytes), "cudaMalloc");
  check(cudaMemcpy(on_device, phases.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  int n = static_cast<int>(phases.size());
  const double t = seconds_per_pass(d, [&] {
    check(cudaMemsetAsync(d.arrived, 0, sizeof(unsigned), d.stream), "cudaMemsetAsync");
    void* args[] = {&on_device, &n, &d.outs, &d.arrived, &d.sink, &early};
    check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_kernel<kRelease>),
                                      dim3(grid), dim3(kThreads), args, 0, d.stream),
          "persistent_kernel");
  });
  cudaFree(on_device);
  return t;
}

double copy_rate(Device& d) {
  const size_t bytes = size_t{2} << 30;
  const double t = seconds_per_pass(d, [&] {
    check(cudaMemcpyAsync(d.weights + bytes, d.weights, bytes, cudaMemcpyDeviceToDevice, d.stream),
          "cudaMemcpyAsync");
  });
  return 2.0 * bytes / t;
}

void run(Device& d, const Format& f, double copy) {
  const int grid = 2 * d.sms;
  int64_t bytes = 0;
  const std::vector<Phase> phases = step_phases(f, d.weights, grid, &bytes);
  if (static_cast<size_t>(bytes) > d.weight_bytes || phases.size() > kMaxPhases) {
    std::fprintf(stderr, "the %s step does not fit the buffers\n", f.name);
    std::exit(1);
  }
  const int boundaries = static_cast<int>(phases.size()) - 1;
  const Phase all{reinterpret_cast<const uint4*>(d.weights), bytes / 16, grid};
  const double ceiling = chained(d, {all}, grid, false, false);
  const double roofline = bytes / copy;
  std::printf("%s: %.2f GB a step, %zu phases (%d small ops a layer); copy roofline %.3f ms\n",
              f.name, bytes / 1e9, phases.size(), f.small_ops_per_layer(), roofline * 1e3);
  auto row = [&](const char* variant, double t) {
    std::printf("  %-42s %7.3f ms  %5.1f%% of the roofline  %5.2f us a boundary\n", variant,
                t * 1e3, 100 * roofline / t, (t - ceiling) / boundaries * 1e6);
  };
  row("one stream, no boundaries", ceiling);
  row("kernels in a graph", chained(d, phases, grid, false, false));
  row("kernels in a graph, dependent launch", chained(d, phases, grid, true, false));
  row("  the same, at most 2 blocks an SM", chained(d, phases, grid, true, true));
  row("persistent, grid barrier", persistent<false>(d, phases, grid, false));
  row("persistent, grid barrier, loads early", persistent<false>(d, phases, grid, true));
  row("persistent, release barrier", persistent<true>(d, phases, grid, false));
  row("persistent, release barrier, loads early", persistent<true>(d, phases, grid, true));
}

}  // namespace

int main(int argc, char** argv) {
  const Format formats[] = {{"bf16", 2.0, false}, {"int8", 1.03125, true}, {"int4", 0.53125, true}};
  std::vector<Format> chosen;
  for (int i = 1; i < argc; ++i) {
    bool known = false;
    for (const Format& f : formats) {
      if (std::strcmp(argv[i], f.name) == 0) chosen.push_back(f), known = true;
    }
    if (!known) {
      std::fprintf(stderr, "usage: %s [bf16|int8|int4]...\n", argv[0]);
      return 2;
    }
  }
  if (chosen.empty()) chosen.assign(std::begin(formats), std::end(formats));

  Device d;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  d.sms = prop.multiProcessorCount;
  int per_sm = 0;
  check(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_kernel<true>, kThreads, 0),
      "occupancy");
  if (per_sm < 2) {
    std::fprintf(stderr, "persistent_kernel: %d blocks per multiprocessor, need 2\n", per_sm);
    return 1;
  }
  check(cudaFuncSetAttribute(phase_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kReservedShared),
        "cudaFuncSetAttribute");
  d.weight_bytes = size_t{17} << 30;  // the bf16 step (15.0 GB) and the copy's 4 GiB fit
  check(cudaMalloc(&d.weights, d.weight_bytes), "cudaMalloc (weights)");
  check(cudaMemset(d.weights, 1, d.weight_bytes), "cudaMemset");
  const size_t outs = size_t{kMaxPhases + 1} * 2 * d.sms;
  check(cudaMalloc(&d.outs, outs * sizeof(uint32_t)), "cudaMalloc");
  check(cudaMemset(d.outs, 0, outs * sizeof(uint32_t)), "cudaMemset");
  check(cudaMalloc(&d.arrived, sizeof(unsigned)), "cudaMalloc");
  check(cudaMalloc(&d.sink, sizeof(uint32_t)), "cudaMalloc");
  check(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&d.start), "cudaEventCreate");
  check(cudaEventCreate(&d.stop), "cudaEventCreate");
  const double copy = copy_rate(d);
  std::printf("%s, %d multiprocessors; device copy %.0f GB/s\n", prop.name, d.sms, copy / 1e9);
  for (const Format& f : chosen) run(d, f, copy);
  return 0;
}
