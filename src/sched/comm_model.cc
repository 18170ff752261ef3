#include "src/sched/comm_model.h"

#include <algorithm>
#include <tuple>

namespace gpupool {

CommEstimate EstimateRingAllReduce(double model_bytes, std::vector<ReplicaSite> sites, const LinkBandwidths& bw) {
  CommEstimate e;
  // Sites on one node are one group of workers: merge them.
  std::sort(sites.begin(), sites.end(),
            [](const ReplicaSite& a, const ReplicaSite& b) { return std::tie(a.rack, a.node) < std::tie(b.rack, b.node); });
  std::vector<ReplicaSite> nodes;
  for (const ReplicaSite& s : sites) {
    if (s.gpus <= 0) continue;
    if (!nodes.empty() && nodes.back().node == s.node && nodes.back().rack == s.rack) {
      nodes.back().gpus += s.gpus;
    } else {
      nodes.push_back(s);
    }
    e.workers += s.gpus;
  }
  if (e.workers <= 1) return e;
  const double n = e.workers;
  e.bytes_per_link = 2 * (n - 1) / n * model_bytes;
  double slowest = 0;  // GB/s of the slowest link
  auto link = [&](double gbps) { slowest = slowest == 0 ? gbps : std::min(slowest, gbps); };
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Links inside the node: gpus - 1 of them.
    if (nodes[i].gpus > 1) link(nodes[i].nvlink ? bw.nvlink_gbps : bw.pcie_gbps);
    // The link to the next node of the ring (the last one closes it).
    if (nodes.size() > 1) {
      const ReplicaSite& next = nodes[(i + 1) % nodes.size()];
      ++e.cross_node_links;
      e.cross_node_bytes += e.bytes_per_link;
      if (next.rack != nodes[i].rack) {
        ++e.cross_rack_links;
        e.cross_rack_bytes += e.bytes_per_link;
        link(bw.inter_rack_gbps);
      } else {
        link(bw.intra_rack_gbps);
      }
    }
  }
  e.seconds_per_step = e.bytes_per_link / (slowest * 1e9);
  return e;
}

}  // namespace gpupool
