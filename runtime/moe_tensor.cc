#include "runtime/moe_tensor.h"

#include <algorithm>

namespace shardsim::runtime {
namespace {

// Rows of each tensor rank in the table.
std::vector<int64_t> RowsPerRank(const std::vector<int>& table, int64_t per_rank) {
  std::vector<int64_t> rows(table.size() / static_cast<size_t>(per_rank), 0);
  for (size_t i = 0; i < table.size(); ++i) rows[i / static_cast<size_t>(per_rank)] += table[i];
  return rows;
}

}  // namespace

std::vector<int> GatherRowTable(MeshComms& comms, const std::vector<int>& expert_rows, const std::string& what) {
  const int64_t t = comms.GroupSize({"tensor"});
  // An all-gather as an all-to-all that sends every rank the same counts.
  std::vector<int> send, table(expert_rows.size() * static_cast<size_t>(t));
  for (int64_t r = 0; r < t; ++r) send.insert(send.end(), expert_rows.begin(), expert_rows.end());
  comms.AllToAll(table.data(), send.data(), static_cast<int>(expert_rows.size()), {"tensor"}, what);
  return table;
}

void AllGatherRows(MeshComms& comms, std::vector<float>& all, const std::vector<float>& own, const std::vector<int>& table, int64_t per_rank,
                   int64_t d, const std::string& what) {
  const std::vector<int64_t> rows = RowsPerRank(table, per_rank);
  const int64_t most = *std::max_element(rows.begin(), rows.end());
  std::vector<float> padded(own), gathered(static_cast<size_t>(most * d) * rows.size());
  padded.resize(static_cast<size_t>(most * d), 0.0f);
  comms.AllGather(gathered.data(), padded.data(), most * d, {"tensor"}, what);
  all.clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto from = gathered.begin() + static_cast<std::ptrdiff_t>(r * static_cast<size_t>(most * d));
    all.insert(all.end(), from, from + static_cast<std::ptrdiff_t>(rows[r] * d));
  }
}

void ReduceScatterRows(MeshComms& comms, std::vector<float>& own, const std::vector<float>& all, const std::vector<int>& table, int64_t per_rank,
                       int64_t d, const std::string& what) {
  const std::vector<int64_t> rows = RowsPerRank(table, per_rank);
  const int64_t most = *std::max_element(rows.begin(), rows.end());
  std::vector<float> padded(static_cast<size_t>(most * d) * rows.size(), 0.0f);
  size_t at = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(rows[r] * d)),
              padded.begin() + static_cast<std::ptrdiff_t>(r * static_cast<size_t>(most * d)));
    at += static_cast<size_t>(rows[r] * d);
  }
  own.assign(static_cast<size_t>(most * d), 0.0f);
  comms.ReduceScatterSum(own.data(), padded.data(), most * d, {"tensor"}, what);
  own.resize(static_cast<size_t>(rows[static_cast<size_t>(comms.GroupRank({"tensor"}))] * d));
}

}  // namespace shardsim::runtime
