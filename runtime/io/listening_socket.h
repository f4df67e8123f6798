#pragma once
// A TCP socket bound (and listening), owned until handed to a server. Node 0's port is one; so is an
// elastic job's standby port, bound when its distrun starts (so that the address it reports holds) but
// listening only once that distrun takes the job over (DESIGN §4.5): until then a connection to it is
// refused, and whoever tries a list of addresses goes on to the next.

#include <stdexcept>
#include <string>

namespace distrun {

// Why Open or Reserve could not bind: `code` is the errno of the last address tried (EADDRINUSE: another
// socket holds the port; EADDRNOTAVAIL: not an address of this host; 0: the name did not resolve).
class ListenError : public std::runtime_error {
 public:
  ListenError(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

class ListeningSocket {
 public:
  ListeningSocket() = default;
  // Binds the first address `host` resolves to that can be bound, on `port` (0: the OS picks one), and
  // listens; non-blocking, close-on-exec. Throws ListenError naming the address when it cannot.
  static ListeningSocket Open(const std::string& host, int port);
  // Binds as Open does, without listening yet (Listen).
  static ListeningSocket Reserve(const std::string& host, int port);
  // A descriptor of its own for the socket `fd` another owner holds (a dup, close-on-exec): a single-host
  // job's port, held listening until its runtime starts (launcher/job/lazy_link.h). Throws
  // std::runtime_error.
  static ListeningSocket Duplicate(int fd);
  // Listens (again: a socket that listens already keeps its queue). Throws std::runtime_error.
  void Listen();
  ~ListeningSocket();
  ListeningSocket(ListeningSocket&& other) noexcept;
  ListeningSocket& operator=(ListeningSocket&& other) noexcept;
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int port() const { return port_; }
  // The descriptor, now the caller's.
  int Release();

 private:
  static ListeningSocket Bind(const std::string& host, int port, bool listen);

  int fd_ = -1;
  int port_ = 0;
};

}  // namespace distrun
