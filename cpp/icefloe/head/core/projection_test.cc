#include "icefloe/head/core/projection.h"

#include <arrow/type.h>
#include <gtest/gtest.h>

namespace icefloe {
namespace {

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("label", arrow::int32()),
                        arrow::field("f0", arrow::float32()),
                        arrow::field("f1", arrow::float32())});
}

TEST(Project, NoNamesIsEveryColumnUnprojected) {
  auto p = Project(Schema(), {}, "range descriptor");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->columns.empty());
  EXPECT_TRUE(p->schema->Equals(*Schema()));
}

TEST(Project, KeepsTheRequestedOrder) {
  auto p = Project(Schema(), {"f1", "id"}, "epoch descriptor");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->columns, (std::vector<uint16_t>{3, 0}));
  EXPECT_EQ(p->schema->ToString(), "f1: float\nid: int64");
}

TEST(Project, UnknownDuplicateAndAmbiguousNamesAreInvalidNamingTheColumn) {
  auto unknown = Project(Schema(), {"id", "nope"}, "rows descriptor");
  ASSERT_TRUE(unknown.status().IsInvalid());
  EXPECT_NE(unknown.status().message().find("rows descriptor: 'columns'[1]: no column 'nope'"),
            std::string::npos)
      << unknown.status();
  auto twice = Project(Schema(), {"f0", "label", "f0"}, "epoch descriptor");
  ASSERT_TRUE(twice.status().IsInvalid());
  EXPECT_NE(twice.status().message().find("'f0' is asked for twice"), std::string::npos)
      << twice.status();
  auto dup_schema =
      arrow::schema({arrow::field("x", arrow::int8()), arrow::field("x", arrow::int8())});
  auto ambiguous = Project(dup_schema, {"x"}, "range descriptor");
  ASSERT_TRUE(ambiguous.status().IsInvalid());
  EXPECT_NE(ambiguous.status().message().find("ambiguous"), std::string::npos);
}

}  // namespace
}  // namespace icefloe
