#pragma once
// What `distrun --detect` prints: the topology and the per-worker plan, in text, JSON, YAML or
// `export NAME=value` lines (DESIGN §2.3). The JSON keys are a stable interface.

#include <string>

#include "launcher/config/options.h"
#include "launcher/plan/plan.h"
#include "launcher/report/report_value.h"

namespace distrun {

// `protection`: which protection the job would have (JobProtection::Describe); empty: not shown.
ReportValue BuildDetectReport(const Plan& plan, const Options& options, const std::string& protection = "");

// The report in `options.format`. Text and env formats leave the warnings out of the result; the caller
// prints them on stderr (env adds them as shell comments too).
std::string RenderDetectReport(const Plan& plan, const Options& options, const std::string& protection = "");

}  // namespace distrun
