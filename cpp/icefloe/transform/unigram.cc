#include "icefloe/transform/unigram.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

// The library's penalty below the lowest score for an unknown character.
constexpr double kUnkPenalty = 10.0;

std::string Quoted(const std::string& token) {
  return Json(token).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A score as the library reads it: serde_json's default (not
// float_roundtrip) parser takes the number's digits as an integer, then
// multiplies or divides it by one power of ten; with 16 or more digits
// (what its own writer, ryu, gives) that may land one ULP from the
// correctly rounded value nlohmann parsed. The digits are taken as the
// shortest that give `parsed` back, which is what ryu (and Python's json)
// wrote.
double AsSerdeReads(double parsed) {
  static const std::vector<double> kPow10 = [] {
    std::vector<double> p;
    for (int k = 0; k <= 308; ++k)
      p.push_back(std::strtod(("1e" + std::to_string(k)).c_str(), nullptr));
    return p;
  }();
  if (parsed == 0 || !std::isfinite(parsed)) return parsed;
  char buf[64];
  const auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(parsed), std::chars_format::scientific);
  if (ec != std::errc()) return parsed;
  // d.ddddde±x: the digits as an integer, the exponent moved past them.
  const std::string_view text(buf, static_cast<size_t>(end - buf));
  const size_t e = text.find('e');
  uint64_t significand = 0;
  int decimals = -1;
  for (char c : text.substr(0, e)) {
    if (c == '.') {
      decimals = 0;
      continue;
    }
    significand = significand * 10 + static_cast<uint64_t>(c - '0');
    if (decimals >= 0) ++decimals;
  }
  int exponent = std::atoi(std::string(text.substr(e + 1)).c_str()) - std::max(decimals, 0);
  double f = static_cast<double>(significand);
  while (true) {
    const auto k = static_cast<size_t>(exponent < 0 ? -exponent : exponent);
    if (k < kPow10.size()) {
      f = exponent >= 0 ? f * kPow10[k] : f / kPow10[k];
      break;
    }
    if (exponent >= 0) return parsed;  // beyond f64: the library refuses it
    f /= kPow10[308];
    exponent += 308;
  }
  return parsed < 0 ? -f : f;
}

// The best path ending at a position: its score, where its last piece
// starts (-1: none yet) and that piece's id.
struct Best {
  double score = 0;
  int64_t start = -1;
  int32_t id = 0;
};

}  // namespace

arrow::Result<std::unique_ptr<Unigram>> Unigram::FromJson(JsonObject* o) {
  std::unique_ptr<Unigram> m(new Unigram());
  const std::string path = o->PathOf("vocab");
  const Json* vocab = o->Find("vocab");
  if (vocab == nullptr) return Refuse(path, "missing");
  if (!vocab->is_array()) return Refuse(path, "must be a list of [piece, score]");
  if (vocab->empty()) return Refuse(path, "is empty");
  if (vocab->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Refuse(path, vocab->size(), " pieces, more than int32 ids hold");
  }
  m->vocab_.reserve(vocab->size());
  m->scores_.reserve(vocab->size());
  double min_score = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < vocab->size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const Json& e = (*vocab)[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
      return Refuse(at, "must be [piece, score], got ", e.dump());
    }
    std::string piece = e[0].get<std::string>();
    if (piece.empty()) return Refuse(at, "the piece is empty");
    if (!unicode::IsValid(piece)) return Refuse(at, "the piece is not valid UTF-8");
    const auto id = static_cast<int32_t>(i);
    if (auto [it, fresh] = m->vocab_.emplace(piece, id); !fresh) {
      return Refuse(at, Quoted(piece), " is also ", path, "[", it->second,
                    "] (each piece must be given once)");
    }
    if (piece.size() >= m->lengths_.size()) m->lengths_.resize(piece.size() + 1, false);
    m->lengths_[piece.size()] = true;
    const double score = e[1].is_number_float()      ? AsSerdeReads(e[1].get<double>())
                         : e[1].is_number_unsigned() ? static_cast<double>(e[1].get<uint64_t>())
                                                     : static_cast<double>(e[1].get<int64_t>());
    m->scores_.push_back(score);
    if (score < min_score) min_score = score;
  }
  m->unk_score_ = min_score - kUnkPenalty;
  const Json* unk = o->Find("unk_id");
  if (unk == nullptr) {
    return Refuse(o->PathOf("unk_id"),
                  "null is not supported (the library fails on any character outside the "
                  "vocabulary without one)");
  }
  ARROW_ASSIGN_OR_RAISE(int64_t unk_id, o->Int("unk_id", 0, m->vocab_size() - 1));
  m->unk_id_ = static_cast<int32_t>(unk_id);
  ARROW_ASSIGN_OR_RAISE(m->byte_fallback_, o->Bool("byte_fallback", false));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m->vocab_.find(std::string_view(name));
    m->byte_ids_[b] = it == m->vocab_.end() ? -1 : it->second;
  }
  ARROW_RETURN_NOT_OK(o->Done());
  return m;
}

std::optional<int32_t> Unigram::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

int32_t Unigram::Find(std::string_view word, size_t start, size_t len) const {
  auto it = vocab_.find(word.substr(start, len));
  return it == vocab_.end() ? -1 : it->second;
}

void Unigram::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  const size_t n = word.size();
  // The library's encode_optimized: positions in order, each piece that
  // starts there offered to the position it ends at; a strictly better
  // score replaces, so among equals the earliest offer stays.
  std::vector<Best> best(n + 1);
  for (size_t start = 0; start < n;) {
    const double here = best[start].score;
    size_t next = start;
    unicode::Next(word, &next);
    const size_t char_len = next - start;
    bool single = false;
    const size_t longest = std::min(lengths_.size() - 1, n - start);
    for (size_t len = 1; len <= longest; ++len) {
      if (!lengths_[len]) continue;
      const int32_t id = Find(word, start, len);
      if (id < 0) continue;
      Best& target = best[start + len];
      const double candidate = scores_[static_cast<size_t>(id)] + here;
      if (target.start < 0 || candidate > target.score) {
        target = {candidate, static_cast<int64_t>(start), id};
      }
      if (len == char_len) single = true;
    }
    if (!single) {
      Best& target = best[next];
      const double candidate = unk_score_ + here;
      if (target.start < 0 || candidate > target.score) {
        target = {candidate, static_cast<int64_t>(start), unk_id_};
      }
    }
    start = next;
  }
  // Back from the end: the pieces (byte ranges), unk ones fused.
  std::vector<std::pair<size_t, size_t>> pieces;
  size_t fused_start = 0, fused_end = 0;  // a pending fused unk run, if fused_end > 0
  for (size_t end = n; end > 0;) {
    const Best& b = best[end];
    const auto start = static_cast<size_t>(b.start);
    if (b.id == unk_id_) {
      if (fused_end == 0) fused_end = end;
      fused_start = start;
    } else {
      if (fused_end > 0) pieces.emplace_back(fused_start, fused_end);
      fused_end = 0;
      pieces.emplace_back(start, end);
    }
    end = start;
  }
  if (fused_end > 0) pieces.emplace_back(fused_start, fused_end);
  // The library's tokenize: each piece's id, else its bytes, else unk.
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
    const std::string_view piece = word.substr(it->first, it->second - it->first);
    if (auto found = vocab_.find(piece); found != vocab_.end()) {
      ids->push_back(found->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : piece) all = all && byte_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : piece) ids->push_back(byte_ids_[c]);
        continue;
      }
    }
    ids->push_back(unk_id_);
  }
}

}  // namespace icefloe::transform::hf
