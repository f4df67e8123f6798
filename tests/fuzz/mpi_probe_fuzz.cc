// libFuzzer target for the MPI probe's answer (detect/mpi_probe.h DecodeMpiProbe): the text the probe's
// child, which ran the launcher's MPI library (and through it PMI-1, PMI-2 or PMIx), writes on its pipe.
// distrun itself never reads the process manager's PMI replies: the MPI library does, inside that child, so
// this answer is the only text from that side that distrun parses. A malformed answer must become an
// outcome without a result; what decodes must encode and decode to the same text again, and the `mpi`
// method must turn it into a topology and a plan or throw UsageError. Any other exception, a crash, a leak
// or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "detect/environment.h"
#include "detect/mpi_probe.h"
#include "plan_without_sockets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace distrun;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const MpiProbeOutcome outcome = DecodeMpiProbe(text);
  if (!outcome.result && outcome.error.empty() && !text.starts_with("error ")) __builtin_trap();

  // The encoder makes every value one line, so a second trip changes nothing.
  const std::string encoded = EncodeMpiProbe(outcome);
  const MpiProbeOutcome again = DecodeMpiProbe(encoded);
  if (again.result.has_value() != outcome.result.has_value() || EncodeMpiProbe(again) != encoded) {
    __builtin_trap();
  }
  if (outcome.result) {
    const MpiProbeResult& a = *outcome.result;
    const MpiProbeResult& b = *again.result;
    if (a.rank != b.rank || a.size != b.size || a.local_rank != b.local_rank ||
        a.local_size != b.local_size || a.node_rank != b.node_rank || a.num_nodes != b.num_nodes ||
        a.hosts.size() != b.hosts.size() || a.coordinator_port != b.coordinator_port ||
        a.master_port != b.master_port || a.jax_port != b.jax_port) {
      __builtin_trap();
    }
  }

  Environment env;
  env.hostname = "fuzzhost";
  env.root = "/nonexistent-distrun-fuzz-root";  // no file look-up may escape into the real system
  env.mpi_probe = [&outcome](const std::vector<std::string>&) { return outcome; };
  PlanWithoutSockets(env, "mpi");
  return 0;
}
