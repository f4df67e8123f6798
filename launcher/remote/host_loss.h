#pragma once
// How the launcher of a job over ssh takes a host's end: whether node 0's is the job's end, and what it says
// of a host that is lost. In an elastic job node 0's loss is not the job's end: its standby takes the job
// over, and the job's code comes from the hosts that go on.

#include <cstddef>
#include <string>

namespace distrun {

// The exit code of a node's distrun that the job went on without (the runtime's kFencedExitCode, which this
// room cannot include; main.cc checks that they agree).
inline constexpr int kNodeLeftExitCode = 75;
// ssh's own code: the connection, the host or its sshd lost (or the remote command killed by a signal).
inline constexpr int kSshLostExitCode = 255;

// Whether node 0's host, whose distrun (through ssh) exited with `exit_code` by itself, ended the job with
// that code: not where ssh lost the host, nor, in an elastic job, where node 0 left the job (fenced, cut off
// from its standby's majority): the standby goes on with the others then.
bool NodeZeroEndedTheJob(int exit_code, bool elastic);

// A host's distrun's exit code: its supervisor's, but kNodeLeftExitCode where it stopped its workers
// (SIGTERM: 143) because the launcher was gone or silent (`launcher_lost`). The launcher then hears it only
// if the link comes back, and it is no word on the job: node 0 cut off from everything is not the job's end.
int RemoteNodeExitCode(int supervisor_exit_code, bool launcher_lost);

// What the launcher says of host `destination` (node `node`), whose ssh ended with `exit_code`, where it
// is lost (ssh's 255, or node 0 of an elastic job that left it); "" where it is not.
std::string DescribeLostHost(const std::string& destination, size_t node, int exit_code, bool elastic);

}  // namespace distrun
