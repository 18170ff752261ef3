// The CUDA cap (tools/cuda_cap, issue 15 "Capped time-sliced shares"): its
// probe (tests/cuda_cap/cap_probe.c) runs as a child process with the cap
// preloaded and the fake libcuda (tests/fake_cuda) on LD_LIBRARY_PATH, and
// allocates and launches through both dlsym and cuGetProcAddress. Pacing is
// measured on the fake's simulated clock, so a loaded machine cannot make it
// flaky.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

using Env = std::map<std::string, std::string>;

struct ProbeRun {
  int exit_code = -1;
  std::string out, err;
};

// The probe's environment: nothing of ours (a GPUPOOL_CUDA_* of the test
// runner must not leak in), the fake libcuda, the cap when preloaded.
std::vector<std::string> ProbeEnv(const Env& extra, bool preload) {
  std::vector<std::string> env = {std::string("PATH=/usr/bin:/bin"),
                                  std::string("LD_LIBRARY_PATH=") + GPUPOOL_FAKE_CUDA_DIR};
  if (preload) env.push_back(std::string("LD_PRELOAD=") + GPUPOOL_CUDA_CAP_LIBRARY);
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

// A probe child with its stdin, stdout and stderr on pipes.
struct Child {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
};

Child Spawn(const std::vector<std::string>& args, const Env& extra, bool preload,
            const std::string& binary = GPUPOOL_CUDA_CAP_PROBE) {
  int in[2], out[2], err[2];
  if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return {};
  std::vector<std::string> argv_text = {binary};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<std::string> env_text = ProbeEnv(extra, preload);
  std::vector<char*> argv, envp;
  for (auto& a : argv_text) argv.push_back(a.data());
  for (auto& e : env_text) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  return {pid, in[1], out[0], err[0]};
}

// Reads fd until EOF, or until `until` appears in what was read, or 30 s.
std::string ReadFrom(int fd, const std::string& until = "") {
  std::string text;
  char buffer[4096];
  for (int rounds = 0; rounds < 300; ++rounds) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) == 0) continue;
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (!until.empty() && text.find(until) != std::string::npos) break;
  }
  return text;
}

int Reap(Child& child) {
  for (int fd : {child.in, child.out, child.err})
    if (fd >= 0) close(fd);
  int status = 0;
  waitpid(child.pid, &status, 0);
  child.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ProbeRun RunProbe(const std::vector<std::string>& args, const Env& extra, bool preload = true,
                  const std::string& binary = GPUPOOL_CUDA_CAP_PROBE) {
  Child child = Spawn(args, extra, preload, binary);
  EXPECT_GT(child.pid, 0);
  close(child.in);
  child.in = -1;
  ProbeRun run;
  run.out = ReadFrom(child.out);
  run.err = ReadFrom(child.err);
  run.exit_code = Reap(child);
  return run;
}

// The value of "key=value" in the probe's output ("" when absent).
std::string Value(const std::string& out, const std::string& key) {
  for (size_t at = out.find(key + "="); at != std::string::npos; at = out.find(key + "=", at + 1)) {
    if (at > 0 && out[at - 1] != ' ' && out[at - 1] != '\n') continue;
    const size_t start = at + key.size() + 1;
    return out.substr(start, out.find_first_of(" \n", start) - start);
  }
  return "";
}

double Number(const std::string& out, const std::string& key) {
  const std::string v = Value(out, key);
  return v.empty() ? -1 : std::strtod(v.c_str(), nullptr);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const Env kLimit4G = {{"GPUPOOL_CUDA_MEMORY_LIMIT_MIB", "4096"}};

TEST(CudaCapTest, WithoutThePreloadEveryChunkFits) {
  const ProbeRun run = RunProbe({"alloc"}, kLimit4G, /*preload=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Value(run.out, "allocated"), "80") << run.out;  // the fake's 80 GiB
  EXPECT_EQ(Value(run.out, "total_mib"), "81920");
}

TEST(CudaCapTest, AllocationsPastTheLimitFailThroughBothPathsAndFreeingReturnsBudget) {
  const ProbeRun run = RunProbe({"alloc"}, kLimit4G);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Value(run.out, "allocated"), "4") << run.out;
  EXPECT_EQ(Value(run.out, "direct"), "2");
  EXPECT_EQ(Value(run.out, "proc"), "2");
  EXPECT_EQ(Value(run.out, "refused"), "2");  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(Value(run.out, "total_mib"), "4096");
  EXPECT_EQ(Value(run.out, "free_mib"), "0");
  EXPECT_EQ(Value(run.out, "freed"), "4");
  EXPECT_EQ(Value(run.out, "free_after_mib"), "4096");
  EXPECT_EQ(Value(run.out, "reallocated"), "4");
  EXPECT_EQ(run.err, "");
}

TEST(CudaCapTest, EveryAllocationEntryPointCountsAgainstTheLimit) {
  const ProbeRun capped = RunProbe({"kinds"}, kLimit4G);
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  // 1 GiB each: plain, managed, pitched and a 2D array fill the 4 GiB ...
  for (const char* kind : {"alloc", "managed", "pitch", "array"}) EXPECT_EQ(Value(capped.out, kind), "0") << kind;
  // ... so a 3D array and a stream-ordered allocation do not fit,
  EXPECT_EQ(Value(capped.out, "array3d"), "2") << capped.out;
  EXPECT_EQ(Value(capped.out, "async"), "2");
  // destroying the 2D array makes room for the 3D one, and then nothing fits.
  EXPECT_EQ(Value(capped.out, "array_destroy"), "0");
  EXPECT_EQ(Value(capped.out, "array3d_again"), "0");
  EXPECT_EQ(Value(capped.out, "async_ptsz"), "2");

  const ProbeRun uncapped = RunProbe({"kinds"}, kLimit4G, /*preload=*/false);
  for (const char* kind : {"array3d", "async", "async_ptsz"}) EXPECT_EQ(Value(uncapped.out, kind), "0") << kind;
}

TEST(CudaCapTest, ProcessesSharingAStateFileGetNoMoreThanTheLimitTogether) {
  const std::string dir = testing::MakeTempDir();
  Env env = kLimit4G;
  env["GPUPOOL_CUDA_CAP_STATE"] = dir + "/cap-state";
  Child holder = Spawn({"alloc", "3"}, env, true);
  ASSERT_GT(holder.pid, 0);
  const std::string held = ReadFrom(holder.out, "holding=1");
  ASSERT_EQ(Value(held, "allocated"), "3") << held;

  const ProbeRun second = RunProbe({"alloc"}, env);
  EXPECT_EQ(Value(second.out, "allocated"), "1") << second.out << second.err;
  EXPECT_EQ(Value(second.out, "free_mib"), "0");
  EXPECT_EQ(Value(second.out, "total_mib"), "4096");

  EXPECT_EQ(Reap(holder), 0);  // closing its stdin ends it, without freeing
  const ProbeRun third = RunProbe({"alloc"}, env);
  EXPECT_EQ(Value(third.out, "allocated"), "4") << "a dead process's memory comes back: " << third.out;
  std::filesystem::remove_all(dir);
}

TEST(CudaCapTest, PacesLaunchesToTheComputeShareOnSimulatedTime) {
  const ProbeRun quarter = RunProbe({"pace", "10"}, {{"GPUPOOL_CUDA_COMPUTE_SHARE", "0.25"}});
  ASSERT_EQ(quarter.exit_code, 0) << quarter.err;
  EXPECT_GE(Number(quarter.out, "elapsed_s"), 10.0) << quarter.out;
  const double fraction = Number(quarter.out, "busy_fraction");
  EXPECT_GE(fraction, 0.225) << quarter.out;
  EXPECT_LE(fraction, 0.275) << quarter.out;
  // The documented bound: at most (burst 25 ms + one 1 ms kernel) / 10 s above.
  EXPECT_LE(fraction, 0.25 + 0.0027) << quarter.out;
  EXPECT_GE(fraction, 0.25) << quarter.out;

  for (const Env& uncapped : {Env{}, Env{{"GPUPOOL_CUDA_COMPUTE_SHARE", "1"}}}) {
    const ProbeRun full = RunProbe({"pace", "10"}, uncapped);
    ASSERT_EQ(full.exit_code, 0) << full.err;
    EXPECT_GE(Number(full.out, "busy_fraction"), 0.99) << full.out;
  }
}

// The agent's contention signal (tools/cuda_cap/cuda_cap.h): "STATE UNTIL_MS".
void WriteContention(const std::string& path, const std::string& state, int64_t valid_for_ms = 60000) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::ofstream(path) << state << " " << now_ms + valid_for_ms << "\n";
}

struct ContentionDir {
  std::string dir = testing::MakeTempDir();
  std::string file = dir + "/state";
  ~ContentionDir() { std::filesystem::remove_all(dir); }
  Env QuarterShare() const { return {{"GPUPOOL_CUDA_COMPUTE_SHARE", "0.25"}, {"GPUPOOL_CUDA_CONTENTION_FILE", file}}; }
};

TEST(CudaCapTest, AnUncontendedGpuIsNotThrottled) {
  ContentionDir c;
  WriteContention(c.file, "uncontended");
  const ProbeRun run = RunProbe({"pace", "10"}, c.QuarterShare());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GE(Number(run.out, "busy_fraction"), 0.99) << run.out;
  EXPECT_EQ(run.err, "");
}

TEST(CudaCapTest, AContendedGpuHoldsTheShareAsWithoutASignal) {
  ContentionDir c;
  WriteContention(c.file, "contended");
  const ProbeRun run = RunProbe({"pace", "10"}, c.QuarterShare());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GE(Number(run.out, "busy_fraction"), 0.25) << run.out;
  EXPECT_LE(Number(run.out, "busy_fraction"), 0.25 + 0.0027) << run.out;
}

TEST(CudaCapTest, AMissingMalformedOrStaleSignalEnforcesTheShare) {
  ContentionDir c;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"missing", ""},
      {"garbage", "uncontended soon\n"},
      {"trailing", "uncontended 99999999999999 x\n"},
      {"stale", "uncontended 1000\n"},  // 1970: long past
      {"too far ahead", ""},             // written below: an hour ahead
      {"too long", "uncontended " + std::string(80, '9') + "\n"},
      {"empty", "\n"},
  };
  for (const auto& [what, text] : bad) {
    std::filesystem::remove(c.file);
    if (what == "too far ahead") {
      WriteContention(c.file, "uncontended", 3600 * 1000);
    } else if (what != "missing") {
      std::ofstream(c.file) << text;
    }
    const ProbeRun run = RunProbe({"pace", "4"}, c.QuarterShare());
    ASSERT_EQ(run.exit_code, 0) << what << ": " << run.err;
    EXPECT_LE(Number(run.out, "busy_fraction"), 0.25 + 0.0066) << what << ": " << run.out;  // (25 + 1 ms) / 4 s
    EXPECT_GE(Number(run.out, "busy_fraction"), 0.25) << what << ": " << run.out;
  }
}

TEST(CudaCapTest, ContentionStartingMidRunReturnsTheTaskToItsShareWithinThePollInterval) {
  ContentionDir c;
  WriteContention(c.file, "uncontended");
  // Flipped at 5.05 s, off the 100 ms poll grid; the share measured from
  // flip + 101 ms (the poll interval and one kernel) to the end, 10 s.
  const ProbeRun run = RunProbe({"pace", "15.151", "5.05", "contended", "0.101"}, c.QuarterShare());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GE(Number(run.out, "busy_before"), 0.99) << run.out;
  const double first_wait = Number(run.out, "first_wait_s");
  EXPECT_GT(first_wait, 0) << run.out;
  EXPECT_LE(first_wait, 0.101) << run.out;  // CAP_CONTENTION_POLL_MS + one 1 ms kernel
  const double after = Number(run.out, "busy_after");
  EXPECT_GE(after, 0.225) << run.out;  // the 10% tolerance
  EXPECT_LE(after, 0.275) << run.out;
  EXPECT_LE(after, 0.25 + 0.0027) << run.out;  // the documented bound: no burst carried over beyond [0, burst]
  EXPECT_GE(after, 0.2475) << run.out;
}

TEST(CudaCapTest, ContentionEndingMidRunLetsTheTaskTakeTheGpuWithinThePollInterval) {
  ContentionDir c;
  WriteContention(c.file, "contended");
  const ProbeRun run = RunProbe({"pace", "15.2", "5.05", "uncontended", "0.151"}, c.QuarterShare());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GE(Number(run.out, "busy_before"), 0.25) << run.out;
  EXPECT_LE(Number(run.out, "busy_before"), 0.25 + 0.0053) << run.out;  // (25 + 1 ms) / 5.05 s
  // A launch asleep at the flip wakes at the next poll: within 100 ms plus
  // one 50 ms sleep step.
  EXPECT_LE(Number(run.out, "last_wait_s"), 0.151) << run.out;
  EXPECT_GE(Number(run.out, "busy_after"), 0.999) << run.out;
}

TEST(CudaCapTest, ABadValueIsReportedOnceNamingTheVariableAndThatCapIsOff) {
  const ProbeRun share = RunProbe({"pace", "2"}, {{"GPUPOOL_CUDA_COMPUTE_SHARE", "abc"}});
  ASSERT_EQ(share.exit_code, 0) << share.err;
  EXPECT_EQ(Count(share.err, "GPUPOOL_CUDA_COMPUTE_SHARE=\"abc\""), 1u) << share.err;
  EXPECT_NE(share.err.find("not paced"), std::string::npos) << share.err;
  EXPECT_GE(Number(share.out, "busy_fraction"), 0.99) << share.out;

  const ProbeRun memory = RunProbe({"alloc"}, {{"GPUPOOL_CUDA_MEMORY_LIMIT_MIB", "4 GiB"}});
  ASSERT_EQ(memory.exit_code, 0) << memory.err;
  EXPECT_EQ(Count(memory.err, "GPUPOOL_CUDA_MEMORY_LIMIT_MIB=\"4 GiB\""), 1u) << memory.err;
  EXPECT_EQ(Value(memory.out, "allocated"), "80") << memory.out;
}

TEST(CudaCapTest, DlsymWithRtldNextStillSeesItsRealCaller) {
  // The cap's dlsym hands RTLD_NEXT to glibc as a tail call; were it a plain
  // call, glibc would search after the cap instead of after the probe.
  const ProbeRun run = RunProbe({"dlnext"}, {});
  EXPECT_EQ(Value(run.out, "rtld_next_ok"), "1") << run.out << run.err;
}

// gpupool-cap-gpu-check is for real GPUs (scripts/device-check.sh); its
// memory mode needs nothing the fake lacks, so it is checked here too.
TEST(CudaCapTest, TheGpuCheckProgramSeesTheCapOnTheFake) {
  const ProbeRun capped = RunProbe({"memory", "256"}, {{"GPUPOOL_CUDA_MEMORY_LIMIT_MIB", "2048"}}, true,
                                   GPUPOOL_CAP_GPU_CHECK);
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_EQ(Value(capped.out, "info_total_mib"), "2048") << capped.out;
  EXPECT_EQ(Value(capped.out, "info_free_mib"), "2048");
  EXPECT_EQ(Value(capped.out, "allocated"), "8");
  EXPECT_EQ(Value(capped.out, "refused"), "2");
  const ProbeRun plain = RunProbe({"memory", "256"}, {}, false, GPUPOOL_CAP_GPU_CHECK);
  EXPECT_EQ(Value(plain.out, "allocated"), "320") << plain.out;  // the fake's 80 GiB
  // Its kernel is PTX for a real driver: the fake has no modules, and the
  // program says which call failed.
  const ProbeRun pace = RunProbe({"pace", "1", "2"}, {}, true, GPUPOOL_CAP_GPU_CHECK);
  EXPECT_EQ(pace.exit_code, 1);
  EXPECT_NE(pace.err.find("cuModuleLoadData"), std::string::npos) << pace.err;
  EXPECT_EQ(RunProbe({"pace"}, {}, true, GPUPOOL_CAP_GPU_CHECK).exit_code, 2);
}

TEST(CudaCapTest, TheLibraryNeedsNoCxxRuntime) {
  const std::string image = testing::ReadTextFile(GPUPOOL_CUDA_CAP_LIBRARY);
  ASSERT_FALSE(image.empty());
  EXPECT_EQ(image.find("libstdc++"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
