#include "src/agent/oci_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "src/agent/cgroup.h"
#include "src/agent/cuda_cap_env.h"
#include "src/agent/driver_files.h"
#include "src/agent/oci_spec.h"
#include "src/agent/proc_stat.h"
#include "src/base/sha256.h"
#include "src/base/subprocess.h"
#include "src/base/install_paths.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kRuncTimeout = std::chrono::seconds(30);
constexpr auto kStartPoll = std::chrono::milliseconds(2);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    if (!(out << text)) return false;
  }
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  return !ec;
}

// Owns `dir` by uid:uid with mode 0700; a tree owned by anyone else (an
// earlier release wrote it as the agent's user) is chowned whole.
Status OwnTree(const std::string& dir, int64_t uid) {
  if (auto ok = MakeDir(dir, 0700); !ok) return ok;
  if (uid <= 0) return {};
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return IoError(dir + ": " + std::strerror(errno));
  if (static_cast<int64_t>(st.st_uid) == uid) return {};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (::lchown(it->path().c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
      return IoError(it->path().string() + ": chown: " + std::strerror(errno));
    }
  }
  if (::chown(dir.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) != 0) {
    return IoError(dir + ": chown: " + std::strerror(errno));
  }
  return {};
}

// Every directory from `root` (exclusive) down to `dir` gets o+x (search,
// not read) so that the container's user can reach what is bound.
void OpenPath(const std::string& root, const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  const fs::path stop = fs::path(root).lexically_normal().parent_path();
  for (; !p.empty() && p != stop && p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) ::chmod(p.c_str(), (st.st_mode & 07777) | 0711);
  }
}

int64_t ParseInt(const std::string& s, int64_t fallback) {
  try {
    return std::stoll(s);
  } catch (...) {
    return fallback;
  }
}

class OciTask : public RunningTask {
 public:
  OciTask(const OciRuntimeOptions& o, std::string id, std::string bundle, std::string cgroup, int init_pid,
          int shim_pid)
      : options_(o), id_(std::move(id)), bundle_(std::move(bundle)), cgroup_(std::move(cgroup)),
        init_pid_(init_pid), shim_pid_(shim_pid) {}

  // The task's first process once known (per-task usage reads its group),
  // else the container's init.
  int pid() const override { return leader_ > 0 ? leader_ : init_pid_; }
  std::string id() const override { return id_; }
  bool reaped() const override { return reaped_; }

  std::optional<ExitStatus> Poll() override {
    ReapShim();
    if (reaped_) return std::nullopt;
    Leader();
    const std::string text = ReadFile(bundle_ + "/exit");
    if (text.empty()) {
      if (shim_pid_ != 0 || InitAlive()) return std::nullopt;
      // Adopted, and the shim is gone without a word (it was killed): the
      // exit status is lost; the task counts as failed.
      if (CgroupProcs(cgroup_).empty()) return Finish(ExitStatus{-1, 0, CgroupOomKills(cgroup_) > 0});
      return std::nullopt;
    }
    std::istringstream in(text);
    int code = -1, sig = 0;
    in >> code >> sig;
    ExitStatus s{code, sig, CgroupOomKills(cgroup_) > 0};
    // The init reports a task killed by signal N as 128 + N (as a shell).
    if (s.signal == 0 && s.exit_code > 128 && s.exit_code < 128 + 65) {
      s.signal = s.exit_code - 128;
      s.exit_code = 0;
    }
    return Finish(s);
  }

  void Signal(int sig) override {
    if (sig == SIGKILL) {
      if (init_pid_ > 0) ::kill(init_pid_, SIGKILL);  // the kernel ends its pid namespace
      for (int p : CgroupProcs(cgroup_)) ::kill(p, SIGKILL);
      return;
    }
    const int leader = Leader();
    if (leader > 0) {
      ::kill(-leader, sig);
    } else if (init_pid_ > 0) {
      ::kill(init_pid_, sig);  // the init forwards it to the task's group
    }
  }

  void SignalLeader(int sig) override {
    const int leader = Leader();
    if (leader > 0) ::kill(leader, sig);
  }

  bool Alive() override { return InitAlive() || !CgroupProcs(cgroup_).empty(); }

  void Remove() override {
    if (removed_) return;
    const CommandOutcome o =
        RunProgram({options_.runc, "--root", options_.work_dir + "/runc", "delete", "--force", id_}, {}, kRuncTimeout);
    (void)o;  // "container does not exist" when it was never created or already deleted
    ReapShim();
    if (shim_pid_ != 0) ::kill(shim_pid_, SIGKILL);
    ReapShim();
    std::error_code ec;
    fs::remove_all(bundle_, ec);
    removed_ = true;
  }

 private:
  std::optional<ExitStatus> Finish(const ExitStatus& s) {
    reaped_ = true;
    return s;
  }

  void ReapShim() {
    if (shim_pid_ <= 0) return;
    int status = 0;
    if (::waitpid(shim_pid_, &status, WNOHANG) != 0) shim_pid_ = 0;
  }

  bool InitAlive() const {
    if (init_pid_ <= 0) return false;
    // Alive and still the container's init: its parent is the shim or, once
    // the shim is gone, whoever adopted it; a zombie counts as gone.
    const std::optional<ProcStat> s = ReadProcStat(init_pid_);
    return s && s->state != 'Z';
  }

  // The init's child: the task's first process, leading its process group.
  int Leader() {
    if (leader_ > 0 && ::kill(leader_, 0) == 0) return leader_;
    leader_ = 0;
    if (init_pid_ <= 0) return 0;
    const std::string kids =
        ReadFile("/proc/" + std::to_string(init_pid_) + "/task/" + std::to_string(init_pid_) + "/children");
    std::istringstream in(kids);
    int first = 0;
    if (in >> first) leader_ = first;
    return leader_;
  }

  const OciRuntimeOptions& options_;
  std::string id_, bundle_, cgroup_;
  int init_pid_ = 0;
  int shim_pid_ = 0;  // our child while we started it; 0 once reaped or when adopted
  int leader_ = 0;
  bool reaped_ = false, removed_ = false;
};

class OciRuntime : public TaskRuntime {
 public:
  explicit OciRuntime(OciRuntimeOptions o) : options_(std::move(o)) {
    Sha256 h;
    h.Update(options_.work_dir);
    cgroup_parent_ = "/gpupool/" + h.HexDigest().substr(0, 12);
    host_root_ = ReadHostRoot();
    driver_files_ = FindDriverFiles();
    cuda_cap_ = FindCudaCapLibrary();
  }

  std::string name() const override { return "oci"; }
  std::string isolation() const override { return "container"; }

  Result<std::unique_ptr<RunningTask>> Start(const TaskLaunch& l) override {
    GP_ASSIGN_OR_RETURN(auto image, ResolveImage(l.image, options_.work_dir));
    const std::string id = ContainerId(l.job, l.replica, l.attempt);
    const std::string bundle = options_.work_dir + "/containers/" + id;
    Discard(id, bundle);  // a leftover of an earlier try of the same attempt
    GP_TRY(PrepareDirs(l, bundle));
    OciSpecInputs in;
    in.host_image = image.host;
    in.rootfs = image.host ? bundle + "/rootfs" : image.rootfs;
    in.host_root = host_root_;
    in.init_binary = options_.shim;
    in.cgroups_path = cgroup_parent_ + "/" + id;
    in.cuda_cap_library = cuda_cap_;
    if (image.host) {
      GP_TRY(MakeHostRootfs(in.rootfs));
    }
    GP_TRY(MakeMountPoints(in.rootfs, !cuda_cap_.empty()));
    if (!image.host) in.driver_files = MakeFileMountPoints(in.rootfs, driver_files_);
    if (MakeDirMountPoints(in.rootfs, l.binds).size() != l.binds.size()) {
      return FailedPrecondition("image: cannot make the mount points of the bound directories (MPS, GPU contention) in " + in.rootfs);
    }
    if (!WriteFile(bundle + "/config.json", BuildOciSpec(l, in).dump(1)) ||
        !WriteFile(bundle + "/meta.json", json{{"job", l.job}, {"replica", l.replica}, {"attempt", l.attempt},
                                                {"tenant", l.tenant}, {"cgroup", in.cgroups_path}}
                                              .dump())) {
      return IoError("cannot write the bundle " + bundle);
    }
    GP_ASSIGN_OR_RETURN(auto shim, SpawnShim(id, bundle, l.log_file));
    auto init = WaitStarted(bundle, shim);
    if (!init) {
      OciTask failed(options_, id, bundle, in.cgroups_path, 0, shim);
      failed.Remove();
      return std::unexpected(init.error());
    }
    return std::unique_ptr<RunningTask>(new OciTask(options_, id, bundle, in.cgroups_path, *init, shim));
  }

  std::map<TaskKey, std::unique_ptr<RunningTask>> Recover() override {
    std::map<TaskKey, std::unique_ptr<RunningTask>> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(options_.work_dir + "/containers", ec)) {
      const std::string bundle = e.path().string(), id = e.path().filename().string();
      const json meta = json::parse(ReadFile(bundle + "/meta.json"), nullptr, false);
      const std::string started = ReadFile(bundle + "/started");
      if (!meta.is_object() || started.empty() || !meta.contains("job") || !meta.contains("cgroup")) {
        Discard(id, bundle);  // it never ran: nothing to keep
        continue;
      }
      const TaskKey key{meta.value("job", JobId{-1}), meta.value("replica", 0), meta.value("attempt", 0)};
      const int init = static_cast<int>(ParseInt(started, 0));
      out[key] = std::make_unique<OciTask>(options_, id, bundle, meta.value("cgroup", ""), init, 0);
    }
    return out;
  }

  void SaveState(const std::vector<const RunningTask*>&) override {}  // the bundles are the state

 private:
  void Discard(const std::string& id, const std::string& bundle) {
    if (!fs::exists(bundle)) return;
    OciTask t(options_, id, bundle, "", 0, 0);
    t.Remove();
  }

  Status PrepareDirs(const TaskLaunch& l, const std::string& bundle) {
    if (auto ok = MakeDir(bundle, 0711); !ok) return ok;
    if (auto ok = OwnTree(l.checkpoint_dir, l.uid_count > 0 ? l.uid : 0); !ok) return ok;
    if (auto ok = OwnTree(l.scratch_dir, l.uid_count > 0 ? l.uid : 0); !ok) return ok;
    if (auto ok = MakeDir(l.task_dir, 0755); !ok) return ok;
    for (const std::string& d : {l.checkpoint_dir, l.scratch_dir, l.task_dir, bundle}) {
      OpenPath(options_.work_dir, fs::path(d).parent_path().string());
    }
    OpenPath("/", fs::path(options_.work_dir).string());
    for (const std::string& d : {l.checkpoint_dir}) OpenPath("/", fs::path(d).parent_path().string());
    return {};
  }

  Status MakeHostRootfs(const std::string& rootfs) {
    if (auto ok = MakeDir(rootfs, 0755); !ok) return ok;
    std::error_code ec;
    for (const HostRootEntry& e : host_root_) {
      if (!e.target.empty()) {
        fs::create_symlink(e.target, rootfs + "/" + e.name, ec);
      } else {
        fs::create_directories(rootfs + "/" + e.name, ec);
      }
    }
    for (const char* d : {"usr", "etc"}) fs::create_directories(rootfs + "/" + d, ec);
    return {};
  }

  // The container's root user (a tenant's unprivileged uid) cannot create
  // mount points in a root file system owned by the node's root, so the
  // agent makes those of its own mounts beforehand (once per rootfs).
  static Status MakeMountPoints(const std::string& rootfs, bool cuda_cap) {
    std::error_code ec;
    for (const char* d : {"proc", "dev", "sys", "tmp", "gpupool/checkpoint", "gpupool/scratch", "gpupool/task",
                          "gpupool/lib"}) {
      fs::create_directories(rootfs + "/" + d, ec);
      if (ec) return IoError("image: cannot make the mount point /" + std::string(d) + " in " + rootfs + ": " +
                             ec.message());
    }
    std::vector<std::string> files = {rootfs + kContainerInit};
    if (cuda_cap) files.push_back(rootfs + kContainerCudaCap);
    for (const std::string& file : files) {
      if (fs::exists(file, ec)) continue;
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
      if (fd < 0) return IoError("image: cannot make the mount point " + file + ": " + std::strerror(errno));
      ::close(fd);
    }
    return {};
  }

  Result<int> SpawnShim(const std::string& id, const std::string& bundle, const std::string& log_file) {
    const int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (log < 0) return IoError("task log " + log_file + ": " + std::strerror(errno));
    std::vector<std::string> args = {options_.shim, "supervise", "--runtime", options_.runc, "--root",
                                     options_.work_dir + "/runc", "--bundle", bundle, "--id", id};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    char* envp[] = {path.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, log, 1);
    posix_spawn_file_actions_adddup2(&actions, log, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(log);
    if (rc != 0) return FailedPrecondition("runtime: cannot start the shim " + options_.shim + ": " + std::strerror(rc));
    return static_cast<int>(pid);
  }

  // Waits until the shim says the container runs (its init pid) or failed.
  Result<int> WaitStarted(const std::string& bundle, int shim) {
    const auto deadline = SteadyClock::now() + options_.start_timeout;
    for (;;) {
      const std::string started = ReadFile(bundle + "/started");
      if (!started.empty()) return static_cast<int>(ParseInt(started, 0));
      if (!ReadFile(bundle + "/exit").empty()) {
        std::string reason = ReadFile(bundle + "/error");
        while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
        return FailedPrecondition("runtime: " + options_.runc + " could not start the container: " +
                                  (reason.empty() ? "no reason given" : reason));
      }
      int status = 0;
      if (::waitpid(shim, &status, WNOHANG) == shim) {
        if (!ReadFile(bundle + "/started").empty()) continue;
        if (!ReadFile(bundle + "/exit").empty()) continue;
        return FailedPrecondition("runtime: the shim " + options_.shim + " ended before the container started (status " +
                                  std::to_string(status) + ")");
      }
      if (SteadyClock::now() >= deadline) {
        ::kill(shim, SIGKILL);
        return FailedPrecondition("runtime: the container did not start within " +
                                  std::to_string(options_.start_timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(kStartPoll);
    }
  }

  OciRuntimeOptions options_;
  std::string cgroup_parent_;
  std::vector<HostRootEntry> host_root_;
  std::vector<BindMount> driver_files_;  // the node's NVIDIA user-space files, found once
  std::string cuda_cap_;                 // libgpupool-cuda-cap.so beside gpupool; empty: none
};

}  // namespace

std::string ContainerId(JobId job, int32_t replica, int32_t attempt) {
  return "gp-" + std::to_string(job) + "-" + std::to_string(replica) + "-" + std::to_string(attempt);
}

std::string FindOnPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::istringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin"}) {  // root's PATH may lack sbin
    const std::string candidate = std::string(dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string FindShim() { return FindHelper("gpupool-shim", true); }

std::unique_ptr<TaskRuntime> MakeOciRuntime(OciRuntimeOptions options) {
  return std::make_unique<OciRuntime>(std::move(options));
}

}  // namespace gpupool

namespace gpupool {

Status ProbeOciRuntime(const OciRuntimeOptions& options) {
  if (options.runc.empty()) return NotFound("no OCI runtime: runc is not on the PATH (Debian package runc)");
  if (options.shim.empty()) return NotFound("gpupool-shim is not installed beside the gpupool binary");
  OciRuntimeOptions o = options;
  o.work_dir = options.work_dir + "/probe";
  std::error_code ec;
  std::filesystem::remove_all(o.work_dir, ec);
  TaskLaunch l;
  l.job = 0;
  l.argv = {"true"};
  l.log_file = o.work_dir + "/probe.log";
  l.checkpoint_dir = o.work_dir + "/checkpoint";
  l.scratch_dir = o.work_dir + "/scratch";
  l.task_dir = o.work_dir + "/task";
  l.image = "host";
  l.uid = kProbeUid;
  l.uid_count = 65536;
  l.memory_mib = 64;
  l.pids_limit = 16;
  std::filesystem::create_directories(o.work_dir, ec);
  auto runtime = MakeOciRuntime(o);
  GP_ASSIGN_OR_RETURN(auto task, (*runtime).Start(l));
  std::optional<ExitStatus> exit;
  for (int i = 0; i < 500 && !exit; ++i) {
    exit = task->Poll();
    if (!exit) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  task->Signal(SIGKILL);
  task->Remove();
  std::string log;
  {
    std::ifstream in(l.log_file);
    std::getline(in, log);
  }
  std::filesystem::remove_all(o.work_dir, ec);
  if (!exit) return FailedPrecondition("runtime: a probe container (`true`) did not end within 5 s");
  if (!exit->ok()) {
    return FailedPrecondition("runtime: a probe container (`true`) failed: exit " + std::to_string(exit->exit_code) +
                              ", signal " + std::to_string(exit->signal) + (log.empty() ? "" : ": " + log));
  }
  return {};
}

}  // namespace gpupool
