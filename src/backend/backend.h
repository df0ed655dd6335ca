// The device interface every model is written against: memory, synchronisation and the ops.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "backend/tensor.h"
#include "core/activation.h"
#include "core/error.h"

namespace specd {

// Owning device memory; freed by the backend that allocated it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(void* data, size_t bytes, Device device, void (*release)(void*))
      : data_(data, release), bytes_(bytes), device_(device) {}
  void* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  Tensor view(DType dtype, int64_t rows, int64_t cols) const {
    return Tensor::make(data(), dtype, rows, cols, device_);
  }

 private:
  std::unique_ptr<void, void (*)(void*)> data_{nullptr, +[](void*) {}};
  size_t bytes_ = 0;
  Device device_{};
};

// Precomputed rotary tables: cos/sin of position * inv_freq (already multiplied by the rope
// scaling's attention factor), for positions [0, max_positions).
struct RopeTable {
  Tensor cos;  // [max_positions, head_dim / 2] f32
  Tensor sin;  // [max_positions, head_dim / 2] f32
};

// One layer's K and V cache for every slot: k[slot][index][kv_head][head_dim].
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kBF16;
  int64_t capacity = 0;     // entries per slot
  int64_t n_slots = 0;      // slots in k and v (store_kv and attention check slot < n_slots)
  int64_t slot_stride = 0;  // elements between slots (= capacity * n_kv_heads * head_dim)
  int n_kv_heads = 0;
  int head_dim = 0;
};

// Where the M rows of one forward live in the KV cache and what each row attends to.
// Without a mask, row m attends to cache entries [0, cache_index[m]] of its slot (causal).
// With a mask, row m attends to entries [0, mask_start[m]) and to entry mask_start[m] + j for
// each j < mask.cols with mask[m][j] != 0 (tree verification).
// With window > 0 (sliding-window layers), entries j <= positions[m] - window are hidden as
// well (Hugging Face's sliding mask: visible iff j > position - window). The cache is
// position-indexed, so entry j holds position j; the masked part of a tree (entries from
// mask_start on) is not windowed (a tree is shallower than the window).
struct AttentionRows {
  int64_t count = 0;
  Tensor slots;           // [1, M] i32: cache slot of each row
  Tensor cache_index;     // [1, M] i32: where each row's K/V is written
  Tensor positions;       // [1, M] i32: RoPE position of each row
  Tensor mask_start;      // [1, M] i32, or empty (data == nullptr) for plain causal rows
  Tensor mask;            // [M, mask_cols] i32, nonzero = visible, or empty
  int64_t window = 0;     // sliding window in positions; 0 = unlimited
  bool one_slot = false;  // every row is in the same cache slot (known on the host)
  // The op right before attention stored these rows' K/V and nothing else has written the cache
  // since the index arrays were uploaded: a backend may read the older entries (and the index
  // arrays) while that op still runs (the transformer's rope_store_kv or qkv_rope_store_kv,
  // then attention).
  bool settled = false;
  // The weight of the matmul that reads `out` right after attention, with no op in between
  // (the o projection), or nullptr: a backend may also write out in the form that matmul reads.
  const Tensor* reader = nullptr;
};

// How sample_rows draws the token of one logits row: Sampler::distribution's settings (the
// temperature, 0 = greedy: the argmax; top-k, 0 = off; top-p, 1 = off; min-p, 0 = off) and the
// uniform u in [0, 1) of the inverse-CDF draw in token order.
struct RowSampling {
  double temperature = 0.0;
  int top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double u = 0.0;
};

// Sampled draft tokens for verify_sampled: each token, the draft distribution it was drawn from,
// and the uniforms of Verifier::verify at its row.
struct SampledDraft {
  int64_t k = 0;
  std::span<const int32_t> tokens;         // [k] on the host, or empty with device_tokens
  const int32_t* device_tokens = nullptr;  // [k] i32 on the verifying device, or nullptr
  const Tensor* q = nullptr;               // [k, V] f32 on the verifying device
  std::span<const double> u_accept;        // [k]
  std::span<const double> u_resample;      // [k]
};

// One product of a matmul group: y = x · wᵀ (+ bias).
struct MatmulPart {
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;  // or nullptr
  Tensor* y = nullptr;
};

// An RMSNorm folded into the ops on either side of it: the op that writes the residual stream r
// (fold_norm, matmul_norm_out, gated_matmul_norm_out) leaves rms_norm(r) in a form of the
// backend's choosing, and the matmuls that read it (matmul_group_folded, gate_up_act_folded)
// compute rms_norm(r, weight, eps) · wᵀ from that. The defaults write rms_norm(r) into scaled
// (folded false); a GPU backend may instead write r ⊙ weight and partial sums of r² (folded true)
// and scale each product row by the inverse RMS, which saves the norm's own kernel between
// matmuls of a few rows.
struct FoldedNorm {
  const Tensor* weight = nullptr;  // [1, D] the norm's weight
  float eps = 0.0f;
  Tensor* scaled = nullptr;  // [R, D] f32
  Tensor* sums = nullptr;    // [R, ceil(D / 16)] f32: the sums of r² over columns 16j .. 16j + 15
  bool folded = false;       // set by the writing op: scaled and sums hold r ⊙ weight and sums
  // A weight of the matmuls that will read the norm: a backend writes the folded form only where
  // they can take it (else reading it would cost a kernel more than the norm). nullptr: none.
  const Tensor* reader = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu (AVX2, 2 threads)"

  // ---- memory ----
  virtual DeviceBuffer alloc(size_t bytes) = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  // Waits for the device's queued work, then copies.
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Copies between two buffers of this device.
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  // Whether ops return before the device has run them (a GPU's stream): the host can then queue
  // the next forward while it waits for the last one's token.
  virtual bool queues_work() const { return false; }
  // A download of at most kMaxDownload bytes that does not wait: it copies `src` once the work
  // queued before it has run and returns a ticket; finish_download(ticket, dst) waits for that
  // copy and writes its bytes to dst. At most kDownloadSlots downloads may be unfinished.
  static constexpr size_t kMaxDownload = 64;
  static constexpr int kDownloadSlots = 4;
  virtual uint64_t start_download(const void* src, size_t bytes) = 0;
  virtual void finish_download(uint64_t ticket, void* dst) = 0;
  // Makes the work queued here from now on wait for the work queued so far on `other`, a
  // backend of the same device (a draft model's, whose outputs this one's ops will read). Does
  // nothing where ops do not return early.
  virtual void wait_for(Backend& /*other*/) {}
  // Marks that split queued work's time into parts: mark() notes how far the work queued so far
  // has come, and seconds_between(a, b) waits for mark b and returns the device time between
  // the two. At most kMarkSlots marks stay valid. The default, for a backend that does not
  // queue work, notes the host time of each call.
  static constexpr int kMarkSlots = 8;
  virtual uint64_t mark();
  virtual double seconds_between(uint64_t a, uint64_t b);
  // Makes a host weight (for example a memory-mapped safetensors tensor) usable by the ops.
  // The CPU backend returns the same view (no copy); a GPU backend uploads into `storage`, in a
  // layout of its own where its kernels want one (CUDA: int8/int4 rows in groups of 8, their
  // codes side by side, then their block headers).
  virtual Tensor place_weight(const Tensor& host, DeviceBuffer* storage) = 0;
  // True if the ops take weights (matmul, embedding tables) of `dtype`; block-quantised formats
  // need kernels of their own. The CPU backend takes every dtype.
  virtual bool supports_weights(DType /*dtype*/) const { return true; }
  virtual void synchronize() = 0;
  // Runs `ops`, a sequence of op calls whose launches depend only on `key` (shapes, buffer
  // addresses; data-dependent values such as positions are read from device memory). A GPU
  // backend records it once as a graph and replays it for later calls with the same key.
  virtual void run_recorded(uint64_t /*key*/, const std::function<void()>& ops) { ops(); }
  // Whether run_recorded records (then a key's first run is eager and its second records).
  virtual bool records_forwards() const { return false; }
  // Recordings made so far (a graph recorded again after a scratch grew counts again).
  virtual int recordings() const { return 0; }

  // Memory bandwidth in bytes/s that bounds a decode step, measured now: a multi-threaded
  // streaming read on the CPU, a large device-to-device copy (bytes read + written) on a GPU.
  virtual double measure_bandwidth() = 0;

  // ---- ops (M = number of rows) ----
  // out[m] = table[ids[m]] widened to f32. ids: [1, M] i32; table: [V, D]; out: [M, D] f32.
  virtual void embedding(const Tensor& ids, const Tensor& table, Tensor& out) = 0;
  // y = x · wᵀ (+ bias) (+ y if accumulate). x: [M, K] f32; w: [N, K] f32/f16/bf16;
  // bias: [1, N] or nullptr; y: [M, N] f32. For M <= kSmallBatch each row's result is
  // bit-identical to computing it alone (batch invariance).
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                      bool accumulate) = 0;
  // Several products of the same x (for example q, k and v), with the results of separate
  // matmul calls; a GPU backend runs them as one launch.
  virtual void matmul_group(const Tensor& x, std::span<const MatmulPart> parts) {
    for (const MatmulPart& p : parts) matmul(x, *p.w, p.bias, *p.y, false);
  }
  // y = x / sqrt(mean(x²) + eps) * weight, per row. x, y: [R, D] f32; weight: [1, D].
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) = 0;
  // In-place rotary embedding (rotate-half layout) of x: [M, n_heads * head_dim] f32.
  virtual void rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table) = 0;
  // out = silu(gate) * up. gate, up, out: [M, F] f32.
  virtual void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out = gelu_tanh(gate) * up, with PyTorch's tanh approximation of GELU
  // (0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g³)))). gate, up, out: [M, F] f32.
  virtual void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // x *= s in place, element by element (one f32 multiply). x: [M, D] f32.
  virtual void scale(Tensor& x, float s) = 0;
  // y += x, element by element. x, y: [M, D] f32 (they may not overlap).
  virtual void add(const Tensor& x, Tensor& y) = 0;
  // Writes the rows' K and V ([M, n_kv_heads * head_dim] f32) into the cache at cache_index.
  virtual void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
                        const AttentionRows& rows) = 0;
  // ids[r] = the column of row r's largest logit: the first one on ties, as a sequential scan
  // with `>` finds it (a NaN wins only in column 0). logits: [R, V] f32; ids: [1, R] i32. Lets
  // greedy decoding copy R tokens to the host instead of R logit rows.
  virtual void argmax_rows(const Tensor& logits, Tensor& ids) = 0;
  // Whether sample_rows and verify_sampled run here (else they return false).
  virtual bool samples_on_device() const { return false; }
  // ids[r] = a token drawn from row r as `rows[r]` says (-1 if no logit is finite), so that
  // sampled requests copy token ids instead of logits rows; `probs` (or nullptr): [R, >= V] f32,
  // row r's distribution after the filters. Returns false, doing nothing, on a backend without
  // the op (the caller samples on the host). logits: [R, V] f32; ids: [1, R] i32.
  virtual bool sample_rows(const Tensor& /*logits*/, std::span<const RowSampling> /*rows*/,
                           Tensor& /*ids*/, Tensor* /*probs*/) {
    return false;
  }
  // Speculative sampling of k sampled draft tokens (Verifier::verify's rule) from the target's
  // k + 1 rows: ids[i] (i < k) = tokens[i] if accepted, else the draw from norm(max(0, p - q));
  // ids[k] = the draw from the last row with sampling.u. -1: no finite logit. Returns false,
  // doing nothing, on a backend without the op. logits: [k + 1, V] f32; ids: [1, k + 1] i32.
  virtual bool verify_sampled(const Tensor& /*logits*/, const RowSampling& /*sampling*/,
                              const SampledDraft& /*draft*/, Tensor& /*ids*/) {
    return false;
  }
  // A gated MLP's gate and up projections with the activation: gate = act(x · w_gateᵀ) *
  // (x · w_upᵀ), the bits of matmul_group and then silu_mul / gelu_tanh_mul. Returns false,
  // doing nothing, where the backend does not fuse them (the caller runs those ops). x: [M, K]
  // f32; w_gate, w_up: [F, K]; gate: [M, F] f32.
  virtual bool gate_up_act(Activation /*act*/, const Tensor& /*x*/, const Tensor& /*w_gate*/,
                           const Tensor& /*w_up*/, Tensor& /*gate*/) {
    return false;
  }
  // A gated MLP's down projection: y = (act(gate) * up) · wᵀ (+ bias) (+ y if accumulate).
  // gate, up: [M, F] f32; w: [N, F]; y: [M, N] f32. gate is scratch: the default writes
  // act(gate) * up into it and runs matmul on it; a GPU backend reads act(gate) * up in the
  // matmul instead, with the same bits.
  virtual void gated_matmul(Activation act, Tensor& gate, const Tensor& up, const Tensor& w,
                            const Tensor* bias, Tensor& y, bool accumulate) {
    gate_act_mul(act, gate, up, gate);
    matmul(gate, w, bias, y, accumulate);
  }
  // out = act(gate) * up: silu_mul or gelu_tanh_mul.
  void gate_act_mul(Activation act, const Tensor& gate, const Tensor& up, Tensor& out) {
    if (act == Activation::kGeluTanh) {
      gelu_tanh_mul(gate, up, out);
    } else {
      silu_mul(gate, up, out);
    }
  }
  // ---- folded RMSNorms (see FoldedNorm) ----
  // `norm` of r ([R, D] f32).
  virtual void fold_norm(const Tensor& r, FoldedNorm& norm) {
    SPECD_CHECK(norm.weight != nullptr && norm.scaled != nullptr,
                "fold_norm: the folded norm lacks its weight or output");
    rms_norm(r, *norm.weight, norm.eps, *norm.scaled);
    norm.folded = false;
  }
  // matmul(x, w, bias, y, true), then fold_norm(y, norm).
  virtual void matmul_norm_out(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                               FoldedNorm& norm) {
    matmul(x, w, bias, y, true);
    fold_norm(y, norm);
  }
  // gated_matmul(act, gate, up, w, bias, y, true), then fold_norm(y, norm).
  virtual void gated_matmul_norm_out(Activation act, Tensor& gate, const Tensor& up,
                                     const Tensor& w, const Tensor* bias, Tensor& y,
                                     FoldedNorm& norm) {
    gated_matmul(act, gate, up, w, bias, y, true);
    fold_norm(y, norm);
  }
  // matmul_group of rms_norm(r) (`norm` as the op writing r left it). May rewrite norm.scaled
  // into rms_norm(r) (then norm.folded becomes false).
  virtual void matmul_group_folded(FoldedNorm& norm, std::span<const MatmulPart> parts) {
    SPECD_CHECK(!norm.folded, "matmul_group_folded: a folded norm on a backend without folds");
    matmul_group(*norm.scaled, parts);
  }
  // gate_up_act of rms_norm(r); false where it declines (then matmul_group_folded runs).
  virtual bool gate_up_act_folded(Activation act, FoldedNorm& norm, const Tensor& w_gate,
                                  const Tensor& w_up, Tensor& gate) {
    SPECD_CHECK(!norm.folded, "gate_up_act_folded: a folded norm on a backend without folds");
    return gate_up_act(act, *norm.scaled, w_gate, w_up, gate);
  }

  // The attention inputs of one layer: rope on q ([M, n_heads * head_dim] f32) and on k, then k
  // and v into the cache. The default runs rope, rope and store_kv; a GPU backend fuses them.
  virtual void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, int n_heads,
                             const RopeTable& table, const KvLayerView& cache,
                             const AttentionRows& rows) {
    rope(q, n_heads, rows.positions, table);
    rope(k, cache.n_kv_heads, rows.positions, table);
    store_kv(k, v, cache, rows);
  }
  // The same after an RMSNorm of each head of q and of k (weights [1, head_dim], as Qwen3 and
  // Gemma 3 apply before RoPE). The default runs rms_norm on both, then rope_store_kv; a GPU
  // backend fuses them.
  virtual void qk_norm_rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                                     const Tensor& k_norm, float eps, int n_heads,
                                     const RopeTable& table, const KvLayerView& cache,
                                     const AttentionRows& rows) {
    Tensor q_heads = q.reshape_cols(cache.head_dim), k_heads = k.reshape_cols(cache.head_dim);
    rms_norm(q_heads, q_norm, eps, q_heads);
    rms_norm(k_heads, k_norm, eps, k_heads);
    rope_store_kv(q, k, v, n_heads, table, cache, rows);
  }
  // q, k, v = x · Wᵀ (+ bias) for the three parts of `qkv` (x: `norm`'s rows, as
  // matmul_group_folded reads them), then rope_store_kv, in one op where the backend can: k and v
  // then go to the cache only (their tensors are not written). Returns false, having done
  // nothing, where it cannot; the caller then runs matmul_group_folded and rope_store_kv.
  virtual bool qkv_rope_store_kv(FoldedNorm& /*norm*/, std::span<const MatmulPart> /*qkv*/,
                                 int /*n_heads*/, const RopeTable& /*table*/,
                                 const KvLayerView& /*cache*/, const AttentionRows& /*rows*/) {
    return false;
  }
  // Attention of q ([M, n_heads * head_dim] f32) over the cache; out has q's shape.
  // Each row's result is independent of the other rows (batch invariance).
  virtual void attention(const Tensor& q, int n_heads, const KvLayerView& cache,
                         const AttentionRows& rows, float scale, Tensor& out) = 0;

 protected:
  // The slot of a valid mark (checked): mark m uses slot m % kMarkSlots.
  int mark_slot(uint64_t mark) const;
  uint64_t next_mark_ = 0;

 private:
  std::array<double, kMarkSlots> mark_seconds_{};  // the default marks' host times
};

// The tickets of Backend::start_download: ticket t uses slot t % kDownloadSlots and stays valid
// until kDownloadSlots later downloads have started.
class DownloadTickets {
 public:
  // A new ticket for a download of `bytes`; its slot is slot(ticket).
  uint64_t start(size_t bytes);
  // The slot of a valid ticket, and the size of its download.
  int slot(uint64_t ticket) const;
  size_t bytes(uint64_t ticket) const { return bytes_[slot(ticket)]; }

 private:
  uint64_t next_ = 0;
  std::array<size_t, Backend::kDownloadSlots> bytes_{};
};

// Rows up to which matmul uses the batch-invariant small-batch kernels.
inline constexpr int64_t kSmallBatch = 16;

// True if this build has the CUDA backend and a CUDA device is usable.
bool cuda_available();

// Creates the backend for `device` (the CPU backend uses `threads` worker threads, and with
// `map_weights` reads weights where they are mapped instead of copying them when placed).
std::unique_ptr<Backend> make_backend(Device device, int threads, bool map_weights = false);

}  // namespace specd
