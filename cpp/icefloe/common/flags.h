// A small command-line flag parser for the thin binaries.
//
// Flags are `--name=value` or `--name value`; booleans are `--name` or
// `--name=false`. A flag may fall back to an environment variable, which is how
// secrets reach a server without showing up in `ps` output. Positional
// arguments are bound in order. Parse errors are Invalid naming the flag.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <arrow/status.h>

namespace icefloe {

class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);

  /// Registers `--name`. When the flag is absent and `env` names a set
  /// variable, its value is used instead.
  void String(const std::string& name, std::string* target, const std::string& help,
              const std::string& env = "");
  void Int(const std::string& name, int64_t* target, const std::string& help,
           const std::string& env = "");
  void Bool(const std::string& name, bool* target, const std::string& help,
            const std::string& env = "");
  /// A byte size such as "8GiB" (see ParseByteSize).
  void Bytes(const std::string& name, int64_t* target, const std::string& help,
             const std::string& env = "");
  /// A flag that may repeat; every value is appended.
  void List(const std::string& name, std::vector<std::string>* target, const std::string& help,
            const std::string& env = "");
  /// An optional positional argument, bound in registration order.
  void Positional(const std::string& name, std::string* target, const std::string& help);

  /// Parses argv[1..]. Returns Invalid for unknown flags, missing values or
  /// values that do not parse.
  arrow::Status Parse(int argc, char** argv);

  bool help_requested() const { return help_requested_; }
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string env;
    std::string default_text;
    bool is_bool = false;
    bool is_list = false;
    std::function<arrow::Status(const std::string&)> set;
  };
  void Add(Flag flag);
  arrow::Status Apply(Flag& flag, const std::string& value);

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::vector<Flag> positionals_;
  bool help_requested_ = false;
};

}  // namespace icefloe
