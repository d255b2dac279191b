// Buffer planning: liveness groups, greedy-by-size placement improved by a bounded search
// under a peak limit, and the plan's text and JSON.
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

/// Offsets of `groups` under `limit` bytes, or empty when the search finds none within
/// `budget` placements. Groups go in order of first use (then size, descending); each tries,
/// in order, the lowest aligned offset of every gap between the groups it overlaps in time
/// that holds it, the highest such offset of that gap, and the offsets just above all of them
/// and just under the limit; a group with no candidate backtracks to the previous one. Putting
/// a buffer at the top of the free space keeps the bottom contiguous for the next one: the
/// transformed input and product of a Winograd conv, each twice an activation, alternate
/// between the halves of the arena that greedy-by-size fills one way only.
std::vector<int64_t> searchPlacement(const std::vector<Group> &groups, int64_t limit,
                                     int64_t budget) {
  const size_t n = groups.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Group &x = groups[a], &y = groups[b];
    if (x.first != y.first)
      return x.first < y.first;
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    return a < b;
  });
  std::vector<int64_t> offset(n, -1);
  auto candidates = [&](size_t k) {
    const Group &g = groups[order[k]];
    std::vector<int64_t> out;
    if (g.bytes == 0)
      return std::vector<int64_t>{0};
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j = 0; j < k; ++j) {
      const Group &p = groups[order[j]];
      if (p.first <= g.last && g.first <= p.last && p.bytes > 0)
        busy.push_back({offset[order[j]], offset[order[j]] + p.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    auto gap = [&](int64_t end) {
      if (at + g.bytes > end)
        return;
      out.push_back(at);
      int64_t top = (end - g.bytes) / kArenaAlignment * kArenaAlignment;
      if (top > at)
        out.push_back(top);
    };
    for (const auto &[lo, hi] : busy) {
      gap(lo);
      at = std::max(at, alignUp(hi, kArenaAlignment));
    }
    gap(limit);
    return out;
  };
  std::vector<std::vector<int64_t>> cands(n);
  std::vector<size_t> next(n, 0);
  size_t k = 0;
  int64_t steps = 0;
  if (n > 0)
    cands[0] = candidates(0);
  while (k < n) {
    if (++steps > budget)
      return {};
    if (next[k] < cands[k].size()) {
      offset[order[k]] = cands[k][next[k]++];
      if (++k < n) {
        cands[k] = candidates(k);
        next[k] = 0;
      }
    } else { // no place left for group k: move the previous one
      offset[order[k]] = -1;
      if (k == 0)
        return {};
      --k;
    }
  }
  return offset;
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

  // 4. A search under limits from the lower bound up, in steps of 2%, while they are below
  //    the greedy peak; the first placement found replaces the greedy one. The budget keeps
  //    planning linear-ish in the group count.
  const int64_t budget = 64 * static_cast<int64_t>(groups.size()) + 1024;
  for (int step = 0; step <= 10; ++step) {
    int64_t limit =
        alignUp(plan.lowerBoundBytes + plan.lowerBoundBytes * step / 50, kArenaAlignment);
    if (limit >= peak)
      break;
    std::vector<int64_t> offsets = searchPlacement(groups, limit, budget);
    if (offsets.empty())
      continue;
    int64_t found = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i].offset = offsets[i];
      found = std::max(found, offsets[i] + groups[i].bytes);
    }
    peak = found;
    break;
  }
  plan.peakBytes = peak;
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
