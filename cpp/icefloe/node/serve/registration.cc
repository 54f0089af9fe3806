#include "icefloe/node/serve/registration.h"

#include <arrow/flight/client.h>

#include "icefloe/common/log.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

namespace flight = arrow::flight;

HeadRegistration::HeadRegistration(std::string head_location, std::string self_location,
                                   SecurityOptions security, StatusFn status, double interval_s)
    : head_(std::move(head_location)),
      self_(std::move(self_location)),
      security_(std::move(security)),
      status_(std::move(status)),
      interval_s_(interval_s) {}

HeadRegistration::~HeadRegistration() { Stop(); }

void HeadRegistration::Beat() {
  auto call = [&]() -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(head_));
    ARROW_ASSIGN_OR_RAISE(auto client,
                          flight::FlightClient::Connect(location, ClientOptions(security_)));
    std::string body = Dump(RegisterRequest{self_, status_()}.ToJson());
    auto options = CallOptions(security_, 5.0);
    std::string key = security_.TicketKey();
    if (!key.empty()) {
      options.headers.emplace_back(kActionSignatureHeader, SignAction(key, "node.register", body));
    }
    ARROW_ASSIGN_OR_RAISE(
        auto stream, client->DoAction(options, {"node.register", arrow::Buffer::FromString(body)}));
    ARROW_RETURN_NOT_OK(stream->Drain());
    return client->Close();
  };
  arrow::Status st = call();
  bool was = connected_.exchange(st.ok());
  if (st.ok() && !was) LogInfo("registered with head", {{"head", head_}});
  if (!st.ok() && was) LogWarn("lost the head", {{"head", head_}, {"error", st.ToString()}});
  if (!st.ok() && !was) LogDebugOnce(st);
}

void HeadRegistration::LogDebugOnce(const arrow::Status& st) {
  if (!warned_) {
    LogWarn("cannot reach the head yet; retrying", {{"head", head_}, {"error", st.ToString()}});
    warned_ = true;
  }
}

void HeadRegistration::Start() {
  loop_.Start("node heartbeat", BackgroundLoop::Duration(interval_s_), [this] { Beat(); });
}

void HeadRegistration::Stop() { loop_.Stop(); }

}  // namespace icefloe
