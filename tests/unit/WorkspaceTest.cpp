// nnc_workspace, the per-thread scratch of generated kernels (kir::BufferDecl::perThread):
// 64-byte aligned, the same block on later asks of a thread for no more, slots apart, each
// thread its own. (Kernels that use it, at 1 and 2 threads: LowerNN.Conv's blocked cases
// and the artifact test's workspace part.)
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "nnc/ir/KernelHelpers.h"

namespace {

bool aligned64(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

} // namespace

TEST(WorkspaceTest, PerThreadAlignedAndStable) {
  void *a = nnc_workspace(0, 100);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(aligned64(a));
  EXPECT_EQ(nnc_workspace(0, 64), a) << "a smaller ask keeps the block";
  EXPECT_EQ(nnc_workspace(0, 100), a);
  void *b = nnc_workspace(1, 100);
  EXPECT_NE(b, a) << "slots are separate";
  void *grown = nnc_workspace(0, 1 << 20);
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(aligned64(grown));
  static_cast<char *>(grown)[(1 << 20) - 1] = 1; // the whole block is there
  EXPECT_TRUE(aligned64(nnc_workspace(2, 0))) << "an empty ask still gets a block";
  void *other = nullptr;
  std::thread t([&] { other = nnc_workspace(0, 100); });
  t.join();
  EXPECT_NE(other, nullptr);
  EXPECT_NE(other, grown) << "each thread has its own";
}
