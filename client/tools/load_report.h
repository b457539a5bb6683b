// What one load step measured, and how topk-loadgen prints it: a table on
// stdout, and CSV and JSON files (perf_analyzer-style columns) rewritten after
// every step, so a long sweep that is stopped keeps the steps it finished.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace topk::tools {

// One group of callers' share of a step: with rows by reference spread over
// several GPUs (topk-loadgen --ipc_device=0,1), the callers of one GPU.
struct GroupResult {
  std::string name;  // "gpu0"
  int64_t requests = 0;
  double seconds = 0;
  double mean_us = 0;  // client round trip
  double server_total_us = 0, server_queue_us = 0, server_device_us = 0;
  double batch_mean = 0;
  double requests_per_s() const { return seconds > 0 ? requests / seconds : 0; }
};

struct StepResult {
  std::string mode;      // "concurrency" or "rate"
  double setting = 0;    // concurrency, or requested requests/s
  double seconds = 0;    // measured window
  int64_t requests = 0;  // completed OK in the window
  // Failed calls that ended in the window (warm-up failures are not counted:
  // a server still warming its caches must not fail a run).
  int64_t errors = 0;
  // errors by gRPC status code name ("UNAVAILABLE", ...); "DROPPED" for
  // open-loop requests never sent because --max_outstanding were in flight.
  std::map<std::string, int64_t> errors_by_code;
  int64_t warmup_calls = 0;  // completed before the window: neither verified nor counted
  int64_t verified = 0;      // spot-checked with the verifier (window only)
  int64_t inexact = 0;       // spot checks that failed
  int64_t rows = 0;
  int64_t score_bytes = 0;
  // Client round trip, microseconds.
  double p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
  // Server-side means, microseconds (from the response timings).
  double server_total_us = 0, server_queue_us = 0, server_device_us = 0;
  // Of server_total_us, before the queue (Timings.prepare_us; 0 from a
  // server that does not report it).
  double server_prepare_us = 0;
  // Requests per server-side launch that the calls saw (Timings.
  // batch_requests): mean over the calls, and the largest. 0: the server
  // does not report it.
  double batch_mean = 0;
  int64_t batch_max = 0;
  // Open loop: coefficient of variation of the gaps between sends (about 0
  // for constant arrivals, about 1 for Poisson arrivals).
  double arrival_cv = 0;
  // CPU seconds (user + system) this process spent over the step, warm-up
  // included: the load generator's own cost, to tell a limit of the client
  // from one of the server.
  double client_cpu_s = 0;
  // Per group of callers, when there is more than one (in group order).
  std::vector<GroupResult> groups;
  std::string first_error;

  double requests_per_s() const { return seconds > 0 ? requests / seconds : 0; }
  double rows_per_s() const { return seconds > 0 ? rows / seconds : 0; }
  double gb_per_s() const { return seconds > 0 ? score_bytes / seconds / 1e9 : 0; }
};

// What the run was: written once at the top of the JSON so a result file can
// be read without the command line that made it. Values are JSON-escaped when
// written.
struct RunMetadata {
  std::vector<std::pair<std::string, std::string>> fields;  // in order
};

// Fills the percentiles and mean from raw latencies (sorted in place).
void Summarize(std::vector<int64_t>& latencies_us, StepResult& step);

void PrintTable(const std::vector<StepResult>& steps);
absl::Status WriteCsv(const std::vector<StepResult>& steps, const std::string& path);
// {"metadata": {...}, "steps": [...]}
absl::Status WriteJson(const RunMetadata& metadata, const std::vector<StepResult>& steps,
                       const std::string& path);

}  // namespace topk::tools
