// The oci runtime with the real runc and gpupool-shim (skipped without root
// or runc): start, exit status, signals, re-adoption, and failures.
#include "src/agent/oci_runtime.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

class OciRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.runc = FindOnPath("runc");
    options_.shim = FindShim();
    if (::geteuid() != 0 || options_.runc.empty() || options_.shim.empty()) {
      GTEST_SKIP() << "needs root, runc and gpupool-shim";
    }
    dir_ = (fs::temp_directory_path() / ("gpupool-oci-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    options_.work_dir = dir_ + "/work";
    fs::create_directories(options_.work_dir + "/logs");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  TaskLaunch Launch(JobId job, std::vector<std::string> argv) {
    TaskLaunch l;
    l.job = job;
    l.attempt = 1;
    l.argv = std::move(argv);
    l.log_file = options_.work_dir + "/logs/" + std::to_string(job) + ".log";
    l.checkpoint_dir = options_.work_dir + "/checkpoints/" + std::to_string(job);
    l.scratch_dir = options_.work_dir + "/scratch/" + std::to_string(job);
    l.task_dir = options_.work_dir + "/tasks/" + std::to_string(job);
    l.image = "host";
    l.uid = 1'000'000;
    l.uid_count = 65'536;
    l.memory_mib = 128;
    l.pids_limit = 32;
    return l;
  }

  static std::optional<ExitStatus> WaitExit(RunningTask& t, std::chrono::seconds limit = std::chrono::seconds(10)) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (auto s = t.Poll()) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  OciRuntimeOptions options_;
  std::string dir_;
};

TEST_F(OciRuntimeTest, ATaskRunsInItsContainerAndItsExitIsReported) {
  auto runtime = MakeOciRuntime(options_);
  const TaskLaunch l = Launch(1, {"sh", "-c", "echo hello from $(id -u) in $(pwd); exit 3"});
  auto t = runtime->Start(l);
  ASSERT_TRUE(t) << t.error().message;
  const auto exit = WaitExit(**t);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_FALSE(exit->oom);
  // Root inside its user namespace, in its scratch directory.
  EXPECT_NE(Read(l.log_file).find(std::string("hello from 0 in ") + kContainerScratchDir), std::string::npos)
      << Read(l.log_file);
  EXPECT_FALSE((*t)->Alive());
  (*t)->Remove();
  EXPECT_FALSE(fs::exists(options_.work_dir + "/containers/" + ContainerId(1, 0, 1)));
  // The checkpoint directory belongs to the tenant's range, 0700.
  struct stat st {};
  ASSERT_EQ(::stat(l.checkpoint_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1'000'000u);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(OciRuntimeTest, ACheckpointAnEarlierReleaseWroteAsTheAgentIsMigratedNotLost) {
  auto runtime = MakeOciRuntime(options_);
  const TaskLaunch l = Launch(7, {"sh", "-c", "cat /gpupool/checkpoint/step && echo 2 > /gpupool/checkpoint/step"});
  fs::create_directories(l.checkpoint_dir + "/shards");
  std::ofstream(l.checkpoint_dir + "/step") << "1\n";
  fs::permissions(l.checkpoint_dir, fs::perms(0755));
  auto t = runtime->Start(l);
  ASSERT_TRUE(t) << t.error().message;
  const auto exit = WaitExit(**t);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->ok()) << Read(l.log_file);
  EXPECT_EQ(Read(l.checkpoint_dir + "/step"), "2\n");
  for (const std::string& p : {l.checkpoint_dir, l.checkpoint_dir + "/step", l.checkpoint_dir + "/shards"}) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 1'000'000u) << p;
  }
  (*t)->Remove();
}

TEST_F(OciRuntimeTest, ASignalFromTheHostEndsTheTask) {
  auto runtime = MakeOciRuntime(options_);
  auto t = runtime->Start(Launch(2, {"sleep", "100"}));
  ASSERT_TRUE(t) << t.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE((*t)->Alive());
  (*t)->Signal(SIGTERM);
  const auto exit = WaitExit(**t);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGTERM);
  for (int i = 0; i < 200 && (*t)->Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE((*t)->Alive());
  (*t)->Remove();
}

TEST_F(OciRuntimeTest, ANewRuntimeReadoptsARunningContainer) {
  int pid = 0;
  {
    auto runtime = MakeOciRuntime(options_);
    auto t = runtime->Start(Launch(3, {"sleep", "100"}));
    ASSERT_TRUE(t) << t.error().message;
    pid = (*t)->pid();
    // Dropped without Remove: the container and its shim keep running.
  }
  auto runtime = MakeOciRuntime(options_);
  auto found = runtime->Recover();
  ASSERT_EQ(found.size(), 1u);
  auto& [key, task] = *found.begin();
  EXPECT_EQ(key, (TaskKey{3, 0, 1}));
  EXPECT_TRUE(task->Alive());
  EXPECT_EQ(task->pid(), pid);
  EXPECT_FALSE(task->Poll().has_value());
  task->Signal(SIGKILL);
  const auto exit = WaitExit(*task);
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->ok());
  task->Remove();
  EXPECT_TRUE(runtime->Recover().empty());
}

TEST_F(OciRuntimeTest, AnExitWhileNobodyWatchesIsKept) {
  {
    auto runtime = MakeOciRuntime(options_);
    auto t = runtime->Start(Launch(4, {"sh", "-c", "sleep 0.2; exit 7"}));
    ASSERT_TRUE(t) << t.error().message;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  auto runtime = MakeOciRuntime(options_);
  auto found = runtime->Recover();
  ASSERT_EQ(found.size(), 1u);
  const auto exit = WaitExit(*found.begin()->second);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 7);
  found.begin()->second->Remove();
}

TEST_F(OciRuntimeTest, AMissingProgramOrRuntimeFailsWithAReason) {
  auto runtime = MakeOciRuntime(options_);
  auto t = runtime->Start(Launch(5, {"no-such-program-here"}));
  ASSERT_TRUE(t) << t.error().message;
  const auto exit = WaitExit(**t);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 127);
  EXPECT_NE(Read(options_.work_dir + "/logs/5.log").find("cannot run 'no-such-program-here'"), std::string::npos);
  (*t)->Remove();

  OciRuntimeOptions broken = options_;
  broken.runc = "/bin/false";
  auto bad = MakeOciRuntime(broken)->Start(Launch(6, {"true"}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("runtime: /bin/false could not start the container"), std::string::npos)
      << bad.error().message;
  EXPECT_FALSE(fs::exists(options_.work_dir + "/containers/" + ContainerId(6, 0, 1)));

  auto no_image = runtime->Start([&] {
    TaskLaunch l = Launch(7, {"true"});
    l.image = dir_ + "/no-such-image";
    return l;
  }());
  ASSERT_FALSE(no_image);
  EXPECT_EQ(no_image.error().message.rfind("image: ", 0), 0u) << no_image.error().message;
}

TEST_F(OciRuntimeTest, TheProbeRunsATrivialContainer) {
  const Status ok = ProbeOciRuntime(options_);
  EXPECT_TRUE(ok) << ok.error().message;
  OciRuntimeOptions missing = options_;
  missing.runc = "";
  const Status no = ProbeOciRuntime(missing);
  ASSERT_FALSE(no);
  EXPECT_NE(no.error().message.find("runc is not on the PATH"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
