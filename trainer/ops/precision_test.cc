#include "trainer/ops/precision.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(PrecisionTest, ParsesEveryNameAndRoundTrips) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp16}) {
    auto parsed = ParsePrecision(PrecisionName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(StorageDType(Precision::kTf32), DType::kF32);
  EXPECT_EQ(StorageDType(Precision::kBf16), DType::kBF16);
  EXPECT_EQ(StorageDType(Precision::kFp16), DType::kF16);
}

TEST(PrecisionTest, RejectsUnknownNamesWithTheChoices) {
  auto parsed = ParsePrecision("int8");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("fp32, tf32, bf16 or fp16"), std::string::npos);
}

}  // namespace
}  // namespace cohort
