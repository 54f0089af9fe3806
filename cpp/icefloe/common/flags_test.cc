#include "icefloe/common/flags.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

arrow::Status ParseArgs(FlagParser& p, std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "prog";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return p.Parse(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST(FlagParser, ParsesEveryKind) {
  std::string host = "127.0.0.1", name;
  int64_t port = 0, mem = 0;
  bool tls = false;
  std::vector<std::string> nodes;
  FlagParser p("prog", "test");
  p.Positional("host", &host, "");
  p.Int("port", &port, "");
  p.Bytes("memory-limit", &mem, "");
  p.Bool("tls", &tls, "");
  p.List("node", &nodes, "");
  p.String("name", &name, "");
  ASSERT_TRUE(ParseArgs(p, {"0.0.0.0", "--port=50051", "--memory-limit", "1GiB", "--tls", "--node",
                            "a", "--node=b", "--name", "x"})
                  .ok());
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 50051);
  EXPECT_EQ(mem, 1LL << 30);
  EXPECT_TRUE(tls);
  EXPECT_EQ(nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(name, "x");
}

TEST(FlagParser, ErrorsNameTheFlag) {
  int64_t port = 0;
  FlagParser p("prog", "test");
  p.Int("port", &port, "");
  auto st = ParseArgs(p, {"--port=abc"});
  ASSERT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("--port"), std::string::npos);
  EXPECT_TRUE(ParseArgs(p, {"--nope"}).IsInvalid());
  EXPECT_TRUE(ParseArgs(p, {"--port"}).IsInvalid());
  EXPECT_TRUE(ParseArgs(p, {"stray"}).IsInvalid());
}

TEST(FlagParser, FallsBackToEnvironment) {
  std::string token;
  FlagParser p("prog", "test");
  p.String("token", &token, "", "ICEFLOE_TEST_TOKEN");
  ::setenv("ICEFLOE_TEST_TOKEN", "s3cret", 1);
  ASSERT_TRUE(ParseArgs(p, {}).ok());
  EXPECT_EQ(token, "s3cret");
  ::unsetenv("ICEFLOE_TEST_TOKEN");
}

TEST(FlagParser, HelpStopsParsing) {
  FlagParser p("prog", "does things");
  ASSERT_TRUE(ParseArgs(p, {"--help", "--bogus"}).ok());
  EXPECT_TRUE(p.help_requested());
  EXPECT_NE(p.Usage().find("does things"), std::string::npos);
}

}  // namespace icefloe
