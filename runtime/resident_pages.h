// Memory a sharded buffer does not need, given back to the operating system while the buffer's
// flat index space stays: FSDP / ZeRO-3 free the gathered parameters after use (PyTorch FSDP2
// frees the unsharded storage, reshard_after_forward), and ZeRO-2/3 free each bucket's full
// gradients once they are reduce-scattered (Rajbhandari et al. 2020, section 5). The runtime
// keeps one flat parameter and one flat gradient buffer per stage (stage_model.h); the parts it
// does not hold live on pages returned with madvise(MADV_DONTNEED), which read as zeros until
// written again, so what it holds is what is resident, measured with mincore(2).
#pragma once

#include <cstdint>
#include <utility>

namespace shardsim::runtime {

// The system's page size in bytes.
uintptr_t PageSize();

// The whole pages inside [begin, end) as [first, last) byte addresses; {nullptr, nullptr} where
// there are none.
std::pair<char*, char*> WholePages(float* begin, float* end);

// Sets [begin, end) to zero, returning the pages that lie wholly inside it to the system (the
// elements on pages it covers only partly are zeroed in place).
void ReleaseToZero(float* begin, float* end);

// The bytes of [begin, end) that are resident in memory now: its resident pages, at most
// (end - begin) x 4 bytes. Where mincore is refused, the whole range.
int64_t ResidentBytes(const float* begin, const float* end);

}  // namespace shardsim::runtime
