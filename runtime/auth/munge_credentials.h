#pragma once
// munge credentials (DESIGN §4.4): a process proves its user id to another host through munged, which
// every Slurm cluster with auth/munge runs. libmunge.so.2 is loaded at run time, so distrun has no
// link-time dependency on it and runs unchanged where it is missing.
//
// A credential carries a payload and the encoding process's uid and gid; munged decodes each credential
// once only (a second decode is "replayed") and only within its time to live (300 s by default), so a
// captured credential cannot be used again.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "runtime/auth/munge_socket.h"

namespace distrun {

struct MungeDecoded {
  std::string payload;
  uid_t uid = 0;
  gid_t gid = 0;
};

class MungeCredentials {
 public:
  // Loads libmunge.so.2; nullopt with `why` when it cannot be loaded. `socket`: munged's socket, empty for
  // the library's default (/run/munge/munge.socket.2).
  static std::unique_ptr<MungeCredentials> Load(const std::string& socket, std::string* why);
  ~MungeCredentials();
  MungeCredentials(const MungeCredentials&) = delete;
  MungeCredentials& operator=(const MungeCredentials&) = delete;

  // A credential for `payload`; nullopt with `why` (munged down: "munged does not answer at PATH: ...").
  // Thread-safe; blocks on munged (about a millisecond).
  std::optional<std::string> Encode(const std::string& payload, std::string* why) const;
  // What `credential` proves; nullopt with `why` (invalid, expired, replayed, munged down). Thread-safe.
  std::optional<MungeDecoded> Decode(const std::string& credential, std::string* why) const;

  // Whether munged answers: encodes and decodes one credential (which is then used up).
  bool Probe(std::string* why) const;

  const std::string& socket() const { return socket_; }  // as given; empty: the library's default

 public:
  struct Library;  // libmunge's entry points (munge_credentials.cc)

 private:
  MungeCredentials(std::unique_ptr<Library> library, std::string socket);
  // The socket named in messages.
  std::string SocketName() const;

  std::unique_ptr<Library> library_;
  std::string socket_;
};

}  // namespace distrun
