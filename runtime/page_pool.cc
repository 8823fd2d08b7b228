#include "runtime/page_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "runtime/resident_pages.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4  // Linux 5.7's value, for older headers
#endif

namespace shardsim::runtime {
namespace {

// Pieces past this many go back to the system, oldest first: each piece is a mapping of its own,
// and a process may have about 65,000.
constexpr size_t kMaxPieces = 1024;

uintptr_t PageSize() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

// The whole pages inside [begin, end), empty where there are none.
std::pair<char*, char*> WholePages(float* begin, float* end) {
  const uintptr_t page = PageSize();
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin), e = reinterpret_cast<uintptr_t>(end);
  const uintptr_t first = (b + page - 1) / page * page, last = e / page * page;
  if (first >= last) return {nullptr, nullptr};
  return {reinterpret_cast<char*>(first), reinterpret_cast<char*>(last)};
}

// Calls `run(address, bytes)` for each stretch of whole pages of [first, last) whose residency is
// `resident`, until it returns false. Returns false where mincore is refused.
template <typename F>
bool ForEachRun(char* first, char* last, bool resident, F run) {
  const size_t page = PageSize();
  const size_t pages = static_cast<size_t>(last - first) / page;
  std::vector<unsigned char> in_core(pages);
  if (mincore(first, pages * page, in_core.data()) != 0) return false;
  size_t i = 0;
  while (i < pages) {
    if (((in_core[i] & 1) != 0) != resident) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < pages && ((in_core[j] & 1) != 0) == resident) ++j;
    if (!run(first + i * page, (j - i) * page)) return true;
    i = j;
  }
  return true;
}

}  // namespace

PagePool::~PagePool() {
  for (const Piece& p : pieces_) munmap(p.address, p.bytes);
}

void PagePool::Release(float* begin, float* end) {
  const auto [first, last] = WholePages(begin, end);
  if (refused_ || first == nullptr) {
    ReleaseToZero(begin, end);
    return;
  }
  std::fill(begin, reinterpret_cast<float*>(first), 0.0f);
  std::fill(reinterpret_cast<float*>(last), end, 0.0f);
  const bool listed = ForEachRun(first, last, true, [&](char* at, size_t bytes) {
    Take(at, bytes);
    return true;
  });
  if (!listed) ReleaseToZero(reinterpret_cast<float*>(first), reinterpret_cast<float*>(last));
}

void PagePool::Acquire(float* begin, float* end, Contents contents) {
  if (pieces_.empty() || end <= begin) return;
  const auto [first, last] = WholePages(begin, end);
  if (first == nullptr) return;
  ForEachRun(first, last, false, [&](char* at, size_t bytes) {
    const size_t filled = Fill(at, bytes);
    if (contents == Contents::kZeros) std::memset(at, 0, filled);  // pooled pages hold what their last buffer wrote
    return filled == bytes;
  });
}

void PagePool::Trim(int64_t bytes) {
  int64_t pooled = pooled_bytes();
  size_t drop = 0;
  while (drop < pieces_.size() && pooled > bytes) {
    munmap(pieces_[drop].address, pieces_[drop].bytes);
    pooled -= static_cast<int64_t>(pieces_[drop].bytes);
    ++drop;
  }
  pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(drop));
}

int64_t PagePool::pooled_bytes() const {
  int64_t bytes = 0;
  for (const Piece& p : pieces_) bytes += static_cast<int64_t>(p.bytes);
  return bytes;
}

void PagePool::Take(char* address, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address), end = begin + bytes;
  uintptr_t at = begin;
  while (at < end) {
    const auto split = splits_.upper_bound(at);
    const uintptr_t to = split != splits_.end() && *split < end ? *split : end;
    char* from = reinterpret_cast<char*>(at);
    const size_t n = to - at;
    // The pages move to a new mapping; the range keeps its mapping, empty, reading as zeros. The
    // new address is named (none: the kernel picks), as the kernel reads it with this flag.
    void* moved = refused_ ? MAP_FAILED : mremap(from, n, n, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, nullptr);
    if (moved == MAP_FAILED) {
      refused_ = refused_ || !moved_;
      refused_bytes_ += static_cast<int64_t>(n);
      ReleaseToZero(reinterpret_cast<float*>(from), reinterpret_cast<float*>(from + n));
    } else {
      moved_ = true;
      pieces_.push_back({static_cast<char*>(moved), n});
      splits_.insert(at);
      splits_.insert(to);
    }
    at = to;
  }
  if (pieces_.size() > kMaxPieces) {
    munmap(pieces_.front().address, pieces_.front().bytes);
    pieces_.erase(pieces_.begin());
  }
}

size_t PagePool::PieceFor(size_t bytes) const {
  for (size_t i = pieces_.size(); i-- > 0;) {
    if (pieces_[i].bytes == bytes) return i;
  }
  return pieces_.size() - 1;
}

size_t PagePool::Fill(char* address, size_t bytes) {
  size_t done = 0;
  while (done < bytes && !pieces_.empty()) {
    const size_t i = PieceFor(bytes - done);
    Piece& p = pieces_[i];
    const size_t n = std::min(p.bytes, bytes - done);
    const uintptr_t at = reinterpret_cast<uintptr_t>(address + done);
    // The piece's first n bytes replace the range's empty pages, one mapping now; the rest of the
    // piece stays in the pool.
    if (mremap(p.address, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, address + done) == MAP_FAILED) break;
    splits_.erase(splits_.upper_bound(at), splits_.lower_bound(at + n));
    splits_.insert(at);
    splits_.insert(at + n);
    done += n;
    p.address += n;
    p.bytes -= n;
    if (p.bytes == 0) pieces_.erase(pieces_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return done;
}

}  // namespace shardsim::runtime
