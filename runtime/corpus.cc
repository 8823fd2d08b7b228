#include "runtime/corpus.h"

#include "core/error.h"

namespace shardsim::runtime {

Corpus::Corpus(std::string text, int64_t seq_len) : text_(std::move(text)), seq_len_(seq_len) {
  if (seq_len_ <= 0 || static_cast<int64_t>(text_.size()) < 2 * (seq_len_ + 1)) {
    throw InputError("--corpus", "holds " + std::to_string(text_.size()) + " bytes, too few for sequences of " + std::to_string(seq_len_),
                     "at least " + std::to_string(2 * (seq_len_ + 1)) + " bytes", "use a longer text or a shorter --seq-len");
  }
}

void Corpus::Batch(int32_t* ids, int32_t* targets, int64_t step, int64_t batch, int64_t first, int64_t count) const {
  std::vector<int32_t> all(static_cast<size_t>(seq_len_));
  for (int64_t i = 0; i < seq_len_; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  Batch(ids, targets, step, batch, first, count, all);
}

void Corpus::Batch(int32_t* ids, int32_t* targets, int64_t step, int64_t batch, int64_t first, int64_t count,
                   const std::vector<int32_t>& positions) const {
  const int64_t span = static_cast<int64_t>(text_.size()) - seq_len_ - 1;
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int64_t j = 0; j < count; ++j) {
    const int64_t start = ((step * batch + first + j) * seq_len_) % span;
    for (int64_t i = 0; i < n; ++i) {
      const size_t at = static_cast<size_t>(start + positions[static_cast<size_t>(i)]);
      ids[j * n + i] = static_cast<unsigned char>(text_[at]);
      targets[j * n + i] = static_cast<unsigned char>(text_[at + 1]);
    }
  }
}

}  // namespace shardsim::runtime
