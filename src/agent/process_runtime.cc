#include "src/agent/process_runtime.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "src/agent/executor.h"
#include "src/agent/proc_stat.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  in >> id;
  return id;
}

// Field 22 of /proc/PID/stat (clock ticks after boot); 0 when it is gone.
unsigned long long StartTime(int pid) {
  const std::optional<ProcStat> s = ReadProcStat(pid);
  return s ? s->start_time : 0;
}

class ProcessTask : public RunningTask {
 public:
  explicit ProcessTask(ChildProcess p) : proc_(std::move(p)) {}
  int pid() const override { return proc_.pid(); }
  std::optional<ExitStatus> Poll() override { return proc_.Poll(); }
  void Signal(int sig) override { proc_.Signal(sig); }
  void SignalLeader(int sig) override { proc_.SignalLeader(sig); }
  bool Alive() override { return !proc_.reaped() || proc_.GroupAlive(); }
  bool reaped() const override { return proc_.reaped(); }
  void Remove() override {}
  std::string id() const override { return "pid " + std::to_string(proc_.pid()); }

 private:
  ChildProcess proc_;
};

class ProcessRuntime : public TaskRuntime {
 public:
  ProcessRuntime(std::string work_dir, std::function<void(int)> log)
      : work_dir_(std::move(work_dir)), log_(std::move(log)) {}
  std::string name() const override { return "process"; }
  std::string isolation() const override { return "none"; }

  Result<std::unique_ptr<RunningTask>> Start(const TaskLaunch& l) override {
    // What only a container can give is refused rather than quietly dropped.
    if (l.network_isolated) {
      return FailedPrecondition("network: isolated needs the oci runtime; this node runs tasks as plain processes "
                                "(isolation: none)");
    }
    if (!l.image.empty() && l.image != "host") {
      return FailedPrecondition("image: " + l.image + " needs the oci runtime; this node runs tasks as plain "
                                "processes on its own system (isolation: none)");
    }
    std::error_code ec;
    fs::create_directories(l.scratch_dir, ec);
    LaunchSpec spec;
    spec.argv = l.argv;
    spec.env = l.env;
    spec.working_dir = l.working_dir.empty() ? l.task_dir : l.working_dir;
    spec.log_file = l.log_file;
    spec.unset = {"CUDA_VISIBLE_DEVICES", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"};
    GP_ASSIGN_OR_RETURN(auto p, ChildProcess::Spawn(spec));
    return std::unique_ptr<RunningTask>(new ProcessTask(std::move(p)));
  }

  std::map<TaskKey, std::unique_ptr<RunningTask>> Recover() override {
    KillLeftovers();
    return {};
  }

  void SaveState(const std::vector<const RunningTask*>& live) override {
    // Every group that may still live: its leader's pid and start time.
    std::string text = "boot " + BootId() + "\n";
    for (const RunningTask* t : live) text += std::to_string(t->pid()) + " " + std::to_string(StartTime(t->pid())) + "\n";
    if (text == saved_) return;
    const std::string file = work_dir_ + "/tasks.pids";
    std::ofstream(file + ".tmp", std::ios::trunc) << text;
    std::error_code ec;
    fs::rename(file + ".tmp", file, ec);
    saved_ = text;
  }

 private:
  void KillLeftovers() {
    std::ifstream in(work_dir_ + "/tasks.pids");
    std::string word, boot;
    if (!(in >> word >> boot) || word != "boot" || boot != BootId()) return;  // none, or from before a reboot
    std::vector<int> killed;
    int pid = 0;
    unsigned long long start = 0;
    while (in >> pid >> start) {
      if (pid <= 1) continue;
      // Ours: the same process (pid and start time), still leading its
      // session; or, its leader gone, a group that still uses its pid (the
      // kernel reuses no pid that is still a process group id).
      const unsigned long long now_start = StartTime(pid);
      const bool same_leader = now_start != 0 && now_start == start && ::getsid(pid) == pid;
      const bool orphan_group = now_start == 0 && ::kill(-pid, 0) == 0;
      if (same_leader || orphan_group) {
        ::kill(-pid, SIGKILL);
        killed.push_back(pid);
        log_(pid);
      }
    }
    // Their GPU memory is free only once they are gone.
    for (auto until = SteadyClock::now() + std::chrono::seconds(10); SteadyClock::now() < until;) {
      bool alive = false;
      for (int p : killed) alive = alive || ::kill(-p, 0) == 0;
      if (!alive) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string work_dir_;
  std::function<void(int)> log_;
  std::string saved_;
};

}  // namespace

std::unique_ptr<TaskRuntime> MakeProcessRuntime(std::string work_dir, std::function<void(int pid)> log) {
  return std::make_unique<ProcessRuntime>(std::move(work_dir), std::move(log));
}

}  // namespace gpupool
