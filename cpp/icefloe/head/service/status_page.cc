#include "icefloe/head/service/status_page.h"

#include <algorithm>
#include <cstdio>

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 .2em} h2{font-size:16px;margin:1.4em 0 .4em}
table{border-collapse:collapse;min-width:40em;background:#fff}
th,td{border-bottom:1px solid #e3e6ea;padding:.3em .7em;text-align:left;vertical-align:middle}
th{background:#eef1f5;font-weight:600} td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;width:10em;height:.8em;background:#e3e6ea;border-radius:3px;
     vertical-align:middle;margin-right:.5em;overflow:hidden}
.bar>span{display:block;height:100%;background:#3b82f6}
.bar.warn>span{background:#f59e0b} .bar.bad>span{background:#dc2626}
.ok{color:#15803d;font-weight:600} .bad{color:#dc2626;font-weight:600}
.warn{color:#b45309;font-weight:600} .muted{color:#6b7280}
)";

// Accessors that never throw, whatever the JSON holds.
std::string Text(const json& v) {
  if (v.is_null()) return "";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? "" : Text(*it);
}

// The member `key` of `j`, or null (which iterates as empty).
const json& Member(const json& j, const char* key) {
  static const json kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

size_t Size(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? it->size() : 0;
}

double Num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// 1234567 -> "1,234,567".
std::string Count(double v) {
  std::string digits = Fixed(v, 0), out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[i]);
    if (digits[i] != '-' && (n - i - 1) % 3 == 0 && i + 1 < n) out.push_back(',');
  }
  return out;
}

std::string Bytes(double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return Fixed(v, u == 0 ? 0 : 1) + " " + units[u];
}

// A bar filled to `share` (0..1), coloured by how bad `share` is for `kind`.
std::string Bar(double share, double warn_at, double bad_at) {
  share = std::clamp(share, 0.0, 1.0);  // display only: the value is printed next to it
  const char* cls = share >= bad_at ? "bar bad" : share >= warn_at ? "bar warn" : "bar";
  return std::string("<span class=\"") + cls + "\"><span style=\"width:" + Fixed(share * 100, 1) +
         "%\"></span></span>";
}

std::string StateCell(const std::string& state) {
  const char* cls =
      state == "ready" || state == "alive" || state == "following" ? "ok"
      : state == "failed" || state == "dead"                       ? "bad"
      : state == "degraded" || state == "healing" || state == "loading" || state == "refreshing"
          ? "warn"
          : "muted";
  return std::string("<td class=\"") + cls + "\">" + HtmlEscape(state) + "</td>";
}

void Datasets(const json& status, std::string* out) {
  *out += "<h2>Datasets</h2>\n";
  const json datasets = Member(status, "datasets");
  if (datasets.empty()) {
    *out += "<p class=\"muted\">No datasets.</p>\n";
    return;
  }
  *out +=
      "<table><tr><th>dataset</th><th>state</th><th>rows</th><th>bytes</th>"
      "<th>slices per node</th></tr>\n";
  for (const auto& d : datasets) {
    std::string slices;
    const json per_node = Member(d, "slices_per_node");  // [{node, slices}]
    for (const auto& n : per_node.is_array() ? per_node : json::array()) {
      slices += (slices.empty() ? "" : "<br>") + HtmlEscape(Str(n, "node")) + ": " +
                Count(Num(n, "slices"));
    }
    *out += "<tr><td>" + HtmlEscape(Str(d, "name")) + "</td>" + StateCell(Str(d, "state")) +
            "<td class=\"n\">" + Count(Num(d, "rows")) + "</td><td class=\"n\">" +
            Bytes(Num(d, "bytes")) + "</td><td>" + slices + "</td></tr>\n";
  }
  *out += "</table>\n";
}

void Nodes(const json& status, std::string* out) {
  *out += "<h2>Nodes</h2>\n";
  const json nodes = Member(status, "nodes");
  if (nodes.empty()) {
    *out += "<p class=\"muted\">No data nodes.</p>\n";
    return;
  }
  *out +=
      "<table><tr><th>node</th><th>state</th><th>last heartbeat</th><th>memory</th>"
      "<th>disk tier</th><th>datasets</th></tr>\n";
  for (const auto& n : nodes) {
    const double used = Num(n, "memory_used_bytes"), limit = Num(n, "memory_limit_bytes");
    const double seen = n.contains("last_seen_s") ? Num(n, "last_seen_s") : -1;  // absent: never
    std::string memory = Bytes(used);
    if (limit > 0) {
      memory = Bar(used / limit, 0.8, 0.95) + Bytes(used) + " of " + Bytes(limit) + " (" +
               Bytes(std::max(0.0, limit - used)) + " free)";
    } else {
      memory += " (no limit)";
    }
    const double disk_used = Num(n, "disk_used_bytes"), disk_limit = Num(n, "disk_limit_bytes");
    std::string disk = disk_limit > 0 ? Bar(disk_used / disk_limit, 0.8, 0.95) + Bytes(disk_used) +
                                            " of " + Bytes(disk_limit)
                                      : std::string("none");
    const double ram_read = Num(n, "tier_ram_bytes"), disk_read = Num(n, "tier_disk_bytes");
    if (ram_read + disk_read > 0) {
      disk += "; read " + Fixed(100 * ram_read / (ram_read + disk_read), 1) + "% from RAM, " +
              Bytes(disk_read) + " waited for; " + Count(Num(n, "prefetch_lead_batches")) +
              " batches ahead";
    }
    *out += "<tr><td>" + HtmlEscape(Str(n, "location")) + "</td>" + StateCell(Str(n, "state")) +
            "<td class=\"n\">" + (seen < 0 ? std::string("never") : Fixed(seen, 1) + " s ago") +
            "</td><td>" + memory + "</td><td>" + disk + "</td><td class=\"n\">" +
            Count(static_cast<double>(Size(n, "datasets"))) + "</td></tr>\n";
  }
  *out += "</table>\n";
}

void Jobs(const json& status, std::string* out) {
  *out += "<h2>Jobs reading now</h2>\n";
  const json jobs = Member(status, "jobs");
  if (jobs.empty()) {
    *out += "<p class=\"muted\">No job has reported in the last two minutes.</p>\n";
    return;
  }
  *out +=
      "<table><tr><th>job</th><th>datasets</th><th>consumers</th><th>rows/s</th>"
      "<th>waiting on data</th><th>worst rank</th><th>nodes</th></tr>\n";
  for (const auto& j : jobs) {
    std::string datasets, nodes;
    const json job_datasets = Member(j, "datasets");
    const json job_sources = Member(j, "sources");
    const json job_nodes = Member(j, "nodes");
    // Each source's progress (a mixture reads several); a head without
    // `sources` names the datasets only.
    for (const auto& s : job_sources) {
      datasets += (datasets.empty() ? "" : "<br>") + HtmlEscape(Str(s, "dataset")) + ": " +
                  Count(Num(s, "rows_total")) + " rows, " + Count(Num(s, "rows_per_s")) + " rows/s";
    }
    if (job_sources.empty()) {
      for (const auto& d : job_datasets) {
        datasets += (datasets.empty() ? "" : ", ") + HtmlEscape(Text(d));
      }
    }
    for (const auto& n : job_nodes) nodes += (nodes.empty() ? "" : "<br>") + HtmlEscape(Text(n));
    const double stall = Num(j, "stall_ratio");
    *out += "<tr><td>" + HtmlEscape(Str(j, "job")) + "</td><td>" + datasets +
            "</td><td class=\"n\">" + Count(Num(j, "consumers")) + "</td><td class=\"n\">" +
            Count(Num(j, "rows_per_s")) + "</td><td>" + Bar(stall, 0.1, 0.3) +
            Fixed(stall * 100, 1) + " %</td><td>rank " + Str(j, "worst_rank") + ": " +
            Fixed(Num(j, "worst_rank_stall_ratio") * 100, 1) + " %</td><td>" + nodes +
            "</td></tr>\n";
  }
  *out += "</table>\n";
}

void Loads(const json& status, std::string* out) {
  *out += "<h2>Loads</h2>\n";
  const json running = Member(status, "loads");
  const json recent = Member(status, "recent_loads");
  if (running.empty() && recent.empty()) {
    *out += "<p class=\"muted\">No loads yet.</p>\n";
    return;
  }
  *out +=
      "<table><tr><th>dataset</th><th>state</th><th>progress</th><th>rows</th>"
      "<th>bytes</th><th>time</th></tr>\n";
  for (const auto& l : running) {
    const double done = Num(l, "tasks_done"), total = Num(l, "tasks_total");
    *out += "<tr><td>" + HtmlEscape(Str(l, "name")) + "</td>" + StateCell("loading") + "<td>" +
            Bar(total > 0 ? done / total : 0, 2, 2) + HtmlEscape(Str(l, "phase")) + " " +
            Count(done) + "/" + Count(total) + " files</td><td></td><td class=\"n\">~" +
            Bytes(Num(l, "estimated_bytes")) + "</td><td class=\"n\">" +
            Fixed(Num(l, "seconds"), 1) + " s</td></tr>\n";
  }
  for (const auto& l : recent) {
    const std::string state = Str(l, "state");
    const std::string error = Str(l, "error");
    *out += "<tr><td>" + HtmlEscape(Str(l, "name")) + "</td>" + StateCell(state) + "<td>" +
            (error.empty() ? std::string("done ") + Fixed(Num(l, "finished_s_ago"), 0) + " s ago"
                           : HtmlEscape(error)) +
            "</td><td class=\"n\">" + Count(Num(l, "rows")) + "</td><td class=\"n\">" +
            Bytes(Num(l, "bytes")) + "</td><td class=\"n\">" + Fixed(Num(l, "load_seconds"), 2) +
            " s</td></tr>\n";
  }
  *out += "</table>\n";
}

// "12.3 s ago" for a number of seconds, "never" for null.
std::string Ago(const json& f, const char* key) {
  auto it = f.find(key);
  if (it == f.end() || !it->is_number()) return "never";
  return Fixed(it->get<double>(), 1) + " s ago";
}

// The follower (--follow): shown only when it is on.
void Following(const json& status, std::string* out) {
  const json& follow = Member(status, "follow");
  const double period_s = Num(follow, "period_s");
  if (period_s <= 0) return;
  *out += "<h2>Following tables <span class=\"muted\">(every " + Fixed(period_s, 0) +
          " s)</span></h2>\n";
  const json datasets = Member(follow, "datasets");
  if (datasets.empty()) {
    *out += "<p class=\"muted\">No datasets.</p>\n";
    return;
  }
  *out +=
      "<table><tr><th>dataset</th><th>state</th><th>snapshot</th><th>table's snapshot</th>"
      "<th>last check</th><th>last refresh</th><th>lag</th><th>errors</th></tr>\n";
  for (const auto& f : datasets) {
    const json& followed = Member(f, "followed");
    if (followed.is_boolean() && !followed.get<bool>()) {
      *out += "<tr><td>" + HtmlEscape(Str(f, "name")) + "</td>" + StateCell("not followed") +
              "<td colspan=\"6\" class=\"muted\">" + HtmlEscape(Str(f, "why_not")) + "</td></tr>\n";
      continue;
    }
    const std::string error = Str(f, "last_error");
    const json& lag = Member(f, "lag_s");
    *out += "<tr><td>" + HtmlEscape(Str(f, "name")) + "</td>" + StateCell(Str(f, "state")) +
            "<td class=\"n\">" + HtmlEscape(Str(f, "snapshot_id")) + "</td><td class=\"n\">" +
            HtmlEscape(Str(f, "table_snapshot_id")) + "</td><td class=\"n\">" +
            Ago(f, "last_check_s_ago") + "</td><td class=\"n\">" + Ago(f, "last_refresh_s_ago") +
            "</td><td class=\"n\">" +
            (lag.is_number() ? Fixed(lag.get<double>(), 1) + " s" : std::string()) + "</td>" +
            (error.empty() ? std::string("<td class=\"n\">") + Count(Num(f, "errors")) + "</td>"
                           : "<td class=\"bad\">" + Count(Num(f, "errors")) + ", last " +
                                 Ago(f, "last_error_s_ago") + ": " + HtmlEscape(error) + "</td>") +
            "</tr>\n";
  }
  *out += "</table>\n";
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string RenderStatusPage(const json& status, int refresh_s) {
  const json& ready_value = Member(status, "ready");
  const bool ready = ready_value.is_boolean() && ready_value.get<bool>();
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"" +
      std::to_string(refresh_s) + "\"><title>icefloe status</title><style>" + kStyle +
      "</style></head><body>\n<h1>icefloe</h1>\n<p>Head <span class=\"" +
      (ready ? "ok\">ready" : "bad\">not ready") + "</span> <span class=\"muted\">" +
      HtmlEscape(Str(status, "reason")) + " &middot; refreshes every " + std::to_string(refresh_s) +
      " s &middot; <a href=\"/metrics\">metrics</a> &middot; <a href=\"/status\">JSON</a>"
      "</span></p>\n";
  Datasets(status, &out);
  Nodes(status, &out);
  Jobs(status, &out);
  Loads(status, &out);
  Following(status, &out);
  out += "</body></html>\n";
  return out;
}

}  // namespace icefloe
