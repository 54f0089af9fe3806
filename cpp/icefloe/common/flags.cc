#include "icefloe/common/flags.h"

#include <charconv>
#include <cstdlib>
#include <sstream>

#include "icefloe/common/bytes.h"

namespace icefloe {

FlagParser::FlagParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagParser::Add(Flag flag) { flags_.push_back(std::move(flag)); }

void FlagParser::String(const std::string& name, std::string* target, const std::string& help,
                        const std::string& env) {
  Add({name, help, env, *target, false, false, [target](const std::string& v) {
         *target = v;
         return arrow::Status::OK();
       }});
}

void FlagParser::Int(const std::string& name, int64_t* target, const std::string& help,
                     const std::string& env) {
  Add({name, help, env, std::to_string(*target), false, false,
       [target, name](const std::string& v) {
         int64_t parsed = 0;
         auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), parsed);
         if (ec != std::errc() || ptr != v.data() + v.size()) {
           return arrow::Status::Invalid("--", name, ": '", v, "' is not an integer");
         }
         *target = parsed;
         return arrow::Status::OK();
       }});
}

void FlagParser::Bool(const std::string& name, bool* target, const std::string& help,
                      const std::string& env) {
  Add({name, help, env, *target ? "true" : "false", true, false,
       [target, name](const std::string& v) {
         if (v == "" || v == "true" || v == "1" || v == "yes") {
           *target = true;
         } else if (v == "false" || v == "0" || v == "no") {
           *target = false;
         } else {
           return arrow::Status::Invalid("--", name, ": '", v, "' is not a boolean");
         }
         return arrow::Status::OK();
       }});
}

void FlagParser::Bytes(const std::string& name, int64_t* target, const std::string& help,
                       const std::string& env) {
  Add({name, help, env, *target > 0 ? FormatBytes(*target) : "", false, false,
       [target, name](const std::string& v) {
         auto parsed = ParseByteSize(v);
         if (!parsed.ok())
           return arrow::Status::Invalid("--", name, ": ", parsed.status().message());
         *target = *parsed;
         return arrow::Status::OK();
       }});
}

void FlagParser::List(const std::string& name, std::vector<std::string>* target,
                      const std::string& help, const std::string& env) {
  Add({name, help, env, "", false, true, [target](const std::string& v) {
         // Environment values may hold several comma-separated entries.
         std::stringstream ss(v);
         std::string item;
         while (std::getline(ss, item, ',')) {
           if (!item.empty()) target->push_back(item);
         }
         return arrow::Status::OK();
       }});
}

void FlagParser::Positional(const std::string& name, std::string* target, const std::string& help) {
  positionals_.push_back({name, help, "", "", false, false, [target](const std::string& v) {
                            *target = v;
                            return arrow::Status::OK();
                          }});
}

arrow::Status FlagParser::Apply(Flag& flag, const std::string& value) { return flag.set(value); }

arrow::Status FlagParser::Parse(int argc, char** argv) {
  std::vector<bool> seen(flags_.size(), false);
  size_t next_positional = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      return arrow::Status::OK();
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      if (next_positional >= positionals_.size()) {
        return arrow::Status::Invalid("unexpected argument '", arg, "' (see --help)");
      }
      ARROW_RETURN_NOT_OK(Apply(positionals_[next_positional++], arg));
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    size_t index = flags_.size();
    for (size_t f = 0; f < flags_.size(); ++f) {
      if (flags_[f].name == name) index = f;
    }
    if (index == flags_.size())
      return arrow::Status::Invalid("unknown flag --", name, " (see --help)");
    Flag& flag = flags_[index];
    if (!has_value && !flag.is_bool) {
      if (i + 1 >= argc) return arrow::Status::Invalid("--", name, " needs a value");
      value = argv[++i];
    }
    ARROW_RETURN_NOT_OK(Apply(flag, value));
    seen[index] = true;
  }
  for (size_t f = 0; f < flags_.size(); ++f) {
    if (seen[f] || flags_[f].env.empty()) continue;
    if (const char* env = std::getenv(flags_[f].env.c_str()); env != nullptr && *env != '\0') {
      auto st = Apply(flags_[f], env);
      if (!st.ok()) return st.WithMessage("from $", flags_[f].env, ": ", st.message());
    }
  }
  return arrow::Status::OK();
}

std::string FlagParser::Usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]";
  for (const auto& p : positionals_) out << " [" << p.name << "]";
  out << "\n\n" << summary_ << "\n";
  if (!positionals_.empty()) {
    out << "\narguments:\n";
    for (const auto& p : positionals_) out << "  " << p.name << "\n      " << p.help << "\n";
  }
  out << "\nflags:\n";
  for (const auto& f : flags_) {
    out << "  --" << f.name << (f.is_bool ? "" : " VALUE") << "\n      " << f.help;
    if (!f.default_text.empty()) out << " (default: " << f.default_text << ")";
    if (!f.env.empty()) out << " [env: " << f.env << "]";
    out << "\n";
  }
  out << "  --help\n      Show this help and exit.\n";
  return out.str();
}

}  // namespace icefloe
