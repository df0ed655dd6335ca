// CudaBackend: device memory and copies, argument checks, scratch, graph recording, dispatch.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/kernels.h"
#if SPECD_WITH_CUBLASLT
#include "backend/cuda/cublaslt_gemm.h"
#endif
#include "backend/op_checks.h"
#include "core/error.h"

namespace specd {

namespace {

using cuda::check;

// A switch that is on unless the environment sets it to "0" (to measure without a feature).
bool env_switch(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// Weights in a quantised format with CUDA kernels: int8/int4 or GGUF blocks.
bool quant_kernel_dtype(DType dtype) {
  return cuda::int_quant_dtype(dtype) || cuda::block_quant_dtype(dtype);
}

// The small-M matmul of a group of int8/int4 or block-quantised weights (one dtype).
void matmul_quant_small(const cuda::MatmulGroup& group, cudaStream_t stream) {
  if (cuda::int_quant_dtype(group.part[0].w_dtype)) {
    cuda::matmul_int_small(group, stream);
  } else {
    cuda::matmul_block_small(group, stream);
  }
}

cuda::CacheArgs cache_args(const KvLayerView& cache) {
  cuda::CacheArgs c;
  c.k = cache.k;
  c.v = cache.v;
  c.dtype = cache.dtype;
  c.capacity = cache.capacity;
  c.n_slots = cache.n_slots;
  c.slot_stride = cache.slot_stride;
  c.n_kv_heads = cache.n_kv_heads;
  c.head_dim = cache.head_dim;
  return c;
}

}  // namespace

void CudaBackend::check_device(const char* op, int index,
                               std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    SPECD_CHECK(t->device.kind == DeviceKind::kCuda && t->device.index == index,
                "{}: tensor on {} passed to the cuda:{} backend", op, device_name(t->device),
                index);
  }
}

void cuda::check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("cuda: {} failed: {}", what, cudaGetErrorString(status));
}

void cuda::fail_message(const std::string& message) { fail("{}", message); }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

CudaBackend::CudaBackend(int device_index) : index_(device_index) {
  const int count = cuda_device_count();
  SPECD_CHECK(count > 0, "cuda: no CUDA device is available (driver missing or no GPU)");
  SPECD_CHECK(device_index >= 0 && device_index < count,
              "cuda: device cuda:{} does not exist ({} device{} found)", device_index, count,
              count == 1 ? "" : "s");
  check(cudaSetDevice(index_), "cudaSetDevice");
  check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, index_),
        "cudaDeviceGetAttribute");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = stream;
  graphs_ = env_switch("SPECD_CUDA_GRAPHS");
  int_mma_ = env_switch("SPECD_CUDA_INT_MMA");
  stacked_x_ = env_switch("SPECD_CUDA_INT_STACK");
  fuse_gate_ = env_switch("SPECD_CUDA_FUSE_GATE");
  fold_norms_ = env_switch("SPECD_CUDA_FOLD_NORMS");
  sampling_ = env_switch("SPECD_CUDA_SAMPLING");
  prefill_attention_ = env_switch("SPECD_PREFILL_ATTENTION");
  early_attention_ = env_switch("SPECD_CUDA_EARLY_ATTENTION");
  fuse_rope_ = env_switch("SPECD_CUDA_FUSE_ROPE");
  queue_work_ = env_switch("SPECD_CUDA_QUEUE");
  void* pinned = nullptr;
  check(cudaMallocHost(&pinned, kDownloadSlots * kMaxDownload), "cudaMallocHost (downloads)");
  downloads_ = static_cast<std::byte*>(pinned);
  for (CUevent_st*& event : download_done_) {
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  }
  for (CUevent_st*& event : marks_) check(cudaEventCreate(&event), "cudaEventCreate (mark)");
  check(cudaEventCreateWithFlags(&handoff_, cudaEventDisableTiming), "cudaEventCreate");
#if SPECD_WITH_CUBLASLT
  if (env_switch("SPECD_CUBLASLT")) lt_ = std::make_unique<cuda::LtGemm>();
#endif
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(index_);
  cudaStreamSynchronize(stream_);
#if SPECD_WITH_CUBLASLT
  lt_.reset();
#endif
  for (auto& [key, r] : recorded_) {
    if (r.graph != nullptr) cudaGraphExecDestroy(r.graph);
  }
  for (Scratch& s : scratch_) {
    if (s.data != nullptr) cudaFree(s.data);
  }
  for (CUevent_st* event : download_done_) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  for (CUevent_st* event : marks_) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (handoff_ != nullptr) cudaEventDestroy(handoff_);
  if (downloads_ != nullptr) cudaFreeHost(downloads_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::describe() const {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index_), "cudaGetDeviceProperties");
  bool lt = false;
#if SPECD_WITH_CUBLASLT
  lt = lt_ != nullptr;
#endif
  return fmt::format("cuda:{} ({}, sm_{}{}, {} GiB{}{}{})", index_, prop.name, prop.major,
                     prop.minor, prop.totalGlobalMem >> 30, lt ? ", cuBLASLt prefill" : "",
                     graphs_ ? "" : ", graphs off",
                     prefill_attention_ ? "" : ", tensor-core prefill attention off");
}

DeviceBuffer CudaBackend::alloc(size_t bytes) {
  check(cudaSetDevice(index_), "cudaSetDevice");
  void* data = nullptr;
  const cudaError_t status = cudaMalloc(&data, std::max<size_t>(bytes, 256));
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    fail("cuda:{}: out of device memory allocating {} MiB ({} MiB free of {} MiB)", index_,
         bytes >> 20, free_bytes >> 20, total >> 20);
  }
  return DeviceBuffer(data, bytes, device(), [](void* p) { cudaFree(p); });
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync (upload)");
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync (download)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync (device)");
}

uint64_t CudaBackend::start_download(const void* src, size_t bytes) {
  const uint64_t ticket = download_tickets_.start(bytes);
  const int slot = download_tickets_.slot(ticket);
  if (bytes != 0) {
    check(cudaMemcpyAsync(downloads_ + slot * kMaxDownload, src, bytes, cudaMemcpyDeviceToHost,
                          stream_),
          "cudaMemcpyAsync (download)");
  }
  check(cudaEventRecord(download_done_[slot], stream_), "cudaEventRecord (download)");
  return ticket;
}

void CudaBackend::finish_download(uint64_t ticket, void* dst) {
  const int slot = download_tickets_.slot(ticket);
  check(cudaEventSynchronize(download_done_[slot]), "cudaEventSynchronize (download)");
  const size_t bytes = download_tickets_.bytes(ticket);
  if (bytes != 0) std::memcpy(dst, downloads_ + slot * kMaxDownload, bytes);
}

void CudaBackend::wait_for(Backend& other) {
  if (&other == this) return;
  auto* cuda = dynamic_cast<CudaBackend*>(&other);
  SPECD_CHECK(cuda != nullptr && cuda->index_ == index_, "cuda:{} cannot wait for the work of {}",
              index_, other.describe());
  check(cudaEventRecord(cuda->handoff_, cuda->stream_), "cudaEventRecord (handoff)");
  check(cudaStreamWaitEvent(stream_, cuda->handoff_, 0), "cudaStreamWaitEvent");
}

uint64_t CudaBackend::mark() {
  check(cudaEventRecord(marks_[next_mark_ % kMarkSlots], stream_), "cudaEventRecord (mark)");
  return next_mark_++;
}

double CudaBackend::seconds_between(uint64_t a, uint64_t b) {
  CUevent_st* from = marks_[mark_slot(a)];
  CUevent_st* to = marks_[mark_slot(b)];
  check(cudaEventSynchronize(to), "cudaEventSynchronize (mark)");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime (mark)");
  return ms * 1e-3;
}

bool CudaBackend::supports_weights(DType dtype) const {
  return !is_quantized(dtype) || quant_kernel_dtype(dtype);
}

Tensor CudaBackend::place_weight(const Tensor& host, DeviceBuffer* storage) {
  SPECD_CHECK(host.contiguous(), "cuda: weights must be contiguous to upload");
  *storage = alloc(host.bytes());
  const void* bytes = host.data;
  std::vector<uint8_t> split;  // int8/int4 rows in the device layout: codes, then headers
  if (cuda::int_quant_dtype(host.dtype)) {
    split.resize(host.bytes());
    cuda::split_int_rows(host.data, host.dtype, host.rows, host.stride, split.data());
    bytes = split.data();
  }
  // On the backend's stream, so that kernels queued after it read the whole weight: cudaMemcpy
  // on the legacy default stream is not ordered with this (non-blocking) stream, and from
  // pageable memory it returns before its DMA has finished. Synchronised, as `split` dies here.
  check(cudaMemcpyAsync(storage->data(), bytes, host.bytes(), cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (weights)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  Tensor out = host;
  out.data = storage->data();
  out.device = device();
  return out;
}

void CudaBackend::synchronize() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

double CudaBackend::measure_bandwidth() {
  constexpr size_t kBytes = size_t{2} << 30;
  DeviceBuffer a = alloc(kBytes), b = alloc(kBytes);
  check(cudaMemsetAsync(a.data(), 1, kBytes, stream_), "cudaMemsetAsync");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    check(cudaEventRecord(start, stream_), "cudaEventRecord");
    copy_on_device(b.data(), a.data(), kBytes);
    check(cudaEventRecord(stop, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    if (i >= 2) ms.push_back(t);  // two warm-up copies
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 2.0 * kBytes / (ms[ms.size() / 2] * 1e-3);
}

void* CudaBackend::scratch(int which, size_t bytes) {
  Scratch& s = scratch_[which];
  s.recorded = s.recorded || capturing_;
  if (s.bytes >= bytes) return s.data;
  SPECD_CHECK(!capturing_, "cuda: scratch growth while recording a graph");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (s.data != nullptr) cudaFree(s.data);
  const size_t size = std::max<size_t>(bytes, 1 << 16);
  check(cudaMalloc(&s.data, size), "cudaMalloc (scratch)");
  if (which == kTickets || which == kArgmax || which == kSampleSlices) {  // before their kernels
    check(cudaMemsetAsync(s.data, 0, size, stream_), "cudaMemsetAsync (tickets)");
  }
  s.bytes = size;
  if (!s.recorded) return s.data;     // no graph captured the old address
  for (auto& [key, r] : recorded_) {  // graphs captured the old address: record them again
    if (r.graph != nullptr) cudaGraphExecDestroy(r.graph);
    r.graph = nullptr;
  }
  return s.data;
}

void CudaBackend::run_recorded(uint64_t key, const std::function<void()>& ops) {
  if (!graphs_ || capturing_) {
    ops();
    return;
  }
  Recorded& r = recorded_[key];
  if (r.graph != nullptr) {
    check(cudaGraphLaunch(r.graph, stream_), "cudaGraphLaunch");
    return;
  }
  if (++r.seen < 2) {  // the first run is eager: scratch reaches its size before recording
    ops();
    return;
  }
  capturing_ = true;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    ops();
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    capturing_ = false;
    throw;
  }
  capturing_ = false;
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(status, "cudaGraphInstantiate");
  recorded_[key].graph = exec;
  ++recordings_;
  check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
}

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_device("embedding", index_, {&ids, &table, &out});
  op_checks::embedding(ids, table, out, /*read_indices=*/false);
  if (ids.cols == 0) return;
  if (cuda::int_quant_dtype(table.dtype)) {
    cuda::embedding_int(ids.ptr<const int32_t>(), ids.cols, table.data, table.dtype, table.stride,
                        table.rows, table.cols, out.ptr<float>(), out.stride, stream_);
    return;
  }
  if (cuda::block_quant_dtype(table.dtype)) {
    cuda::embedding_block(ids.ptr<const int32_t>(), ids.cols, table.data, table.dtype, table.stride,
                          table.rows, table.cols, out.ptr<float>(), out.stride, stream_);
    return;
  }
  SPECD_CHECK(!is_quantized(table.dtype), "cuda embedding: {} tables have no CUDA kernel yet",
              dtype_name(table.dtype));
  cuda::embedding(ids.ptr<const int32_t>(), ids.cols, table.data, table.dtype, table.stride,
                  table.rows, table.cols, out.ptr<float>(), out.stride, stream_);
}

void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                         bool accumulate) {
  const MatmulPart part{&w, bias, &y};
  run_matmuls(x, std::span<const MatmulPart>(&part, 1), accumulate);
}

void CudaBackend::matmul_group(const Tensor& x, std::span<const MatmulPart> parts) {
  SPECD_CHECK(!parts.empty() && parts.size() <= cuda::MatmulGroup::kMaxParts,
              "matmul_group: {} parts (1 to {})", parts.size(), cuda::MatmulGroup::kMaxParts);
  run_matmuls(x, parts, false);
}

cuda::MatmulGroup CudaBackend::make_group(const Tensor& x, std::span<const MatmulPart> parts,
                                          bool accumulate) const {
  cuda::MatmulGroup group;
  for (const MatmulPart& p : parts) {
    check_device("matmul", index_, {&x, p.w, p.y});
    if (p.bias != nullptr) check_device("matmul", index_, {p.bias});
    op_checks::matmul(x, *p.w, p.bias, *p.y);
    SPECD_CHECK(supports_weights(p.w->dtype), "cuda matmul: {} weights have no CUDA kernel yet",
                dtype_name(p.w->dtype));
    cuda::MatmulArgs& a = group.part[group.count];
    a.x = x.ptr<const float>();
    a.x_stride = x.stride;
    a.w = p.w->data;
    a.w_dtype = p.w->dtype;
    a.w_stride = p.w->stride;
    a.bias = p.bias != nullptr ? p.bias->data : nullptr;
    a.bias_dtype = p.bias != nullptr ? p.bias->dtype : DType::kF32;
    a.y = p.y->ptr<float>();
    a.y_stride = p.y->stride;
    a.m = x.rows;
    a.n = p.w->rows;
    a.k = p.w->cols;
    a.accumulate = accumulate;
    const int64_t before = group.count == 0 ? 0 : group.tile_end[group.count - 1];
    group.tile_end[group.count] = before + (a.n + 15) / 16;
    ++group.count;
  }
  return group;
}

void CudaBackend::run_matmuls(const Tensor& x, std::span<const MatmulPart> parts, bool accumulate) {
  const cuda::MatmulGroup group = make_group(x, parts, accumulate);
  const int64_t m = x.rows;
  if (m > kSmallBatch) int_x_ready_ = {};
  if (m == 0) return;
  bool same_weights = true;  // one launch needs one weight dtype
  for (int p = 1; p < group.count; ++p) {
    same_weights = same_weights && group.part[p].w_dtype == group.part[0].w_dtype;
  }
  if (m <= kSmallBatch && same_weights) {
    run_small(group);
    return;
  }
  const void* x_bf16 = nullptr;  // x rounded to bf16 once for the group's GEMMs
  for (int p = 0; p < group.count; ++p) {
    const cuda::MatmulArgs& a = group.part[p];
    if (a.n == 0) continue;
    if (m > kSmallBatch && quant_kernel_dtype(a.w_dtype)) {
      const size_t slab = static_cast<size_t>(std::min(cuda::dequant_slab_rows(a.k), a.n) * a.k);
      void* w_bf16 = scratch(kDequant, slab * 2);
      cuda::matmul_quant_gemm(a, w_bf16, stream_,
                              [&](const cuda::MatmulArgs& part) { run_gemm(part, &x_bf16); });
      continue;
    }
    if (m > kSmallBatch && cuda::gemm_supported(a)) {
      run_gemm(a, &x_bf16);
      continue;
    }
    cuda::MatmulGroup single;
    single.part[0] = a;
    single.tile_end[0] = (a.n + 15) / 16;
    single.count = 1;
    run_small(single);
  }
}

bool CudaBackend::gate_up_act(Activation act, const Tensor& x, const Tensor& w_gate,
                              const Tensor& w_up, Tensor& gate) {
  // bf16 with few rows: the small-M kernel multiplies 8 gate rows and the 8 matching up rows in
  // one tile and writes act(gate) * up as the tile finishes, which saves the silu_mul kernel.
  const cuda::MatmulGroup pair = gate_up_pair(act, x, w_gate, w_up, gate);
  if (pair.count == 0) return false;
  run_small(pair);
  return true;
}

cuda::MatmulGroup CudaBackend::gate_up_pair(Activation act, const Tensor& x, const Tensor& w_gate,
                                            const Tensor& w_up, Tensor& gate) const {
  if (!fuse_gate_ || x.rows == 0 || x.rows > kSmallBatch) return {};
  const MatmulPart parts[] = {{&w_gate, nullptr, &gate}, {&w_up, nullptr, &gate}};
  const cuda::MatmulGroup separate = make_group(x, parts, false);
  return cuda::gate_up_pair_group(act, separate.part[0], separate.part[1]);
}

void CudaBackend::gated_matmul(Activation act, Tensor& gate, const Tensor& up, const Tensor& w,
                               const Tensor* bias, Tensor& y, bool accumulate) {
  // int8/int4 with few rows on tensor cores: x is quantised first anyway, and that kernel reads
  // act(gate) * up itself, which saves the silu_mul kernel. (bf16: combining them inside the
  // matmul's x loads, once per tile, made H100 decode 28% slower; not done.)
  const cuda::MatmulGroup group = gated_int_group(act, gate, up, w, bias, y, accumulate);
  if (group.count > 0) {
    run_small(group);
    return;
  }
  Backend::gated_matmul(act, gate, up, w, bias, y, accumulate);
}

cuda::MatmulGroup CudaBackend::gated_int_group(Activation act, Tensor& gate, const Tensor& up,
                                               const Tensor& w, const Tensor* bias, Tensor& y,
                                               bool accumulate) const {
  if (!fuse_gate_ || !cuda::int_quant_dtype(w.dtype) || up.rows == 0 || up.rows > kSmallBatch) {
    return {};
  }
  check_device("gated_matmul", index_, {&gate});
  op_checks::silu_mul(gate, up, gate);  // the shapes (gelu_tanh_mul's are the same)
  const MatmulPart part{&w, bias, &y};
  cuda::MatmulGroup group = make_group(up, std::span<const MatmulPart>(&part, 1), accumulate);
  cuda::MatmulArgs& a = group.part[0];
  a.gate = gate.ptr<const float>();
  a.gate_stride = gate.stride;
  a.gate_act = act;
  if (!cuda::small_gate_fusable(a) || !int_tensor_cores(group)) return {};
  return group;
}

void CudaBackend::run_gemm(const cuda::MatmulArgs& a, const void** x_bf16) {
  cuda::MatmulScratch s;
  s.x_bf16_elems = static_cast<size_t>(a.m * a.k);
  s.x_bf16 = scratch(kBf16X, s.x_bf16_elems * 2);
#if SPECD_WITH_CUBLASLT
  if (lt_ != nullptr && lt_->supports(a)) {
    if (*x_bf16 == nullptr) {
      cuda::round_x_bf16(a, s, stream_);
      *x_bf16 = s.x_bf16;
    }
    lt_->matmul(a, *x_bf16, stream_);
    cuda::add_bias(a, stream_);
    return;
  }
#endif
  cuda::matmul_gemm(a, s, stream_);  // rounds x itself, as it always has
}

bool CudaBackend::int_tensor_cores(const cuda::MatmulGroup& group) const {
  if (!int_mma_ || !cuda::int_quant_dtype(group.part[0].w_dtype)) return false;
  for (int p = 0; p < group.count; ++p) {
    if (!cuda::small_tensor_cores(group.part[p])) return false;
  }
  return true;
}

bool CudaBackend::small_tensor_core_group(const cuda::MatmulGroup& group) const {
  if (group.count == 0) return false;
  const cuda::MatmulArgs& a = group.part[0];
  if (a.m == 0 || a.m > kSmallBatch) return false;
  for (int p = 0; p < group.count; ++p) {
    const cuda::MatmulArgs& part = group.part[p];
    if (part.w_dtype != a.w_dtype || !cuda::small_tensor_cores(part)) return false;
  }
  return a.w_dtype == DType::kBF16 || int_tensor_cores(group);
}

void CudaBackend::run_small(const cuda::MatmulGroup& group) {
  const IntXReady ready = std::exchange(int_x_ready_, {});  // valid for this matmul only
  if (quant_kernel_dtype(group.part[0].w_dtype) && !int_tensor_cores(group)) {
    matmul_quant_small(group, stream_);  // GGUF blocks; int8/int4 on CUDA cores
    return;
  }
  cuda::SmallMatmulPlan plan = cuda::plan_small_matmul(group, multiprocessors_);
  if (plan.tiles == 0) return;
  plan.stacked_x = stacked_x_;
  cuda::MatmulScratch s;
  s.partial_floats = cuda::small_matmul_partial_floats(plan);
  if (s.partial_floats > 0) {
    s.partials = static_cast<float*>(scratch(kPartials, s.partial_floats * 4));
    s.tickets = static_cast<unsigned*>(scratch(kTickets, static_cast<size_t>(plan.tiles) * 4));
  }
  const cuda::MatmulArgs& a = group.part[0];
  if (cuda::int_quant_dtype(a.w_dtype)) {
    s.x_int8 = scratch(kIntX, cuda::small_int_x_bytes(a.m, a.k));
    s.x_int8_ready = group.count == 1 && a.gate == nullptr && ready.x == a.x && ready.w == a.w &&
                     ready.m == a.m && ready.k == a.k;
  }
  cuda::matmul_small(group, plan, s, stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  check_device("rms_norm", index_, {&x, &weight, &y});
  op_checks::rms_norm(x, weight, y);
  if (x.rows == 0) return;
  cuda::rms_norm(x.ptr<const float>(), x.stride, weight.data, weight.dtype, eps, y.ptr<float>(),
                 y.stride, x.rows, x.cols, stream_);
}

void CudaBackend::rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table) {
  check_device("rope", index_, {&x, &positions, &table.cos, &table.sin});
  op_checks::rope(x, n_heads, positions, table, /*read_indices=*/false);
  if (x.rows == 0) return;
  cuda::rope(x.ptr<float>(), x.stride, x.rows, n_heads, static_cast<int>(table.cos.cols),
             positions.ptr<const int32_t>(), table.cos.ptr<const float>(),
             table.sin.ptr<const float>(), table.cos.stride, table.cos.rows, stream_);
}

void CudaBackend::silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  check_device("silu_mul", index_, {&gate, &up, &out});
  op_checks::silu_mul(gate, up, out);
  if (gate.numel() == 0) return;
  cuda::silu_mul(gate.ptr<const float>(), gate.stride, up.ptr<const float>(), up.stride,
                 out.ptr<float>(), out.stride, gate.rows, gate.cols, stream_);
}

void CudaBackend::gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  check_device("gelu_tanh_mul", index_, {&gate, &up, &out});
  op_checks::gelu_tanh_mul(gate, up, out);
  if (gate.numel() == 0) return;
  cuda::gelu_tanh_mul(gate.ptr<const float>(), gate.stride, up.ptr<const float>(), up.stride,
                      out.ptr<float>(), out.stride, gate.rows, gate.cols, stream_);
}

void CudaBackend::scale(Tensor& x, float s) {
  check_device("scale", index_, {&x});
  op_checks::scale(x);
  if (x.numel() == 0) return;
  cuda::scale(x.ptr<float>(), x.stride, x.rows, x.cols, s, stream_);
}

void CudaBackend::add(const Tensor& x, Tensor& y) {
  check_device("add", index_, {&x, &y});
  op_checks::add(x, y);
  if (x.numel() == 0) return;
  cuda::add(x.ptr<const float>(), x.stride, y.ptr<float>(), y.stride, x.rows, x.cols, stream_);
}

void CudaBackend::store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
                           const AttentionRows& rows) {
  check_device("store_kv", index_, {&k, &v, &rows.slots, &rows.cache_index});
  op_checks::store_kv(k, v, cache, rows, /*read_indices=*/false);
  if (k.rows == 0) return;
  cuda::store_kv(k.ptr<const float>(), k.stride, v.ptr<const float>(), v.stride, k.rows,
                 cache_args(cache), rows.slots.ptr<const int32_t>(),
                 rows.cache_index.ptr<const int32_t>(), stream_);
}

namespace {

cuda::RopeStoreArgs rope_store_args(Tensor& q, Tensor& k, const Tensor& v, int n_heads,
                                    const RopeTable& table, const KvLayerView& cache,
                                    const AttentionRows& rows) {
  cuda::RopeStoreArgs a;
  a.q = q.ptr<float>();
  a.q_stride = q.stride;
  a.k = k.ptr<float>();
  a.k_stride = k.stride;
  a.v = v.ptr<const float>();
  a.v_stride = v.stride;
  a.m = q.rows;
  a.n_heads = n_heads;
  a.half = static_cast<int>(table.cos.cols);
  a.positions = rows.positions.ptr<const int32_t>();
  a.cos = table.cos.ptr<const float>();
  a.sin = table.sin.ptr<const float>();
  a.table_stride = table.cos.stride;
  a.table_rows = table.cos.rows;
  a.cache = cache_args(cache);
  a.slots = rows.slots.ptr<const int32_t>();
  a.cache_index = rows.cache_index.ptr<const int32_t>();
  return a;
}

}  // namespace

void CudaBackend::rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, int n_heads,
                                const RopeTable& table, const KvLayerView& cache,
                                const AttentionRows& rows) {
  check_device("rope_store_kv", index_,
               {&q, &k, &v, &rows.positions, &rows.slots, &rows.cache_index, &table.cos});
  op_checks::rope(q, n_heads, rows.positions, table, /*read_indices=*/false);
  op_checks::rope(k, cache.n_kv_heads, rows.positions, table, /*read_indices=*/false);
  op_checks::store_kv(k, v, cache, rows, /*read_indices=*/false);
  if (q.rows == 0) return;
  if (2 * table.cos.cols != cache.head_dim) {  // partial rotary: the separate ops
    Backend::rope_store_kv(q, k, v, n_heads, table, cache, rows);
    return;
  }
  cuda::rope_store_kv(rope_store_args(q, k, v, n_heads, table, cache, rows), stream_);
}

void CudaBackend::qk_norm_rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                                        const Tensor& k_norm, float eps, int n_heads,
                                        const RopeTable& table, const KvLayerView& cache,
                                        const AttentionRows& rows) {
  check_device(
      "qk_norm_rope_store_kv", index_,
      {&q, &k, &v, &q_norm, &k_norm, &rows.positions, &rows.slots, &rows.cache_index, &table.cos});
  // Partial rotary, or SPECD_CUDA_FUSE_ROPE=0: the separate ops.
  if (!fuse_rope_ || 2 * table.cos.cols != cache.head_dim) {
    Backend::qk_norm_rope_store_kv(q, k, v, q_norm, k_norm, eps, n_heads, table, cache, rows);
    return;
  }
  const Tensor q_heads = q.reshape_cols(cache.head_dim), k_heads = k.reshape_cols(cache.head_dim);
  op_checks::rms_norm(q_heads, q_norm, q_heads);
  op_checks::rms_norm(k_heads, k_norm, k_heads);
  op_checks::rope(q, n_heads, rows.positions, table, /*read_indices=*/false);
  op_checks::rope(k, cache.n_kv_heads, rows.positions, table, /*read_indices=*/false);
  op_checks::store_kv(k, v, cache, rows, /*read_indices=*/false);
  if (q.rows == 0) return;
  cuda::RopeStoreArgs a = rope_store_args(q, k, v, n_heads, table, cache, rows);
  a.q_norm = q_norm.data;
  a.q_norm_dtype = q_norm.dtype;
  a.k_norm = k_norm.data;
  a.k_norm_dtype = k_norm.dtype;
  a.eps = eps;
  cuda::qk_norm_rope_store_kv(a, stream_);
}

void CudaBackend::attention(const Tensor& q, int n_heads, const KvLayerView& cache,
                            const AttentionRows& rows, float scale, Tensor& out) {
  int_x_ready_ = {};
  check_device("attention", index_, {&q, &out, &rows.slots});
  if (rows.window > 0) check_device("attention", index_, {&rows.positions});
  op_checks::attention(q, n_heads, cache, rows, out, /*read_indices=*/false);
  if (q.rows == 0) return;
  const bool masked = rows.mask_start.data != nullptr;
  cuda::AttentionArgs a;
  a.q = q.ptr<const float>();
  a.q_stride = q.stride;
  a.out = out.ptr<float>();
  a.out_stride = out.stride;
  a.cache = cache_args(cache);
  a.n_heads = n_heads;
  a.m = q.rows;
  a.scale = scale;
  a.slots = rows.slots.ptr<const int32_t>();
  a.window = rows.window;
  a.positions = rows.window > 0 ? rows.positions.ptr<const int32_t>() : nullptr;
  a.cache_index = masked ? nullptr : rows.cache_index.ptr<const int32_t>();
  a.mask_start = masked ? rows.mask_start.ptr<const int32_t>() : nullptr;
  a.mask = masked && rows.mask.cols > 0 ? rows.mask.ptr<const int32_t>() : nullptr;
  a.mask_cols = masked ? rows.mask.cols : 0;
  a.mask_stride = masked ? rows.mask.stride : 0;
  a.settled = rows.settled && early_attention_;
  // Prompt chunks: tensor cores (rows of one slot, above the small-batch sizes whose bits must
  // match decoding, as with the GEMM).
  if (prefill_attention_ && rows.one_slot && a.m > kSmallBatch &&
      cuda::prefill_attention_supported(a)) {
    cuda::prefill_attention(a, stream_);
    return;
  }
  auto* partials = static_cast<float*>(scratch(kAttention, cuda::attention_partial_floats(a) * 4));
  // The o projection's x parts from the combine kernel (a head is one 128-element block), where
  // that projection runs on the int8/int4 tensor-core kernel: its quantisation kernel is saved.
  const Tensor* w = rows.reader;
  const bool int_reader = w != nullptr && int_mma_ && a.m <= kSmallBatch && w->device == device() &&
                          cuda::int_quant_dtype(w->dtype) && cache.head_dim == 128 &&
                          w->cols == out.cols && out.cols == int64_t{n_heads} * 128;
  if (int_reader) {
    a.x_int8 = scratch(kIntX, cuda::small_int_x_bytes(a.m, out.cols));
    int_x_ready_ = {out.data, w->data, a.m, out.cols};
  }
  cuda::attention(a, partials, stream_);
}

}  // namespace specd
