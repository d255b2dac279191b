// The buffer planner on synthetic live ranges: packing, determinism, bounds, in-place groups.
#include <gtest/gtest.h>

#include "BufferPlan.h"

using namespace nnc;

namespace {

BufferRequest req(std::string name, int64_t bytes, int first, int last, int reuses = -1) {
  return {std::move(name), bytes, first, last, reuses};
}

int64_t offsetOf(const BufferPlan &p, const std::string &name) {
  for (const auto &e : p.entries)
    if (e.name == name)
      return e.offset;
  ADD_FAILURE() << "no entry " << name;
  return -1;
}

/// No two buffers with overlapping live ranges overlap in the arena.
void expectNoConflicts(const BufferPlan &p) {
  for (size_t i = 0; i < p.entries.size(); ++i)
    for (size_t j = i + 1; j < p.entries.size(); ++j) {
      const auto &a = p.entries[i], &b = p.entries[j];
      if (a.reuses == b.name || b.reuses == a.name)
        continue;
      bool timeOverlap = a.firstUse <= b.lastUse && b.firstUse <= a.lastUse;
      bool spaceOverlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(timeOverlap && spaceOverlap && a.bytes > 0 && b.bytes > 0)
          << a.name << " and " << b.name;
      EXPECT_EQ(a.offset % kArenaAlignment, 0);
    }
}

} // namespace

TEST(BufferPlan, DisjointLiveRangesShareOffsets) {
  BufferPlan p = planBuffers({req("a", 1000, 0, 1), req("b", 1000, 2, 3), req("c", 1000, 4, 5)});
  EXPECT_EQ(offsetOf(p, "a"), 0);
  EXPECT_EQ(offsetOf(p, "b"), 0);
  EXPECT_EQ(offsetOf(p, "c"), 0);
  EXPECT_EQ(p.peakBytes, 1000);
  EXPECT_EQ(p.lowerBoundBytes, 1000);
  EXPECT_EQ(p.unplannedBytes, 3000);
}

TEST(BufferPlan, OverlappingRangesAreAlignedApart) {
  BufferPlan p = planBuffers({req("a", 1000, 0, 2), req("b", 500, 1, 3)});
  EXPECT_EQ(offsetOf(p, "a"), 0);
  EXPECT_EQ(offsetOf(p, "b"), 1024);
  EXPECT_EQ(p.peakBytes, 1524);
  EXPECT_EQ(p.lowerBoundBytes, 1500);
  expectNoConflicts(p);
}

TEST(BufferPlan, ChainOfLayersPacksToTheLowerBound) {
  // x0 -> x1 -> ... : each buffer lives from its producer to its consumer, like a plain CNN.
  std::vector<BufferRequest> r;
  const int64_t sizes[] = {4096, 8192, 2048, 8192, 1024, 4096, 640, 64};
  for (int i = 0; i < 8; ++i)
    r.push_back(req("x" + std::to_string(i), sizes[i], i, i + 1));
  BufferPlan p = planBuffers(r);
  expectNoConflicts(p);
  EXPECT_EQ(p.lowerBoundBytes, 8192 + 4096);
  EXPECT_EQ(p.peakBytes, p.lowerBoundBytes);
}

TEST(BufferPlan, GapIsFilledByASmallerBuffer) {
  // a and c are live together; b (after a) fits in the hole a leaves.
  BufferPlan p = planBuffers(
      {req("a", 2048, 0, 1), req("c", 4096, 0, 5), req("b", 1024, 2, 4), req("d", 1024, 2, 3)});
  expectNoConflicts(p);
  EXPECT_EQ(offsetOf(p, "c"), 0);
  EXPECT_EQ(offsetOf(p, "a"), 4096);
  EXPECT_EQ(offsetOf(p, "b"), 4096);
  EXPECT_EQ(offsetOf(p, "d"), 5120);
  EXPECT_EQ(p.peakBytes, 6144);
  EXPECT_EQ(p.lowerBoundBytes, 6144);
}

TEST(BufferPlan, Deterministic) {
  std::vector<BufferRequest> r;
  for (int i = 0; i < 40; ++i)
    r.push_back(req("t" + std::to_string(i), 64 * ((i * 7) % 5 + 1), i % 9, i % 9 + (i % 4)));
  BufferPlan a = planBuffers(r), b = planBuffers(r);
  EXPECT_EQ(a.json(), b.json());
  EXPECT_EQ(a.str(), b.str());
  expectNoConflicts(a);
  EXPECT_GE(a.peakBytes, a.lowerBoundBytes);
  // Equal sizes and first uses: the name decides.
  BufferPlan t = planBuffers({req("z", 64, 0, 1), req("y", 64, 0, 1)});
  EXPECT_EQ(offsetOf(t, "y"), 0);
  EXPECT_EQ(offsetOf(t, "z"), 64);
}

TEST(BufferPlan, InPlaceReuseSharesStorage) {
  // b = relu(a) in place; c = exp(b) in place; d lives beside them.
  BufferPlan p = planBuffers({req("a", 4096, 0, 1), req("b", 4096, 1, 2, 0),
                              req("c", 4096, 2, 3, 1), req("d", 128, 0, 3)});
  EXPECT_EQ(offsetOf(p, "a"), offsetOf(p, "b"));
  EXPECT_EQ(offsetOf(p, "b"), offsetOf(p, "c"));
  EXPECT_EQ(p.entries[1].reuses, "a");
  EXPECT_EQ(p.entries[2].reuses, "b");
  EXPECT_EQ(p.lowerBoundBytes, 4096 + 128);
  EXPECT_EQ(p.peakBytes, 4096 + 128);
  EXPECT_EQ(p.unplannedBytes, 3 * 4096 + 128);
  expectNoConflicts(p);
}

TEST(BufferPlan, EmptyAndZeroSized) {
  BufferPlan e = planBuffers({});
  EXPECT_EQ(e.peakBytes, 0);
  EXPECT_EQ(e.lowerBoundBytes, 0);
  BufferPlan z = planBuffers({req("empty", 0, 0, 3), req("a", 256, 1, 2)});
  EXPECT_EQ(z.peakBytes, 256);
  EXPECT_EQ(offsetOf(z, "a"), 0);
}

TEST(BufferPlan, JsonAndText) {
  BufferPlan p = planBuffers({req("a\"q", 100, 0, 1), req("b", 200, 1, 2, 0)});
  std::string j = p.json();
  EXPECT_NE(j.find("\"peak_bytes\": "), std::string::npos);
  EXPECT_NE(j.find("\"lower_bound_bytes\": "), std::string::npos);
  EXPECT_NE(j.find("\"unplanned_bytes\": 300"), std::string::npos);
  EXPECT_NE(j.find("\"name\": \"a\\\"q\""), std::string::npos);
  EXPECT_NE(j.find("\"reuses\": \"a\\\"q\""), std::string::npos);
  std::string s = p.str();
  EXPECT_NE(s.find("lower bound"), std::string::npos);
  EXPECT_NE(s.find("in place of"), std::string::npos);
}

TEST(BufferPlan, AlternatingLargeTemporariesReachTheLowerBound) {
  // Two residual blocks of Winograd convs: per conv a transformed input v and a product m
  // (2.25 activations each) live one step apart, beside a residual that spans the block.
  // Greedy-by-size puts every v at one offset and every m at another, leaving no room for
  // the activations between them (1.36x the lower bound); the search alternates them.
  BufferPlan p = planBuffers(
      {req("s", 4096, 0, 1), req("p", 1024, 1, 9), req("v1", 2304, 2, 3), req("m1", 2304, 3, 4),
       req("r1", 1024, 4, 5), req("v2", 2304, 5, 6), req("m2", 2304, 6, 7), req("c2", 1024, 7, 10),
       req("add", 1024, 8, 15), req("v3", 2304, 10, 11), req("m3", 2304, 11, 12),
       req("r3", 1024, 12, 13), req("v4", 2304, 13, 14), req("m4", 2304, 14, 15)});
  expectNoConflicts(p);
  EXPECT_EQ(p.lowerBoundBytes, 5632);
  EXPECT_EQ(p.peakBytes, p.lowerBoundBytes);
}
