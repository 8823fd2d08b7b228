#include "runtime/resident_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace shardsim::runtime {

uintptr_t PageSize() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

std::pair<char*, char*> WholePages(float* begin, float* end) {
  if (end <= begin) return {nullptr, nullptr};
  const uintptr_t page = PageSize();
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin), e = reinterpret_cast<uintptr_t>(end);
  const uintptr_t first = (b + page - 1) / page * page, last = e / page * page;
  if (first >= last) return {nullptr, nullptr};
  return {reinterpret_cast<char*>(first), reinterpret_cast<char*>(last)};
}

void ReleaseToZero(float* begin, float* end) {
  if (end <= begin) return;
  const auto [first, last] = WholePages(begin, end);
  if (first == nullptr) {
    std::fill(begin, end, 0.0f);
    return;
  }
  std::fill(begin, reinterpret_cast<float*>(first), 0.0f);
  std::fill(reinterpret_cast<float*>(last), end, 0.0f);
  // Private anonymous memory (the heap and malloc's own mappings): the pages read as zeros after.
  if (madvise(first, static_cast<size_t>(last - first), MADV_DONTNEED) != 0) {
    std::fill(reinterpret_cast<float*>(first), reinterpret_cast<float*>(last), 0.0f);
  }
}

int64_t ResidentBytes(const float* begin, const float* end) {
  if (end <= begin) return 0;
  const int64_t bytes = static_cast<int64_t>(end - begin) * static_cast<int64_t>(sizeof(float));
  const uintptr_t page = PageSize();
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin) / page * page, e = reinterpret_cast<uintptr_t>(end);
  const size_t pages = static_cast<size_t>((e - b + page - 1) / page);
  std::vector<unsigned char> in_core(pages);
  if (mincore(reinterpret_cast<void*>(b), e - b, in_core.data()) != 0) return bytes;
  int64_t resident = 0;
  for (unsigned char c : in_core) resident += (c & 1) ? static_cast<int64_t>(page) : 0;
  return std::min(resident, bytes);
}

}  // namespace shardsim::runtime
