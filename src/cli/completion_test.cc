#include "src/cli/completion.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

// What bash's completion offers for the words of `line` (the last one is
// being completed), with `script` loaded.
std::string Complete(const std::string& script, const std::vector<std::string>& words) {
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/c.bash") << script;
  std::string array;
  for (const std::string& w : words) array += " '" + w + "'";
  std::ofstream(dir + "/run.bash") << "source " << dir << "/c.bash\nCOMP_WORDS=(" << array << " )\nCOMP_CWORD="
                                   << words.size() - 1 << "\n_gpupool\necho \"${COMPREPLY[*]}\"\n";
  std::string out;
  if (FILE* p = ::popen(("bash " + dir + "/run.bash 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  std::filesystem::remove_all(dir);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::unique_ptr<CLI::App> Tree() {
  auto app = std::make_unique<CLI::App>("test");
  static bool verbose = false, wait = false;  // never parsed: only the tree is read
  app->add_flag("--verbose", verbose, "v");
  CLI::App* job = app->add_subcommand("job", "jobs");
  CLI::App* submit = job->add_subcommand("submit", "submit one");
  static std::string file;
  submit->add_option("-f,--file", file, "a job file");
  submit->add_flag("--wait", wait, "wait for it");
  job->add_subcommand("list", "list them");
  app->add_subcommand("server", "serve");
  app->add_subcommand("hidden", "not shown")->group("");
  return app;
}

TEST(CompletionTest, OffersTheSubcommandsAndFlagsOfTheDeepestCommandNamed) {
  auto app = Tree();
  const std::string s = BashCompletionScript(*app, "gpupool");
  EXPECT_EQ(Complete(s, {"gpupool", ""}), "job server --help -h --verbose");
  EXPECT_EQ(Complete(s, {"gpupool", "j"}), "job");
  EXPECT_EQ(Complete(s, {"gpupool", "job", ""}), "submit list --help -h");
  EXPECT_EQ(Complete(s, {"gpupool", "job", "submit", "--w"}), "--wait");
  EXPECT_EQ(Complete(s, {"gpupool", "--verbose", "job", "submit", "-"}), "--help -h --file -f --wait");
}

TEST(CompletionTest, AFlagThatTakesAValueCompletesFileNames) {
  auto app = Tree();
  const std::string s = BashCompletionScript(*app, "gpupool");
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/job-one.yaml") << "x";
  EXPECT_EQ(Complete(s, {"gpupool", "job", "submit", "--file", dir + "/job-"}), dir + "/job-one.yaml");
  std::filesystem::remove_all(dir);
}

TEST(CompletionTest, TheBinarysScriptNamesItsRealCommands) {
  auto r = testing::RunGpupool({"completion", "bash"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Complete(r.out, {"gpupool", "ser"}), "server");
  const std::string job = Complete(r.out, {"gpupool", "job", ""});
  EXPECT_NE(job.find("submit"), std::string::npos) << job;
  EXPECT_NE(job.find("list"), std::string::npos) << job;
  EXPECT_NE(Complete(r.out, {"gpupool", "server", "--li"}).find("--listen"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
