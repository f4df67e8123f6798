#include "detect/sysfs_word.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <string_view>

namespace distrun {

std::string ReadFirstWord(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::array<char, 64> buffer{};
  ssize_t n = ::read(fd, buffer.data(), buffer.size());
  ::close(fd);
  if (n <= 0) return {};
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  std::string_view text(buffer.data(), static_cast<size_t>(n));
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  text.remove_prefix(begin);
  return std::string(text.substr(0, text.find_first_of(kSpace)));
}

}  // namespace distrun
