#include "launcher/process/elf_needed.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "launcher/process/unique_fd.h"

namespace distrun {
namespace {

template <typename T>
bool ReadAt(int fd, uint64_t offset, T& out) {
  return ::pread(fd, &out, sizeof out, static_cast<off_t>(offset)) == static_cast<ssize_t>(sizeof out);
}

// `count` records of T at `offset`, in one read (a read per record was 40 system calls per launch).
template <typename T>
bool ReadArrayAt(int fd, uint64_t offset, std::vector<T>& out, size_t count) {
  out.resize(count);
  const size_t bytes = count * sizeof(T);
  return ::pread(fd, out.data(), bytes, static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes);
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
  std::vector<Elf64_Phdr> segments;
  if (!ReadArrayAt(fd.get(), header.e_phoff, segments, header.e_phnum)) return {};
  const Elf64_Phdr* dynamic = nullptr;
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type == PT_DYNAMIC) dynamic = &p;
  }
  if (dynamic == nullptr) return {};
  std::vector<uint64_t> needed;
  std::optional<uint64_t> strtab;
  uint64_t strsz = 0;
  // The entries up to DT_NULL; a section cut short by the file's end is read as far as it goes.
  const size_t count =
      static_cast<size_t>(std::min<uint64_t>(dynamic->p_filesz, uint64_t{1} << 20) / sizeof(Elf64_Dyn));
  std::vector<Elf64_Dyn> entries(count);
  const ssize_t got =
      ::pread(fd.get(), entries.data(), count * sizeof(Elf64_Dyn), static_cast<off_t>(dynamic->p_offset));
  entries.resize(got > 0 ? static_cast<size_t>(got) / sizeof(Elf64_Dyn) : 0);
  for (const Elf64_Dyn& entry : entries) {
    if (entry.d_tag == DT_NULL) break;
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
