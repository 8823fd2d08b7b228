#include "runtime/memory_account.h"

#include <gtest/gtest.h>

#include <vector>

namespace shardsim::runtime {
namespace {

TEST(MemoryAccountTest, KeepsCurrentAndPeakPerCategoryAndThePeakTotal) {
  MemoryAccount account;
  account.Add(MemoryCategory::kParams, 100);
  account.Add(MemoryCategory::kActivations, 50);
  account.Release(MemoryCategory::kActivations, 50);
  account.Add(MemoryCategory::kBuffers, 30);
  EXPECT_EQ(account.current(MemoryCategory::kParams), 100);
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 0);
  EXPECT_EQ(account.peak(MemoryCategory::kActivations), 50);
  EXPECT_EQ(account.peak(MemoryCategory::kBuffers), 30);
  EXPECT_EQ(account.peak_total(), 150);  // params + activations, before the buffers came
  account.Add(MemoryCategory::kBuffers, 40);
  EXPECT_EQ(account.peak_total(), 170);
  account.Transient(MemoryCategory::kActivations, 80);  // on top of 170 held
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 0);
  EXPECT_EQ(account.peak(MemoryCategory::kActivations), 80);
  EXPECT_EQ(account.peak_total(), 250);
}

// The routed rows held when the activations peaked: noted with the peak, not after it.
TEST(MemoryAccountTest, NotesTheRoutedRowsHeldAtTheActivationPeak) {
  MemoryAccount account;
  {
    RoutedRowsHold rows(&account);
    MemoryHold bytes(&account, MemoryCategory::kActivations);
    rows.Set({300, 200});
    bytes.Set(1000);
    rows.Set({500, 400});
    bytes.Set(900);  // more rows, fewer bytes: not a peak
    RoutedRowsHold more = std::move(rows);
    more.Set({700, 400});
    bytes.Set(1200);  // the peak
    bytes.Set(100);
  }
  EXPECT_EQ(account.routed_at_activation_peak().received, 700);
  EXPECT_EQ(account.routed_at_activation_peak().sent, 400);
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 0);
  RoutedRowsHold again(&account);  // everything held was released with its holds
  again.Set({1, 1});
  MemoryHold bytes(&account, MemoryCategory::kActivations, 1300);
  EXPECT_EQ(account.routed_at_activation_peak().received, 1);
}

TEST(MemoryAccountTest, HoldsReleaseOnDestructionAndFollowSetAndMoves) {
  MemoryAccount account;
  std::vector<float> a(10), b(6);
  std::vector<std::vector<float>> nested(2, std::vector<float>(4));
  EXPECT_EQ(HeldBytes(a, b), 64);
  EXPECT_EQ(HeldBytes(nested), static_cast<int64_t>(2 * sizeof(std::vector<float>) + 32));
  {
    MemoryHold hold(&account, MemoryCategory::kGrads, HeldBytes(a));
    EXPECT_EQ(account.current(MemoryCategory::kGrads), 40);
    hold.SetTo(a, b);
    EXPECT_EQ(account.current(MemoryCategory::kGrads), 64);
    MemoryHold moved = std::move(hold);
    EXPECT_EQ(account.current(MemoryCategory::kGrads), 64);  // counted once
    hold.Set(0);                                             // the moved-from hold counts nothing
    EXPECT_EQ(account.current(MemoryCategory::kGrads), 64);
    moved.Set(8);
  }
  EXPECT_EQ(account.current(MemoryCategory::kGrads), 0);
  EXPECT_EQ(account.peak(MemoryCategory::kGrads), 64);
  MemoryHold detached(nullptr, MemoryCategory::kParams, 1000);  // no account: nothing counted
  EXPECT_EQ(account.peak(MemoryCategory::kParams), 0);
}

}  // namespace
}  // namespace shardsim::runtime
