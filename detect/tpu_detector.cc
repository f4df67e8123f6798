// Placeholder until the detector lands: reports the method as absent.
#include "detect/detector.h"

namespace distrun {

Detector TpuDetector() {
  return {"tpu", [](const Environment&) { return std::vector<std::string>{"(not built yet)"}; },
          [](const Environment&) { return Topology{}; }};
}

}  // namespace distrun
