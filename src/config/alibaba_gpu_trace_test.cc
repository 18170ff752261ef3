#include "src/config/alibaba_gpu_trace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpupool {
namespace {

constexpr std::string_view kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr std::string_view kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n";
constexpr std::string_view kPodHeaderShort = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

const Catalog& Cat() { return Catalog::Builtin(); }

GpuModelId Id(std::string_view name) {
  auto id = Cat().Find(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}
GpuModelMask Bit(std::string_view name) { return GpuModelMask{1} << Id(name); }

std::string NodesError(const std::string& text) {
  auto r = ParseOpenbNodes(text, "nodes.csv", Cat());
  EXPECT_FALSE(r.has_value()) << "parsed a bad node list:\n" << text;
  if (r) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  return r.error().message;
}

std::string PodsError(const std::string& text) {
  auto r = ParseOpenbPods(text, "pods.csv", Cat());
  EXPECT_FALSE(r.has_value()) << "parsed a bad pod list:\n" << text;
  if (r) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  return r.error().message;
}

// The message starts with `prefix` (the location) and contains `detail`.
#define EXPECT_MSG(msg, prefix, detail)                                        \
  do {                                                                         \
    const std::string m_ = (msg);                                              \
    EXPECT_TRUE(m_.starts_with(prefix)) << "message: " << m_;                  \
    EXPECT_NE(m_.find(detail), std::string::npos) << "message: " << m_;        \
  } while (0)

// ---------------------------------------------------------------- nodes

TEST(OpenbNodesTest, ParsesGpuAndCpuOnlyNodes) {
  const std::string text = std::string(kNodeHeader) +
                           "node-a,96000,786432,8,G2\n"
                           "node-b,32000,131072,0,\n"
                           "node-c,64000,262144,2,T4\n";
  auto r = ParseOpenbNodes(text, "nodes.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  const NodeSpec& a = (*r)[0];
  EXPECT_EQ(a.name, "node-a");
  EXPECT_EQ(a.cpu_milli, 96000);
  EXPECT_EQ(a.memory_mib, 786432);
  EXPECT_EQ(a.gpu_count, 8);
  EXPECT_EQ(a.gpu_model, Id("G2"));
  const NodeSpec& b = (*r)[1];
  EXPECT_EQ(b.name, "node-b");
  EXPECT_EQ(b.cpu_milli, 32000);
  EXPECT_EQ(b.memory_mib, 131072);
  EXPECT_EQ(b.gpu_count, 0);
  EXPECT_EQ(b.gpu_model, kNoGpuModel);
  EXPECT_EQ((*r)[2].gpu_model, Id("T4"));
  EXPECT_EQ((*r)[2].gpu_count, 2);
}

TEST(OpenbNodesTest, HeaderOnlyGivesNoNodes) {
  auto r = ParseOpenbNodes(kNodeHeader, "nodes.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->empty());
}

TEST(OpenbNodesTest, CrlfAndBlankLines) {
  auto r = ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\r\n\r\nn1,1000,2048,1,A10\r\n", "nodes.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].gpu_model, Id("A10"));
}

TEST(OpenbNodesTest, EmptyFile) {
  EXPECT_EQ(NodesError(""), "nodes.csv: empty file, expected an openb node list");
  EXPECT_EQ(NodesError("\n\n"), "nodes.csv: empty file, expected an openb node list");
}

TEST(OpenbNodesTest, WrongHeader) {
  EXPECT_MSG(NodesError("sn,cpu,memory_mib,gpu,model\nn1,1,1,0,\n"), "nodes.csv:1: not an openb node list",
             "'sn,cpu_milli,memory_mib,gpu,model'");
  // A pod list is not a node list; the header's line is the one reported.
  EXPECT_MSG(NodesError("\n" + std::string(kPodHeaderShort)), "nodes.csv:2: not an openb node list", "expected header");
}

TEST(OpenbNodesTest, WrongColumnCount) {
  EXPECT_EQ(NodesError(std::string(kNodeHeader) + "n1,1000,1024,0,\nn2,1000,1024,0\n"),
            "nodes.csv:3: expected 5 columns, got 4");
  EXPECT_EQ(NodesError(std::string(kNodeHeader) + "n1,1000,1024,0,,\n"), "nodes.csv:2: expected 5 columns, got 6");
}

TEST(OpenbNodesTest, BadNumbers) {
  EXPECT_MSG(NodesError(std::string(kNodeHeader) + "n1,lots,1024,0,\n"), "nodes.csv:2:2 (cpu_milli): ",
             "expected an integer, got 'lots'");
  EXPECT_MSG(NodesError(std::string(kNodeHeader) + "n1,1000,-1,0,\n"), "nodes.csv:2:3 (memory_mib): ",
             "got '-1'");
  EXPECT_MSG(NodesError(std::string(kNodeHeader) + "n1,1000,1024,17,G2\n"), "nodes.csv:2:4 (gpu): ",
             "must be between 0 and 16, got '17'");
}

TEST(OpenbNodesTest, EmptyNameAndDuplicateNode) {
  EXPECT_MSG(NodesError(std::string(kNodeHeader) + ",1000,1024,0,\n"), "nodes.csv:2:1 (sn): ", "empty");
  EXPECT_EQ(NodesError(std::string(kNodeHeader) + "n1,1000,1024,0,\nn2,1,1,0,\nn1,1000,1024,0,\n"),
            "nodes.csv:4:1 (sn): duplicate node 'n1'");
}

TEST(OpenbNodesTest, ModelErrors) {
  EXPECT_MSG(NodesError(std::string(kNodeHeader) + "n1,1000,1024,4,G9\n"), "nodes.csv:2:5 (model): ",
             "unknown GPU model 'G9'");
  EXPECT_EQ(NodesError(std::string(kNodeHeader) + "n1,1000,1024,4,\n"),
            "nodes.csv:2:5 (model): a node with GPUs needs a model");
  EXPECT_EQ(NodesError(std::string(kNodeHeader) + "n0,1,1,1,T4\nn1,1000,1024,0,T4\n"),
            "nodes.csv:3:5 (model): a node without GPUs must have an empty model");
}

TEST(OpenbNodesTest, UnknownModelMessageListsKnownModels) {
  const std::string m = NodesError(std::string(kNodeHeader) + "n1,1000,1024,4,G9\n");
  EXPECT_NE(m.find("known: " + Cat().Names()), std::string::npos) << m;
}

TEST(OpenbNodesTest, MalformedCsvNamesFileAndLine) {
  EXPECT_MSG(NodesError(std::string(kNodeHeader) + "n1,1000,1024,0,\n\"n2,1,1,0,\n"), "nodes.csv:3: malformed CSV",
             "unterminated");
}

// ---------------------------------------------------------------- pods, 11 columns

TEST(OpenbPodsTest, ParsesFullLayout) {
  const std::string text = std::string(kPodHeader) +
                           "p-cpu,8000,16384,0,0,,LS,Running,10,200,12\n"
                           "p-share,4000,8192,1,250,,BE,Succeeded,11,20,15\n"
                           "p-whole,16000,65536,4,1000,V100M16|V100M32,Guaranteed,Failed,12,,\n"
                           "p-pending,1000,1024,1,1000,T4,Burstable,Pending,13,99,\n";
  auto r = ParseOpenbPods(text, "pods.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 4u);

  const TracePod& cpu = (*r)[0];
  EXPECT_EQ(cpu.name, "p-cpu");
  EXPECT_EQ(cpu.demand, (Demand{8000, 16384, 0, 0, kAnyGpuModel}));
  EXPECT_EQ(cpu.demand.kind(), DemandKind::kCpuOnly);
  EXPECT_EQ(cpu.qos, "LS");
  EXPECT_EQ(cpu.pod_phase, "Running");
  EXPECT_EQ(cpu.creation_time_s, 10);
  EXPECT_EQ(cpu.deletion_time_s, 200);
  EXPECT_EQ(cpu.scheduled_time_s, 12);

  const TracePod& share = (*r)[1];
  EXPECT_EQ(share.demand, (Demand{4000, 8192, 1, 250, kAnyGpuModel}));
  EXPECT_EQ(share.demand.kind(), DemandKind::kGpuShare);
  EXPECT_EQ(share.qos, "BE");
  EXPECT_EQ(share.pod_phase, "Succeeded");

  const TracePod& whole = (*r)[2];
  EXPECT_EQ(whole.demand.cpu_milli, 16000);
  EXPECT_EQ(whole.demand.memory_mib, 65536);
  EXPECT_EQ(whole.demand.gpu_count, 4);
  EXPECT_EQ(whole.demand.gpu_milli, 1000);
  EXPECT_EQ(whole.demand.allowed_models, Bit("V100M16") | Bit("V100M32"));
  EXPECT_EQ(whole.demand.kind(), DemandKind::kWholeGpus);
  EXPECT_EQ(whole.creation_time_s, 12);
  EXPECT_FALSE(whole.deletion_time_s.has_value());
  EXPECT_FALSE(whole.scheduled_time_s.has_value());

  const TracePod& pending = (*r)[3];
  EXPECT_EQ(pending.demand.allowed_models, Bit("T4"));
  EXPECT_EQ(pending.pod_phase, "Pending");
  EXPECT_EQ(pending.creation_time_s, 13);
  EXPECT_EQ(pending.deletion_time_s, 99);
  EXPECT_FALSE(pending.scheduled_time_s.has_value());
}

TEST(OpenbPodsTest, AllTimesMayBeEmpty) {
  auto r = ParseOpenbPods(std::string(kPodHeader) + "p,1,1,0,0,,,,,,\n", "pods.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_FALSE((*r)[0].creation_time_s);
  EXPECT_FALSE((*r)[0].deletion_time_s);
  EXPECT_FALSE((*r)[0].scheduled_time_s);
  EXPECT_EQ((*r)[0].qos, "");
  EXPECT_EQ((*r)[0].pod_phase, "");
}

TEST(OpenbPodsTest, DeletionEqualToCreationIsAllowed) {
  auto r = ParseOpenbPods(std::string(kPodHeader) + "p,1,1,0,0,,LS,Running,50,50,50\n", "pods.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)[0].deletion_time_s, 50);
}

TEST(OpenbPodsTest, HeaderOnlyGivesNoPods) {
  auto full = ParseOpenbPods(kPodHeader, "pods.csv", Cat());
  ASSERT_TRUE(full) << full.error().message;
  EXPECT_TRUE(full->empty());
  auto short_layout = ParseOpenbPods(kPodHeaderShort, "pods.csv", Cat());
  ASSERT_TRUE(short_layout) << short_layout.error().message;
  EXPECT_TRUE(short_layout->empty());
}

// ---------------------------------------------------------------- pods, 5 columns

TEST(OpenbPodsTest, ParsesShortLayout) {
  const std::string text = std::string(kPodHeaderShort) +
                           "m1,32000,131072,8,1000\n"
                           "m2,2000,4096,1,500\n"
                           "m3,1000,2048,0,0\n";
  auto r = ParseOpenbPods(text, "pods.csv", Cat());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "m1");
  EXPECT_EQ((*r)[0].demand, (Demand{32000, 131072, 8, 1000, kAnyGpuModel}));
  EXPECT_EQ((*r)[1].demand, (Demand{2000, 4096, 1, 500, kAnyGpuModel}));
  EXPECT_EQ((*r)[2].demand, (Demand{1000, 2048, 0, 0, kAnyGpuModel}));
  for (const TracePod& p : *r) {
    EXPECT_EQ(p.qos, "");
    EXPECT_EQ(p.pod_phase, "");
    EXPECT_FALSE(p.creation_time_s);
    EXPECT_FALSE(p.deletion_time_s);
    EXPECT_FALSE(p.scheduled_time_s);
  }
}

TEST(OpenbPodsTest, ShortLayoutRejectsLongRows) {
  EXPECT_EQ(PodsError(std::string(kPodHeaderShort) + "m1,1,1,0,0\nm2,1,1,0,0,,LS,Running,1,2,3\n"),
            "pods.csv:3: expected 5 columns, got 11");
}

TEST(OpenbPodsTest, ShortLayoutErrorsNameTheColumn) {
  EXPECT_MSG(PodsError(std::string(kPodHeaderShort) + "m1,1,1,2,500\n"), "pods.csv:2:5 (gpu_milli): ",
             "must be 1000 when num_gpu > 1");
  EXPECT_MSG(PodsError(std::string(kPodHeaderShort) + "m1,1,1,20,1000\n"), "pods.csv:2:4 (num_gpu): ",
             "must be between 0 and 16, got '20'");
}

// ---------------------------------------------------------------- pod errors

TEST(OpenbPodsTest, EmptyFile) {
  EXPECT_EQ(PodsError(""), "pods.csv: empty file, expected an openb pod list");
  EXPECT_EQ(PodsError("\r\n\n"), "pods.csv: empty file, expected an openb pod list");
}

TEST(OpenbPodsTest, WrongHeader) {
  const std::string m = PodsError("name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n");
  EXPECT_MSG(m, "pods.csv:1: not an openb pod list: expected header ",
             "'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
             "scheduled_time' or 'name,cpu_milli,memory_mib,num_gpu,gpu_milli'");
  // Six columns: neither layout.
  EXPECT_MSG(PodsError("\nname,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"),
             "pods.csv:2: not an openb pod list", "expected header");
  // A node list is not a pod list.
  EXPECT_MSG(PodsError(std::string(kNodeHeader)), "pods.csv:1: not an openb pod list", "expected header");
}

TEST(OpenbPodsTest, WrongColumnCount) {
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,0,0,,LS,Running,1,2,3\np2,1,1,0,0,,LS,Running,1,2\n"),
            "pods.csv:3: expected 11 columns, got 10");
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,0,0\n"), "pods.csv:2: expected 11 columns, got 5");
}

TEST(OpenbPodsTest, NonIntegerCpuMilli) {
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,0,0,,LS,Running,1,2,3\np2,4c,1,0,0,,LS,Running,1,2,3\n"),
            "pods.csv:3:2 (cpu_milli): expected an integer, got '4c'");
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,,1,0,0,,LS,Running,1,2,3\n"),
            "pods.csv:2:2 (cpu_milli): expected an integer, got ''");
}

TEST(OpenbPodsTest, NegativeMemory) {
  EXPECT_MSG(PodsError(std::string(kPodHeader) + "p1,1000,-5,0,0,,LS,Running,1,2,3\n"),
             "pods.csv:2:3 (memory_mib): must be between 0 and ", "got '-5'");
}

TEST(OpenbPodsTest, NumGpuTooLarge) {
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,0,0,,LS,Running,1,2,3\np2,1,1,17,1000,,LS,Running,1,2,3\n"),
            "pods.csv:3:4 (num_gpu): must be between 0 and 16, got '17'");
}

TEST(OpenbPodsTest, GpuMilliAboveOneGpu) {
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,1,1001,,LS,Running,1,2,3\n"),
            "pods.csv:2:5 (gpu_milli): must be between 0 and 1000, got '1001'");
}

TEST(OpenbPodsTest, MultiGpuShareIsRejected) {
  EXPECT_MSG(PodsError(std::string(kPodHeader) + "p1,1,1,2,500,,LS,Running,1,2,3\n"), "pods.csv:2:5 (gpu_milli): ",
             "must be 1000 when num_gpu > 1");
}

TEST(OpenbPodsTest, CpuOnlyWithGpuMilliIsRejected) {
  EXPECT_MSG(PodsError(std::string(kPodHeader) + "p1,1,1,0,100,,LS,Running,1,2,3\n"), "pods.csv:2:5 (gpu_milli): ",
             "must be 0 when num_gpu is 0");
}

TEST(OpenbPodsTest, GpuPodWithZeroMilliIsRejected) {
  EXPECT_MSG(PodsError(std::string(kPodHeader) + "p1,1,1,1,0,,LS,Running,1,2,3\n"), "pods.csv:2:5 (gpu_milli): ",
             "must be between 1 and 1000");
}

TEST(OpenbPodsTest, UnknownGpuSpecModel) {
  const std::string m = PodsError(std::string(kPodHeader) + "p1,1,1,1,1000,V100M16|X1,LS,Running,1,2,3\n");
  EXPECT_MSG(m, "pods.csv:2:6 (gpu_spec): ", "unknown GPU model 'X1'");
  EXPECT_NE(m.find("known: " + Cat().Names()), std::string::npos) << m;
  // An empty item in the list is an unknown (empty) model, not "any".
  EXPECT_MSG(PodsError(std::string(kPodHeader) + "p1,1,1,1,1000,T4|,LS,Running,1,2,3\n"), "pods.csv:2:6 (gpu_spec): ",
             "unknown GPU model ''");
}

TEST(OpenbPodsTest, BadTimes) {
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,0,0,,LS,Running,soon,2,3\n"),
            "pods.csv:2:9 (creation_time): expected an integer, got 'soon'");
  EXPECT_MSG(PodsError(std::string(kPodHeader) + "p1,1,1,0,0,,LS,Running,1,2,-3\n"),
             "pods.csv:2:11 (scheduled_time): ", "got '-3'");
}

TEST(OpenbPodsTest, DeletionBeforeCreation) {
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "p1,1,1,0,0,,LS,Running,100,2,3\n"),
            "pods.csv:2:10 (deletion_time): deletion_time is before creation_time");
}

TEST(OpenbPodsTest, EmptyAndDuplicatePodName) {
  EXPECT_MSG(PodsError(std::string(kPodHeader) + ",1,1,0,0,,LS,Running,1,2,3\n"), "pods.csv:2:1 (name): ", "empty");
  EXPECT_EQ(PodsError(std::string(kPodHeaderShort) + "a,1,1,0,0\nb,1,1,0,0\n\na,1,1,0,0\n"),
            "pods.csv:5:1 (name): duplicate pod 'a'");
}

TEST(OpenbPodsTest, LineNumbersFollowEmbeddedNewlines) {
  // A quoted field spanning lines 2-3 shifts the next record to line 4.
  EXPECT_EQ(PodsError(std::string(kPodHeader) + "\"p\n1\",1,1,0,0,,LS,Running,1,2,3\np2,x,1,0,0,,LS,Running,1,2,3\n"),
            "pods.csv:4:2 (cpu_milli): expected an integer, got 'x'");
}

TEST(OpenbPodsTest, NoPartialResultOnLateError) {
  std::string text(kPodHeaderShort);
  for (int i = 0; i < 50; ++i) text += "p" + std::to_string(i) + ",1,1,0,0\n";
  text += "bad,1,1,0,7\n";
  EXPECT_MSG(PodsError(text), "pods.csv:52:5 (gpu_milli): ", "must be 0 when num_gpu is 0");
}

TEST(OpenbLoadFileTest, MissingFileIsAnIoError) {
  auto nodes = LoadOpenbNodesFile("/nonexistent/nodes.csv", Cat());
  ASSERT_FALSE(nodes);
  EXPECT_EQ(nodes.error().code, ErrorCode::kIo);
  auto pods = LoadOpenbPodsFile("/nonexistent/pods.csv", Cat());
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, ErrorCode::kIo);
}

}  // namespace
}  // namespace gpupool
