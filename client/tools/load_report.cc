#include "load_report.h"

#include <algorithm>
#include <fstream>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace topk::tools {
namespace {

double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return static_cast<double>(sorted[i]);
}

}  // namespace

void Summarize(std::vector<int64_t>& latencies_us, StepResult& step) {
  std::sort(latencies_us.begin(), latencies_us.end());
  step.p50_us = Percentile(latencies_us, 0.50);
  step.p90_us = Percentile(latencies_us, 0.90);
  step.p99_us = Percentile(latencies_us, 0.99);
  step.mean_us =
      latencies_us.empty()
          ? 0
          : std::accumulate(latencies_us.begin(), latencies_us.end(), 0.0) / latencies_us.size();
}

void PrintTable(const std::vector<StepResult>& steps) {
  absl::PrintF("%-12s %8s %9s %9s %10s %8s %9s %9s %9s %9s %9s %9s %8s %6s\n", "mode", "setting",
               "req/s", "rows/s", "GB/s", "p50_ms", "p90_ms", "p99_ms", "srv_ms", "queue_ms",
               "dev_ms", "checked", "inexact", "errors");
  for (const StepResult& s : steps) {
    absl::PrintF("%-12s %8g %9.1f %9.0f %10.3f %8.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9d %8d %6d\n",
                 s.mode, s.setting, s.requests_per_s(), s.rows_per_s(), s.gb_per_s(),
                 s.p50_us / 1e3, s.p90_us / 1e3, s.p99_us / 1e3, s.server_total_us / 1e3,
                 s.server_queue_us / 1e3, s.server_device_us / 1e3, s.verified, s.inexact,
                 s.errors);
  }
}

absl::Status WriteCsv(const std::vector<StepResult>& steps, const std::string& path) {
  std::ofstream out(path);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  out << "mode,setting,seconds,requests,errors,verified,inexact,rows,score_bytes,req_per_s,"
         "rows_per_s,gb_per_s,p50_us,p90_us,p99_us,mean_us,server_total_us,server_queue_us,"
         "server_device_us\n";
  for (const StepResult& s : steps) {
    out << absl::StrFormat(
        "%s,%g,%.3f,%d,%d,%d,%d,%d,%d,%.2f,%.1f,%.4f,%.0f,%.0f,%.0f,%.1f,%.1f,"
        "%.1f,%.1f\n",
        s.mode, s.setting, s.seconds, s.requests, s.errors, s.verified, s.inexact, s.rows,
        s.score_bytes, s.requests_per_s(), s.rows_per_s(), s.gb_per_s(), s.p50_us, s.p90_us,
        s.p99_us, s.mean_us, s.server_total_us, s.server_queue_us, s.server_device_us);
  }
  return out ? absl::OkStatus() : absl::DataLossError(absl::StrCat("short write to ", path));
}

absl::Status WriteJson(const std::vector<StepResult>& steps, const std::string& path) {
  std::ofstream out(path);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  out << "[\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepResult& s = steps[i];
    out << absl::StrFormat(
        "  {\"mode\": \"%s\", \"setting\": %g, \"seconds\": %.3f, \"requests\": %d, "
        "\"errors\": %d, \"verified\": %d, \"inexact\": %d, \"rows\": %d, \"score_bytes\": %d, "
        "\"req_per_s\": %.2f, \"rows_per_s\": %.1f, \"gb_per_s\": %.4f, \"p50_us\": %.0f, "
        "\"p90_us\": %.0f, \"p99_us\": %.0f, \"mean_us\": %.1f, \"server_total_us\": %.1f, "
        "\"server_queue_us\": %.1f, \"server_device_us\": %.1f}%s\n",
        s.mode, s.setting, s.seconds, s.requests, s.errors, s.verified, s.inexact, s.rows,
        s.score_bytes, s.requests_per_s(), s.rows_per_s(), s.gb_per_s(), s.p50_us, s.p90_us,
        s.p99_us, s.mean_us, s.server_total_us, s.server_queue_us, s.server_device_us,
        i + 1 < steps.size() ? "," : "");
  }
  out << "]\n";
  return out ? absl::OkStatus() : absl::DataLossError(absl::StrCat("short write to ", path));
}

}  // namespace topk::tools
