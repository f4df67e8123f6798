#include "runtime/io/socket_input.h"

#include <sys/socket.h>
#include <unistd.h>

namespace distrun {

void CloseInOrder(int fd, std::vector<char>* buffer, bool drain) {
  while (drain && ::recv(fd, buffer->data(), buffer->size(), MSG_DONTWAIT) > 0) {
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

}  // namespace distrun
