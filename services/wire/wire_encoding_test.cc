#include "services/wire/wire_encoding.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/tensor/tensor.h"

namespace cohort {
namespace {

// Values that exercise rounding: normal, tiny (F16 subnormals and underflow), huge (F16
// overflow), ties, signed zeros.
std::vector<float> Awkward(size_t n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-30, 20), mantissa(1, 2);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = (i % 2 ? -1.0f : 1.0f) * mantissa(rng) * std::exp2(exponent(rng));
  }
  v[0] = 0.0f;
  v[1] = -0.0f;
  v[2] = 1.0f + std::exp2(-11.0f);  // an F16 tie: rounds to even
  v[3] = 70000.0f;                  // beyond F16: infinity
  v[4] = 6e-8f;                     // an F16 subnormal
  return v;
}

// A byte string cut into chunks of the given sizes (cycled), as the transport delivers it.
std::vector<absl::Span<const char>> Cut(const std::string& bytes, std::vector<size_t> sizes) {
  std::vector<absl::Span<const char>> chunks;
  for (size_t pos = 0, i = 0; pos < bytes.size(); ++i) {
    const size_t n = std::min(sizes[i % sizes.size()], bytes.size() - pos);
    chunks.emplace_back(bytes.data() + pos, n);
    pos += n;
  }
  return chunks;
}

std::string Encoded(WireEncoding e, const std::vector<float>& values, float threshold = 0,
                    std::vector<float>* residual = nullptr) {
  std::string out(EncodedBytes(e, values.size()), '\0');
  EncodeValues(e, values, threshold, residual != nullptr ? residual->data() : nullptr, out.data());
  return out;
}

// The vectorised 16-bit conversions give the reference's bits (round to nearest even), and
// decoding gives the reference's floats, whatever chunks the bytes arrive in.
TEST(WireEncodingTest, SixteenBitEncodingsMatchTheReferenceConversions) {
  const std::vector<float> values = Awkward(10'003);  // not a multiple of the vector width
  for (WireEncoding e : {WireEncoding::kF16, WireEncoding::kBF16}) {
    const std::string bytes = Encoded(e, values);
    ASSERT_EQ(bytes.size(), 2 * values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, bytes.data() + 2 * i, 2);
      const uint16_t want =
          e == WireEncoding::kF16 ? FloatToF16(values[i]) : FloatToBf16(values[i]);
      ASSERT_EQ(bits, want) << WireEncodingName(e) << " value " << values[i] << " at " << i;
    }
    for (const std::vector<size_t>& sizes :
         std::vector<std::vector<size_t>>{{1 << 20}, {3}, {7, 16384, 5}}) {
      const auto chunks = Cut(bytes, sizes);
      std::vector<float> back(values.size());
      ASSERT_TRUE(DecodeValues(e, chunks, 0, absl::MakeSpan(back)).ok());
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        const float want = e == WireEncoding::kF16 ? F16ToFloat(bits) : Bf16ToFloat(bits);
        ASSERT_EQ(back[i], want) << i;
      }
    }
  }
  std::vector<float> nan = {std::nanf("")};
  std::vector<float> back(1);
  for (WireEncoding e : {WireEncoding::kF16, WireEncoding::kBF16}) {
    const std::string bytes = Encoded(e, nan);
    const auto chunks = Cut(bytes, {2});
    ASSERT_TRUE(DecodeValues(e, chunks, 0, absl::MakeSpan(back)).ok());
    EXPECT_TRUE(std::isnan(back[0])) << WireEncodingName(e);  // the shard refuses it
  }
}

// 2-bit with error feedback: every code is ±threshold or 0, and what was not sent stays in the
// residual, so that over the steps the sum sent equals the sum of the gradients minus the
// residual, exactly as a person checks it.
TEST(WireEncodingTest, TwoBitKeepsWhatItDidNotSendInTheResidual) {
  const float t = 0.5f;
  std::vector<float> residual(5, 0.0f);
  std::vector<float> sent_sum(5, 0.0f), grad_sum(5, 0.0f);
  const std::vector<std::vector<float>> steps = {{0.3f, -0.7f, 0.5f, 0.0f, 2.0f},
                                                 {0.3f, -0.1f, -0.2f, 0.1f, 0.0f},
                                                 {0.25f, 0.0f, 0.0f, -0.75f, 0.0f}};
  for (const std::vector<float>& g : steps) {
    const std::string bytes = Encoded(WireEncoding::kTwoBit, g, t, &residual);
    ASSERT_EQ(bytes.size(), 2u);  // 5 values: two bytes
    std::vector<float> decoded(5);
    const auto chunks = Cut(bytes, {1});
    ASSERT_TRUE(DecodeValues(WireEncoding::kTwoBit, chunks, t, absl::MakeSpan(decoded)).ok());
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(decoded[i] == 0 || decoded[i] == t || decoded[i] == -t) << decoded[i];
      sent_sum[i] += decoded[i];
      grad_sum[i] += g[i];
    }
  }
  // Step 1: 0.3 stays; -0.7 sends -0.5; 0.5 sends 0.5; 2.0 sends 0.5 and keeps 1.5.
  // Step 2: 0.6 sends 0.5; ... the residual holds the difference everywhere.
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_FLOAT_EQ(sent_sum[i] + residual[i], grad_sum[i]) << i;
    EXPECT_LT(std::fabs(residual[i]), 1.5f + 1e-6f) << i;
  }
  EXPECT_FLOAT_EQ(sent_sum[0], 0.5f);
  EXPECT_FLOAT_EQ(sent_sum[4], 1.5f);  // 2.0 needs four steps at 0.5 a step: one to go
  EXPECT_FLOAT_EQ(residual[4], 0.5f);
}

TEST(WireEncodingTest, MalformedBytesAreRefused) {
  std::vector<float> out(5);
  const std::string three = "\x03\x00";  // code 3 stands for nothing
  const auto chunks = Cut(three, {2});
  EXPECT_FALSE(DecodeValues(WireEncoding::kTwoBit, chunks, 0.5f, absl::MakeSpan(out)).ok());
  const std::string short_f16(8, '\0');  // 4 halves for 5 values
  const auto short_chunks = Cut(short_f16, {8});
  EXPECT_EQ(DecodeValues(WireEncoding::kF16, short_chunks, 0, absl::MakeSpan(out)).message(),
            "8 bytes of F16 values, not the 10 that 5 values take");
}

TEST(WireEncodingTest, CompressionFlagParses) {
  EXPECT_EQ(ParseGradientCompression("none")->encoding, WireEncoding::kF32);
  EXPECT_EQ(ParseGradientCompression("fp16")->encoding, WireEncoding::kF16);
  EXPECT_EQ(ParseGradientCompression("bf16")->encoding, WireEncoding::kBF16);
  EXPECT_EQ(ParseGradientCompression("2bit")->threshold, 0.5f);
  EXPECT_EQ(ParseGradientCompression("2bit:0.125")->threshold, 0.125f);
  EXPECT_EQ(GradientCompressionName(*ParseGradientCompression("2bit:0.125")), "2bit:0.125");
  for (const char* bad : {"fp8", "2bit:", "2bit:-1", "2bit:x"}) {
    EXPECT_FALSE(ParseGradientCompression(bad).ok()) << bad;
  }
  EXPECT_EQ(AnswerEncoding(WireEncoding::kTwoBit), WireEncoding::kF32);
  EXPECT_EQ(AnswerEncoding(WireEncoding::kBF16), WireEncoding::kBF16);
}

}  // namespace
}  // namespace cohort
