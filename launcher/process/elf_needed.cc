#include "launcher/process/elf_needed.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "launcher/process/unique_fd.h"

namespace distrun {
namespace {

template <typename T>
bool ReadAt(int fd, uint64_t offset, T& out) {
  return ::pread(fd, &out, sizeof out, static_cast<off_t>(offset)) == static_cast<ssize_t>(sizeof out);
}

// The file offset of a virtual address, through the segment that loads it.
std::optional<uint64_t> FileOffset(const std::vector<Elf64_Phdr>& segments, uint64_t address) {
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type == PT_LOAD && address >= p.p_vaddr && address - p.p_vaddr < p.p_filesz) {
      return p.p_offset + (address - p.p_vaddr);
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> ElfNeededLibraries(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  Elf64_Ehdr header{};
  if (!fd || !ReadAt(fd.get(), 0, header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum > 4096) {
    return {};
  }
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (!ReadAt(fd.get(), header.e_phoff + i * sizeof(Elf64_Phdr), segments[i])) return {};
  }
  const Elf64_Phdr* dynamic = nullptr;
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type == PT_DYNAMIC) dynamic = &p;
  }
  if (dynamic == nullptr) return {};
  std::vector<uint64_t> needed;
  std::optional<uint64_t> strtab;
  uint64_t strsz = 0;
  for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dynamic->p_filesz && at < (uint64_t{1} << 20);
       at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn entry{};
    if (!ReadAt(fd.get(), dynamic->p_offset + at, entry) || entry.d_tag == DT_NULL) break;
    if (entry.d_tag == DT_NEEDED) needed.push_back(entry.d_un.d_val);
    if (entry.d_tag == DT_STRTAB) strtab = FileOffset(segments, entry.d_un.d_ptr);
    if (entry.d_tag == DT_STRSZ) strsz = entry.d_un.d_val;
  }
  if (!strtab || strsz == 0 || strsz > (uint64_t{64} << 20)) return {};
  std::string strings(strsz, '\0');
  if (::pread(fd.get(), strings.data(), strsz, static_cast<off_t>(*strtab)) != static_cast<ssize_t>(strsz)) {
    return {};
  }
  std::vector<std::string> out;
  for (uint64_t offset : needed) {
    if (offset < strings.size()) out.emplace_back(strings.c_str() + offset);
  }
  return out;
}

}  // namespace distrun
