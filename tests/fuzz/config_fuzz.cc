// Fuzzes the YAML config: parsing and option resolution either succeed or throw UsageError.

#include <cstddef>
#include <cstdint>
#include <string>

#include "detect/errors.h"
#include "launcher/config/config_file.h"
#include "launcher/config/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace distrun;
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ConfigFile config = ParseConfigText(text, "fuzz.yaml");
    ResolveOptions({}, {}, config.values);
  } catch (const UsageError&) {
  }
  return 0;
}
