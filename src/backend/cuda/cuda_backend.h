// The CUDA backend: device memory, one stream, tensor-core kernels and recorded (graph) forwards.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>

#include "backend/backend.h"

struct CUstream_st;
namespace specd::cuda {
struct MatmulArgs;
struct MatmulGroup;
struct NormIn;
class LtGemm;
}  // namespace specd::cuda
struct CUgraphExec_st;
struct CUevent_st;

namespace specd {

// Number of usable CUDA devices (0 without a driver or GPU).
int cuda_device_count();

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device{DeviceKind::kCuda, index_}; }
  std::string describe() const override;  // "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79 GiB)"

  DeviceBuffer alloc(size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  bool queues_work() const override { return queue_work_; }
  // Into pinned host memory, then an event; finish_download waits for the event.
  uint64_t start_download(const void* src, size_t bytes) override;
  void finish_download(uint64_t ticket, void* dst) override;
  void wait_for(Backend& other) override;  // an event of other's stream, waited for on this one
  uint64_t mark() override;                // a timing event recorded on the stream
  double seconds_between(uint64_t a, uint64_t b) override;
  Tensor place_weight(const Tensor& host, DeviceBuffer* storage) override;
  bool supports_weights(DType dtype) const override;  // float, int8/int4 and GGUF blocks
  void synchronize() override;
  double measure_bandwidth() override;  // median of 2 GiB device-to-device copies
  void run_recorded(uint64_t key, const std::function<void()>& ops) override;
  bool records_forwards() const override { return graphs_; }
  int recordings() const override { return recordings_; }

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
              bool accumulate) override;
  void matmul_group(const Tensor& x, std::span<const MatmulPart> parts) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) override;
  void rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table) override;
  bool gate_up_act(Activation act, const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                   Tensor& gate) override;
  void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void gated_matmul(Activation act, Tensor& gate, const Tensor& up, const Tensor& w,
                    const Tensor* bias, Tensor& y, bool accumulate) override;
  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void add(const Tensor& x, Tensor& y) override;
  void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
                const AttentionRows& rows) override;
  void argmax_rows(const Tensor& logits, Tensor& ids) override;
  bool samples_on_device() const override { return sampling_; }
  bool sample_rows(const Tensor& logits, std::span<const RowSampling> rows, Tensor& ids,
                   Tensor* probs) override;
  bool verify_sampled(const Tensor& logits, const RowSampling& sampling, const SampledDraft& draft,
                      Tensor& ids) override;
  // Folded RMSNorms (cuda_folded_norm.cc): up to 16 rows on the tensor-core matmuls, the writing
  // matmul stores r ⊙ weight and per-tile sums of r², the reading one scales its rows.
  void fold_norm(const Tensor& r, FoldedNorm& norm) override;
  void matmul_norm_out(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                       FoldedNorm& norm) override;
  void gated_matmul_norm_out(Activation act, Tensor& gate, const Tensor& up, const Tensor& w,
                             const Tensor* bias, Tensor& y, FoldedNorm& norm) override;
  void matmul_group_folded(FoldedNorm& norm, std::span<const MatmulPart> parts) override;
  bool gate_up_act_folded(Activation act, FoldedNorm& norm, const Tensor& w_gate,
                          const Tensor& w_up, Tensor& gate) override;
  void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, int n_heads, const RopeTable& table,
                     const KvLayerView& cache, const AttentionRows& rows) override;
  // One kernel (a block per row and head).
  void qk_norm_rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const Tensor& q_norm,
                             const Tensor& k_norm, float eps, int n_heads, const RopeTable& table,
                             const KvLayerView& cache, const AttentionRows& rows) override;
  // Up to 16 rows on the tensor-core matmuls (cuda_qkv_rope.cc): the q/k/v tile epilogue rotates
  // q and k and writes k and v into the cache.
  bool qkv_rope_store_kv(FoldedNorm& norm, std::span<const MatmulPart> qkv, int n_heads,
                         const RopeTable& table, const KvLayerView& cache,
                         const AttentionRows& rows) override;
  void attention(const Tensor& q, int n_heads, const KvLayerView& cache, const AttentionRows& rows,
                 float scale, Tensor& out) override;

 private:
  enum ScratchKind {
    kPartials = 0,  // split-K partials
    kTickets,       // split-K tickets
    kBf16X,         // bf16 x
    kAttention,     // attention partials
    kDequant,       // bf16 slab of dequantised int8/int4 weights (prefill)
    kSampling,      // sampling weights
    kIntX,          // x as int8 parts for the int8/int4 tensor-core kernels
    kArgmax,        // argmax slices' winners and per-row tickets
    kSampleSlices,  // sums and tickets of sampled rows drawn over many blocks
    kScratchKinds
  };
  // Throws unless every tensor is on cuda:`index`.
  static void check_device(const char* op, int index, std::initializer_list<const Tensor*> tensors);
  // Runs a group of matmuls that share x (one part for plain matmul).
  // The launch arguments of the parts (checked against x, the device and the kernels).
  cuda::MatmulGroup make_group(const Tensor& x, std::span<const MatmulPart> parts,
                               bool accumulate) const;
  void run_matmuls(const Tensor& x, std::span<const MatmulPart> parts, bool accumulate);
  // At most 16 rows, one weight dtype: the tensor-core kernels where they take the group, else
  // the block kernels (GGUF formats, int8/int4 on CUDA cores) or the generic one.
  void run_small(const cuda::MatmulGroup& group);
  // int8/int4 weights that the small-M tensor-core kernel takes (else the CUDA-core kernel).
  bool int_tensor_cores(const cuda::MatmulGroup& group) const;
  // The gate/up pair group of gate_up_act (count 0 where it declines).
  cuda::MatmulGroup gate_up_pair(Activation act, const Tensor& x, const Tensor& w_gate,
                                 const Tensor& w_up, Tensor& gate) const;
  // The group of gated_matmul's fused int8/int4 path (count 0 where it does not take it).
  cuda::MatmulGroup gated_int_group(Activation act, Tensor& gate, const Tensor& up, const Tensor& w,
                                    const Tensor* bias, Tensor& y, bool accumulate) const;
  // A group of 1 to 16 rows and one weight dtype that the tensor-core kernels (bf16, int8/int4)
  // run: the ones whose tile epilogue can fold norms or rotate q/k.
  bool small_tensor_core_group(const cuda::MatmulGroup& group) const;
  // small_tensor_core_group, unless SPECD_CUDA_FOLD_NORMS=0.
  bool folds_in_epilogue(const cuda::MatmulGroup& group) const;
  // Whether `norm`'s readers (its reader weight, `rows` rows) scale rows in their epilogue: the
  // writing ops leave the folded form only then.
  bool readers_fold(const FoldedNorm& norm, int64_t rows) const;
  // The epilogue's view of a folded norm's sums.
  static cuda::NormIn norm_in(const FoldedNorm& norm);
  // Checks `norm` against r's shape [rows, cols] and the device.
  void check_folded(const char* op, int64_t rows, int64_t cols, const FoldedNorm& norm) const;
  // norm.scaled = rms_norm(r) from its folded form (norm.folded becomes false).
  void unfold(FoldedNorm& norm);
  // The bf16 GEMM of more than 16 rows: cuBLASLt when the build has it, else gemm.cu's kernel.
  // *x_bf16 holds the group's bf16 copy of x once made (nullptr before).
  void run_gemm(const cuda::MatmulArgs& a, const void** x_bf16);
  // Device scratch that grows (never shrinks). Growth of a scratch that a recorded forward used
  // drops the recorded graphs; each is recorded again on its next run.
  void* scratch(int which, size_t bytes);

  int index_ = 0;
  int multiprocessors_ = 0;
  CUstream_st* stream_ = nullptr;
  bool graphs_ = true;   // SPECD_CUDA_GRAPHS=0 runs recorded forwards eagerly
  bool int_mma_ = true;  // SPECD_CUDA_INT_MMA=0: int8/int4 small-M on the CUDA-core kernel
  // SPECD_CUDA_INT_STACK=0: up to 4 rows, x's two parts in separate mma (as for 5 to 16 rows)
  bool stacked_x_ = true;
  // SPECD_CUDA_FUSE_GATE=0: the gated MLP's activation as its own kernel (gate_up_act declines;
  // gated_matmul runs silu_mul, then matmul).
  bool fuse_gate_ = true;
  bool fold_norms_ = true;         // SPECD_CUDA_FOLD_NORMS=0: RMSNorms as their own kernels
  bool sampling_ = true;           // SPECD_CUDA_SAMPLING=0: sampled rows go to the host
  bool prefill_attention_ = true;  // SPECD_PREFILL_ATTENTION=0: prompt chunks on the decode kernel
  // SPECD_CUDA_EARLY_ATTENTION=0: attention reads nothing before its predecessor finishes
  bool early_attention_ = true;
  // SPECD_CUDA_FUSE_ROPE=0: q/k/v products, then rope_store_kv as its own kernel
  bool fuse_rope_ = true;
  // SPECD_CUDA_QUEUE=0: queues_work() is false (the host waits for each token of plain decoding
  // before it queues the next forward)
  bool queue_work_ = true;
  DownloadTickets download_tickets_;
  std::byte* downloads_ = nullptr;  // [kDownloadSlots, kMaxDownload] pinned host memory
  CUevent_st* download_done_[kDownloadSlots] = {};
  CUevent_st* marks_[kMarkSlots] = {};  // timing events of mark()
  CUevent_st* handoff_ = nullptr;       // recorded by wait_for on this stream for another's
  // The attention output that attention() also wrote as the int8/int4 x parts of its reader
  // weight (kIntX scratch); the next small matmul of that x and weight skips its quantisation.
  struct IntXReady {
    const void* x = nullptr;
    const void* w = nullptr;
    int64_t m = 0, k = 0;
  };
  IntXReady int_x_ready_;
  bool capturing_ = false;
  int recordings_ = 0;
  struct Scratch {
    void* data = nullptr;
    size_t bytes = 0;
    bool recorded = false;  // used inside a recorded forward
  };
  Scratch scratch_[kScratchKinds];
  struct Recorded {
    int seen = 0;  // runs so far (kept when the graph is dropped)
    CUgraphExec_st* graph = nullptr;
  };
  std::unordered_map<uint64_t, Recorded> recorded_;
#if SPECD_WITH_CUBLASLT
  std::unique_ptr<cuda::LtGemm> lt_;  // null when SPECD_CUBLASLT=0 at run time
#endif
};

}  // namespace specd
