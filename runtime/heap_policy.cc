#include "runtime/heap_policy.h"

#include <malloc.h>

namespace shardsim::runtime {

void UseCachingHeap() {
  // Setting either threshold also turns off glibc's dynamic adjustment of both.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace shardsim::runtime
