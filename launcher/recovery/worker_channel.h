#pragma once
// The node's socket for its workers under --recovery in-process (ARCHITECTURE.md, "Recovering in place"):
// one Unix stream socket with an abstract name (DISTRUN_RECOVERY_SOCKET, "@distrun-…"), one connection per
// worker, frames of runtime/recovery/worker_message.h both ways. Who connected comes from the kernel
// (SO_PEERCRED): a process of distrun's own user that is a worker or descends from one (a `sh -c` or a
// wrapper in between); anything else, and a second connection for a worker that has one, is refused with
// one `error` message. One epoll descriptor covers the socket and every connection, so the supervisor's
// loop watches one descriptor and calls Process when it is readable.

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/process/unique_fd.h"
#include "runtime/recovery/worker_message.h"

namespace distrun {

struct ChannelEvent {
  size_t slot = 0;
  std::optional<WorkerMessage> message;  // unset: the worker's connection closed
};

class WorkerChannel {
 public:
  // The slot of the worker whose process is `pid` itself, or nullopt.
  using SlotOf = std::function<std::optional<size_t>(pid_t pid)>;

  // Listens at once. Throws std::runtime_error when the socket cannot be made.
  explicit WorkerChannel(SlotOf slot_of);
  WorkerChannel(const WorkerChannel&) = delete;
  WorkerChannel& operator=(const WorkerChannel&) = delete;

  // "@distrun-…": what a worker connects to (the '@' stands for the abstract namespace's leading NUL).
  const std::string& address() const { return address_; }
  // Readable (epoll) when a connection waits, a worker wrote, or a blocked write can go on.
  int fd() const { return epoll_.get(); }

  // Accepts, reads and writes what is ready, without blocking. Returns the messages that arrived and the
  // connections that closed, in order.
  std::vector<ChannelEvent> Process();
  // Queues `message` for the worker in `slot`; false when it has no connection. A frame that cannot be
  // encoded is dropped with a problem.
  bool Send(size_t slot, const WorkerMessage& message);
  bool Connected(size_t slot) const { return by_slot_.contains(slot); }
  // Closes the slot's connection (its worker is being started again).
  void Drop(size_t slot);
  // One line each: refused peers, unreadable frames. For the caller's log.
  std::vector<std::string> TakeProblems();

 private:
  struct Connection {
    UniqueFd fd;
    std::optional<size_t> slot;
    FrameReader reader;
    std::string out;       // what is still to be written
    bool closing = false;  // refused: closed once `out` is written
  };

  void Accept();
  // Reads what is there; false when the connection ended (or failed).
  bool Read(Connection& c, std::vector<ChannelEvent>& events);
  // Writes what it can; false when the connection failed.
  bool Flush(Connection& c);
  void Refuse(Connection& c, const std::string& why);
  void Close(int fd, std::vector<ChannelEvent>* events);
  void WantWrite(const Connection& c, bool on);
  std::optional<size_t> Identify(pid_t pid) const;

  SlotOf slot_of_;
  UniqueFd listener_;
  UniqueFd epoll_;
  std::string address_;
  std::map<int, Connection> connections_;  // by descriptor
  std::map<size_t, int> by_slot_;
  std::vector<std::string> problems_;
  std::vector<ChannelEvent> pending_;  // connections Send found broken, for the next Process
};

}  // namespace distrun
