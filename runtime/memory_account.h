// The bytes one rank of the runtime holds, per category, counted from the buffers it actually
// allocates (std::vector capacities), so that they can be set beside the memory model's
// (strategies/memory_model.h) per-device figures. Categories, as the runtime fills them:
//   params       the resident part of the flat parameter buffer of this rank's stage
//                (StageModel::params): its tensor shards of its pipeline chunks and its expert
//                rank's experts. Under FSDP / ZeRO-3 only this rank's blocks stay; a bucket's
//                gathered parameters are held while its layer runs (resident_pages.h).
//   grads        the resident part of the flat gradient buffer the backward accumulates into
//                (StageModel::grads: with ZeRO-2/3 and FSDP a bucket's full gradients only until
//                they are reduce-scattered, then the reduced range this rank updates) and
//                DataParallel's per-bucket blocks of reduce-scattered gradients accumulated over
//                micro-batches.
//   optimizer    AdamW's m and v over this rank's optimizer ranges (fp32, no master copy).
//   activations  what a chunk's forward keeps for its backward, per micro-batch in flight: every
//                layer's saved tensors (runtime/stage_model_saved.h, MoE's saved routing and
//                expert rows), the embedding's token ids, the head's final-norm input and output,
//                and weight-gradient inputs kept for a deferred W task; released layer by layer
//                as the backward (or the W task) is done with them.
//   buffers      everything transient or communication-side: pipeline receive and send buffers
//                (sends stay until the step's end), the micro-batch's token ids, the logits
//                (softmax numerators [T, V/t], kept from forward to backward) and their gradient,
//                FSDP / ZeRO-3 gather buffers, gradient reduce-scatter send/receive buffers in
//                flight, ZeRO-1/2 partition buffers, ring attention's workspace, MoE all-to-all
//                buffers, and each layer's forward/backward scratch at its largest point.
// Not counted: MPI's and OpenBLAS's internal buffers, small per-call vectors (row maxima, counts,
// positions) and the model-independent program and trace.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace shardsim::runtime {

enum class MemoryCategory { kParams, kGrads, kOptimizer, kActivations, kBuffers };
inline constexpr int kMemoryCategories = 5;
// "params", "grads", "optimizer", "activations", "buffers": the report's keys.
std::string_view MemoryCategoryName(MemoryCategory category);

// Routed token copies (expert rows) the saved activations hold: the rows this rank's experts
// received from the dispatch, and the copies this rank's own tokens sent (what balanced routing
// would bring back). Dropless routing makes the activations depend on them.
struct RoutedRows {
  int64_t received = 0, sent = 0;
};

// Current and peak bytes per category, and the peak of their sum; and the routed rows held when
// the activations peaked, so that the memory model can be evaluated at the routing that
// happened. One per rank, owned by the Trainer; not thread-safe (one thread per rank).
class MemoryAccount {
 public:
  void Add(MemoryCategory category, int64_t bytes) {
    int64_t& now = current_[Index(category)];
    now += bytes;
    total_ += bytes;
    if (category == MemoryCategory::kActivations && now > peak_[Index(category)]) routed_at_peak_ = routed_;
    peak_[Index(category)] = std::max(peak_[Index(category)], now);
    peak_total_ = std::max(peak_total_, total_);
  }
  // Changes the routed rows held (before the activation bytes that hold them are added).
  void AddRoutedRows(RoutedRows delta) {
    routed_.received += delta.received;
    routed_.sent += delta.sent;
  }
  RoutedRows routed_at_activation_peak() const { return routed_at_peak_; }
  void Release(MemoryCategory category, int64_t bytes) { Add(category, -bytes); }
  // `bytes` held for a moment only (allocated and freed before anything else is): counts in the
  // peaks, not in what is held after.
  void Transient(MemoryCategory category, int64_t bytes) {
    Add(category, bytes);
    Release(category, bytes);
  }
  int64_t current(MemoryCategory category) const { return current_[Index(category)]; }
  int64_t peak(MemoryCategory category) const { return peak_[Index(category)]; }
  int64_t peak_total() const { return peak_total_; }

 private:
  static size_t Index(MemoryCategory category) { return static_cast<size_t>(category); }
  std::array<int64_t, kMemoryCategories> current_{}, peak_{};
  int64_t total_ = 0, peak_total_ = 0;
  RoutedRows routed_, routed_at_peak_;
};

// Routed rows held in an account, adjusted as they change (as MemoryHold holds bytes).
class RoutedRowsHold {
 public:
  explicit RoutedRowsHold(MemoryAccount* account = nullptr) : account_(account) {}
  ~RoutedRowsHold() { Set({}); }
  RoutedRowsHold(const RoutedRowsHold&) = delete;
  RoutedRowsHold& operator=(const RoutedRowsHold&) = delete;
  RoutedRowsHold(RoutedRowsHold&& other) noexcept : account_(std::exchange(other.account_, nullptr)), rows_(std::exchange(other.rows_, {})) {}
  RoutedRowsHold& operator=(RoutedRowsHold&& other) noexcept {
    if (this != &other) {
      Set({});
      account_ = std::exchange(other.account_, nullptr);
      rows_ = std::exchange(other.rows_, {});
    }
    return *this;
  }
  void Set(RoutedRows rows) {
    if (account_ != nullptr) account_->AddRoutedRows({rows.received - rows_.received, rows.sent - rows_.sent});
    rows_ = rows;
  }

 private:
  MemoryAccount* account_ = nullptr;
  RoutedRows rows_;
};

// Bytes a vector holds (its capacity).
template <class T>
int64_t HeldBytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}
template <class T>
int64_t HeldBytes(const std::vector<std::vector<T>>& v) {
  int64_t bytes = static_cast<int64_t>(v.capacity() * sizeof(std::vector<T>));
  for (const std::vector<T>& inner : v) bytes += HeldBytes(inner);
  return bytes;
}
template <class... V>
int64_t HeldBytes(const V&... vectors)
  requires(sizeof...(V) > 1)
{
  return (HeldBytes(vectors) + ...);
}

// Bytes of one category held for the hold's lifetime (RAII): Set() changes the amount, the
// destructor releases it. A null account counts nothing. Movable, not copyable.
class MemoryHold {
 public:
  MemoryHold() = default;
  MemoryHold(MemoryAccount* account, MemoryCategory category, int64_t bytes = 0) : account_(account), category_(category) { Set(bytes); }
  ~MemoryHold() { Set(0); }
  MemoryHold(const MemoryHold&) = delete;
  MemoryHold& operator=(const MemoryHold&) = delete;
  MemoryHold(MemoryHold&& other) noexcept
      : account_(std::exchange(other.account_, nullptr)), category_(other.category_), bytes_(std::exchange(other.bytes_, 0)) {}
  MemoryHold& operator=(MemoryHold&& other) noexcept {
    if (this != &other) {
      Set(0);
      account_ = std::exchange(other.account_, nullptr);
      category_ = other.category_;
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  void Set(int64_t bytes) {
    if (account_ != nullptr && bytes != bytes_) account_->Add(category_, bytes - bytes_);
    bytes_ = bytes;
  }
  // Holds the bytes of `vectors` (their capacities, now).
  template <class... V>
  void SetTo(const V&... vectors) {
    Set(HeldBytes(vectors...));
  }
  int64_t bytes() const { return bytes_; }

 private:
  MemoryAccount* account_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kBuffers;
  int64_t bytes_ = 0;
};

inline std::string_view MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParams: return "params";
    case MemoryCategory::kGrads: return "grads";
    case MemoryCategory::kOptimizer: return "optimizer";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kBuffers: return "buffers";
  }
  return "buffers";
}

}  // namespace shardsim::runtime
