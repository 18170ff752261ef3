#include "src/agent/executor.h"

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

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("gpupool-exec-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Read(const std::string& f) {
    std::ifstream in(f);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  ExitStatus Wait(ChildProcess& p) {
    for (int i = 0; i < 500; ++i) {
      if (auto s = p.Poll()) return *s;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "process did not exit";
    p.Signal(SIGKILL);
    return {};
  }
  std::string dir_;
};

TEST_F(ExecutorTest, RunsWithEnvironmentDirectoryAndLog) {
  ::setenv("GPUPOOL_TEST_SECRET", "leaked", 1);  // not on the inherited list
  ::setenv("CUDA_VISIBLE_DEVICES", "stale", 1);
  LaunchSpec s;
  s.argv = {"sh", "-c",
            "echo \"$X [$GPUPOOL_TEST_SECRET] [$CUDA_VISIBLE_DEVICES] $(pwd)\"; [ -n \"$PATH\" ] || exit 9; "
            "ls /proc/self/fd | wc -l >&2; echo err >&2; exit 7"};
  s.env = {{"X", "hello"}};
  s.unset = {"CUDA_VISIBLE_DEVICES"};
  s.working_dir = dir_;
  s.log_file = dir_ + "/task.log";
  auto p = ChildProcess::Spawn(s);
  ASSERT_TRUE(p.has_value()) << p.error().message;
  const ExitStatus st = Wait(*p);
  EXPECT_EQ(st.exit_code, 7);
  EXPECT_EQ(st.signal, 0);
  EXPECT_FALSE(st.ok());
  // stdin, stdout, stderr and the descriptor ls reads: nothing of the agent's.
  EXPECT_EQ(Read(dir_ + "/task.log"), "hello [] [] " + fs::canonical(dir_).string() + "\n4\nerr\n");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ::unsetenv("GPUPOOL_TEST_SECRET");
}

TEST_F(ExecutorTest, SignalsReachTheWholeProcessGroup) {
  LaunchSpec s;
  // The shell starts a child that outlives nothing: both must die.
  s.argv = {"sh", "-c", "sleep 30 & echo $! > child.pid; wait"};
  s.working_dir = dir_;
  s.log_file = dir_ + "/task.log";
  auto p = ChildProcess::Spawn(s);
  ASSERT_TRUE(p.has_value());
  for (int i = 0; i < 200 && Read(dir_ + "/child.pid").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int child = std::stoi(Read(dir_ + "/child.pid"));
  EXPECT_EQ(::getsid(p->pid()), p->pid());  // its own session
  p->Signal(SIGTERM);
  const ExitStatus st = Wait(*p);
  EXPECT_TRUE(st.signal == SIGTERM || st.exit_code != 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(child, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the task's child survived SIGTERM to the group";
}

TEST_F(ExecutorTest, TheLeaderAloneGetsALeaderSignal) {
  LaunchSpec s;
  s.argv = {"sh", "-c", "trap 'echo got-usr1; exit 0' USR1; while true; do sleep 0.05; done"};
  s.log_file = dir_ + "/task.log";
  auto p = ChildProcess::Spawn(s);
  ASSERT_TRUE(p.has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  p->SignalLeader(SIGUSR1);
  EXPECT_TRUE(Wait(*p).ok());
  EXPECT_EQ(Read(dir_ + "/task.log"), "got-usr1\n");
}

TEST_F(ExecutorTest, FailuresNameTheProgramOrTheLog) {
  LaunchSpec s;
  s.argv = {"/no/such/program"};
  s.log_file = dir_ + "/task.log";
  auto p = ChildProcess::Spawn(s);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("/no/such/program"), std::string::npos) << p.error().message;
  s.argv = {"true"};
  s.log_file = dir_ + "/missing/dir/task.log";
  auto q = ChildProcess::Spawn(s);
  ASSERT_FALSE(q.has_value());
  EXPECT_NE(q.error().message.find("task.log"), std::string::npos);
  s.log_file = dir_ + "/task.log";
  s.working_dir = dir_ + "/missing";
  auto r = ChildProcess::Spawn(s);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("missing"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpupool
