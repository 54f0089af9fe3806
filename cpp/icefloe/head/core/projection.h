// Projection: the columns a descriptor asks for, checked against the
// dataset's schema and turned into the ticket's column indices.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>

namespace icefloe {

/// What a reader receives: the schema of the columns asked for, in the order
/// asked, and their indices in the dataset's schema (for the ticket).
struct Projection {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<uint16_t> columns;  ///< empty: every column (no projection)
};

/// The projection of `schema` onto `names` (empty: every column, unprojected).
/// Invalid, prefixed with `what` ("epoch descriptor"), naming a column that
/// is unknown, named twice or ambiguous, or whose index does not fit a ticket.
arrow::Result<Projection> Project(const std::shared_ptr<arrow::Schema>& schema,
                                  const std::vector<std::string>& names, std::string_view what);

}  // namespace icefloe
