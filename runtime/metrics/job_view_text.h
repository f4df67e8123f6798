#pragma once
// Node 0's view of the job (CoordinationService::Overview) as the outside reads it: Prometheus' metrics
// (GET /metrics) and the page's JSON (GET /job.json, the schema the page, job_page.html, reads). Data in,
// text out: the server (observe_server.h) calls these on every request.

#include <string>

#include "runtime/service/types.h"

namespace distrun {

// Prometheus' text format 0.0.4: the job's gauges and counters, and per rank its step, section medians and
// straggler score, labelled `rank` and `host`.
std::string JobMetricsText(const JobStatusView& view);

// The page's document: the job's header, its epochs, every rank (step, step time, score) and recent events.
std::string JobJson(const JobStatusView& view);

// `s` as a JSON string, quotes included.
std::string JsonQuote(const std::string& s);

}  // namespace distrun
