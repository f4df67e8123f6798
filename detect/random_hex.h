#pragma once
// Random hexadecimal digits from the kernel's random source: job tokens, run ids, the MPI probe's job id.
// One getrandom call. std::random_device, used before, asked the CPU (cpuid, then rdrand per draw), and on
// a virtual machine each of those is a trap to the hypervisor: 23 us for 32 digits here, on every launch.

#include <cstddef>
#include <string>

namespace distrun {

// `digits` lowercase hexadecimal digits. Throws std::runtime_error when the kernel gives no random bytes.
std::string RandomHex(size_t digits);

}  // namespace distrun
