#include "src/model/demand.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

Demand D(int64_t cpu, int64_t mem, int32_t gpus, int32_t milli, GpuModelMask models = kAnyGpuModel) {
  return Demand{cpu, mem, gpus, milli, models};
}

// Expects rejection with a message that starts with "FIELD: " and contains `detail`.
void ExpectRejected(const Demand& d, const std::string& field, const std::string& detail) {
  Status st = ValidateDemand(d);
  ASSERT_FALSE(st) << "accepted a bad demand; expected an error on " << field;
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(st.error().message.starts_with(field + ": ")) << st.error().message;
  EXPECT_NE(st.error().message.find(detail), std::string::npos) << st.error().message;
}

TEST(DemandValidateTest, AcceptsTheThreeKinds) {
  EXPECT_TRUE(ValidateDemand(D(0, 0, 0, 0)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 0, 0)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 1, 1)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 1, 500)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 1, 999)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 1, 1000)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 8, 1000)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, kMaxGpusPerNode, 1000)));
  EXPECT_TRUE(ValidateDemand(D(4000, 8192, 2, 1000, GpuModelMask{0b110})));
}

TEST(DemandValidateTest, CpuOnlyIgnoresModels) {
  // allowed_models does not matter for CPU-only demands.
  EXPECT_TRUE(ValidateDemand(D(1000, 1000, 0, 0, 0)));
}

TEST(DemandValidateTest, RejectsNegativeSizes) {
  ExpectRejected(D(-1, 0, 0, 0), "cpu_milli", "(got -1)");
  ExpectRejected(D(0, -2, 0, 0), "memory_mib", "(got -2)");
  ExpectRejected(D(0, 0, -1, 1000), "num_gpu", "(got -1)");
}

TEST(DemandValidateTest, RejectsTooManyGpus) {
  ExpectRejected(D(0, 0, kMaxGpusPerNode + 1, 1000), "num_gpu", "at most 16");
}

TEST(DemandValidateTest, CpuOnlyMustHaveNoGpuMilli) {
  ExpectRejected(D(0, 0, 0, 100), "gpu_milli", "must be 0 when num_gpu is 0 (got 100)");
}

TEST(DemandValidateTest, GpuMilliRange) {
  ExpectRejected(D(0, 0, 1, 0), "gpu_milli", "(got 0)");
  ExpectRejected(D(0, 0, 1, -5), "gpu_milli", "(got -5)");
  ExpectRejected(D(0, 0, 1, 1001), "gpu_milli", "(got 1001)");
}

TEST(DemandValidateTest, MultiGpuMustBeWhole) {
  ExpectRejected(D(0, 0, 2, 500), "gpu_milli", "must be 1000 when num_gpu > 1");
  ExpectRejected(D(0, 0, 8, 999), "gpu_milli", "(got 999)");
}

TEST(DemandValidateTest, GpuDemandMustAllowSomeModel) {
  ExpectRejected(D(0, 0, 1, 500, 0), "gpu_spec", "allows no GPU model");
}

TEST(DemandValidateTest, FirstFailingFieldIsReported) {
  // cpu_milli is checked before memory_mib and the GPU fields.
  ExpectRejected(D(-1, -1, 2, 500), "cpu_milli", "");
  ExpectRejected(D(0, -1, 2, 500), "memory_mib", "");
}

TEST(DemandTest, KindAndTotal) {
  EXPECT_EQ(D(1, 1, 0, 0).kind(), DemandKind::kCpuOnly);
  EXPECT_EQ(D(1, 1, 1, 300).kind(), DemandKind::kGpuShare);
  EXPECT_EQ(D(1, 1, 1, 1000).kind(), DemandKind::kWholeGpus);
  EXPECT_EQ(D(1, 1, 4, 1000).kind(), DemandKind::kWholeGpus);
  EXPECT_EQ(D(1, 1, 4, 1000).total_gpu_milli(), 4000);
  EXPECT_EQ(D(1, 1, 1, 300).total_gpu_milli(), 300);
  EXPECT_EQ(D(1, 1, 0, 0).total_gpu_milli(), 0);
}

}  // namespace
}  // namespace gpupool
