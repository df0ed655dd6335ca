// CudaBackend: device memory and copies, argument checks, scratch, graph recording, and the
// elementwise and attention ops (matmuls: cuda_matmul.cc).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
  return !is_quantized(dtype) || cuda::quant_kernel_dtype(dtype);
}

Tensor CudaBackend::place_weight(const Tensor& host, DeviceBuffer* storage) {
  SPECD_CHECK(host.contiguous(), "cuda: weights must be contiguous to upload");
  const void* bytes = host.data;
  size_t size = host.bytes();
  std::vector<uint8_t> grouped;  // int8/int4 rows in the device layout: groups of 8 rows
  if (cuda::int_quant_dtype(host.dtype)) {
    size = cuda::int_weight_bytes(host.dtype, host.rows, host.stride);
    grouped.resize(size);
    cuda::to_device_int_layout(host.data, host.dtype, host.rows, host.stride, grouped.data());
    bytes = grouped.data();
  }
  *storage = alloc(size);
  // On the backend's stream, so that kernels queued after it read the whole weight: cudaMemcpy
  // on the legacy default stream is not ordered with this (non-blocking) stream, and from
  // pageable memory it returns before its DMA has finished. Synchronised, as `grouped` dies here.
  check(cudaMemcpyAsync(storage->data(), bytes, size, cudaMemcpyHostToDevice, stream_),
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
