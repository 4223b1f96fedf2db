#include "services/wire/row_codec.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(RowCodecTest, RowsRoundTripThroughTheMessagesBytes) {
  const std::vector<uint64_t> ids = {3, 17, 0xfeedfacecafebeefull};
  const std::vector<float> values = {1, -2, 3.5f, 1e-30f, 7, 8};
  v1::TableRows message;
  EncodeRows({5, 12, 1, 2, 2}, ids, values, &message);
  v1::TableRows received;
  ASSERT_TRUE(received.ParseFromString(message.SerializeAsString()));
  std::vector<uint64_t> got_ids;
  std::vector<float> got_values;
  absl::StatusOr<TableRowsHeader> header = DecodeRows(received, &got_ids, &got_values);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->table, 5);
  EXPECT_EQ(header->step, 12);
  EXPECT_EQ(header->rank, 1);
  EXPECT_EQ(header->generation, 2);
  EXPECT_EQ(header->dim, 2);
  EXPECT_EQ(got_ids, ids);
  EXPECT_EQ(got_values, values);
  // No rows: a worker whose batch touched none of this shard's.
  EncodeRows({5, 13, 0, 2, 2}, {}, {}, &message);
  ASSERT_TRUE(DecodeRows(message, &got_ids, &got_values).ok());
  EXPECT_TRUE(got_ids.empty());
}

TEST(RowCodecTest, RefusesIdsOutOfOrderAndValuesThatAreNotTheirRows) {
  std::vector<uint64_t> ids;
  std::vector<float> values;
  v1::TableRows message;
  EncodeRows({5, 12, 1, 0, 2}, std::vector<uint64_t>{3, 3}, std::vector<float>(4), &message);
  EXPECT_EQ(DecodeRows(message, &ids, &values).status().message(),
            "rows of table 5 from worker 1 for step 12: id 3 at 1 after 3; a message's ids are "
            "ascending, each once");
  EncodeRows({5, 12, 1, 0, 2}, std::vector<uint64_t>{3, 4}, std::vector<float>(3), &message);
  EXPECT_EQ(DecodeRows(message, &ids, &values).status().message(),
            "rows of table 5 from worker 1 for step 12: 12 bytes of values for 2 rows of 2 F32 "
            "(16 bytes)");
  EncodeRows({5, 12, 1, 0, 0}, {}, {}, &message);
  EXPECT_FALSE(DecodeRows(message, &ids, &values).ok());
}

}  // namespace
}  // namespace cohort
