// Buffer planning: liveness groups, greedy-by-size placement, and the plan's text and JSON.
#include "BufferPlan.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace nnc {

namespace {

int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct Group {
  int root;      // the request that owns the storage
  int64_t bytes; // largest member
  int first, last;
  int64_t offset = 0;
};

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20)
        out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
      else
        out += c;
    }
  }
  return out + "\"";
}

} // namespace

BufferPlan planBuffers(const std::vector<BufferRequest> &requests) {
  const int n = static_cast<int>(requests.size());
  // 1. Storage groups: follow `reuses` to the request that owns the storage.
  std::vector<int> rootOf(n);
  for (int i = 0; i < n; ++i) {
    int r = requests[i].reuses;
    NNC_ASSERT(r < i, "buffer '{}' reuses a later buffer", requests[i].name);
    rootOf[i] = r < 0 ? i : rootOf[r];
  }
  std::vector<Group> groups;
  std::vector<int> groupOf(n, -1);
  for (int i = 0; i < n; ++i) {
    const BufferRequest &q = requests[i];
    NNC_ASSERT(q.bytes >= 0 && q.firstUse <= q.lastUse, "bad buffer request '{}'", q.name);
    if (rootOf[i] == i) {
      groupOf[i] = static_cast<int>(groups.size());
      groups.push_back({i, q.bytes, q.firstUse, q.lastUse});
    } else {
      Group &g = groups[groupOf[rootOf[i]]];
      groupOf[i] = groupOf[rootOf[i]];
      g.bytes = std::max(g.bytes, q.bytes);
      g.first = std::min(g.first, q.firstUse);
      g.last = std::max(g.last, q.lastUse);
    }
  }

  // 2. Placement order: size descending, then first use, then name.
  std::vector<int> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Group &x = groups[a], &y = groups[b];
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    if (x.first != y.first)
      return x.first < y.first;
    return requests[x.root].name < requests[y.root].name;
  });

  // 3. Lowest aligned offset clear of every placed group with an overlapping live range.
  std::vector<int> placed;
  int64_t peak = 0;
  for (int gi : order) {
    Group &g = groups[gi];
    std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end)
    for (int pi : placed) {
      const Group &p = groups[pi];
      if (p.first <= g.last && g.first <= p.last && p.bytes > 0)
        busy.push_back({p.offset, p.offset + p.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    if (g.bytes > 0) {
      for (const auto &[lo, hi] : busy) {
        if (offset + g.bytes <= lo)
          break;
        offset = std::max(offset, alignUp(hi, kArenaAlignment));
      }
    }
    g.offset = offset;
    peak = std::max(peak, offset + g.bytes);
    placed.push_back(gi);
  }

  BufferPlan plan;
  plan.peakBytes = peak;
  // Lower bound: the largest total of groups live at one launch step.
  int lastStep = -1;
  for (const Group &g : groups)
    lastStep = std::max(lastStep, g.last);
  if (lastStep >= 0) {
    std::vector<int64_t> delta(static_cast<size_t>(lastStep) + 2, 0);
    for (const Group &g : groups) {
      delta[g.first] += g.bytes;
      delta[g.last + 1] -= g.bytes;
    }
    int64_t live = 0;
    for (int t = 0; t <= lastStep; ++t) {
      live += delta[t];
      plan.lowerBoundBytes = std::max(plan.lowerBoundBytes, live);
    }
  }
  for (int i = 0; i < n; ++i) {
    const BufferRequest &q = requests[i];
    plan.unplannedBytes += q.bytes;
    plan.entries.push_back({q.name, q.bytes, groups[groupOf[i]].offset, q.firstUse, q.lastUse,
                            q.reuses >= 0 ? requests[q.reuses].name : std::string()});
  }
  return plan;
}

std::string BufferPlan::str() const {
  std::string s = fmt::format(
      "buffer plan: {} buffers, arena {} bytes, lower bound {} bytes, unplanned {} bytes", entries.size(),
      peakBytes, lowerBoundBytes, unplannedBytes);
  if (lowerBoundBytes > 0)
    s += fmt::format(" (peak/lower bound {:.3f})", double(peakBytes) / double(lowerBoundBytes));
  s += "\n";
  s += fmt::format("  {:>12} {:>12}  {:>11}  {}\n", "offset", "bytes", "live", "buffer");
  for (const Entry &e : entries) {
    s += fmt::format("  {:>12} {:>12}  {:>11}  {}", e.offset, e.bytes,
                     fmt::format("[{},{}]", e.firstUse, e.lastUse), e.name);
    if (!e.reuses.empty())
      s += " (in place of " + e.reuses + ")";
    s += "\n";
  }
  return s;
}

std::string BufferPlan::json() const {
  std::string s = fmt::format(
      "{{\"peak_bytes\": {}, \"lower_bound_bytes\": {}, \"unplanned_bytes\": {}, \"buffers\": [",
      peakBytes, lowerBoundBytes, unplannedBytes);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry &e = entries[i];
    s += fmt::format("{}\n  {{\"name\": {}, \"bytes\": {}, \"offset\": {}, \"first_use\": {}, "
                     "\"last_use\": {}, \"reuses\": {}}}",
                     i ? "," : "", jsonString(e.name), e.bytes, e.offset, e.firstUse, e.lastUse,
                     e.reuses.empty() ? std::string("null") : jsonString(e.reuses));
  }
  s += entries.empty() ? "]}\n" : "\n]}\n";
  return s;
}

} // namespace nnc
