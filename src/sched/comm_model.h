// A communication model for data-parallel training (TOPO-1): each step,
// the workers all-reduce their gradients (the model's size) in a ring, so
// every link of the ring carries 2 (N-1)/N of the model's bytes, and the
// step's communication takes as long as its slowest link needs for that.
//
// A ring's links are of three kinds: inside a node (NVLink when the GPUs
// have it, else PCIe), between nodes of one rack (the nodes' network), and
// between racks (the aggregation layer, usually oversubscribed). The ring
// visits the workers grouped by rack, then node, which is how topology-
// aware collectives order it; so a job spread over fewer racks and nodes
// crosses fewer slow links.
//
// Used to compare placements (claim C-TOPO: cross-rack traffic and
// communication time, topology-aware vs topology-blind). Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool {

struct LinkBandwidths {
  double nvlink_gbps = 450;      // per GPU, one direction (GB/s)
  double pcie_gbps = 25;         // GPUs of a node without NVLink
  double intra_rack_gbps = 50;   // per node, 400 Gb/s NIC
  double inter_rack_gbps = 12.5; // per node across racks (4:1 oversubscribed)
};

// Where one replica of the job runs: `gpus` workers on one node.
struct ReplicaSite {
  int32_t node = -1;
  std::string rack;
  int32_t gpus = 1;
  bool nvlink = false;  // the node's GPUs are joined by NVLink
};

struct CommEstimate {
  int32_t workers = 0;
  double bytes_per_link = 0;            // per step, each ring link
  double cross_node_bytes = 0;          // per step, summed over links between nodes
  double cross_rack_bytes = 0;          // per step, summed over links between racks
  double seconds_per_step = 0;          // the slowest link's time
  int32_t cross_node_links = 0, cross_rack_links = 0;
};

// The ring all-reduce of `model_bytes` over the workers of `sites`.
// One worker (or none) communicates nothing.
CommEstimate EstimateRingAllReduce(double model_bytes, std::vector<ReplicaSite> sites, const LinkBandwidths& bw);

}  // namespace gpupool
