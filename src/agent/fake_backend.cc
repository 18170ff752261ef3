#include "src/agent/fake_backend.h"

#include "src/agent/device_nodes.h"
#include "src/agent/mig_layout.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "src/base/sha256.h"
#include "src/base/time_text.h"
#include "src/model/cluster.h"
#include "src/model/gpu_catalog.h"
#include "src/model/mig.h"

namespace gpupool {

namespace {

std::string HashUuid(const std::string& prefix, const std::string& seed) {
  Sha256 hasher;
  hasher.Update(seed);
  const std::string h = hasher.HexDigest();
  return prefix + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
         h.substr(20, 12);
}

// ":mig" or ":mig=P@S/P@S" after a model: MIG mode and the instances there
// before the agent starts.
Status ParseMigSuffix(const std::string& whole, const std::string& suffix, GpuDevice& g) {
  const std::string what = "--fake-gpus: '" + whole + "': ";
  if (suffix != "mig" && suffix.rfind("mig=", 0) != 0) {
    return InvalidArgument(what + "unknown suffix ':" + suffix + "' (known: :mig, :mig=PROFILE@START/...)");
  }
  const MigTable* table = FindMigTable(g.model);
  if (!table) return InvalidArgument(what + g.model + " has no MIG mode");
  g.mig_enabled = true;
  if (suffix == "mig") return {};
  std::vector<std::pair<int, uint8_t>> layout;
  std::stringstream in(suffix.substr(4));
  for (std::string item; std::getline(in, item, '/');) {
    const size_t at = item.find('@');
    const int p = at == std::string::npos ? -1 : MigProfileIndex(*table, item.substr(0, at));
    const std::string start_text = at == std::string::npos ? "" : item.substr(at + 1);
    if (p < 0 || start_text.empty() || start_text.size() > 1 || !std::isdigit(static_cast<unsigned char>(start_text[0]))) {
      return InvalidArgument(what + "'" + item + "' is not PROFILE@START with a " + g.model + " profile");
    }
    const int start = start_text[0] - '0';
    layout.emplace_back(p, static_cast<uint8_t>(start));
    MigInstance m;
    m.profile = table->profiles[p].name;
    m.start = start;
    m.memory_mib = table->profiles[p].memory_mib;
    m.gi_id = static_cast<int>(g.mig.size()) + 1;
    m.ci_id = 0;
    m.uuid = HashUuid("MIG-", g.uuid + "/" + item);
    g.mig.push_back(std::move(m));
  }
  if (!IsValidLayout(*table, layout)) {
    return InvalidArgument(what + "not a layout the hardware accepts (documented starts, no overlap)");
  }
  std::sort(g.mig.begin(), g.mig.end(), [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  return {};
}

}  // namespace

Result<std::vector<GpuDevice>> ParseFakeGpus(const std::string& spec, const std::string& node) {
  std::vector<std::string> models;
  if (spec.empty()) return InvalidArgument("--fake-gpus: empty (expected e.g. 4xH100 or H100,H100)");
  if (const size_t x = spec.find('x'); x != std::string::npos && x > 0 &&
                                       std::all_of(spec.begin(), spec.begin() + x, ::isdigit)) {
    const int n = std::stoi(spec.substr(0, std::min<size_t>(x, 3)));
    if (x > 3 || n < 1 || n > kMaxGpusPerNode) {
      return InvalidArgument("--fake-gpus: '" + spec + "': the count must be 1 to " + std::to_string(kMaxGpusPerNode));
    }
    models.assign(n, spec.substr(x + 1));
  } else {
    std::stringstream in(spec);
    for (std::string m; std::getline(in, m, ',');) models.push_back(m);
    if (models.size() > static_cast<size_t>(kMaxGpusPerNode)) {
      return InvalidArgument("--fake-gpus: at most " + std::to_string(kMaxGpusPerNode) + " GPUs per node");
    }
  }
  std::vector<GpuDevice> gpus;
  std::string first_model;
  for (size_t i = 0; i < models.size(); ++i) {
    const size_t colon = models[i].find(':');
    const std::string model = models[i].substr(0, colon);
    const auto id = Catalog::Builtin().Find(model);
    if (!id) {
      return InvalidArgument("--fake-gpus: unknown GPU model '" + model + "' (known: " + Catalog::Builtin().Names() +
                             ")");
    }
    if (i == 0) first_model = model;
    if (model != first_model) {
      return InvalidArgument("--fake-gpus: a node holds GPUs of one model (got " + first_model + " and " + model + ")");
    }
    const GpuModel& m = Catalog::Builtin().Get(*id);
    GpuDevice g;
    g.index = static_cast<int>(i);
    g.uuid = HashUuid("GPU-", node + "/" + std::to_string(i));
    g.product = "fake " + m.name;
    g.model = m.name;
    g.memory_mib = m.memory_mib;
    if (colon != std::string::npos) GP_TRY(ParseMigSuffix(models[i], models[i].substr(colon + 1), g));
    gpus.push_back(std::move(g));
  }
  // NVLink-class models get an all-to-all NVLink domain, like an SXM board.
  for (GpuDevice& g : gpus) {
    const GpuModel& m = Catalog::Builtin().Get(*Catalog::Builtin().Find(g.model));
    if (m.interconnect_gbps < 300) continue;
    for (const GpuDevice& p : gpus) {
      if (p.index != g.index) g.nvlink_peers.push_back(p.index);
    }
  }
  return gpus;
}

std::map<int, double> ProcessGroupCpuSeconds(const std::set<int>& pgids) {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::map<int, double> total;
  for (int g : pgids) total[g] = 0;
  if (pgids.empty()) return total;
  DIR* d = opendir("/proc");
  if (!d) return total;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 2));
    std::string state;
    long long ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = 0;
    unsigned long long flags = 0, minflt = 0, cminflt = 0, majflt = 0, cmajflt = 0, utime = 0, stime = 0;
    long long cutime = 0, cstime = 0;
    fields >> state >> ppid >> pgrp >> session >> tty >> tpgid >> flags >> minflt >> cminflt >> majflt >> cmajflt >>
        utime >> stime >> cutime >> cstime;
    auto it = fields ? total.find(static_cast<int>(pgrp)) : total.end();
    if (it == total.end()) continue;
    it->second += static_cast<double>(utime + stime) / ticks;
    // The leader also carries its reaped children (a shell running many
    // short commands is busy too).
    if (std::atoll(e->d_name) == pgrp) it->second += static_cast<double>(cutime + cstime) / ticks;
  }
  closedir(d);
  return total;
}

FakeBackend::FakeBackend(std::vector<GpuDevice> gpus, std::string scrub_record_file, std::string dev_dir)
    : gpus_(std::move(gpus)), record_file_(std::move(scrub_record_file)), dev_dir_(std::move(dev_dir)),
      gpu_util_(gpus_.size(), 0), gpu_task_memory_mib_(gpus_.size(), 0), energy_mj_(gpus_.size(), 0),
      nvlink_kib_(gpus_.size(), 0), energy_at_(std::chrono::steady_clock::now()) {}

Status FakeBackend::MakeDeviceNodes() {
  if (dev_dir_.empty()) return {};
  return MakeFakeDeviceNodes(dev_dir_, static_cast<int>(gpus_.size()));
}

std::vector<DeviceNode> FakeBackend::GpuDeviceNodes(int gpu) {
  std::vector<DeviceNode> out;
  if (dev_dir_.empty()) return out;
  const std::string name = "nvidia" + std::to_string(gpu);
  if (auto d = StatDeviceNode(dev_dir_ + "/" + name, "/dev/" + name)) out.push_back(*d);
  return out;
}

Result<std::vector<DeviceNode>> FakeBackend::MigDeviceNodes(int gpu, const MigInstance& instance) {
  if (dev_dir_.empty()) return std::vector<DeviceNode>{};
  const int gi = instance.gi_id >= 0 ? instance.gi_id : instance.start + 1;
  const int ci = std::max(instance.ci_id, 0);
  if (auto ok = MakeFakeMigCapNodes(dev_dir_ + "/proc-caps", dev_dir_ + "/nvidia-caps", gpu, gi, ci); !ok) {
    return std::unexpected(ok.error());
  }
  return StatMigCapNodes(dev_dir_ + "/proc-caps", dev_dir_ + "/nvidia-caps", gpu, gi, ci);
}

std::vector<DeviceNode> FakeBackend::ControlDeviceNodes() {
  return dev_dir_.empty() ? std::vector<DeviceNode>{} : StatControlNodes(dev_dir_);
}

Result<std::vector<GpuSample>> FakeBackend::Sample() {
  std::vector<GpuSample> out;
  for (const GpuDevice& g : gpus_) {
    GpuSample s;
    s.index = g.index;
    s.util_pct = std::min(100.0, gpu_util_[g.index]);
    s.memory_total_mib = g.memory_mib;
    s.memory_used_mib = std::min(g.memory_mib, kFakeDriverOverheadMib + gpu_task_memory_mib_[g.index]);
    s.temperature_c = 30 + static_cast<int>(s.util_pct / 2);
    out.push_back(s);
  }
  return out;
}

std::map<std::string, TaskUsage> FakeBackend::SampleTasks(const std::vector<TaskProbe>& tasks) {
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, TaskUsage> out;
  std::map<std::string, CpuMark> marks;
  std::fill(gpu_util_.begin(), gpu_util_.end(), 0.0);
  std::fill(gpu_task_memory_mib_.begin(), gpu_task_memory_mib_.end(), 0);
  std::set<int> groups;
  for (const TaskProbe& t : tasks) groups.insert(t.pid);
  const std::map<int, double> cpu_of = ProcessGroupCpuSeconds(groups);
  for (const TaskProbe& t : tasks) {
    const double cpu = cpu_of.at(t.pid);
    auto it = marks_.find(t.key);
    TaskUsage u;
    if (it != marks_.end()) {
      const double wall = std::chrono::duration<double>(now - it->second.at).count();
      if (wall > 0) u.util_pct = std::clamp((cpu - it->second.cpu_seconds) / wall * 100.0, 0.0, 100.0);
    }
    marks[t.key] = CpuMark{cpu, now};
    for (int g : t.gpus) {
      if (g < 0 || g >= static_cast<int>(gpu_util_.size())) continue;
      gpu_util_[g] += u.util_pct;
      gpu_task_memory_mib_[g] += u.memory_mib / static_cast<int64_t>(t.gpus.size());
    }
    out[t.key] = u;
  }
  marks_.swap(marks);
  return out;
}

Result<ScrubResult> FakeBackend::Scrub(int gpu, const std::string& mig_uuid) {
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) return InvalidArgument("scrub: no GPU " + std::to_string(gpu));
  // As CUDA: a GPU in MIG mode is reached through its instances only.
  const GpuDevice& g = gpus_[gpu];
  if (mig_uuid.empty() && g.mig_enabled) {
    return FailedPrecondition("scrub: GPU " + std::to_string(gpu) + " is in MIG mode: its instances are scrubbed by UUID");
  }
  if (!mig_uuid.empty() &&
      std::none_of(g.mig.begin(), g.mig.end(), [&](const MigInstance& m) { return m.uuid == mig_uuid; })) {
    return NotFound("scrub: GPU " + std::to_string(gpu) + " has no MIG device " + mig_uuid);
  }
  ScrubRecord r{gpu, mig_uuid, ToMillis(WallNow())};
  scrubs_.push_back(r);
  if (!record_file_.empty()) {
    std::ofstream out(record_file_, std::ios::app);
    out << "{\"gpu\":" << gpu << ",\"mig_uuid\":\"" << mig_uuid << "\",\"unix_ms\":" << r.unix_ms << "}\n";
    if (!out) return IoError("scrub: cannot append to " + record_file_);
  }
  int64_t mib = g.memory_mib;
  for (const MigInstance& m : g.mig) {
    if (m.uuid == mig_uuid) mib = m.memory_mib;
  }
  return ScrubResult{mib << 20, 0.0};
}

Result<MigInstance> FakeBackend::CreateMigInstance(int gpu, const std::string& profile, int start) {
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) {
    return InvalidArgument("create MIG instance: no GPU " + std::to_string(gpu));
  }
  GpuDevice& g = gpus_[gpu];
  const std::string what = "fake GPU " + std::to_string(gpu) + ": cannot create a " + profile +
                           " GPU instance at memory slice " + std::to_string(start) + ": ";
  const MigTable* table = FindMigTable(g.model);
  if (!table || !g.mig_enabled) {
    return FailedPrecondition(what + "Not Supported (the GPU is not in MIG mode; --fake-gpus " + g.model +
                              ":mig puts it there)");
  }
  const int p = MigProfileIndex(*table, profile);
  std::vector<std::pair<int, int>> existing;
  for (const MigInstance& m : g.mig) existing.emplace_back(MigProfileIndex(*table, m.profile), m.start);
  const MigRefusal refusal = CheckMigPlacement(*table, existing, p, start);
  if (refusal == MigRefusal::kUnknownProfile || refusal == MigRefusal::kBadPlacement) {
    return InvalidArgument(what + "Invalid Argument (" + MigRefusalText(refusal) +
                           (p >= 0 ? "; it starts at " + MigStartsText(*table, p) : "") + ")");
  }
  if (refusal != MigRefusal::kNone) return FailedPrecondition(what + "Insufficient Resources (" + MigRefusalText(refusal) + ")");
  MigInstance m;
  m.profile = table->profiles[p].name;
  m.start = start;
  m.memory_mib = table->profiles[p].memory_mib;
  m.ci_id = 0;
  for (m.gi_id = 1; std::any_of(g.mig.begin(), g.mig.end(), [&](const MigInstance& x) { return x.gi_id == m.gi_id; });
       ++m.gi_id) {
  }
  m.uuid = HashUuid("MIG-", g.uuid + "/created/" + std::to_string(++mig_created_));
  if (!dev_dir_.empty()) {
    // As the driver makes them. Best effort (mknod needs root): a container
    // that needs them is refused by MigDeviceNodes, naming what is missing.
    (void)MakeFakeMigCapNodes(dev_dir_ + "/proc-caps", dev_dir_ + "/nvidia-caps", gpu, m.gi_id, m.ci_id);
  }
  g.mig.push_back(m);
  std::sort(g.mig.begin(), g.mig.end(), [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  mig_ops_.push_back("create " + std::to_string(gpu) + " " + m.profile + "@" + std::to_string(start) + " " + m.uuid);
  return m;
}

Status FakeBackend::DestroyMigInstance(int gpu, const MigInstance& instance) {
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) {
    return InvalidArgument("destroy MIG instance: no GPU " + std::to_string(gpu));
  }
  auto& list = gpus_[gpu].mig;
  auto it = std::find_if(list.begin(), list.end(), [&](const MigInstance& m) { return m.uuid == instance.uuid; });
  if (it == list.end()) return NotFound("fake GPU " + std::to_string(gpu) + " has no MIG instance " + instance.uuid);
  if (!dev_dir_.empty()) {
    for (int c : {it->ci_id, -1}) {
      (void)RemoveFakeMigCapNode(dev_dir_ + "/proc-caps", dev_dir_ + "/nvidia-caps", gpu, it->gi_id, c);
    }
  }
  mig_ops_.push_back("destroy " + std::to_string(gpu) + " " + it->profile + "@" + std::to_string(it->start) + " " +
                     it->uuid);
  list.erase(it);
  return {};
}

Result<std::vector<MigInstance>> FakeBackend::ListMigInstances(int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) return InvalidArgument("no GPU " + std::to_string(gpu));
  return gpus_[gpu].mig;
}

// Plausible readings of an SXM board: idle 70 W rising to 700 W at full
// utilization, NVLink traffic up to 10 GB/s where the GPU has peers, SM clock 345 MHz idle and 1980 MHz
// busy, memory clock 2619 MHz, 30 C plus half the utilization.
Result<std::vector<DcgmEntity>> FakeBackend::ReadDcgmFields() {
  using F = DcgmField;
  const auto now = std::chrono::steady_clock::now();
  const double dt_s = std::chrono::duration<double>(now - energy_at_).count();
  energy_at_ = now;
  auto samples = Sample();
  std::vector<DcgmEntity> out;
  for (const GpuDevice& g : gpus_) {
    const GpuSample& s = (*samples)[g.index];
    const double util = s.util_pct;
    const double power_w = 70 + (700 - 70) * util / 100;
    energy_mj_[g.index] += power_w * dt_s * 1000;
    if (!g.nvlink_peers.empty()) nvlink_kib_[g.index] += util * 1e5 * dt_s;  // up to 10 GB/s
    DcgmEntity e;
    e.gpu = g.index;
    e.uuid = g.uuid;
    e.model_name = g.product;
    e.device_minor = g.index;
    e.Set(F::kGpuUtil, std::round(util));
    e.Set(F::kMemCopyUtil, std::round(util / 3));
    e.Set(F::kSmActive, util / 100 * 0.9);
    e.Set(F::kFbUsed, static_cast<double>(s.memory_used_mib));
    e.Set(F::kFbFree, static_cast<double>(s.memory_total_mib - s.memory_used_mib));
    e.Set(F::kFbTotal, static_cast<double>(s.memory_total_mib));
    e.Set(F::kGpuTemp, s.temperature_c);
    e.Set(F::kMemoryTemp, s.temperature_c + 4);
    e.Set(F::kPowerUsage, power_w);
    e.Set(F::kTotalEnergyConsumption, std::floor(energy_mj_[g.index]));
    e.Set(F::kSmClock, util > 0 ? 1980 : 345);
    e.Set(F::kMemClock, 2619);
    e.Set(F::kEccSbeVolTotal, 0);
    e.Set(F::kEccDbeVolTotal, 0);
    e.Set(F::kXidErrors, 0);
    e.Set(F::kPcieTxBytes, std::round(util * 1e7));  // up to 1 GB/s
    e.Set(F::kPcieRxBytes, std::round(util * 2e7));
    e.Set(F::kPcieReplayCounter, 0);
    if (!g.nvlink_peers.empty()) e.Set(F::kNvlinkBandwidthTotal, std::floor(nvlink_kib_[g.index]));
    e.Set(F::kEncUtil, 0);
    e.Set(F::kDecUtil, 0);
    e.Set(F::kClockThrottleReasons, util > 0 ? 0 : 1);  // nvmlClocksEventReasonGpuIdle
    e.Set(F::kCorrectableRemappedRows, 0);
    e.Set(F::kUncorrectableRemappedRows, 0);
    e.Set(F::kRowRemapFailure, 0);
    out.push_back(e);
    for (const MigInstance& m : g.mig) {
      DcgmEntity x;
      x.gpu = g.index;
      x.uuid = g.uuid;
      x.model_name = g.product;
      x.device_minor = g.index;
      x.gpu_instance_id = m.gi_id >= 0 ? m.gi_id : m.start + 1;  // as MigDeviceNodes numbers them
      x.gpu_instance_profile = m.profile;
      x.mig_start = m.start;
      x.Set(F::kFbUsed, 0);
      x.Set(F::kFbFree, static_cast<double>(m.memory_mib));
      x.Set(F::kFbTotal, static_cast<double>(m.memory_mib));
      x.Set(F::kSmActive, 0);
      out.push_back(std::move(x));
    }
  }
  return out;
}

}  // namespace gpupool
