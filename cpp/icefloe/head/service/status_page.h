// The head's status page (GET / on the HTTP side port): one self-refreshing
// HTML page, rendered on the server from the same JSON as the `status` action
// (HeadServer::ClusterStatus), with no scripts and no external assets.
//
// Sections: datasets (state, rows, bytes, slices per node), nodes (liveness,
// heartbeat, a memory bar), jobs reading now (rows/s, stall share, worst
// rank, nodes), loads (running with progress, recently finished).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace icefloe {

/// The page for `status` (ClusterStatus()); every value from it is
/// HTML-escaped. `refresh_s`: how often the browser reloads it.
std::string RenderStatusPage(const nlohmann::json& status, int refresh_s = 5);

/// `text` with & < > " ' escaped for HTML.
std::string HtmlEscape(const std::string& text);

}  // namespace icefloe
