// Training data: a byte-level tokenizer (token = byte, vocabulary 256) over a text corpus, and
// the global batch of each step, the same whatever the plan so runs are comparable: sequence j
// of step k starts at byte ((k * B + j) * S) mod (N - S - 1) of the corpus, and each
// data-parallel replica reads its own contiguous share of the B sequences.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <string_view>
#include <vector>

namespace shardsim::runtime {

// The repository's documentation, embedded at build time (about 50 KB of English).
std::string_view ShippedCorpus();

class Corpus {
 public:
  // Throws InputError when the text is shorter than two sequences.
  Corpus(std::string text, int64_t seq_len);
  int64_t bytes() const { return static_cast<int64_t>(text_.size()); }
  // Inputs and next-token targets of `count` sequences starting at global sequence `first` of
  // `step` (global batch `batch` sequences): ids and targets [count * seq_len], token-major.
  void Batch(int32_t* ids, int32_t* targets, int64_t step, int64_t batch, int64_t first, int64_t count) const;
  // The same sequences' tokens at `positions` only (a context rank's share of each sequence,
  // ring_attention.h SequencePositions): ids and targets [count * positions.size()].
  void Batch(int32_t* ids, int32_t* targets, int64_t step, int64_t batch, int64_t first, int64_t count, const std::vector<int32_t>& positions) const;

 private:
  std::string text_;
  int64_t seq_len_;
};

}  // namespace shardsim::runtime
