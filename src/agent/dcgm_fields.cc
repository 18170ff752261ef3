#include "src/agent/dcgm_fields.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace gpupool {
namespace {

using F = DcgmField;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Names, types and help as the DCGM exporter's etc/default-counters.csv and
// dcp-metrics-included.csv give them (types and units are DCGM's: memory in
// MiB, power in W, energy in mJ, SM activity a ratio 0..1).
constexpr std::array<DcgmFieldInfo, kDcgmFieldCount> kTable = {{
    {F::kGpuUtil, "DCGM_FI_DEV_GPU_UTIL", false, "%", "GPU utilization (in %).", false},
    {F::kMemCopyUtil, "DCGM_FI_DEV_MEM_COPY_UTIL", false, "%", "Memory utilization (in %).", false},
    {F::kSmActive, "DCGM_FI_PROF_SM_ACTIVE", false, "ratio",
     "The ratio of cycles an SM has at least 1 warp assigned (0 to 1).", true},
    {F::kFbUsed, "DCGM_FI_DEV_FB_USED", false, "MiB", "Framebuffer memory used (in MiB).", true},
    {F::kFbFree, "DCGM_FI_DEV_FB_FREE", false, "MiB", "Framebuffer memory free (in MiB).", true},
    {F::kFbTotal, "DCGM_FI_DEV_FB_TOTAL", false, "MiB", "Framebuffer memory total (in MiB).", true},
    {F::kGpuTemp, "DCGM_FI_DEV_GPU_TEMP", false, "C", "GPU temperature (in C).", false},
    {F::kMemoryTemp, "DCGM_FI_DEV_MEMORY_TEMP", false, "C", "Memory temperature (in C).", false},
    {F::kPowerUsage, "DCGM_FI_DEV_POWER_USAGE", false, "W", "Power draw (in W).", false},
    {F::kTotalEnergyConsumption, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", true, "mJ",
     "Total energy consumption since boot (in mJ).", false},
    {F::kSmClock, "DCGM_FI_DEV_SM_CLOCK", false, "MHz", "SM clock frequency (in MHz).", false},
    {F::kMemClock, "DCGM_FI_DEV_MEM_CLOCK", false, "MHz", "Memory clock frequency (in MHz).", false},
    {F::kEccSbeVolTotal, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", true, "count",
     "Total number of single-bit volatile ECC errors.", false},
    {F::kEccDbeVolTotal, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", true, "count",
     "Total number of double-bit volatile ECC errors.", false},
    {F::kXidErrors, "DCGM_FI_DEV_XID_ERRORS", false, "xid", "Value of the last XID error encountered.", false},
    {F::kPcieTxBytes, "DCGM_FI_PROF_PCIE_TX_BYTES", false, "B/s",
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes "
     "per second.",
     false},
    {F::kPcieRxBytes, "DCGM_FI_PROF_PCIE_RX_BYTES", false, "B/s",
     "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per "
     "second.",
     false},
    {F::kPcieReplayCounter, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", true, "count", "Total number of PCIe retries.", false},
    {F::kNvlinkBandwidthTotal, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", true, "KiB",
     "Total number of NVLink bandwidth counters for all lanes (data sent and received, in KiB).", false},
    {F::kEncUtil, "DCGM_FI_DEV_ENC_UTIL", false, "%", "Encoder utilization (in %).", false},
    {F::kDecUtil, "DCGM_FI_DEV_DEC_UTIL", false, "%", "Decoder utilization (in %).", false},
    {F::kClockThrottleReasons, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", false, "bitmask",
     "Current clock throttle reasons (a bitmask of NVML's clocks event reasons).", false},
    {F::kFanSpeed, "DCGM_FI_DEV_FAN_SPEED", false, "%", "Fan speed (in %, of the maximum).", false},
    {F::kCorrectableRemappedRows, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", true, "count",
     "Number of remapped rows for correctable errors", false},
    {F::kUncorrectableRemappedRows, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", true, "count",
     "Number of remapped rows for uncorrectable errors", false},
    {F::kRowRemapFailure, "DCGM_FI_DEV_ROW_REMAP_FAILURE", false, "count", "Whether remapping of rows has failed",
     false},
}};

constexpr bool TableInOrder() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].field) != i) return false;
  }
  return true;
}
static_assert(TableInOrder(), "kTable must list the fields in DcgmField order");

std::vector<ClientMetric::Label> BaseLabels(const DcgmEntity& e, const DcgmNodeLabels& node) {
  std::vector<ClientMetric::Label> l{{"gpu", std::to_string(e.gpu)},
                                     {"UUID", e.uuid},
                                     {"device", "nvidia" + std::to_string(e.device_minor >= 0 ? e.device_minor : e.gpu)},
                                     {"modelName", e.model_name},
                                     {"Hostname", node.hostname}};
  if (e.is_instance()) {
    l.push_back({"GPU_I_PROFILE", e.gpu_instance_profile});
    l.push_back({"GPU_I_ID", std::to_string(e.gpu_instance_id)});
  }
  if (!node.pool.empty()) l.push_back({"pool", node.pool});
  return l;
}

// The tasks whose series `e` carries: those on the instance, or on the GPU
// for a GPU not in MIG mode (one whose tasks sit on instances has none).
std::vector<const DcgmTaskLabels*> TasksOf(const DcgmEntity& e, bool gpu_has_instances, const DcgmNodeLabels& node) {
  std::vector<const DcgmTaskLabels*> out;
  for (const DcgmTaskLabels& t : node.tasks) {
    if (out.size() >= kMaxDcgmTasksPerEntity) break;
    if (t.gpu != e.gpu) continue;
    const bool on = e.is_instance() ? (e.mig_start >= 0 && t.mig_start == e.mig_start)
                                    : (!gpu_has_instances && t.mig_start < 0);
    if (on) out.push_back(&t);
  }
  return out;
}

}  // namespace

const std::array<DcgmFieldInfo, kDcgmFieldCount>& DcgmFieldTable() { return kTable; }
const DcgmFieldInfo& DcgmFieldInfoOf(DcgmField f) { return kTable[static_cast<size_t>(f)]; }

std::string RenderDcgmMetrics(const std::vector<DcgmEntity>& entities, const DcgmNodeLabels& labels) {
  std::vector<MetricFamily> families(kTable.size());
  for (size_t i = 0; i < kTable.size(); ++i) {
    families[i].name = kTable[i].name;
    families[i].help = kTable[i].help;
    families[i].type = kTable[i].counter ? MetricType::Counter : MetricType::Gauge;
  }
  std::map<int, bool> has_instances;  // by GPU index
  for (const DcgmEntity& e : entities) has_instances[e.gpu] = has_instances[e.gpu] || e.is_instance();
  const size_t n = std::min(entities.size(), kMaxDcgmEntities);
  for (size_t k = 0; k < n; ++k) {
    const DcgmEntity& e = entities[k];
    const auto base = BaseLabels(e, labels);
    const auto tasks = TasksOf(e, has_instances[e.gpu], labels);
    for (size_t i = 0; i < kTable.size(); ++i) {
      const std::optional<double> v = e.values[i];
      if (!v) continue;
      // On a GPU in MIG mode, memory and SM activity are the instances'.
      if (!e.is_instance() && kTable[i].per_instance && has_instances[e.gpu]) continue;
      auto add = [&](std::vector<ClientMetric::Label> l) {
        ClientMetric m;
        m.label = std::move(l);
        if (kTable[i].counter) {
          m.counter.value = *v;
        } else {
          m.gauge.value = *v;
        }
        families[i].metric.push_back(std::move(m));
      };
      if (tasks.empty()) add(base);
      for (const DcgmTaskLabels* t : tasks) {
        auto l = base;
        l.push_back({"tenant", t->tenant});
        l.push_back({"job", t->job});
        add(std::move(l));
      }
    }
  }
  std::erase_if(families, [](const MetricFamily& f) { return f.metric.empty(); });
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

bool IsApplicationXid(uint64_t xid) {
  switch (xid) {
    case 13: case 31: case 43: case 45: case 68: case 109: return true;
    default: return false;
  }
}

std::string XidText(uint64_t xid) {
  const char* what = nullptr;
  switch (xid) {
    case 13: what = "graphics engine exception"; break;
    case 31: what = "GPU memory page fault"; break;
    case 43: what = "GPU stopped processing"; break;
    case 45: what = "preemptive cleanup"; break;
    case 48: what = "double-bit ECC error"; break;
    case 61: case 62: what = "internal micro-controller error"; break;
    case 63: what = "ECC page retirement or row remapping recorded"; break;
    case 64: what = "ECC page retirement or row remapping failed"; break;
    case 68: what = "video processor exception"; break;
    case 74: what = "NVLink error"; break;
    case 79: what = "GPU has fallen off the bus"; break;
    case 92: what = "high single-bit ECC error rate"; break;
    case 94: what = "contained ECC error"; break;
    case 95: what = "uncontained ECC error"; break;
    case 109: what = "context switch timeout"; break;
    case 119: case 120: what = "GSP error"; break;
    case 999: what = "unknown XID"; break;
    default: break;
  }
  std::string s = "XID " + std::to_string(xid);
  if (what) s += std::string(" (") + what + ")";
  return s;
}

}  // namespace gpupool
