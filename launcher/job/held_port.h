#pragma once
// What a single-host job's link hands the runtime it starts late (launcher/job/lazy_link.h): the loopback
// port it held, listening, from before the workers started, and the token they were given.

#include <string>

namespace distrun {

struct HeldPort {
  // The listening socket; still the link's: the runtime listens on a descriptor of its own (a dup).
  int listen_fd = -1;
  std::string worker_token;
};

}  // namespace distrun
