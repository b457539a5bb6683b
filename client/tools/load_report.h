// What one load step measured, and how topk-loadgen prints it: a table on
// stdout, and optionally CSV and JSON files (perf_analyzer-style columns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace topk::tools {

struct StepResult {
  std::string mode;      // "concurrency" or "rate"
  double setting = 0;    // concurrency, or requested requests/s
  double seconds = 0;    // measured window
  int64_t requests = 0;  // completed OK in the window
  int64_t errors = 0;
  int64_t verified = 0;  // spot-checked with the verifier
  int64_t inexact = 0;   // spot checks that failed
  int64_t rows = 0;
  int64_t score_bytes = 0;
  // Client round trip, microseconds.
  double p50_us = 0, p90_us = 0, p99_us = 0, mean_us = 0;
  // Server-side means, microseconds (from the response timings).
  double server_total_us = 0, server_queue_us = 0, server_device_us = 0;
  std::string first_error;

  double requests_per_s() const { return seconds > 0 ? requests / seconds : 0; }
  double rows_per_s() const { return seconds > 0 ? rows / seconds : 0; }
  double gb_per_s() const { return seconds > 0 ? score_bytes / seconds / 1e9 : 0; }
};

// Fills the percentiles and mean from raw latencies (sorted in place).
void Summarize(std::vector<int64_t>& latencies_us, StepResult& step);

void PrintTable(const std::vector<StepResult>& steps);
absl::Status WriteCsv(const std::vector<StepResult>& steps, const std::string& path);
absl::Status WriteJson(const std::vector<StepResult>& steps, const std::string& path);

}  // namespace topk::tools
