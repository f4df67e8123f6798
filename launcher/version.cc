#include "launcher/version.h"

namespace distrun {

const char* Version() { return DISTRUN_VERSION; }

}  // namespace distrun
