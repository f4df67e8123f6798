#include "detect/devices.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include "detect/directory.h"
#include "detect/errors.h"
#include "detect/parse.h"
#include "detect/sysfs_word.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;

std::string Quote(std::string_view value) { return "'" + std::string(value) + "'"; }

bool IsDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// A UUID or a prefix of one: CUDA accepts abbreviated UUIDs ("GPU-8932f9").
bool IsUuidBody(std::string_view s) {
  return s.find_first_not_of("0123456789abcdefABCDEF-") == std::string_view::npos &&
         s.find_first_not_of('-') != std::string_view::npos;
}

// The grammar of *_VISIBLE_DEVICES. Entries are separated by commas; blanks around an entry are dropped
// (CUDA reads indices with strtoul, which skips them, and so do PyTorch and JAX); an entry is an index,
// GPU-<uuid>, MIG-<uuid> or the legacy MIG-GPU-<uuid>/GI/CI.
//
// CUDA's own rule is lenient and silent: it stops at the first entry it cannot read ("0,1,-1,2" and
// "0,,1" give devices 0 and 1 resp. 0; "1gpu2" reads as 1) and shows no GPU at all when an entry repeats.
// distrun follows CUDA only where the behaviour is documented and deliberate: a negative index ends the
// list ("-1" is the common way to hide every GPU), and the entries after it are reported as ignored.
// Everything else CUDA would silently truncate or drop (empty entries, unreadable entries, ranges,
// repeats) is a UsageError: a launcher that guesses hands workers GPUs the user did not mean.
enum class EntryKind { kIndex, kNegative, kUuid, kInvalid };

EntryKind Classify(std::string_view entry) {
  if (IsDigits(entry)) return EntryKind::kIndex;
  if (entry.size() > 1 && entry[0] == '-' && IsDigits(entry.substr(1))) return EntryKind::kNegative;
  if (entry.starts_with("MIG-GPU-")) {
    std::vector<std::string> parts = Split(entry.substr(8), '/');
    bool ok = parts.size() == 3 && IsUuidBody(parts[0]) && IsDigits(parts[1]) && IsDigits(parts[2]);
    return ok ? EntryKind::kUuid : EntryKind::kInvalid;
  }
  if (entry.starts_with("GPU-") || entry.starts_with("MIG-")) {
    return IsUuidBody(entry.substr(4)) ? EntryKind::kUuid : EntryKind::kInvalid;
  }
  return EntryKind::kInvalid;
}

// Indices compare by value ("1" and "01" are the same device); UUIDs as written.
std::string DuplicateKey(std::string_view entry, EntryKind kind) {
  if (kind != EntryKind::kIndex) return std::string(entry);
  size_t first = entry.find_first_not_of('0');
  return first == std::string_view::npos ? "0" : std::string(entry.substr(first));
}

std::string JoinNonEmpty(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& field : fields) {
    std::string_view trimmed = Trim(field);
    if (trimmed.empty()) continue;
    if (!out.empty()) out += ',';
    out += trimmed;
  }
  return out;
}

// `visible_variable`: the value is a *_VISIBLE_DEVICES variable that CUDA (or HIP) reads itself, so a
// negative index ends the list and messages say what CUDA would make of the mistake. Lists that distrun
// is given are held to the same grammar, and a negative index there is an error too.
VisibleDevices ParseList(std::string_view variable, std::string_view value, bool visible_variable) {
  VisibleDevices out;
  out.variable = std::string(variable);
  std::vector<std::string> fields = Split(value, ',');
  std::string head = std::string(variable) + "=" + Quote(value);
  auto cuda_says = [&](std::string_view note) {
    return visible_variable ? " (" + std::string(note) + ")" : std::string();
  };
  std::set<std::string> seen;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string_view entry = Trim(fields[i]);
    std::string where = head + ": entry " + std::to_string(i + 1);
    if (entry.empty()) {
      std::string cleaned = JoinNonEmpty(fields);
      throw UsageError(
          where + " is empty" + cuda_says("CUDA would ignore every device from there on") + "; " +
          (cleaned.empty() ? "set it to '' for no GPU or list devices such as '0,1'"
                           : "remove the extra comma: " + std::string(variable) + "=" + Quote(cleaned)));
    }
    EntryKind kind = Classify(entry);
    if (kind == EntryKind::kNegative) {
      if (!visible_variable) {
        throw UsageError(where + " " + Quote(entry) + " is negative; device ids are 0 or more");
      }
      for (size_t j = i + 1; j < fields.size(); ++j) {
        if (!Trim(fields[j]).empty()) out.ignored.emplace_back(Trim(fields[j]));
      }
      break;
    }
    if (kind == EntryKind::kInvalid) {
      size_t dash = entry.find('-');
      std::string fix = "; use indices such as '0,1' or UUIDs as nvidia-smi -L prints them";
      if (dash != std::string_view::npos && IsDigits(entry.substr(0, dash))) {
        fix = " (ranges are not supported); list every index, e.g. '0,1,2,3'";
      } else if (entry.find_first_of(" \t") != std::string_view::npos) {
        fix = "; separate entries with commas, e.g. '0,1'";
      }
      throw UsageError(where + " " + Quote(entry) + " is not a device index, GPU-<uuid> or MIG-<uuid>" + fix);
    }
    if (kind == EntryKind::kIndex && entry.size() > 9) {
      throw UsageError(where + " " + Quote(entry) +
                       " is too large for a device index; use a GPU index such as 0");
    }
    if (!seen.insert(DuplicateKey(entry, kind)).second) {
      throw UsageError(head + " names device " + Quote(entry) + " twice" +
                       cuda_says("CUDA would then show no GPU at all") + "; list each device once");
    }
    out.tokens.emplace_back(entry);
  }
  return out;
}

// The contents of a small file, or "" when it cannot be read.
std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The entries of a directory sorted by name; none when it cannot be read.
std::vector<fs::path> ListDir(const fs::path& dir) {
  std::vector<fs::path> entries;
  for (const std::string& name : ListNames(dir)) entries.push_back(dir / name);
  return entries;
}

// Follows symbolic links: a link to /dev/null is a character device too (test trees and Slurm labs use
// them as stand-ins).
bool IsCharacterDevice(const fs::path& path) {
  std::error_code ec;
  return fs::is_character_file(fs::status(path, ec));
}

// The number after `prefix` in a file name such as "nvidia3"; nullopt for other names.
std::optional<uint64_t> NumberAfter(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || !IsDigits(name.substr(prefix.size())) || name.size() - prefix.size() > 9) {
    return std::nullopt;
  }
  uint64_t n = 0;
  std::from_chars(name.data() + prefix.size(), name.data() + name.size(), n);
  return n;
}

std::optional<uint64_t> ParseUnsigned(std::string_view s, int base) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n, base);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return n;
}

// domain, bus, device, function of "dddd:bb:dd.f"; nullopt when it is not one.
using PciAddress = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;
std::optional<PciAddress> ParsePci(std::string_view id) {
  size_t c1 = id.find(':');
  size_t c2 = c1 == std::string_view::npos ? c1 : id.find(':', c1 + 1);
  size_t dot = c2 == std::string_view::npos ? c2 : id.find('.', c2 + 1);
  if (dot == std::string_view::npos) return std::nullopt;
  auto domain = ParseUnsigned(id.substr(0, c1), 16);
  auto bus = ParseUnsigned(id.substr(c1 + 1, c2 - c1 - 1), 16);
  auto device = ParseUnsigned(id.substr(c2 + 1, dot - c2 - 1), 16);
  auto function = ParseUnsigned(id.substr(dot + 1), 16);
  if (!domain || !bus || !device || !function || *domain > 0xffffffff || *bus > 0xff || *device > 0x1f ||
      *function > 7 || c1 > 8) {
    return std::nullopt;
  }
  return PciAddress{*domain, *bus, *device, *function};
}

std::string Hex(uint64_t value, int width) {
  std::array<char, 20> digits{};
  auto [ptr, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), value, 16);
  std::string text(digits.data(), ptr);
  if (static_cast<int>(text.size()) < width) text.insert(0, static_cast<size_t>(width) - text.size(), '0');
  return text;
}

std::string FormatPci(uint64_t domain, uint64_t bus, uint64_t device, uint64_t function) {
  return Hex(domain, 4) + ":" + Hex(bus, 2) + ":" + Hex(device, 2) + "." + Hex(function, 1);
}

// PCI bus order, which nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use; ids that do not parse go last.
void SortByPciBusId(std::vector<GpuInfo>& gpus) {
  std::stable_sort(gpus.begin(), gpus.end(), [](const GpuInfo& a, const GpuInfo& b) {
    auto pa = ParsePci(a.pci_bus_id);
    auto pb = ParsePci(b.pci_bus_id);
    if (pa && pb) return *pa < *pb;
    if (pa || pb) return pa.has_value();
    return a.pci_bus_id < b.pci_bus_id;
  });
}

void NumberInOrder(std::vector<GpuInfo>& gpus) {
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].ordinal = static_cast<int>(i);
}

// /proc/driver/nvidia/gpus/<pci>/information, written by the NVIDIA kernel module:
//   Model:           NVIDIA H100 80GB HBM3
//   GPU UUID:        GPU-5c7c3c4e-...
//   Bus Location:    0000:18:00.0
//   GPU Excluded:    No
// nullopt when the directory lists no GPU.
std::optional<std::vector<GpuInfo>> ReadProcfs(const Environment& env) {
  std::vector<fs::path> dirs = ListDir(env.Path("/proc/driver/nvidia/gpus"));
  if (dirs.empty()) return std::nullopt;
  std::vector<GpuInfo> gpus;
  for (const fs::path& dir : dirs) {
    GpuInfo gpu;
    gpu.pci_bus_id = NormalizePciBusId(dir.filename().string());
    bool excluded = false;
    for (const std::string& line : Split(ReadSmallFile(dir / "information"), '\n')) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string_view key = Trim(std::string_view(line).substr(0, colon));
      std::string_view value = Trim(std::string_view(line).substr(colon + 1));
      if (key == "Model") {
        gpu.name = value;
      } else if (key == "GPU UUID") {
        // The module prints question marks where it could not read the UUID.
        if (value.starts_with("GPU-") && value.find('?') == std::string_view::npos) gpu.uuid = value;
      } else if (key == "Bus Location") {
        gpu.pci_bus_id = NormalizePciBusId(value);
      } else if (key == "GPU Excluded") {
        excluded = value == "Yes";  // NVreg_ExcludedGpus: CUDA cannot use it
      }
    }
    if (!excluded) gpus.push_back(std::move(gpu));
  }
  SortByPciBusId(gpus);
  NumberInOrder(gpus);
  return gpus;
}

// /dev/nvidia<minor> character devices: a count only. The module numbers minors in the order it probes
// the GPUs, which is PCI order, so sorting by minor gives the same order as procfs.
std::optional<std::vector<GpuInfo>> ReadDevfs(const Environment& env) {
  std::vector<std::pair<uint64_t, GpuInfo>> found;
  const fs::path dev = env.Path("/dev");
  for (const std::string& name : ListNames(dev)) {
    std::optional<uint64_t> minor = NumberAfter(name, "nvidia");
    if (minor && IsCharacterDevice(dev / name)) found.emplace_back(*minor, GpuInfo{});
  }
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<GpuInfo> gpus;
  for (auto& [minor, gpu] : found) gpus.push_back(std::move(gpu));
  NumberInOrder(gpus);
  return gpus;
}

// AMD GPUs: with /dev/kfd present, every node of the KFD topology with SIMD units is a GPU (CPU nodes
// have simd_count 0). The properties file holds "name value" lines with decimal values. ROCm enumerates
// GPUs in topology node order, so that order is kept.
std::optional<std::vector<GpuInfo>> ReadKfd(const Environment& env) {
  if (!fs::exists(env.Path("/dev/kfd"))) return std::nullopt;
  std::vector<std::pair<uint64_t, fs::path>> nodes;
  for (const fs::path& path : ListDir(env.Path("/sys/class/kfd/kfd/topology/nodes"))) {
    if (auto n = ParseUnsigned(path.filename().string(), 10)) nodes.emplace_back(*n, path);
  }
  std::sort(nodes.begin(), nodes.end());
  std::vector<GpuInfo> gpus;
  for (const auto& [n, path] : nodes) {
    std::map<std::string, uint64_t, std::less<>> properties;
    for (const std::string& line : Split(ReadSmallFile(path / "properties"), '\n')) {
      std::vector<std::string> kv = Split(Trim(line), ' ');
      if (kv.size() != 2) continue;
      if (auto value = ParseUnsigned(kv[1], 10)) properties[kv[0]] = *value;
    }
    auto property = [&](std::string_view key) {
      auto it = properties.find(key);
      return it == properties.end() ? uint64_t{0} : it->second;
    };
    if (property("simd_count") == 0) continue;
    GpuInfo gpu;
    gpu.name = Trim(ReadSmallFile(path / "name"));
    uint64_t location = property("location_id");  // bus << 8 | device << 3 | function
    gpu.pci_bus_id = FormatPci(property("domain"), location >> 8, (location >> 3) & 0x1f, location & 7);
    // rocminfo prints the unique id as the agent's UUID, which ROCR_VISIBLE_DEVICES accepts.
    if (uint64_t id = property("unique_id"); id != 0) gpu.uuid = "GPU-" + Hex(id, 16);
    gpus.push_back(std::move(gpu));
  }
  if (gpus.empty()) return std::nullopt;
  NumberInOrder(gpus);
  return gpus;
}

// A VFIO group is a TPU chip when its IOMMU group holds a Google device (vendor 0x1ae0, as JAX checks);
// other passthrough devices (NICs, NVMe) have groups too. Without sysfs (some containers) it counts.
bool VfioGroupIsTpu(const Environment& env, const std::string& group) {
  fs::path devices = env.Path("/sys/kernel/iommu_groups") / group / "devices";
  std::error_code ec;
  if (!fs::is_directory(devices, ec)) return true;
  for (const fs::path& device : ListDir(devices)) {
    if (ReadFirstWord(device / "vendor") == "0x1ae0") return true;
  }
  return false;
}

// The GPUs the files under env.root list (every GPU of the node): procfs, else devfs, else KFD. What was
// looked at is appended to `searched`.
std::optional<DiscoveredGpus> ReadGpuFiles(const Environment& env, std::vector<std::string>& searched) {
  if (auto gpus = ReadProcfs(env)) return DiscoveredGpus{std::move(*gpus), "procfs", {}};
  searched.emplace_back("/proc/driver/nvidia/gpus: no GPU");
  if (auto gpus = ReadDevfs(env)) return DiscoveredGpus{std::move(*gpus), "devfs", {}};
  searched.emplace_back("/dev/nvidia[0-9]*: none");
  if (auto gpus = ReadKfd(env)) return DiscoveredGpus{std::move(*gpus), "kfd", {}};
  searched.emplace_back(fs::exists(env.Path("/dev/kfd")) ? "KFD topology: no GPU node" : "/dev/kfd: absent");
  return std::nullopt;
}

void NoteCudaNotAsked(const Environment& env, std::vector<std::string>& searched) {
  if (!env.cuda_not_asked.empty()) searched.push_back("CUDA driver (libcuda.so.1): " + env.cuda_not_asked);
}

std::string JoinSearched(const std::vector<std::string>& searched) {
  std::string out;
  for (const std::string& s : searched) out += (out.empty() ? "" : "; ") + s;
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The hex part of a UUID, lower-cased: "GPU-8932F9" and "MIG-8932f9" both give "8932f9". The driver
// formats a MIG device's own UUID with "GPU-" too, so the prefix cannot be compared.
std::string UuidBody(std::string_view uuid) {
  if (uuid.starts_with("GPU-") || uuid.starts_with("MIG-")) uuid.remove_prefix(4);
  return Lower(uuid);
}

struct TokenMatch {
  std::optional<size_t> index;  // into the GPU list
  std::string problem;
  bool invalid = false;  // CUDA would reject the entry (and, in a *_VISIBLE_DEVICES list, all after it)
};

TokenMatch MatchUuid(std::string_view body, bool mig_instance, const std::vector<GpuInfo>& gpus,
                     std::string_view source) {
  std::vector<size_t> hits;
  bool any_uuid = false;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].uuid.empty()) continue;
    any_uuid = true;
    if (UuidBody(gpus[i].uuid).starts_with(body)) hits.push_back(i);
  }
  if (hits.size() == 1) return {hits.front(), {}, false};
  if (!any_uuid)
    return {std::nullopt, std::string(source) + " gives no GPU UUIDs to match it against", false};
  // A MIG instance's own UUID is not in /proc: its GPU is unknown, not wrong.
  if (hits.empty() && mig_instance) {
    return {std::nullopt, "a MIG device; only the CUDA driver knows which GPU it is on", false};
  }
  if (hits.empty()) {
    return {std::nullopt,
            "matches none of the " + std::to_string(gpus.size()) + " GPU UUIDs " + std::string(source) +
                " lists (nvidia-smi -L prints them)",
            true};
  }
  return {std::nullopt,
          "is a prefix of " + std::to_string(hits.size()) +
              " GPU UUIDs; CUDA needs a unique one, give more of the UUID",
          true};
}

TokenMatch MatchToken(std::string_view token, const std::vector<GpuInfo>& gpus, std::string_view source) {
  if (IsDigits(token)) {
    std::optional<uint64_t> n = ParseUnsigned(token, 10);
    if (n && *n < gpus.size()) return {static_cast<size_t>(*n), {}, false};
    return {std::nullopt,
            "is beyond the " + std::to_string(gpus.size()) + " GPU(s) " + std::string(source) +
                " lists (indices start at 0)",
            true};
  }
  if (token.starts_with("MIG-GPU-")) {
    // The legacy form names the parent GPU: MIG-GPU-<uuid>/<GPU instance>/<compute instance>.
    std::string_view parent = token.substr(4, token.find('/') - 4);
    return MatchUuid(UuidBody(parent), false, gpus, source);
  }
  if (token.starts_with("MIG-")) return MatchUuid(UuidBody(token), true, gpus, source);
  return MatchUuid(UuidBody(token), false, gpus, source);
}

}  // namespace

std::vector<ResolvedDevice> MatchDeviceTokens(const std::vector<std::string>& tokens,
                                              const std::vector<GpuInfo>& gpus, std::string_view source,
                                              bool ends_list) {
  std::vector<ResolvedDevice> out;
  std::optional<size_t> invalid_at;
  for (size_t i = 0; i < tokens.size(); ++i) {
    ResolvedDevice d{tokens[i], std::nullopt, {}};
    if (invalid_at) {
      d.problem = "CUDA ignores it: it follows '" + tokens[*invalid_at] + "', which names no GPU";
    } else if (gpus.empty()) {
      d.problem = "no GPU found (" + std::string(source) + ")";
    } else {
      TokenMatch m = MatchToken(tokens[i], gpus, source);
      if (m.index) d.gpu = gpus[*m.index];
      d.problem = std::move(m.problem);
      if (m.invalid && ends_list) invalid_at = i;
    }
    out.push_back(std::move(d));
  }
  return out;
}

DeviceResolution ResolveDevices(const Environment& env, const std::vector<std::string>& tokens,
                                std::string_view variable) {
  const bool ends_list = variable.ends_with("_VISIBLE_DEVICES");
  std::vector<std::string> searched;
  if (env.cuda_query) {
    std::optional<std::vector<GpuInfo>> driver = env.cuda_query();
    if (!driver) searched.emplace_back("CUDA driver (libcuda.so.1): not loadable or not working");
    if (driver) {
      if (!env.Has("CUDA_VISIBLE_DEVICES")) {
        return {MatchDeviceTokens(tokens, *driver, "the CUDA driver", ends_list), "cuda-driver"};
      }
      if (variable == "CUDA_VISIBLE_DEVICES") {
        // The driver applied this very list: its k-th device is the k-th entry, resolved by CUDA itself.
        DeviceResolution out{{}, "cuda-driver"};
        for (size_t k = 0; k < tokens.size(); ++k) {
          ResolvedDevice d{tokens[k], std::nullopt, {}};
          if (k < driver->size()) {
            d.gpu = (*driver)[k];
          } else {
            d.problem = "the CUDA driver shows only " + std::to_string(driver->size()) + " of the " +
                        std::to_string(tokens.size()) +
                        " devices in CUDA_VISIBLE_DEVICES (it stops at the first entry it cannot use)";
          }
          out.devices.push_back(std::move(d));
        }
        return out;
      }
      // The driver applied a CUDA_VISIBLE_DEVICES these tokens do not come from: its devices are a
      // subset of the node's, numbered differently, so the node's files answer instead.
    }
  } else {
    NoteCudaNotAsked(env, searched);
  }
  if (std::optional<DiscoveredGpus> files = ReadGpuFiles(env, searched)) {
    return {MatchDeviceTokens(tokens, files->gpus, files->source, ends_list), files->source};
  }
  return {MatchDeviceTokens(tokens, {}, "searched " + JoinSearched(searched), false), "none"};
}

VisibleDevices ParseVisibleDevices(std::string_view variable, std::string_view value) {
  if (value.empty()) return {std::string(variable), {}, {}};  // set but empty: no GPU, as CUDA documents
  return ParseList(variable, value, /*visible_variable=*/true);
}

std::vector<std::string> ParseDeviceTokens(std::string_view what, std::string_view value) {
  if (Trim(value).empty()) {
    throw UsageError(std::string(what) + "=" + Quote(value) + " lists no device; give ids such as '0,1'");
  }
  return ParseList(what, value, /*visible_variable=*/false).tokens;
}

std::optional<VisibleDevices> ReadVisibleDevices(const Environment& env) {
  // HIP_VISIBLE_DEVICES before ROCR_VISIBLE_DEVICES: HIP numbers its list within the devices ROCR leaves
  // visible, so with both set the HIP list is the one the process sees, and narrowing it per worker (ROCR
  // inherited) is what keeps both consistent. HIP reads CUDA_VISIBLE_DEVICES like HIP_VISIBLE_DEVICES.
  // An empty value hides every GPU for all three.
  for (std::string_view name : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
    if (const std::string* value = env.Get(name)) return ParseVisibleDevices(name, *value);
  }
  return std::nullopt;
}

DiscoveredGpus DiscoverGpus(const Environment& env) {
  // The driver's order is CUDA_DEVICE_ORDER's: FASTEST_FIRST by default, which may differ from the PCI
  // order of nvidia-smi and of the fallbacks below. Callers that only count or hand out "0".."n-1" are
  // not affected; anything that pairs ordinals with NUMA nodes or NICs should use pci_bus_id.
  std::vector<std::string> searched;
  if (env.cuda_query) {
    if (std::optional<std::vector<GpuInfo>> gpus = env.cuda_query()) {
      std::string said = gpus->empty()
                             ? "CUDA driver (libcuda.so.1): no device"
                             : "CUDA driver (libcuda.so.1): " + std::to_string(gpus->size()) + " GPU(s)";
      return {std::move(*gpus), "cuda-driver", std::move(said)};
    }
    searched.emplace_back("CUDA driver (libcuda.so.1): not loadable or not working");
  } else {
    NoteCudaNotAsked(env, searched);
  }
  if (std::optional<DiscoveredGpus> files = ReadGpuFiles(env, searched)) {
    searched.push_back(files->source + ": " + std::to_string(files->gpus.size()) + " GPU(s)");
    files->searched = JoinSearched(searched);
    return std::move(*files);
  }
  return {{}, "none", JoinSearched(searched)};
}

LocalDevices FindLocalDevices(const Environment& env) {
  if (std::optional<VisibleDevices> visible = ReadVisibleDevices(env)) {
    return {std::move(visible->tokens), std::move(visible->variable), std::move(visible->ignored)};
  }
  // Without a narrowing variable every GPU is visible, and "0".."n-1" name them all whatever order CUDA
  // enumerates them in, so only the count of the discovery matters here.
  DiscoveredGpus found = DiscoverGpus(env);
  LocalDevices out;
  out.source = found.source;
  for (size_t i = 0; i < found.gpus.size(); ++i) out.tokens.push_back(std::to_string(i));
  return out;
}

std::vector<std::string> LocalDeviceTokens(const Environment& env) { return FindLocalDevices(env).tokens; }

int CountTpuChips(const Environment& env) {
  // Only /dev/accel<N> directly under /dev: the kernel's compute-accelerator class puts other devices
  // (Intel NPU, Habana) under /dev/accel/accel<N>.
  int accel = 0;
  const fs::path dev = env.Path("/dev");
  for (const std::string& name : ListNames(dev)) {
    if (NumberAfter(name, "accel") && IsCharacterDevice(dev / name)) ++accel;
  }
  if (accel > 0) return accel;
  int vfio = 0;
  for (const fs::path& path : ListDir(env.Path("/dev/vfio"))) {
    std::string group = path.filename().string();
    if (IsDigits(group) && IsCharacterDevice(path) && VfioGroupIsTpu(env, group)) ++vfio;
  }
  return vfio;
}

std::string NormalizePciBusId(std::string_view id) {
  if (std::optional<PciAddress> pci = ParsePci(Trim(id))) {
    auto [domain, bus, device, function] = *pci;
    return FormatPci(domain, bus, device, function);
  }
  return Lower(Trim(id));
}

}  // namespace distrun
