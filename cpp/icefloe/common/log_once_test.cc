#include "icefloe/common/log_once.h"

#include <gtest/gtest.h>

namespace icefloe {
namespace {

TEST(LogOnceTest, OneLinePerSubjectPerDistinctReason) {
  LogOnce once;
  EXPECT_TRUE(once.First("grpc://w1:50051", "only accepted from 10.0.0.2"));
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(once.First("grpc://w1:50051", "only accepted from 10.0.0.2"));
  }
  EXPECT_TRUE(once.First("grpc://w1:50051", "cannot resolve job-cache-0"));
  EXPECT_TRUE(once.First("grpc://w2:50051", "only accepted from 10.0.0.2"));
}

TEST(LogOnceTest, ForgetLetsTheSubjectLogAgain) {
  LogOnce once;
  EXPECT_FALSE(once.Forget("w1"));
  EXPECT_TRUE(once.First("w1", "refused"));
  EXPECT_TRUE(once.Forget("w1"));
  EXPECT_TRUE(once.First("w1", "refused"));
}

TEST(LogOnceTest, BoundedInSubjectsAndReasons) {
  LogOnce once(/*max_subjects=*/2, /*max_reasons=*/3);
  EXPECT_TRUE(once.First("a", "1"));
  EXPECT_TRUE(once.First("b", "1"));
  EXPECT_FALSE(once.First("c", "1"));  // no room for a third subject
  EXPECT_TRUE(once.First("a", "2"));
  EXPECT_TRUE(once.First("a", "3"));
  EXPECT_FALSE(once.First("a", "4"));  // no room for a fourth reason
  once.Forget("b");
  EXPECT_TRUE(once.First("c", "1"));
}

}  // namespace
}  // namespace icefloe
