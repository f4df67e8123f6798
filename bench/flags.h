#pragma once
// `--name value` pairs after a benchmark's name; every benchmark says which it knows.

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace distrun::bench {

class Flags {
 public:
  // Throws std::invalid_argument for a flag outside `known` or one without a value.
  Flags(int argc, char** argv, int first, const std::set<std::string>& known) {
    for (int i = first; i < argc; i += 2) {
      std::string name = argv[i];
      if (!name.starts_with("--") || !known.count(name.substr(2))) {
        throw std::invalid_argument("unknown flag " + name);
      }
      if (i + 1 >= argc) throw std::invalid_argument(name + " needs a value");
      values_[name.substr(2)] = argv[i + 1];
    }
  }

  std::string Get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  long long Int(const std::string& name, long long fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0') {
      throw std::invalid_argument("--" + name + " needs a number, not '" + it->second + "'");
    }
    return v;
  }
  bool Has(const std::string& name) const { return values_.count(name) != 0; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace distrun::bench
