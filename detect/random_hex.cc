#include "detect/random_hex.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace distrun {

std::string RandomHex(size_t digits) {
  std::string bytes((digits + 1) / 2, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw std::runtime_error(std::string("cannot read random bytes (getrandom): ") +
                               (n < 0 ? std::strerror(errno) : "none returned"));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  out.resize(digits);
  return out;
}

}  // namespace distrun
