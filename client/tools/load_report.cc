#include "load_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace topk::tools {
namespace {

// Nearest rank: p = 0.999 of 1000 samples is the 999th, not an interpolation
// that would report a latency no call had.
double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return static_cast<double>(sorted[i]);
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// "INVALID_ARGUMENT:3 UNAVAILABLE:1": one CSV cell without commas.
std::string CodesCell(const std::map<std::string, int64_t>& codes) {
  return absl::StrJoin(codes, " ", absl::PairFormatter(":"));
}

// "gpu0:req_per_s=19266.3:mean_us=1581:srv_us=332.5:queue_us=86.9:dev_us=121.9:batch=6.31
// gpu1:...": one CSV cell without commas.
std::string GroupsCell(const std::vector<GroupResult>& groups) {
  std::vector<std::string> cells;
  for (const GroupResult& g : groups) {
    cells.push_back(absl::StrFormat(
        "%s:req_per_s=%.1f:mean_us=%.0f:srv_us=%.1f:queue_us=%.1f:dev_us=%.1f:batch=%.2f", g.name,
        g.requests_per_s(), g.mean_us, g.server_total_us, g.server_queue_us, g.server_device_us,
        g.batch_mean));
  }
  return absl::StrJoin(cells, " ");
}

// Written to a temporary name and renamed, so a reader polling the file
// while the run goes on never sees half a file.
absl::Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return absl::NotFoundError(absl::StrCat("cannot write ", temporary));
    out << text;
    if (!out.flush()) return absl::DataLossError(absl::StrCat("short write to ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

void Summarize(std::vector<int64_t>& latencies_us, StepResult& step) {
  std::sort(latencies_us.begin(), latencies_us.end());
  step.p50_us = Percentile(latencies_us, 0.50);
  step.p90_us = Percentile(latencies_us, 0.90);
  step.p95_us = Percentile(latencies_us, 0.95);
  step.p99_us = Percentile(latencies_us, 0.99);
  step.p999_us = Percentile(latencies_us, 0.999);
  step.max_us = latencies_us.empty() ? 0 : static_cast<double>(latencies_us.back());
  step.mean_us =
      latencies_us.empty()
          ? 0
          : std::accumulate(latencies_us.begin(), latencies_us.end(), 0.0) / latencies_us.size();
}

void PrintTable(const std::vector<StepResult>& steps) {
  absl::PrintF("%-12s %8s %9s %9s %9s %8s %8s %8s %9s %8s %8s %8s %7s %6s %8s %8s %6s\n", "mode",
               "setting", "req/s", "rows/s", "GB/s", "p50_ms", "p95_ms", "p99_ms", "p99.9_ms",
               "max_ms", "srv_ms", "queue_ms", "batch", "b_max", "checked", "inexact", "errors");
  for (const StepResult& s : steps) {
    absl::PrintF(
        "%-12s %8g %9.1f %9.0f %9.3f %8.2f %8.2f %8.2f %9.2f %8.2f %8.2f %8.2f %7.2f %6d %8d %8d "
        "%6d\n",
        s.mode, s.setting, s.requests_per_s(), s.rows_per_s(), s.gb_per_s(), s.p50_us / 1e3,
        s.p95_us / 1e3, s.p99_us / 1e3, s.p999_us / 1e3, s.max_us / 1e3, s.server_total_us / 1e3,
        s.server_queue_us / 1e3, s.batch_mean, s.batch_max, s.verified, s.inexact, s.errors);
    if (!s.errors_by_code.empty())
      absl::PrintF("%12s errors: %s\n", "", CodesCell(s.errors_by_code));
    for (const GroupResult& g : s.groups) {
      absl::PrintF(
          "%12s %s: %.1f req/s, mean %.2f ms, srv %.3f ms, queue %.3f ms, device %.3f ms, "
          "batch %.2f\n",
          "", g.name, g.requests_per_s(), g.mean_us / 1e3, g.server_total_us / 1e3,
          g.server_queue_us / 1e3, g.server_device_us / 1e3, g.batch_mean);
    }
    absl::PrintF("%12s client cpu %.2f s\n", "", s.client_cpu_s);
  }
}

absl::Status WriteCsv(const std::vector<StepResult>& steps, const std::string& path) {
  std::string text =
      "mode,setting,seconds,requests,errors,warmup_calls,verified,inexact,rows,score_bytes,"
      "req_per_s,rows_per_s,gb_per_s,p50_us,p90_us,p95_us,p99_us,p999_us,max_us,mean_us,"
      "server_total_us,server_queue_us,server_device_us,batch_mean,batch_max,arrival_cv,"
      "errors_by_code,server_prepare_us,client_cpu_s,groups\n";
  for (const StepResult& s : steps) {
    absl::StrAppendFormat(
        &text,
        "%s,%g,%.3f,%d,%d,%d,%d,%d,%d,%d,%.2f,%.1f,%.4f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.1f,%.1f,"
        "%.1f,%.1f,%.3f,%d,%.3f,%s,%.1f,%.3f,%s\n",
        s.mode, s.setting, s.seconds, s.requests, s.errors, s.warmup_calls, s.verified, s.inexact,
        s.rows, s.score_bytes, s.requests_per_s(), s.rows_per_s(), s.gb_per_s(), s.p50_us, s.p90_us,
        s.p95_us, s.p99_us, s.p999_us, s.max_us, s.mean_us, s.server_total_us, s.server_queue_us,
        s.server_device_us, s.batch_mean, s.batch_max, s.arrival_cv, CodesCell(s.errors_by_code),
        s.server_prepare_us, s.client_cpu_s, GroupsCell(s.groups));
  }
  return WriteWhole(path, text);
}

absl::Status WriteJson(const RunMetadata& metadata, const std::vector<StepResult>& steps,
                       const std::string& path) {
  std::string text = "{\n  \"metadata\": {";
  for (size_t i = 0; i < metadata.fields.size(); ++i) {
    absl::StrAppend(&text, i == 0 ? "\n" : ",\n", "    ", JsonString(metadata.fields[i].first),
                    ": ", JsonString(metadata.fields[i].second));
  }
  absl::StrAppend(&text, "\n  },\n  \"steps\": [\n");
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepResult& s = steps[i];
    std::string codes;
    for (const auto& [code, count] : s.errors_by_code) {
      absl::StrAppend(&codes, codes.empty() ? "" : ", ", JsonString(code), ": ", count);
    }
    absl::StrAppendFormat(
        &text,
        "    {\"mode\": \"%s\", \"setting\": %g, \"seconds\": %.3f, \"requests\": %d, "
        "\"errors\": %d, \"errors_by_code\": {%s}, \"warmup_calls\": %d, \"verified\": %d, "
        "\"inexact\": %d, \"rows\": %d, \"score_bytes\": %d, \"req_per_s\": %.2f, "
        "\"rows_per_s\": %.1f, \"gb_per_s\": %.4f, \"p50_us\": %.0f, \"p90_us\": %.0f, "
        "\"p95_us\": %.0f, \"p99_us\": %.0f, \"p999_us\": %.0f, \"max_us\": %.0f, "
        "\"mean_us\": %.1f, \"server_total_us\": %.1f, \"server_queue_us\": %.1f, "
        "\"server_device_us\": %.1f, \"server_prepare_us\": %.1f, \"batch_mean\": %.3f, "
        "\"batch_max\": %d, "
        "\"arrival_cv\": %.3f, \"client_cpu_s\": %.3f, \"first_error\": %s}%s\n",
        s.mode, s.setting, s.seconds, s.requests, s.errors, codes, s.warmup_calls, s.verified,
        s.inexact, s.rows, s.score_bytes, s.requests_per_s(), s.rows_per_s(), s.gb_per_s(),
        s.p50_us, s.p90_us, s.p95_us, s.p99_us, s.p999_us, s.max_us, s.mean_us, s.server_total_us,
        s.server_queue_us, s.server_device_us, s.server_prepare_us, s.batch_mean, s.batch_max,
        s.arrival_cv, s.client_cpu_s, JsonString(s.first_error), i + 1 < steps.size() ? "," : "");
  }
  absl::StrAppend(&text, "  ]\n}\n");
  return WriteWhole(path, text);
}

}  // namespace topk::tools
