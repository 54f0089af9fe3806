#include "icefloe/protocol/piece.h"

#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace icefloe {
namespace {

using nlohmann::json;

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

PieceInfo FromJson(const json& j) {
  PieceInfo p;
  p.batch = j["batch"].get<uint64_t>();
  p.batch_size = j["batch_size"].get<uint32_t>();
  p.count = j["count"].get<uint32_t>();
  p.last_size = p.count > 1 ? j["last_size"].get<uint32_t>() : 0;
  for (const auto& f : j["flags"]) {
    p.whole |= f == "whole";
    p.by_reference |= f == "by_reference";
  }
  for (const auto& r : j["runs"]) p.runs.push_back({r[0].get<uint32_t>(), r[1].get<uint32_t>()});
  for (const auto& x : j["positions"]) p.positions.push_back(x.get<uint32_t>());
  for (const auto& s : j["source"])
    p.source.push_back({s[0].get<uint64_t>(), s[1].get<uint32_t>()});
  return p;
}

// The vectors the Python client is tested against too: every valid one
// decodes to its fields and is what the encoder writes for them; every
// invalid one is refused with the words both sides use.
TEST(Piece, SharedVectors) {
  std::ifstream in(ICEFLOE_PROTOCOL_TESTDATA "/pieces.json");
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  int valid = 0, invalid = 0;
  for (const auto& v : doc["vectors"]) {
    SCOPED_TRACE(v["name"].get<std::string>());
    const std::string bytes = FromHex(v["hex"].get<std::string>());
    PieceInfo got;
    const PieceError error = DecodePiece(bytes, &got);
    if (!v["error"].is_null()) {
      ASSERT_NE(error, PieceError::kOk);
      EXPECT_EQ(PieceErrorText(error), v["error"].get<std::string>());
      ++invalid;
      continue;
    }
    ASSERT_EQ(error, PieceError::kOk) << PieceErrorText(error);
    const PieceInfo want = FromJson(v["piece"]);
    EXPECT_EQ(got.batch, want.batch);
    EXPECT_EQ(got.batch_size, want.batch_size);
    EXPECT_EQ(got.count, want.count);
    EXPECT_EQ(got.span_rows(), want.span_rows());
    EXPECT_EQ(got.whole, want.whole);
    EXPECT_EQ(got.by_reference, want.by_reference);
    EXPECT_EQ(got.positions, want.positions);
    ASSERT_EQ(got.runs.size(), want.runs.size());
    for (size_t i = 0; i < got.runs.size(); ++i) {
      EXPECT_EQ(got.runs[i].offset, want.runs[i].offset);
      EXPECT_EQ(got.runs[i].length, want.runs[i].length);
    }
    ASSERT_EQ(got.source.size(), want.source.size());
    for (size_t i = 0; i < got.source.size(); ++i) {
      EXPECT_EQ(got.source[i].start, want.source[i].start);
      EXPECT_EQ(got.source[i].length, want.source[i].length);
    }
    EXPECT_EQ(Hex(EncodePiece(want)), v["hex"].get<std::string>());
    ++valid;
  }
  EXPECT_GE(valid, 8);
  EXPECT_GE(invalid, 15);
}

// Positions given row by row (what a node's gather has) encode exactly as
// the same positions given as runs, in whichever form is smaller.
TEST(Piece, PositionsEncodeAsTheirRuns) {
  const std::vector<std::vector<PieceRun>> cases = {
      {{7, 1}, {2, 1}, {50, 2}, {9, 1}},  // mostly single rows: positions
      {{0, 40}, {60, 30}},                // long runs: runs
      {{5, 1}},
  };
  for (const auto& runs : cases) {
    for (uint32_t count : {1u, 3u}) {
      PieceInfo by_runs{9, 100, runs, count, count > 1 ? 40u : 0u};
      PieceInfo by_rows = by_runs;
      by_rows.runs.clear();
      for (const auto& run : runs) {
        for (uint32_t k = 0; k < run.length; ++k) by_rows.positions.push_back(run.offset + k);
      }
      const std::string bytes = EncodePiece(by_runs);
      EXPECT_EQ(EncodePiece(by_rows), bytes) << runs.size() << " runs, count " << count;
      PieceView view;
      ASSERT_EQ(ParsePiece(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &view),
                PieceError::kOk);
      uint32_t rows = 0;
      for (const auto& run : runs) rows += run.length;
      EXPECT_EQ(view.has(kPiecePositions), rows < 2 * runs.size());
      EXPECT_EQ(view.has(kPieceSpan), count > 1);
      EXPECT_EQ(view.span_rows(), count > 1 ? 240u : 100u);
    }
  }
}

// Any bytes give a piece or an error (the fuzzer does this at length).
TEST(Piece, GarbageIsRefusedNotRead) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed=" << seed);
  std::mt19937 rng(seed);
  PieceInfo p{3, 100, {}, 2, 50};
  p.positions = {1, 9, 120, 4};
  p.by_reference = true;
  p.source = {{10, 4}};
  const std::string good = EncodePiece(p);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = good.substr(0, rng() % (good.size() + 1));
    for (auto& c : bytes) {
      if (rng() % 8 == 0) c = static_cast<char>(rng());
    }
    PieceInfo out;
    if (DecodePiece(bytes, &out) == PieceError::kOk) {
      EXPECT_EQ(bytes.size(), kPieceHeaderBytes + 4 * out.positions.size() + 8 * out.runs.size() +
                                  12 * out.source.size());
    }
  }
}

}  // namespace
}  // namespace icefloe
