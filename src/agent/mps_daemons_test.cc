// MpsDaemons against the fake nvidia-cuda-mps-control (tests/fake_mps): the
// exact commands a daemon gets over its life, one daemon per GPU whatever
// the number of tasks, restarts of a dead daemon (bounded), one owner at a
// time, and the failures a node without MPS gives.
#include "src/agent/mps_daemons.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/base/subprocess.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class MpsDaemonsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = testing::MakeTempDir();
    // The record outside the pipe directory (which a new owner gets empty),
    // writable by any owner the test runs the daemon as.
    record_dir_ = work_ + "/record";
    fs::create_directories(record_dir_);
    ::chmod(record_dir_.c_str(), 0777);
    { std::ofstream touch(record()); }
    ::chmod(record().c_str(), 0666);
    ::chmod(work_.c_str(), 0711);
  }
  void TearDown() override {
    if (daemons_) daemons_->ReleaseAll();
    fs::remove_all(work_);
  }

  MpsDaemons& Make(MpsDaemonsOptions o = {}) {
    if (o.control.empty()) o.control = GPUPOOL_FAKE_MPS_CONTROL;
    o.work_dir = work_;
    o.env = {{"FAKE_MPS_RECORD", record()}};
    o.check_every = std::chrono::milliseconds(0);
    o.first_backoff = std::chrono::milliseconds(0);
    o.log = [this](const std::string& action, std::vector<std::pair<std::string, std::string>> fields) {
      std::string line = action;
      for (const auto& [k, v] : fields) line += " " + k + "=" + v;
      actions_.push_back(line);
    };
    daemons_ = std::make_unique<MpsDaemons>(o);
    return *daemons_;
  }
  std::string record() const { return record_dir_ + "/commands.log"; }
  std::string ControlLog(int gpu) const { return Read(daemons_->Dirs(gpu).log + "/control.log"); }
  int DaemonPid(int gpu) const {
    std::ifstream in(daemons_->Dirs(gpu).pipe + "/" + kMpsPidFile);
    int pid = 0;
    in >> pid;
    return pid;
  }
  bool Logged(const std::string& prefix) const {
    for (const std::string& a : actions_) {
      if (a.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }

  std::string work_, record_dir_;
  std::unique_ptr<MpsDaemons> daemons_;
  std::vector<std::string> actions_;
};

constexpr const char* kStartCommands =
    "get_server_list\n"
    "set_default_active_thread_percentage 25\n"
    "set_default_device_pinned_mem_limit 0 10240M\n";

// Start -> defaults -> a second task (no second daemon, no command) -> the
// daemon killed from outside -> restarted by the health check with the same
// defaults -> released (quit).
TEST_F(MpsDaemonsTest, ExactCommandSequenceOverADaemonsLife) {
  MpsDaemons& m = Make();
  ASSERT_TRUE(m.available());
  auto first = m.Ensure(0, "GPU-0000aaaa", MpsOwner{}, MpsLimits{25, 10240});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(m.Up(0));
  EXPECT_EQ(Read(record()), kStartCommands);
  const std::string started = ControlLog(0);
  EXPECT_EQ(Count(started, "[fake] startup"), 1) << started;
  EXPECT_NE(started.find("uid=" + std::to_string(::geteuid())), std::string::npos) << started;
  EXPECT_NE(started.find("CUDA_VISIBLE_DEVICES=GPU-0000aaaa"), std::string::npos) << started;

  auto second = m.Ensure(0, "GPU-0000aaaa", MpsOwner{}, MpsLimits{50, 0});
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(Read(record()), kStartCommands);  // the defaults are the daemon's: set once
  EXPECT_EQ(Count(ControlLog(0), "[fake] startup"), 1);

  const int pid = DaemonPid(0);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (int i = 0; i < 200 && m.Up(0); ++i) ::usleep(10'000);
  EXPECT_FALSE(m.Up(0));
  m.Check();
  EXPECT_TRUE(m.Up(0));
  EXPECT_NE(DaemonPid(0), pid);
  EXPECT_TRUE(Logged("mps_died gpu=0"));
  EXPECT_TRUE(Logged("mps_restart gpu=0"));
  EXPECT_EQ(Read(record()), std::string(kStartCommands) + kStartCommands);

  const int restarted = DaemonPid(0);
  m.Release(0);
  EXPECT_EQ(Read(record()), std::string(kStartCommands) + kStartCommands + "quit\n");
  EXPECT_FALSE(m.Up(0));
  EXPECT_TRUE(m.Gpus().empty());
  EXPECT_NE(ControlLog(0).find("[fake] exit pid=" + std::to_string(restarted)), std::string::npos) << ControlLog(0);
  EXPECT_FALSE(fs::exists(m.Dirs(0).pipe + "/" + kMpsPidFile));
}

// Each GPU has its own daemon and directories; without a memory limit no
// pinned-memory command is sent.
TEST_F(MpsDaemonsTest, OneDaemonPerGpu) {
  MpsDaemons& m = Make();
  ASSERT_TRUE(m.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{25, 0}));
  ASSERT_TRUE(m.Ensure(1, "GPU-1", MpsOwner{}, MpsLimits{50, 0}));
  EXPECT_EQ(m.Gpus(), (std::vector<int>{0, 1}));
  EXPECT_NE(DaemonPid(0), DaemonPid(1));
  EXPECT_NE(m.Dirs(0).pipe, m.Dirs(1).pipe);
  EXPECT_NE(ControlLog(1).find("CUDA_VISIBLE_DEVICES=GPU-1"), std::string::npos);
  EXPECT_EQ(Read(record()),
            "get_server_list\nset_default_active_thread_percentage 25\n"
            "get_server_list\nset_default_active_thread_percentage 50\n");
  m.Release(0);
  EXPECT_TRUE(m.Up(1));
  EXPECT_EQ(m.Gpus(), (std::vector<int>{1}));
}

// A daemon that keeps dying is restarted max_restarts times, then given up
// with an error naming the GPU; a new task tries afresh.
TEST_F(MpsDaemonsTest, ADaemonThatKeepsDyingIsGivenUp) {
  MpsDaemonsOptions o;
  o.max_restarts = 2;
  MpsDaemons& m = Make(o);
  ASSERT_TRUE(m.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{25, 0}));
  for (int death = 0; death < 3; ++death) {
    const int pid = DaemonPid(0);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    for (int i = 0; i < 200 && m.Up(0); ++i) ::usleep(10'000);
    m.Check();
  }
  EXPECT_FALSE(m.Up(0));
  EXPECT_NE(m.Failure(0).find("GPU 0 keeps dying (restarted 2 times)"), std::string::npos) << m.Failure(0);
  EXPECT_TRUE(Logged("error gpu=0 message=the MPS control daemon of GPU 0 keeps dying"));
  EXPECT_EQ(Count(ControlLog(0), "[fake] startup"), 3);
  m.Check();  // given up: no more tries
  EXPECT_EQ(Count(ControlLog(0), "[fake] startup"), 3);
  ASSERT_TRUE(m.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{25, 0}));
  EXPECT_TRUE(m.Up(0));
  EXPECT_TRUE(m.Failure(0).empty());
}

// One owner at a time: another owner is refused while the daemon runs; once
// released, the next owner's daemon runs as that owner in directories made
// anew for it (nothing of the previous owner's left there).
TEST_F(MpsDaemonsTest, ServesOneOwnerAtATimeAndRunsAsIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "running the daemon as another uid needs root";
  MpsDaemons& m = Make();
  ASSERT_TRUE(m.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{25, 0}));
  const MpsOwner tenant{1'065'536, 1'065'536};
  auto refused = m.Ensure(0, "GPU-0", tenant, MpsLimits{25, 0});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("serves one tenant at a time"), std::string::npos) << refused.error().message;
  m.Release(0);
  auto ok = m.Ensure(0, "GPU-0", tenant, MpsLimits{40, 512});
  ASSERT_TRUE(ok) << ok.error().message;
  const std::string log = ControlLog(0);
  EXPECT_EQ(Count(log, "[fake] startup"), 1) << log;  // the log directory is the new owner's alone
  EXPECT_NE(log.find("uid=1065536 gid=1065536"), std::string::npos) << log;
  for (const std::string& dir : {m.Dirs(0).pipe, m.Dirs(0).log}) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 1'065'536u) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
  EXPECT_EQ(m.OwnerOf(0), tenant);
  m.Release(0);
  EXPECT_NE(Read(record()).find("set_default_device_pinned_mem_limit 0 512M\nquit\n"), std::string::npos)
      << Read(record());
}

// No binary: a clear error (the agent then starts MPS tasks with their
// environment limits only); a binary that cannot run, or that never comes
// up, fails within its bounds and leaves no daemon.
TEST_F(MpsDaemonsTest, MissingOrBrokenBinaryIsAClearError) {
  MpsDaemons none(MpsDaemonsOptions{});
  EXPECT_FALSE(none.available());
  auto absent = none.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{});
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.error().message.find("no MPS control daemon on this node (nvidia-cuda-mps-control)"),
            std::string::npos);

  MpsDaemonsOptions broken;
  broken.control = "/no/such/nvidia-cuda-mps-control";
  auto missing = Make(broken).Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("GPU 0: /no/such/nvidia-cuda-mps-control -d: could not start"),
            std::string::npos)
      << missing.error().message;

  MpsDaemonsOptions silent;
  silent.control = "/bin/true";  // exits 0 and starts nothing
  silent.start_timeout = std::chrono::milliseconds(200);
  auto never = Make(silent).Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{});
  ASSERT_FALSE(never);
  EXPECT_NE(never.error().message.find("did not write a live pid"), std::string::npos) << never.error().message;
  EXPECT_TRUE(daemons_->Gpus().empty());
}

// A restarted agent re-adopts the daemon its predecessor left (its clients
// keep it), with the owner and defaults it had.
TEST_F(MpsDaemonsTest, RecoverReadoptsARunningDaemon) {
  {
    MpsDaemons& first = Make();
    ASSERT_TRUE(first.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{30, 0}));
  }
  const int pid = DaemonPid(0);
  MpsDaemons& next = Make();  // the first one is dropped without a release, as when an agent dies
  next.Recover();
  EXPECT_EQ(next.Gpus(), (std::vector<int>{0}));
  EXPECT_TRUE(next.Up(0));
  EXPECT_TRUE(next.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{30, 0}));
  EXPECT_EQ(DaemonPid(0), pid);
  next.Release(0);
  EXPECT_EQ(Read(record()), "get_server_list\nset_default_active_thread_percentage 30\nquit\n");
}

// The fake accepts the documented spellings only.
TEST_F(MpsDaemonsTest, TheFakeRejectsWhatTheRealOneWouldNot) {
  MpsDaemons& m = Make();
  ASSERT_TRUE(m.Ensure(0, "GPU-0", MpsOwner{}, MpsLimits{25, 0}));
  const std::vector<std::pair<std::string, std::string>> env = {{"CUDA_MPS_PIPE_DIRECTORY", m.Dirs(0).pipe},
                                                                {"FAKE_MPS_RECORD", record()}};
  auto run = [&](const std::string& input) {
    ProgramOptions o;
    o.input = input;
    return RunProgram({GPUPOOL_FAKE_MPS_CONTROL}, env, std::chrono::seconds(10), o);
  };
  EXPECT_TRUE(run("get_server_list\n").ok);
  for (const char* bad : {"set_default_active_thread_percentage 0\n", "set_default_active_thread_percentage 101\n",
                          "set_default_device_pinned_mem_limit 0 10240\n", "set_default_device_pinned_mem_limit 10G\n",
                          "set_active_thread_pct 25\n", "quit now\n"}) {
    const CommandOutcome o = run(bad);
    EXPECT_EQ(o.exit_code, 1) << bad << o.Describe();
  }
  EXPECT_EQ(run("get_client_list 1\n").exit_code, 2);  // documented, not modeled
  EXPECT_EQ(Read(record()), "get_server_list\nset_default_active_thread_percentage 25\nget_server_list\n");
}

}  // namespace
}  // namespace gpupool
