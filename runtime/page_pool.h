// Pages one part of a flat buffer gives back and another part takes again, kept by the process
// as a framework's caching allocator keeps its blocks (PyTorch's reuses a freed block for the next
// tensor without asking the driver), so that FSDP's gathered parameters and ZeRO-2/3's full
// gradients, freed after every layer, do not cost a page fault per 4 KiB when the next layer
// writes them. Measured on this project's 2-core machines: faulting 64 MiB in while writing it
// takes 35-41 ms, writing it resident 2.5-3.6 ms, moving its pages with mremap(2) 0.03 ms.
//
// Release moves a range's resident pages into the pool (mremap with MREMAP_DONTUNMAP: the range
// stays mapped, reads as zeros and is no longer resident, as after madvise(MADV_DONTNEED), so
// resident_pages.h's accounting sees it given back; swapped-out pages are dropped with madvise).
// Acquire moves pooled pages onto a range's empty pages (neither resident nor swapped out, as
// /proc/self/pagemap tells) and zeroes them. A range written without Acquire faults its pages in
// as before: slower, never wrong. The pool holds what was given back and not taken again, so the
// process's resident set is the high-water mark of what the buffers held, like a caching
// allocator's reserved memory. mremap moves pages within one mapping only, and every move splits
// mappings at its ends: the pool keeps the addresses where it may have split one and moves the
// pages between two such addresses at a time; a move refused all the same reads the process's
// mapping boundaries and tries again. Where the kernel refuses to move (EINVAL before Linux 5.7)
// or pagemap cannot be read, pages are given back with madvise, as ReleaseToZero does.
// For private anonymous memory only (the runtime's buffers): on shared memory, which Linux 5.13
// moves too, the range would keep showing the pages the pool holds.
// A read of a given-back range maps the kernel's zero page, which counts as resident: such pages
// move to the pool and back like written ones (no memory, but counted in pooled_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace shardsim::runtime {

class PagePool {
 public:
  PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;
  ~PagePool();

  // Sets [begin, end) to zero; its resident whole pages go to the pool (the elements on pages it
  // covers only partly are zeroed in place).
  void Release(float* begin, float* end);
  // What Acquire leaves in the pages it takes: zeros, as the range read before, or their old
  // contents where the caller overwrites all of [begin, end) before reading it.
  enum class Contents { kZeros, kOverwritten };
  // Whole pages of [begin, end) that are not resident take pooled pages while the pool has them.
  void Acquire(float* begin, float* end, Contents contents = Contents::kZeros);

  // Gives pooled pages back to the system, the oldest first, until at most `bytes` are pooled.
  void Trim(int64_t bytes);

  // Bytes held in the pool now (resident, in no buffer).
  int64_t pooled_bytes() const;
  // Bytes Release gave back with madvise because the kernel refused to move them.
  int64_t refused_bytes() const { return refused_bytes_; }

 private:
  struct Piece {
    char* address;
    size_t bytes;
  };
  // Moves whole pages [address, address + bytes), resident, into the pool, a stretch between two
  // of `splits_` at a time.
  void Take(char* address, size_t bytes);
  // Fills whole pages [address, address + bytes), not resident, from the pool; returns the bytes
  // filled from its start.
  size_t Fill(char* address, size_t bytes);
  // The piece Fill takes next for `bytes`: one of exactly that size if any (the range becomes one
  // mapping again), else the last given back.
  size_t PieceFor(size_t bytes) const;

  std::vector<Piece> pieces_;
  std::set<uintptr_t> splits_;  // where a move may have cut a mapping
  int64_t refused_bytes_ = 0;
  int pagemap_ = -1;      // /proc/self/pagemap, open for the pool's life
  bool moved_ = false;    // a move has succeeded
  bool refused_ = false;  // the first move was refused: this kernel does not move pages, madvise
};

}  // namespace shardsim::runtime
