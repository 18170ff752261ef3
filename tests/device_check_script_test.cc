// scripts/device-check.sh where there is no GPU (CI): every check is a SKIP
// line naming why, the exit status is 0, and nothing is built; and
// scripts/device-bundle.sh, what --prebuilt takes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

struct ScriptRun {
  int exit_code = -1;
  std::string out;
};

// Runs the script through sh -c with `env_prefix` (e.g. "PATH=/x") and args.
ScriptRun RunScript(const std::string& env_prefix, const std::string& args) {
  const std::string command =
      "env " + env_prefix + " bash " GPUPOOL_SOURCE_DIR "/scripts/device-check.sh " + args + " 2>&1";
  ScriptRun run;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, p)) > 0;) run.out.append(buffer, n);
  const int status = ::pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

void ExpectAllSkipped(const ScriptRun& run, const std::string& why) {
  EXPECT_EQ(run.exit_code, 0) << run.out;
  for (const char* check : {"nvml-registration", "scrub", "interposer-memory", "interposer-pacing", "mig"}) {
    EXPECT_NE(run.out.find(std::string("SKIP ") + check + ": " + why), std::string::npos) << check << "\n" << run.out;
  }
  EXPECT_EQ(run.out.find("PASS"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("FAIL"), std::string::npos) << run.out;
}

TEST(DeviceCheckScriptTest, WithoutADriverEveryCheckIsSkippedAndNothingIsBuilt) {
  const std::string dir = testing::MakeTempDir();
  ExpectAllSkipped(RunScript("", "--assume-no-driver --build-dir " + dir + "/build"), "no NVIDIA driver");
  EXPECT_FALSE(std::filesystem::exists(dir + "/build"));
  std::filesystem::remove_all(dir);
}

TEST(DeviceCheckScriptTest, ADriverThatDoesNotAnswerIsNoDriver) {
  // nvidia-smi is there but fails, as when the kernel module is not loaded.
  const std::string dir = testing::MakeTempDir();
  const std::string smi = dir + "/nvidia-smi";
  std::ofstream(smi) << "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                        "driver.\"\nexit 9\n";
  ::chmod(smi.c_str(), 0755);
  ExpectAllSkipped(RunScript("PATH=" + dir + ":/usr/bin:/bin", "--build-dir " + dir + "/build"),
                   "the NVIDIA driver does not answer (nvidia-smi -L: NVIDIA-SMI has failed");
  EXPECT_FALSE(std::filesystem::exists(dir + "/build"));
  std::filesystem::remove_all(dir);
}

TEST(DeviceCheckScriptTest, ABadArgumentIsAUsageError) {
  const ScriptRun run = RunScript("", "--frobnicate");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.out.find("usage:"), std::string::npos) << run.out;
}

// A driver that answers, for the steps after the driver check: one GPU.
std::string FakeSmiDir() {
  const std::string dir = testing::MakeTempDir();
  const std::string smi = dir + "/nvidia-smi";
  std::ofstream(smi) << "#!/bin/sh\ncase \"$*\" in\n  -L) echo 'GPU 0: NVIDIA H200 (UUID: GPU-1)' ;;\n"
                        "  *mig.mode*) echo Disabled ;;\n  *) echo 1 ;;\nesac\n";
  ::chmod(smi.c_str(), 0755);
  return dir;
}

TEST(DeviceCheckScriptTest, AnIncompleteBundleFailsTheBuildLineAndSkipsItsChecks) {
  const std::string dir = FakeSmiDir();
  std::filesystem::create_directories(dir + "/bundle");
  const ScriptRun run = RunScript("PATH=" + dir + ":/usr/bin:/bin", "--prebuilt " + dir + "/bundle");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("FAIL build: " + dir + "/bundle/gpupool is missing (scripts/device-bundle.sh packs it)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("SKIP interposer-pacing: the bundle is incomplete"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("PASS"), std::string::npos) << run.out;
  std::filesystem::remove_all(dir);
}

TEST(DeviceCheckScriptTest, TheBundleHoldsWhatTheChecksRunAndItsGpupoolRunsOnItsOwnLibraries) {
  const std::string dir = testing::MakeTempDir();
  const std::string build = std::filesystem::path(GPUPOOL_BINARY).parent_path().string();
  const std::string bundle = dir + "/bundle";
  ASSERT_EQ(std::system(("bash " GPUPOOL_SOURCE_DIR "/scripts/device-bundle.sh --build-dir " + build + " " + bundle +
                         " >/dev/null")
                            .c_str()),
            0);
  for (const char* f : {"gpupool", "libgpupool-cuda-cap.so", "gpupool-cap-gpu-check", "gpupool_scrub.cu", "commit",
                        "lib/libsqlite3.so.0"}) {
    EXPECT_TRUE(std::filesystem::exists(bundle + "/" + f)) << f;
  }
  EXPECT_FALSE(std::filesystem::exists(bundle + "/lib/libc.so.6"));  // the machine's own glibc serves it
  EXPECT_EQ(std::system(("env LD_LIBRARY_PATH=" + bundle + "/lib " + bundle + "/gpupool --version >/dev/null").c_str()),
            0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
