// The page pool (runtime/page_pool.h): given-back ranges read as zeros and hold no memory, taken
// pages are reused (no fresh faults) and read as zeros, and the pool survives the mappings its
// own moves split.
#include "runtime/page_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "runtime/heap_policy.h"
#include "runtime/resident_pages.h"

namespace shardsim::runtime {
namespace {

int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A buffer of `pages` whole pages (page-aligned), every element written.
std::vector<float> Written(size_t pages, float value) {
  const size_t floats = pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) / sizeof(float);
  std::vector<float> v(floats + 4096, value);
  return v;
}

bool AllEqual(const float* begin, const float* end, float value) {
  return std::all_of(begin, end, [&](float x) { return x == value; });
}

TEST(PagePoolTest, ReleasedRangesReadZeroAndHoldNothing) {
  std::vector<float> a = Written(256, 1.0f);
  PagePool pool;
  float* begin = a.data() + 3;  // not page aligned: the partial pages are zeroed in place
  float* end = a.data() + a.size() - 5;
  pool.Release(begin, end);
  // At most the two partial pages stay resident (measured before reading: a read maps the
  // kernel's zero page, which mincore counts).
  EXPECT_LE(ResidentBytes(begin, end), 2 * sysconf(_SC_PAGESIZE));
  EXPECT_TRUE(AllEqual(begin, end, 0.0f));
  EXPECT_EQ(a[2], 1.0f);
  EXPECT_EQ(a[a.size() - 5], 1.0f);
  if (pool.refused_bytes() > 0) GTEST_SKIP() << "this kernel does not move pages (mremap MREMAP_DONTUNMAP): ReleaseToZero's behaviour";
  EXPECT_GE(pool.pooled_bytes(), 254 * sysconf(_SC_PAGESIZE));
}

TEST(PagePoolTest, AcquireReusesPooledPagesZeroed) {
  std::vector<float> a = Written(512, 1.0f), b = Written(512, 2.0f);
  PagePool pool;
  pool.Release(a.data(), a.data() + a.size());
  if (pool.refused_bytes() > 0) GTEST_SKIP() << "this kernel does not move pages";
  pool.Release(b.data(), b.data() + b.size());
  const int64_t pooled = pool.pooled_bytes();
  pool.Acquire(a.data(), a.data() + a.size());
  EXPECT_LT(pool.pooled_bytes(), pooled);
  EXPECT_TRUE(AllEqual(a.data(), a.data() + a.size(), 0.0f));  // b's twos are not visible
  const int64_t before = MinorFaults();
  std::fill(a.begin(), a.end(), 3.0f);
  const int64_t faults = MinorFaults() - before;
  EXPECT_LT(faults, 16) << "writing acquired pages faulted " << faults << " times";
  EXPECT_TRUE(AllEqual(a.data(), a.data() + a.size(), 3.0f));
  // Taken for a range the caller overwrites: no zeroing, the same reuse.
  pool.Release(a.data(), a.data() + a.size());
  pool.Acquire(a.data(), a.data() + a.size(), PagePool::Contents::kOverwritten);
  const int64_t again = MinorFaults();
  std::fill(a.begin(), a.end(), 4.0f);
  EXPECT_LT(MinorFaults() - again, 16);
  EXPECT_TRUE(AllEqual(a.data(), a.data() + a.size(), 4.0f));
  // b, given back and not acquired, still reads as zeros and faults in when written.
  EXPECT_TRUE(AllEqual(b.data(), b.data() + b.size(), 0.0f));
}

TEST(PagePoolTest, RepeatedCyclesOverSplitMappingsKeepWorking) {
  // Two halves of one buffer given back and taken in turn, in pieces of other sizes, as FSDP's
  // buckets do step after step: every move splits mappings, and every later move must still work.
  std::vector<float> a = Written(1024, 1.0f);
  const size_t half = a.size() / 2;
  PagePool pool;
  pool.Release(a.data() + half, a.data() + a.size());
  if (pool.refused_bytes() > 0) GTEST_SKIP() << "this kernel does not move pages";
  for (int round = 0; round < 50; ++round) {
    float* first = a.data() + (round % 2 == 0 ? 0 : half);
    float* second = a.data() + (round % 2 == 0 ? half : 0);
    pool.Release(first, first + half);
    pool.Acquire(first + 100, first + half / 3);
    pool.Acquire(first, first + half);
    std::fill(first, first + half, static_cast<float>(round));
    ASSERT_TRUE(AllEqual(first, first + half, static_cast<float>(round)));
    std::fill(second, second + half, 7.0f);
    pool.Release(second, second + half / 2);
    pool.Acquire(second, second + half);
    ASSERT_TRUE(AllEqual(second, second + half / 2, 0.0f)) << "round " << round;
    // What was not given back keeps its values: Acquire takes only empty pages.
    ASSERT_TRUE(AllEqual(second + half / 2 + 1024, second + half, 7.0f)) << "round " << round;
  }
  EXPECT_EQ(pool.refused_bytes(), 0) << "a move was refused after the first succeeded";
  pool.Trim(0);
  EXPECT_EQ(pool.pooled_bytes(), 0);
}

TEST(PagePoolTest, HeapBuffersSplitByAnEarlierPoolStillMove) {
  // The runtime's buffers come from the heap (UseCachingHeap); a pool that meets mappings another
  // pool split learns their boundaries instead of giving up.
  UseCachingHeap();
  std::vector<float> a(static_cast<size_t>(3) << 20, 1.0f);  // 12 MiB: under the heap's threshold
  const size_t third = a.size() / 3;
  {
    PagePool earlier;
    earlier.Release(a.data() + third, a.data() + 2 * third);
    if (earlier.refused_bytes() > 0) GTEST_SKIP() << "this kernel does not move pages";
    // Its pages land elsewhere in the buffer: mappings that cannot merge with their neighbours.
    ReleaseToZero(a.data() + 2 * third, a.data() + a.size());
    earlier.Acquire(a.data() + 2 * third, a.data() + a.size());
  }
  std::fill(a.begin(), a.end(), 2.0f);
  PagePool pool;
  pool.Release(a.data() + 100, a.data() + a.size() - 100);
  EXPECT_EQ(pool.refused_bytes(), 0);
  EXPECT_GT(pool.pooled_bytes(), static_cast<int64_t>(a.size() * sizeof(float)) * 9 / 10);
  EXPECT_TRUE(AllEqual(a.data() + 100, a.data() + a.size() - 100, 0.0f));
  EXPECT_EQ(a[99], 2.0f);
  pool.Acquire(a.data(), a.data() + a.size());
  EXPECT_TRUE(AllEqual(a.data() + 100, a.data() + a.size() - 100, 0.0f));
  EXPECT_EQ(a[a.size() - 1], 2.0f);
}

}  // namespace
}  // namespace shardsim::runtime
