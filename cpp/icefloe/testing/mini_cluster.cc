#include "icefloe/testing/mini_cluster.h"

#include <arrow/array/builder_primitive.h>
#include <arrow/io/file.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/writer.h>

#include "icefloe/common/server_util.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::testing {

namespace flight = arrow::flight;

arrow::Result<std::unique_ptr<MiniCluster>> MiniCluster::Start(MiniClusterOptions options) {
  std::unique_ptr<MiniCluster> c(new MiniCluster());
  c->security_.ticket_key = options.secret;
  ARROW_ASSIGN_OR_RAISE(auto listen, ListenLocation("127.0.0.1", 0, false));
  for (int i = 0; i < options.num_nodes; ++i) {
    NodeOptions node;
    node.security = c->security_;
    node.memory_limit_bytes = options.node_memory_limit_bytes;
    auto server = std::make_unique<NodeServer>(node);
    ARROW_RETURN_NOT_OK(server->Init(flight::FlightServerOptions(listen)));
    std::string location = "grpc://127.0.0.1:" + std::to_string(server->port());
    server->set_advertised_location(location);
    c->node_locations_.push_back(location);
    c->nodes_.push_back(std::move(server));
  }
  HeadOptions head;
  head.nodes = c->node_locations_;
  head.security = c->security_;
  head.planner = options.planner;
  head.loads = options.loads;
  head.registry.call_timeout_s = 2;
  c->head_ = std::make_unique<HeadServer>(head);
  ARROW_RETURN_NOT_OK(c->head_->Init(flight::FlightServerOptions(listen)));
  c->head_location_ = "grpc://127.0.0.1:" + std::to_string(c->head_->port());
  c->head_->StartBackground();  // polls every node once first
  if (!c->head_->Ready().first) {
    return arrow::Status::IOError("mini cluster not ready: ", c->head_->Ready().second);
  }
  return c;
}

MiniCluster::~MiniCluster() {
  clients_.clear();
  if (head_) {
    head_->StopBackground();
    (void)head_->Shutdown();
  }
  for (auto& n : nodes_) {
    if (n) {
      n->StopBackground();
      (void)n->Shutdown();
    }
  }
}

void MiniCluster::StopNode(int i) {
  auto& n = nodes_[static_cast<size_t>(i)];
  n->StopBackground();
  (void)n->Shutdown();
}

arrow::Result<flight::FlightClient*> MiniCluster::Client(const std::string& location) {
  auto& slot = clients_[location];
  if (!slot) {
    ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(location));
    ARROW_ASSIGN_OR_RAISE(slot, flight::FlightClient::Connect(loc));
  }
  return slot.get();
}

arrow::Result<std::vector<std::string>> MiniCluster::Action(const std::string& location,
                                                            const std::string& type,
                                                            const std::string& body, bool sign) {
  ARROW_ASSIGN_OR_RAISE(auto* client, Client(location));
  auto options = CallOptions(security_, 30);
  if (sign) {
    options.headers.emplace_back(kActionSignatureHeader,
                                 SignAction(security_.TicketKey(), type, body));
  }
  ARROW_ASSIGN_OR_RAISE(auto stream,
                        client->DoAction(options, {type, arrow::Buffer::FromString(body)}));
  std::vector<std::string> out;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto r, stream->Next());
    if (!r) break;
    out.push_back(r->body->ToString());
  }
  return out;
}

arrow::Result<std::string> MiniCluster::Load(const std::string& body) {
  ARROW_ASSIGN_OR_RAISE(auto results, Action(head_location_, "load", body));
  if (results.empty()) return arrow::Status::IOError("load gave no result");
  return results.back();
}

arrow::Result<flight::FlightInfo> MiniCluster::Info(const std::string& cmd) {
  ARROW_ASSIGN_OR_RAISE(auto* client, Client(head_location_));
  ARROW_ASSIGN_OR_RAISE(auto info, client->GetFlightInfo(CallOptions(security_, 30),
                                                         flight::FlightDescriptor::Command(cmd)));
  return std::move(*info);
}

arrow::Result<std::shared_ptr<arrow::Table>> MiniCluster::ReadAll(const flight::FlightInfo& info) {
  ARROW_ASSIGN_OR_RAISE(auto schema, info.GetSchema(nullptr));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (const auto& e : info.endpoints()) {
    ARROW_ASSIGN_OR_RAISE(auto* client, Client(e.locations[0].ToString()));
    ARROW_ASSIGN_OR_RAISE(auto reader, client->DoGet(CallOptions(security_, 30), e.ticket));
    ARROW_ASSIGN_OR_RAISE(auto table, reader->ToTable());
    ARROW_ASSIGN_OR_RAISE(auto combined, table->CombineChunksToBatch());
    if (combined->num_rows() > 0) batches.push_back(combined);
  }
  return arrow::Table::FromRecordBatches(schema, batches);
}

arrow::Result<iceberg::ScanTask> WriteIdFile(const std::string& path, int64_t first_id,
                                             int64_t rows) {
  arrow::Int64Builder builder;
  for (int64_t i = 0; i < rows; ++i) ARROW_RETURN_NOT_OK(builder.Append(first_id + i));
  ARROW_ASSIGN_OR_RAISE(auto ids, builder.Finish());
  auto field = arrow::field("id", arrow::int64(), false,
                            arrow::key_value_metadata({"PARQUET:field_id"}, {"1"}));
  auto table = arrow::Table::Make(arrow::schema({field}), {ids});
  ARROW_ASSIGN_OR_RAISE(auto out, arrow::io::FileOutputStream::Open(path));
  ARROW_RETURN_NOT_OK(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out,
                                                 /*chunk_size=*/1000));
  ARROW_RETURN_NOT_OK(out->Close());
  iceberg::ScanTask task;
  task.data_file.file_path = path;
  task.data_file.record_count = rows;
  task.data_file.file_size_in_bytes = rows * 8;
  return task;
}

arrow::Result<iceberg::ScanPlan> IdPlan(const std::string& table,
                                        std::vector<iceberg::ScanTask> tasks) {
  iceberg::ScanPlan plan;
  plan.metadata_location = table;
  plan.table_uuid = table;
  plan.snapshot_id = 1;
  plan.schema.fields.push_back(
      {1, "id", true, iceberg::MakePrimitive(iceberg::TypeId::kLong), "", ""});
  plan.projection = {1};
  ARROW_ASSIGN_OR_RAISE(plan.arrow_schema, iceberg::ToArrowSchema(plan.schema, &plan.projection));
  plan.tasks = std::move(tasks);
  return plan;
}

}  // namespace icefloe::testing
