// RunProgram's options (ProgramOptions): stdin text, an environment of its
// own, another uid/gid, stdout kept apart.
#include "src/base/subprocess.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

namespace gpupool {
namespace {

constexpr auto kTimeout = std::chrono::seconds(10);

TEST(SubprocessTest, FeedsStdinAndEndsIt) {
  ProgramOptions o;
  o.input = "first\nsecond\n";
  const CommandOutcome r = RunProgram({"/bin/sh", "-c", "cat; echo end"}, {}, kTimeout, o);
  EXPECT_TRUE(r.ok) << r.Describe();
  EXPECT_EQ(r.output_tail, "first | second | end");
  o.input = std::string(kMaxProgramInput + 1, 'x');
  EXPECT_NE(RunProgram({"/bin/cat"}, {}, kTimeout, o).start_error.find("stdin input over"), std::string::npos);
}

TEST(SubprocessTest, AnEnvironmentOfItsOwn) {
  ::setenv("GPUPOOL_SUBPROCESS_TEST", "inherited", 1);
  ProgramOptions o;
  o.inherit_env = false;
  const CommandOutcome own =
      RunProgram({"/bin/sh", "-c", "echo \"[$GPUPOOL_SUBPROCESS_TEST] $ONLY\""}, {{"ONLY", "this"}}, kTimeout, o);
  EXPECT_EQ(own.output_tail, "[] this");
  const CommandOutcome inherited = RunProgram({"/bin/sh", "-c", "echo $GPUPOOL_SUBPROCESS_TEST"}, {}, kTimeout);
  EXPECT_EQ(inherited.output_tail, "inherited");
  ::unsetenv("GPUPOOL_SUBPROCESS_TEST");
}

TEST(SubprocessTest, StdoutKeptApartFromStderr) {
  ProgramOptions o;
  o.keep_stdout = true;
  const CommandOutcome r =
      RunProgram({"/bin/sh", "-c", "echo out-1; echo err-1 >&2; echo out-2; echo err-2 >&2; exit 4"}, {}, kTimeout, o);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.stdout_text, "out-1\nout-2\n");
  EXPECT_EQ(r.output_tail, "err-1 | err-2");
  // A long answer keeps its end (where a tool puts its result); the
  // program is never blocked by a full pipe.
  const CommandOutcome big = RunProgram(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done; echo '{\"done\":1}'"}, {},
      kTimeout, o);
  EXPECT_TRUE(big.ok) << big.Describe();
  EXPECT_EQ(big.stdout_text.size(), kMaxProgramStdout);
  EXPECT_TRUE(big.stdout_text.ends_with("line-19999\n{\"done\":1}\n"));
  EXPECT_EQ(RunProgram({"/bin/sh", "-c", "echo both"}, {}, kTimeout).stdout_text, "");  // without: in the tail
}

TEST(SubprocessTest, RunsAsAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  ProgramOptions o;
  o.uid = 1'065'537;
  o.gid = 1'065'538;
  o.input = "x";
  const CommandOutcome r = RunProgram({"/bin/sh", "-c", "echo $(id -u) $(id -g) $(id -G) $(cat)"}, {}, kTimeout, o);
  EXPECT_TRUE(r.ok) << r.Describe();
  EXPECT_EQ(r.output_tail, "1065537 1065538 1065538 x");  // no supplementary group left
  const CommandOutcome missing = RunProgram({"/no/such/program"}, {}, kTimeout, o);
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.start_error, "/no/such/program: No such file or directory");
}

}  // namespace
}  // namespace gpupool
