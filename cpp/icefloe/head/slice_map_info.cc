// The "slice_map" action: where every row of a dataset lives, and a read
// grant that lets the client build rows tickets (kind 04) itself, so random
// access goes straight to the nodes in one hop (docs/protocol.md, "Slice map").
#include <arrow/util/base64.h>

#include "icefloe/head/head_server.h"
#include "icefloe/head/projection.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

using json = nlohmann::json;

arrow::Result<SliceMapReply> HeadServer::SliceMap(const std::string& name,
                                                  const std::vector<std::string>& columns) const {
  // Lookup refuses datasets that cannot be read and lists live replicas first.
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(name));
  ARROW_ASSIGN_OR_RAISE(Projection projection, Project(entry->schema, columns, "slice_map"));
  SliceMapReply reply;
  for (const auto& s : entry->slices)
    reply.slices.push_back({s.start, s.stop, s.nodes, std::nullopt});
  // The grant signs the storage name and generation, never rows: any rows of
  // this copy are as readable as with a range ticket the head signs for anyone
  // who asks. A reload makes a new generation, which the grant does not cover.
  // A projection is part of the grant (signed): the nodes send those columns.
  const std::string grant = EncodeReadGrant(
      {TicketKind::kGrantedRows, entry->storage_name, entry->generation, projection.columns},
      ticket_key_);
  reply.name = entry->name;
  reply.storage = entry->storage_name;
  reply.generation = entry->generation;
  reply.state = CopyStateName(entry->state);
  reply.rows = entry->num_rows;
  reply.schema = SchemaToBase64(*projection.schema);
  reply.grant = arrow::util::base64_encode(grant);
  return reply;
}

}  // namespace icefloe
