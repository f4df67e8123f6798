#include "runtime/metrics/job_view_text.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "runtime/metrics/prometheus_text.h"

namespace distrun {
namespace {

// A finite number as JSON; null for what JSON cannot hold.
void Number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  out += buf;
}

void Key(std::string& out, const char* key) {
  out += '"';
  out += key;
  out += "\":";
}

}  // namespace

std::string JsonQuote(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string JobMetricsText(const JobStatusView& view) {
  PrometheusText p;
  p.Family("distrun_ranks", "gauge",
           "Ranks (worker processes) of the current epoch that report progress or sections.");
  std::map<int, std::string> hosts;
  for (const RankProgress& r : view.ranks) hosts[r.rank] = r.host;
  for (const RankSectionMedians& s : view.sections) hosts.emplace(s.rank, s.host);
  p.Sample(static_cast<double>(hosts.size()));
  p.Family("distrun_nodes", "gauge", "Nodes of the current epoch.");
  p.Sample(view.num_nodes);
  p.Family("distrun_epoch", "gauge", "The job's current epoch (one more after each restart or lost node).");
  p.Sample(view.epoch);
  p.Family("distrun_running", "gauge", "1 while the job's workers run, 0 while it forms or after it ended.");
  p.Sample(view.state == JobState::kRunning ? 1 : 0);
  p.Family("distrun_uptime_seconds", "gauge", "Seconds since node 0's coordination service started.");
  p.Sample(static_cast<double>(view.uptime_ms) / 1000);
  p.Family("distrun_restarts_total", "counter", "Epochs begun after a worker failure.");
  p.Sample(view.restarts);
  p.Family("distrun_nodes_lost_total", "counter", "Nodes lost (silent, or their distrun gone).");
  p.Sample(view.nodes_lost);
  p.Family(
      "distrun_recoveries_total", "counter",
      "Generations begun after a lost node, a failed worker or an arrival, by how the workers took them: "
      "in place (--recovery in-process) or restarted.");
  p.Sample({{"mode", "in-process"}}, static_cast<double>(view.recoveries_in_place));
  p.Sample({{"mode", "restart"}}, static_cast<double>(view.recoveries_restart));
  p.Family("distrun_last_recovery_seconds", "gauge",
           "The last complete recovery in place, by phase: seconds from the decision to every worker told "
           "(notified), ready, the world agreed, every group formed (group_up) and every rank's first step.");
  for (auto it = view.recoveries.rbegin(); it != view.recoveries.rend(); ++it) {
    if (!it->in_place || !it->complete) continue;
    const RecoveryPhases& ph = it->phases;
    for (const auto& [name, ms] : {std::pair<const char*, int64_t>{"notified", ph.notified},
                                   {"ready", ph.ready},
                                   {"agreed", ph.agreed},
                                   {"group_up", ph.up},
                                   {"first_step", ph.first_step}}) {
      if (ms >= 0) p.Sample({{"phase", name}}, static_cast<double>(ms) / 1000);
    }
    break;
  }
  p.Family("distrun_heartbeat_round_trip_seconds", "histogram",
           "How long each node's heartbeats waited for node 0's answer, as its distrun measured them.");
  for (const NodeRoundTrips& n : view.round_trips) {
    std::vector<std::pair<double, uint64_t>> buckets;
    for (size_t i = 0; i < RoundTrips::kBounds.size(); ++i)
      buckets.emplace_back(RoundTrips::kBounds[i], n.round_trips.AtMost(i));
    p.Histogram({{"node", std::to_string(n.node)}, {"host", n.host}}, buckets, n.round_trips.sum_seconds(),
                n.round_trips.count());
  }
  p.Family("distrun_hung", "gauge", "1 when the hang watch declared the current epoch hung.");
  p.Sample(view.hung ? 1 : 0);
  p.Family("distrun_stragglers", "gauge", "Ranks named stragglers now (distrun --straggler-threshold).");
  int stragglers = 0;
  for (const RankSectionMedians& s : view.sections) stragglers += s.straggler ? 1 : 0;
  p.Sample(stragglers);
  p.Family("distrun_straggler_threshold", "gauge",
           "A rank scoring below this for several windows is a straggler.");
  p.Sample(view.straggler_threshold);

  p.Family("distrun_rank_step", "gauge", "The step each rank reported last (distrun.progress).");
  for (const RankProgress& r : view.ranks) {
    p.Sample({{"rank", std::to_string(r.rank)}, {"host", r.host}}, static_cast<double>(r.step));
  }
  p.Family("distrun_rank_steps_per_second", "gauge", "Each rank's steps per second over the last minute.");
  for (const RankProgress& r : view.ranks) {
    p.Sample({{"rank", std::to_string(r.rank)}, {"host", r.host}}, r.steps_per_second);
  }
  p.Family("distrun_rank_step_age_seconds", "gauge", "Seconds since each rank's step last changed.");
  for (const RankProgress& r : view.ranks) {
    p.Sample({{"rank", std::to_string(r.rank)}, {"host", r.host}},
             static_cast<double>(r.advanced_ms_ago) / 1000);
  }
  p.Family("distrun_rank_section_seconds", "gauge",
           "The median time of each rank's recent runs of a section (distrun.section).");
  for (const RankSectionMedians& s : view.sections) {
    for (const auto& [name, median] : s.median_s) {
      p.Sample({{"rank", std::to_string(s.rank)}, {"host", s.host}, {"section", name}}, median);
    }
  }
  p.Family("distrun_rank_straggler_score", "gauge",
           "The fastest rank's median time in a section divided by this rank's, in its worst section (1: as "
           "fast as the fastest).");
  for (const RankSectionMedians& s : view.sections) {
    if (s.score >= 0) p.Sample({{"rank", std::to_string(s.rank)}, {"host", s.host}}, s.score);
  }
  p.Family("distrun_rank_straggler", "gauge", "1 for a rank named a straggler now.");
  for (const RankSectionMedians& s : view.sections) {
    if (s.score >= 0) p.Sample({{"rank", std::to_string(s.rank)}, {"host", s.host}}, s.straggler ? 1 : 0);
  }
  return p.text();
}

std::string JobJson(const JobStatusView& view) {
  std::string out;
  out.reserve(256 + 256 * (view.ranks.size() + view.sections.size()));
  out += '{';
  Key(out, "run_id");
  out += JsonQuote(view.run_id);
  out += ',';
  Key(out, "state");
  out += JsonQuote(JobStateName(view.state));
  out += ',';
  Key(out, "epoch");
  out += std::to_string(view.epoch);
  out += ',';
  Key(out, "uptime_s");
  Number(out, static_cast<double>(view.uptime_ms) / 1000);
  out += ',';
  Key(out, "restarts");
  out += std::to_string(view.restarts);
  out += ',';
  Key(out, "nodes_lost");
  out += std::to_string(view.nodes_lost);
  out += ',';
  Key(out, "num_nodes");
  out += std::to_string(view.num_nodes);
  out += ',';
  Key(out, "hung");
  out += view.hung ? "true" : "false";
  out += ',';
  Key(out, "history");
  out += JsonQuote(view.history);
  out += ',';
  Key(out, "straggler_threshold");
  Number(out, view.straggler_threshold);
  out += ',';
  Key(out, "sections");
  out += view.sections.empty() ? "false" : "true";
  out += ',';
  Key(out, "epochs");
  out += '[';
  for (size_t i = 0; i < view.epochs.size(); ++i) {
    const EpochSpan& e = view.epochs[i];
    if (i > 0) out += ',';
    out += "{\"epoch\":" + std::to_string(e.epoch) + ",\"start_s\":";
    Number(out, static_cast<double>(e.start_ms) / 1000);
    out += ",\"end_s\":";
    if (e.end_ms) {
      Number(out, static_cast<double>(*e.end_ms) / 1000);
    } else {
      out += "null";
    }
    out += ",\"ranks\":" + std::to_string(e.ranks) + ",\"end\":" + JsonQuote(e.end) + '}';
  }
  out += "],";
  Key(out, "recoveries_total");
  out += "{\"in_process\":" + std::to_string(view.recoveries_in_place) +
         ",\"restart\":" + std::to_string(view.recoveries_restart) + "},";
  Key(out, "recoveries");
  out += '[';
  for (size_t i = 0; i < view.recoveries.size(); ++i) {
    const RecoveryRecord& r = view.recoveries[i];
    if (i > 0) out += ',';
    auto ranks = [](const std::vector<int>& v) {
      std::string text = "[";
      for (size_t k = 0; k < v.size(); ++k) text += (k ? "," : "") + std::to_string(v[k]);
      return text + "]";
    };
    out += "{\"generation\":" + std::to_string(r.generation) +
           ",\"in_place\":" + (r.in_place ? "true" : "false") + ",\"cause\":" + JsonQuote(r.cause) +
           ",\"decided_s\":";
    Number(out, static_cast<double>(r.decided_ms) / 1000);
    out += ",\"lost\":" + ranks(r.change.lost) + ",\"joined\":" + ranks(r.change.joined) +
           ",\"source\":" + (r.change.source < 0 ? std::string("null") : std::to_string(r.change.source)) +
           ",\"phases_s\":{";
    bool first = true;
    for (const auto& [name, ms] : {std::pair<const char*, int64_t>{"notified", r.phases.notified},
                                   {"ready", r.phases.ready},
                                   {"agreed", r.phases.agreed},
                                   {"group_up", r.phases.up},
                                   {"first_step", r.phases.first_step}}) {
      if (ms < 0) continue;
      out += std::string(first ? "" : ",") + '"' + name + "\":";
      Number(out, static_cast<double>(ms) / 1000);
      first = false;
    }
    out += std::string("},\"complete\":") + (r.complete ? "true" : "false") +
           ",\"text\":" + JsonQuote(r.complete ? DescribeRecovery(r) : r.cause) + '}';
  }
  out += "],";

  // Every rank that reports steps or sections, by rank.
  struct Row {
    const RankProgress* progress = nullptr;
    const RankSectionMedians* sections = nullptr;
  };
  std::map<int, Row> rows;
  for (const RankProgress& r : view.ranks) rows[r.rank].progress = &r;
  for (const RankSectionMedians& s : view.sections) rows[s.rank].sections = &s;
  Key(out, "num_ranks");
  out += std::to_string(rows.size());
  out += ',';
  Key(out, "ranks");
  out += '[';
  bool first = true;
  for (const auto& [rank, row] : rows) {
    if (!first) out += ',';
    first = false;
    const RankProgress* p = row.progress;
    const RankSectionMedians* s = row.sections;
    out += "{\"rank\":" + std::to_string(rank) + ",\"host\":" + JsonQuote(p ? p->host : s->host);
    out += ",\"pid\":";
    out += p && p->pid > 0 ? std::to_string(p->pid) : "null";
    out += ",\"step\":";
    out += p ? std::to_string(p->step) : "null";
    out += ",\"step_time_s\":";
    if (p && p->steps_per_second > 0) {
      Number(out, 1 / p->steps_per_second);
    } else {
      out += "null";
    }
    out += ",\"steps_per_second\":";
    if (p) {
      Number(out, p->steps_per_second);
    } else {
      out += "null";
    }
    out += ",\"advanced_s_ago\":";
    if (p) {
      Number(out, static_cast<double>(p->advanced_ms_ago) / 1000);
    } else {
      out += "null";
    }
    out += ",\"score\":";
    if (s && s->score >= 0) {
      Number(out, s->score);
    } else {
      out += "null";
    }
    out += ",\"straggler\":";
    out += s && s->straggler ? "true" : "false";
    out += ",\"section\":" + JsonQuote(s ? s->section : "");
    out += ",\"sections\":{";
    if (s) {
      bool first_section = true;
      for (const auto& [name, median] : s->median_s) {
        if (!first_section) out += ',';
        first_section = false;
        out += JsonQuote(name) + ':';
        Number(out, median);
      }
    }
    out += "},\"hung\":";
    // The least advanced ranks when others were ahead; else every rank of a hung job.
    const bool hung = view.hung && (!view.hung_at_step || (p != nullptr && p->step <= *view.hung_at_step));
    out += hung ? "true" : "false";
    out += '}';
  }
  out += "],";
  Key(out, "events");
  out += '[';
  for (size_t i = 0; i < view.events.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"t_s\":";
    Number(out, static_cast<double>(view.events[i].first) / 1000);
    out += ",\"text\":" + JsonQuote(view.events[i].second) + '}';
  }
  out += "]}";
  return out;
}

}  // namespace distrun
