#include "src/agent/mps_daemons.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "src/agent/proc_stat.h"
#include "src/base/subprocess.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(10);
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct ProcState {
  bool alive = false;  // running (a zombie is not: whoever adopted it may never reap it)
  unsigned long long start_time = 0;
};

ProcState StatOf(int pid) {
  const std::optional<ProcStat> s = ReadProcStat(pid);
  return s ? ProcState{s->alive(), s->start_time} : ProcState{};
}

bool Alive(int pid, unsigned long long start_time) {
  const ProcState s = StatOf(pid);
  return s.alive && (start_time == 0 || s.start_time == start_time);
}

int ReadPid(const std::string& file) {
  std::ifstream in(file);
  int pid = 0;
  return in >> pid ? pid : 0;
}

// Every directory above `dir` gets o+x (search, not read): the daemon's
// unprivileged owner must reach its directories under the work directory.
void OpenPath(const std::string& dir) {
  for (fs::path p = fs::path(dir).parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) ::chmod(p.c_str(), (st.st_mode & 07777) | 0711);
  }
}

// `dir` owned by uid:gid, mode 0700; emptied when someone else owned it
// (another tenant's sockets and logs are not this one's to see).
Status OwnDir(const std::string& dir, uid_t uid, gid_t gid) {
  struct stat st {};
  std::error_code ec;
  if (::lstat(dir.c_str(), &st) == 0 && (st.st_uid != uid || !S_ISDIR(st.st_mode))) fs::remove_all(dir, ec);
  if (ec) return IoError(dir + ": " + ec.message());
  GP_TRY(MakeDir(dir, 0700));
  if (::chown(dir.c_str(), uid, gid) != 0) return IoError(dir + ": chown: " + std::strerror(errno));
  return {};
}

std::string Path() {
  const char* p = std::getenv("PATH");
  return p && *p ? p : kDefaultPath;
}

}  // namespace

MpsDaemons::MpsDaemons(MpsDaemonsOptions options) : options_(std::move(options)) {}

MpsDirs MpsDaemons::Dirs(int gpu) const {
  const std::string base = options_.work_dir + "/mps/gpu" + std::to_string(gpu);
  return {base + "/pipe", base + "/log"};
}

void MpsDaemons::Log(const std::string& action, std::vector<std::pair<std::string, std::string>> fields) const {
  if (options_.log) options_.log(action, std::move(fields));
}

Status MpsDaemons::Ensure(int gpu, const std::string& uuid, MpsOwner owner, MpsLimits limits) {
  if (!available()) return NotFound("no MPS control daemon on this node (" + std::string(kMpsControlBinary) + ")");
  auto it = daemons_.find(gpu);
  if (it != daemons_.end() && !(it->second.owner == owner)) {
    return FailedPrecondition("GPU " + std::to_string(gpu) + ": its MPS control daemon serves uid " +
                              std::to_string(it->second.owner.uid) + ", whose tasks still run there: an MPS GPU " +
                              "serves one tenant at a time");
  }
  if (it != daemons_.end() && Up(gpu)) return {};  // a later task: the daemon and its defaults stay
  Daemon fresh;
  fresh.uuid = uuid;
  fresh.owner = owner;
  fresh.limits = limits;
  Daemon& d = it != daemons_.end() ? it->second : fresh;
  if (it != daemons_.end()) {  // dead or given up: a new client needs it now
    d.failure.clear();
    d.restarts = 0;
  }
  GP_TRY(Start(gpu, d));
  if (it == daemons_.end()) daemons_.emplace(gpu, std::move(fresh));
  return {};
}

Status MpsDaemons::PrepareDirs(int gpu, const MpsOwner& owner) const {
  const MpsDirs dirs = Dirs(gpu);
  const std::string gpu_dir = fs::path(dirs.pipe).parent_path().string();
  GP_TRY(MakeDir(options_.work_dir + "/mps", 0711));
  GP_TRY(MakeDir(gpu_dir, 0711));
  if (owner.uid >= 0) OpenPath(gpu_dir);
  const uid_t uid = owner.uid >= 0 ? static_cast<uid_t>(owner.uid) : ::geteuid();
  const gid_t gid = owner.gid >= 0 ? static_cast<gid_t>(owner.gid) : ::getegid();
  GP_TRY(OwnDir(dirs.pipe, uid, gid));
  GP_TRY(OwnDir(dirs.log, uid, gid));
  return {};
}

// Starts the daemon and sets its defaults; on failure nothing of it runs.
Status MpsDaemons::Start(int gpu, Daemon& d) {
  const std::string g = std::to_string(gpu);
  const MpsDirs dirs = Dirs(gpu);
  Stop(gpu, d);  // a leftover (a predecessor's, or one that lost its pid file)
  GP_TRY(PrepareDirs(gpu, d.owner));
  std::error_code ec;
  fs::remove(dirs.pipe + "/" + kMpsPidFile, ec);  // a dead one's: WaitUp waits for the new one's
  std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", Path()}, {"CUDA_VISIBLE_DEVICES", d.uuid}, {"CUDA_MPS_PIPE_DIRECTORY", dirs.pipe},
      {"CUDA_MPS_LOG_DIRECTORY", dirs.log}};
  env.insert(env.end(), options_.env.begin(), options_.env.end());
  ProgramOptions as;
  as.inherit_env = false;
  as.uid = d.owner.uid;
  as.gid = d.owner.gid;
  const CommandOutcome started = RunProgram({options_.control, "-d"}, env, options_.command_timeout, as);
  if (!started.ok) return FailedPrecondition("GPU " + g + ": " + options_.control + " -d: " + started.Describe());
  GP_TRY(WaitUp(gpu, d));
  std::vector<std::string> commands = {
      "get_server_list",  // it answers
      "set_default_active_thread_percentage " + std::to_string(std::clamp(d.limits.active_thread_percentage, 1, 100))};
  if (d.limits.pinned_mem_mib > 0) {
    // Device 0: CUDA_VISIBLE_DEVICES leaves the daemon this GPU alone.
    commands.push_back("set_default_device_pinned_mem_limit 0 " + std::to_string(d.limits.pinned_mem_mib) + "M");
  }
  for (const std::string& c : commands) {
    if (auto ok = Command(gpu, d.owner, c); !ok) {
      Stop(gpu, d);
      return std::unexpected(ok.error());
    }
  }
  d.dead = false;
  d.up_since = SteadyClock::now();
  SaveState(gpu, d);
  Log("mps_start", {{"gpu", g}, {"uuid", d.uuid}, {"pid", std::to_string(d.pid)}, {"uid", std::to_string(d.owner.uid)},
                    {"active_thread_percentage", std::to_string(d.limits.active_thread_percentage)},
                    {"pinned_mem_mib", std::to_string(d.limits.pinned_mem_mib)}, {"pipe", dirs.pipe}});
  return {};
}

Status MpsDaemons::WaitUp(int gpu, Daemon& d) const {
  const std::string pid_file = Dirs(gpu).pipe + "/" + kMpsPidFile;
  const auto deadline = SteadyClock::now() + options_.start_timeout;
  for (;;) {
    const int pid = ReadPid(pid_file);
    const ProcState s = StatOf(pid);
    if (s.alive) {
      d.pid = pid;
      d.start_time = s.start_time;
      return {};
    }
    if (SteadyClock::now() >= deadline) {
      return FailedPrecondition("GPU " + std::to_string(gpu) + ": the MPS control daemon did not write a live pid to " +
                                pid_file + " within " + std::to_string(options_.start_timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

// One command on the control client's stdin, as the daemon's owner (the
// daemon takes commands from its own user); its output.
Result<std::string> MpsDaemons::Command(int gpu, const MpsOwner& owner, const std::string& command) const {
  const MpsDirs dirs = Dirs(gpu);
  std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", Path()}, {"CUDA_MPS_PIPE_DIRECTORY", dirs.pipe}, {"CUDA_MPS_LOG_DIRECTORY", dirs.log}};
  env.insert(env.end(), options_.env.begin(), options_.env.end());
  ProgramOptions as;
  as.input = command + "\n";
  as.inherit_env = false;
  as.uid = owner.uid;
  as.gid = owner.gid;
  const CommandOutcome o = RunProgram({options_.control}, env, options_.command_timeout, as);
  if (!o.ok) {
    return FailedPrecondition("GPU " + std::to_string(gpu) + ": MPS control `" + command + "`: " + o.Describe());
  }
  return o.output_tail;
}

// `quit`, waits for the daemon to go (bounded), SIGKILL past that. A live
// pid in the pid file that is not d's (a leftover) is stopped too, as the
// owner of its pipe directory.
void MpsDaemons::Stop(int gpu, Daemon& d) {
  const std::string pipe = Dirs(gpu).pipe;
  MpsOwner owner = d.owner;
  if (!Alive(d.pid, d.start_time)) {
    d.pid = ReadPid(pipe + "/" + kMpsPidFile);
    d.start_time = 0;
    if (!Alive(d.pid, 0)) return;
    struct stat st {};
    owner = ::stat(pipe.c_str(), &st) == 0 && st.st_uid != ::geteuid() ? MpsOwner{st.st_uid, st.st_gid} : MpsOwner{};
  }
  const auto quit = Command(gpu, owner, "quit");
  const auto deadline = SteadyClock::now() + options_.quit_timeout;
  while (Alive(d.pid, d.start_time) && SteadyClock::now() < deadline) std::this_thread::sleep_for(kPoll);
  const bool killed = Alive(d.pid, d.start_time);
  if (killed) ::kill(d.pid, SIGKILL);
  Log("mps_quit", {{"gpu", std::to_string(gpu)}, {"pid", std::to_string(d.pid)}, {"killed", killed ? "true" : "false"},
                   {"error", quit ? "" : quit.error().message}});
  d.pid = 0;
}

void MpsDaemons::Release(int gpu) {
  auto it = daemons_.find(gpu);
  if (it == daemons_.end()) return;
  Stop(gpu, it->second);
  daemons_.erase(it);
  std::error_code ec;
  fs::remove(fs::path(Dirs(gpu).pipe).parent_path() / "daemon.json", ec);
}

void MpsDaemons::ReleaseAll() {
  for (int gpu : Gpus()) Release(gpu);
}

std::chrono::milliseconds MpsDaemons::Backoff(int restarts) const {
  std::chrono::milliseconds b = options_.first_backoff;
  for (int i = 0; i < restarts && b < options_.max_backoff; ++i) b *= 2;
  return std::min(b, options_.max_backoff);
}

void MpsDaemons::Check() {
  const auto now = SteadyClock::now();
  if (now < next_check_) return;
  next_check_ = now + options_.check_every;
  for (auto& [gpu, d] : daemons_) CheckOne(gpu, d, now);
}

void MpsDaemons::CheckOne(int gpu, Daemon& d, SteadyClock::time_point now) {
  const std::string g = std::to_string(gpu);
  if (!d.failure.empty()) return;
  if (!d.dead) {
    if (Alive(d.pid, d.start_time)) {
      if (d.restarts > 0 && now - d.up_since >= options_.stable_after) d.restarts = 0;
      return;
    }
    d.dead = true;
    d.next_restart = now + Backoff(d.restarts);
    Log("mps_died", {{"gpu", g}, {"pid", std::to_string(d.pid)}, {"restarts", std::to_string(d.restarts)}});
  }
  if (d.restarts >= options_.max_restarts) {
    d.failure = "the MPS control daemon of GPU " + g + " keeps dying (restarted " + std::to_string(d.restarts) +
                " times); given up: MPS clients there fail until a new task starts it again";
    Log("error", {{"gpu", g}, {"message", d.failure}});
    return;
  }
  if (now < d.next_restart) return;
  ++d.restarts;
  if (auto ok = Start(gpu, d); !ok) {
    d.next_restart = now + Backoff(d.restarts);
    Log("mps_restart_failed", {{"gpu", g}, {"restarts", std::to_string(d.restarts)}, {"error", ok.error().message}});
    return;
  }
  Log("mps_restart", {{"gpu", g}, {"pid", std::to_string(d.pid)}, {"restarts", std::to_string(d.restarts)}});
}

void MpsDaemons::SaveState(int gpu, const Daemon& d) const {
  const std::string file = (fs::path(Dirs(gpu).pipe).parent_path() / "daemon.json").string();
  std::ofstream(file + ".tmp", std::ios::trunc)
      << json{{"uuid", d.uuid}, {"uid", d.owner.uid}, {"gid", d.owner.gid},
              {"active_thread_percentage", d.limits.active_thread_percentage},
              {"pinned_mem_mib", d.limits.pinned_mem_mib}}
             .dump();
  std::error_code ec;
  fs::rename(file + ".tmp", file, ec);
}

void MpsDaemons::Recover() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.work_dir + "/mps", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("gpu", 0) != 0) continue;
    int gpu = -1;
    try {
      gpu = std::stoi(name.substr(3));
    } catch (...) {
      continue;
    }
    std::ifstream in(e.path() / "daemon.json");
    const json j = json::parse(in, nullptr, false);
    if (!j.is_object()) continue;
    Daemon d;
    d.uuid = j.value("uuid", "");
    d.owner = {j.value("uid", int64_t{-1}), j.value("gid", int64_t{-1})};
    d.limits = {j.value("active_thread_percentage", 100), j.value("pinned_mem_mib", int64_t{0})};
    d.pid = ReadPid(Dirs(gpu).pipe + "/" + kMpsPidFile);
    const ProcState s = StatOf(d.pid);
    d.start_time = s.start_time;
    d.dead = !s.alive;  // Check restarts it, or the agent releases it when nobody uses it
    d.up_since = SteadyClock::now();
    Log("mps_adopt",
        {{"gpu", std::to_string(gpu)}, {"pid", std::to_string(d.pid)}, {"alive", s.alive ? "true" : "false"}});
    daemons_[gpu] = std::move(d);
  }
}

std::vector<int> MpsDaemons::Gpus() const {
  std::vector<int> out;
  for (const auto& [gpu, d] : daemons_) out.push_back(gpu);
  return out;
}

bool MpsDaemons::Up(int gpu) const {
  auto it = daemons_.find(gpu);
  return it != daemons_.end() && !it->second.dead && it->second.failure.empty() &&
         Alive(it->second.pid, it->second.start_time);
}

std::string MpsDaemons::Failure(int gpu) const {
  auto it = daemons_.find(gpu);
  return it == daemons_.end() ? "" : it->second.failure;
}

MpsOwner MpsDaemons::OwnerOf(int gpu) const {
  auto it = daemons_.find(gpu);
  return it == daemons_.end() ? MpsOwner{} : it->second.owner;
}

}  // namespace gpupool
