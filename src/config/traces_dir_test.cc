#include "src/config/traces_dir.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(TracesDirTest, MissingTraceNamesTheFileWhereItLookedAndTheFetchCommand) {
  ::setenv("GPUPOOL_TRACES", "/nowhere/traces", 1);
  const std::string set = MissingTrace("philly-runtime/philly_runtime.csv");
  EXPECT_NE(set.find("philly-runtime/philly_runtime.csv is not here"), std::string::npos) << set;
  EXPECT_NE(set.find("$GPUPOOL_TRACES=/nowhere/traces"), std::string::npos) << set;
  EXPECT_NE(set.find("scripts/fetch-traces.sh"), std::string::npos) << set;
  ::unsetenv("GPUPOOL_TRACES");
  ::setenv("HOME", "/home/someone", 1);
  ::setenv("XDG_CACHE_HOME", "", 1);
  const std::string unset = MissingTrace("x.csv");
  EXPECT_NE(unset.find("$GPUPOOL_TRACES (unset), ../shared/traces, ../../shared/traces, "
                       "/home/someone/.cache/gpupool/traces"),
            std::string::npos)
      << unset;
  EXPECT_EQ(TracesCacheDir(), "/home/someone/.cache/gpupool/traces");
}

TEST(TracesDirTest, AMissingFileInATracesFolderSaysWhereEveryTracesFolderWasLooked) {
  ::setenv("GPUPOOL_TRACES", "/nowhere/traces", 1);
  const std::string in_traces = MissingTraceFile("../shared/traces/alibaba-gpu-2023/openb_pod_list_default.csv");
  EXPECT_NE(in_traces.find("the trace file ../shared/traces/alibaba-gpu-2023/openb_pod_list_default.csv is not "
                           "here (the traces folder is looked for in $GPUPOOL_TRACES=/nowhere/traces): fetch"),
            std::string::npos)
      << in_traces;
  const std::string elsewhere = MissingTraceFile("/data/mine/nodes.csv");
  EXPECT_NE(elsewhere.find("the trace file /data/mine/nodes.csv is not here: fetch the public traces with "
                           "scripts/fetch-traces.sh"),
            std::string::npos)
      << elsewhere;
  ::unsetenv("GPUPOOL_TRACES");
}

}  // namespace
}  // namespace gpupool
