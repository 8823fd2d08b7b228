#include "runtime/page_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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

// Each whole page of [first, last): resident (mapped: written, or the kernel's zero page after a
// read), swapped out (holding data on disk) or empty (reading as zeros), from /proc/self/pagemap
// (bit 63 present, bit 62 swapped; mincore cannot tell the last two apart). False where the file
// cannot be read.
enum class PageState : uint8_t { kResident, kSwapped, kEmpty };
bool PageStates(int pagemap, char* first, char* last, std::vector<PageState>& states) {
  const uintptr_t page = PageSize();
  const size_t pages = static_cast<size_t>(last - first) / page;
  std::vector<uint64_t> entries(pages);
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(first) / page * sizeof(uint64_t));
  const ssize_t want = static_cast<ssize_t>(pages * sizeof(uint64_t));
  if (pagemap < 0 || pread(pagemap, entries.data(), static_cast<size_t>(want), at) != want) return false;
  states.resize(pages);
  for (size_t i = 0; i < pages; ++i) {
    states[i] = (entries[i] >> 63) & 1 ? PageState::kResident : (entries[i] >> 62) & 1 ? PageState::kSwapped : PageState::kEmpty;
  }
  return true;
}

// Calls `run(address, bytes)` for each stretch of pages of `state`, from `first`, until it
// returns false.
template <typename F>
void ForEachRun(const std::vector<PageState>& states, char* first, PageState state, F run) {
  const size_t page = PageSize();
  size_t i = 0;
  while (i < states.size()) {
    if (states[i] != state) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < states.size() && states[j] == state) ++j;
    if (!run(first + i * page, (j - i) * page)) return;
    i = j;
  }
}

// Adds to `splits` every mapping boundary of this process strictly inside (lo, hi), from
// /proc/self/maps.
void AddMappingBounds(uintptr_t lo, uintptr_t hi, std::set<uintptr_t>& splits) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return;
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    unsigned long start = 0, end = 0;
    if (std::sscanf(line, "%lx-%lx", &start, &end) != 2) continue;
    for (uintptr_t b : {static_cast<uintptr_t>(start), static_cast<uintptr_t>(end)}) {
      if (b > lo && b < hi) splits.insert(b);
    }
  }
  std::fclose(maps);
}

}  // namespace

PagePool::PagePool() : pagemap_(open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) {}

PagePool::~PagePool() {
  for (const Piece& p : pieces_) munmap(p.address, p.bytes);
  if (pagemap_ >= 0) close(pagemap_);
}

void PagePool::Release(float* begin, float* end) {
  const auto [first, last] = WholePages(begin, end);
  std::vector<PageState> states;
  if (refused_ || first == nullptr || !PageStates(pagemap_, first, last, states)) {
    ReleaseToZero(begin, end);
    return;
  }
  std::fill(begin, reinterpret_cast<float*>(first), 0.0f);
  std::fill(reinterpret_cast<float*>(last), end, 0.0f);
  ForEachRun(states, first, PageState::kResident, [&](char* at, size_t bytes) {
    Take(at, bytes);
    return true;
  });
  // Swapped-out pages hold data: dropped, they read as zeros too.
  ForEachRun(states, first, PageState::kSwapped, [&](char* at, size_t bytes) {
    ReleaseToZero(reinterpret_cast<float*>(at), reinterpret_cast<float*>(at + bytes));
    return true;
  });
}

void PagePool::Acquire(float* begin, float* end, Contents contents) {
  if (pieces_.empty() || end <= begin) return;
  const auto [first, last] = WholePages(begin, end);
  std::vector<PageState> states;
  if (first == nullptr || !PageStates(pagemap_, first, last, states)) return;
  // Only empty pages: a swapped-out one holds data, a resident one is in use.
  ForEachRun(states, first, PageState::kEmpty, [&](char* at, size_t bytes) {
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
  bool looked_up = false;  // the process's own mapping boundaries, read once a move is refused
  while (at < end) {
    const auto split = splits_.upper_bound(at);
    const uintptr_t to = split != splits_.end() && *split < end ? *split : end;
    char* from = reinterpret_cast<char*>(at);
    const size_t n = to - at;
    // The pages move to a new mapping; the range keeps its mapping, empty, reading as zeros. The
    // new address is named (none: the kernel picks), as the kernel reads it with this flag.
    void* moved = refused_ ? MAP_FAILED : mremap(from, n, n, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, nullptr);
    if (moved != MAP_FAILED) {
      moved_ = true;
      pieces_.push_back({static_cast<char*>(moved), n});
      splits_.insert(at);
      splits_.insert(to);
      at = to;
      continue;
    }
    const int error = errno;
    if (!refused_ && !looked_up && error != EINVAL) {
      // A boundary the pool did not make (another buffer's, a flag changed by madvise): learn
      // them all and try again.
      AddMappingBounds(at, end, splits_);
      looked_up = true;
      continue;
    }
    // EINVAL before any move: this kernel (before Linux 5.7) or this memory does not move.
    refused_ = refused_ || (!moved_ && error == EINVAL);
    refused_bytes_ += static_cast<int64_t>(n);
    ReleaseToZero(reinterpret_cast<float*>(from), reinterpret_cast<float*>(from + n));
    at = to;
  }
  if (pieces_.size() > kMaxPieces) {
    const size_t drop = pieces_.size() - kMaxPieces;
    for (size_t i = 0; i < drop; ++i) munmap(pieces_[i].address, pieces_[i].bytes);
    pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(drop));
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
    if (mremap(p.address, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, address + done) == MAP_FAILED) {
      // Older kernels unmap the destination before they fail: map it again, empty (it was).
      mmap(address + done, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      break;
    }
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
