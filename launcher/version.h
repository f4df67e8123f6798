#pragma once

namespace distrun {

const char* Version();

}  // namespace distrun
