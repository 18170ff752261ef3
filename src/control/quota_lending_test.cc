// Quota lending (QUOTA-3) on its own, through a fake Engine: an idle
// guarantee is lent after the window, once; a reserved one never; the loan
// comes back when the lender submits work that does not fit what it kept.
#include "src/control/quota_lending.h"

#include <gtest/gtest.h>

#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::FakeEngineView;
using testing::Whole;

TEST(QuotaLendingTest, AnIdleGuaranteeIsLentAfterTheWindowOnceAndRecalledByASubmission) {
  FakeEngineView f;
  QuotaLending loop;
  f.Node("a");
  f.Apply(QuotaSet{0, 0, Quota{8000, 16000, 1, false}});
  f.clock += 4min;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());  // not idle for the whole window yet
  f.clock += 1min;
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<QuotaLent>().size(), 1u);
  EXPECT_EQ(f.Of<QuotaLent>()[0].milli, 2400);  // 30% of 8 GPUs
  f.clock += 10min;
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<QuotaLent>().size(), 1u);
  // Work that fits in what it kept (5.6 GPUs) leaves the loan where it is.
  JobSpec small;
  small.demand = Whole(4, 1000);
  loop.Submitted(f.state().job(f.Queue(small)), f, f);
  EXPECT_TRUE(f.Of<QuotaRecalled>().empty());
  JobSpec big;
  big.demand = Whole(8, 1000);
  loop.Submitted(f.state().job(f.Queue(big)), f, f);
  ASSERT_EQ(f.Of<QuotaRecalled>().size(), 1u);
  EXPECT_EQ(f.Of<QuotaRecalled>()[0].milli, 2400);
}

TEST(QuotaLendingTest, AReservedGuaranteeOrOneWithQueuedWorkIsNotLent) {
  FakeEngineView f;
  QuotaLending loop;
  f.Node("a");
  f.Apply(QuotaSet{0, 0, Quota{8000, 16000, 1, true}});
  f.clock += 1h;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
  f.Apply(QuotaSet{0, 0, Quota{8000, 16000, 1, false}});
  f.Queue();
  f.clock += 1h;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
}

}  // namespace
}  // namespace gpupool
