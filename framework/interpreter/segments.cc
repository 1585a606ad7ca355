#include "framework/interpreter/segments.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

namespace sluice::framework {

std::vector<Segment> FormSegments(std::vector<Node>& nodes, bool fuse) {
  const int n = static_cast<int>(nodes.size());
  std::vector<bool> cross_successor(n, false);
  for (int b = 0; b < n; ++b) {
    for (int p : nodes[b].preds) {
      if (nodes[p].stream != nodes[b].stream) cross_successor[p] = true;
    }
  }
  std::vector<Segment> segments;
  absl::flat_hash_map<int, int> open;   // stream -> open segment (-1: closed)
  absl::flat_hash_map<int, int> count;  // stream -> segments so far
  for (int b = 0; b < n; ++b) {
    Node& node = nodes[b];
    bool cut = !fuse;
    for (int p : node.preds) {
      if (nodes[p].stream != node.stream) cut = true;
    }
    auto it = open.find(node.stream);
    if (cut || it == open.end() || it->second < 0) {
      Segment segment;
      segment.stream = node.stream;
      segment.position = count[node.stream]++;
      segments.push_back(std::move(segment));
      it = open.insert_or_assign(node.stream, static_cast<int>(segments.size()) - 1).first;
    }
    node.segment = it->second;
    segments[it->second].nodes.push_back(b);
    if (cross_successor[b]) it->second = -1;
  }
  return segments;
}

}  // namespace sluice::framework
