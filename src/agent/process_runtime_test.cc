#include "src/agent/process_runtime.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

// A node without containers refuses what only a container gives, naming the
// request field, instead of running the task without it.
TEST(ProcessRuntimeTest, RefusesAnImageOrAnIsolatedNetwork) {
  const std::string dir = (fs::temp_directory_path() / ("gpupool-proc-" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  auto runtime = MakeProcessRuntime(dir, [](int) {});
  EXPECT_EQ(runtime->isolation(), "none");
  TaskLaunch l;
  l.job = 1;
  l.argv = {"true"};
  l.log_file = dir + "/1.log";
  l.task_dir = dir + "/task";
  l.scratch_dir = dir + "/scratch";
  l.network_isolated = true;
  auto net = runtime->Start(l);
  ASSERT_FALSE(net);
  EXPECT_EQ(net.error().message.rfind("network: isolated needs the oci runtime", 0), 0u) << net.error().message;
  l.network_isolated = false;
  l.image = "/images/pytorch";
  auto image = runtime->Start(l);
  ASSERT_FALSE(image);
  EXPECT_EQ(image.error().message.rfind("image: /images/pytorch needs the oci runtime", 0), 0u)
      << image.error().message;
  l.image = "host";
  fs::create_directories(l.task_dir);
  auto ok = runtime->Start(l);
  ASSERT_TRUE(ok) << ok.error().message;
  for (int i = 0; i < 500 && !(*ok)->Poll(); ++i) ::usleep(10'000);
  EXPECT_TRUE((*ok)->reaped());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
