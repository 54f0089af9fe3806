// libFuzzer target for every message parser: JSON bodies (actions,
// descriptors, node messages and replies) and the binary tickets. Any bytes
// must give a value or an error, never a crash, a leak, an exception, undefined
// behaviour, an endless loop or a huge allocation. Build with -DICEFLOE_FUZZ=ON
// and clang; seed it with the corpus:
//   protocol_fuzz -max_total_time=60 -rss_limit_mb=2048 corpus/
//   cpp/icefloe/protocol/testdata/corpus
//
// The first byte picks the parser: 0xFF the binary tickets and pieces, any
// other value the message kMessages[byte % kNumMessages] (so adding a message
// does not move the tickets' seeds); the rest is the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/piece.h"
#include "icefloe/protocol/plan_ticket.h"
#include "icefloe/protocol/ticket.h"

namespace {

constexpr std::string_view kMessages[] = {"load",
                                          "describe",
                                          "evict",
                                          "descriptor",
                                          "node.register",
                                          "node.status reply",
                                          "node.load",
                                          "node.load_status",
                                          "node.load_status reply",
                                          "node.commit",
                                          "node.commit reply",
                                          "node.evict",
                                          "node.evict reply",
                                          "job.report",
                                          "dataset description",
                                          "slice",
                                          "load progress",
                                          "evict reply",
                                          "slice_map reply",
                                          "ok reply",
                                          "status reply",
                                          "epoch shape",
                                          "shared file"};
constexpr size_t kNumMessages = sizeof(kMessages) / sizeof(kMessages[0]);

void Tickets(std::string_view bytes) {
  (void)icefloe::DecodeKubeflowTicket(bytes);
  for (std::string_view secret : {std::string_view(), std::string_view("fuzz secret")}) {
    auto ticket = icefloe::DecodeNativeTicket(bytes, secret);
    if (!ticket.ok()) continue;
    (void)icefloe::DecodeRangeBody(ticket->body);
    (void)icefloe::DecodePlanBody(ticket->body);
    (void)icefloe::DecodeRowsBody(ticket->body);
    (void)icefloe::CheckTicketColumns(ticket->header.columns, 16);
  }
  (void)icefloe::DecodePlanBody(bytes);
  (void)icefloe::DecodeRowsBody(bytes);
  icefloe::PieceInfo piece;
  (void)icefloe::DecodePiece(bytes, &piece);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] == 0xFF) {
    Tickets(input);
  } else {
    (void)icefloe::ParseMessage(kMessages[data[0] % kNumMessages], input);
  }
  return 0;
}
