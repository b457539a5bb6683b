#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "bench_trace.h"
#include "kernel_args.h"

namespace topk::bench {
namespace {

double Pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

struct MeanMax {
  double sum = 0, max = 0;
  int64_t n = 0;
  void Add(double v) {
    sum += v;
    max = std::max(max, v);
    ++n;
  }
  double Mean() const { return n > 0 ? sum / n : 0; }
};

}  // namespace

TraceSummary SummarizeTrace(const std::vector<unsigned long long>& words, int64_t rows) {
  using cuda::kTraceWords;
  TraceSummary t;
  unsigned long long t0 = ~0ull;
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned long long* w = &words[r * kTraceWords];
    if (w[cuda::kTraceStart] != 0 && w[cuda::kTraceFinalize] != 0)
      t0 = std::min(t0, w[cuda::kTraceStart]);
  }
  if (t0 == ~0ull) return t;
  std::vector<double> starts, ends;
  MeanMax wall;
  double cycles = 0, ns = 0;
  std::map<unsigned long long, int> per_sm;
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned long long* w = &words[r * kTraceWords];
    const unsigned long long s = w[cuda::kTraceStart], e = w[cuda::kTraceFinalize];
    if (s == 0 || e == 0) continue;
    ++t.rows;
    starts.push_back((s - t0) / 1e3);
    ends.push_back((e - t0) / 1e3);
    wall.Add((e - s) / 1e3);
    if (w[cuda::kTraceCycles] != 0) {
      cycles += static_cast<double>(w[cuda::kTraceCycles]);
      ns += static_cast<double>(e - s);
    }
    ++per_sm[w[cuda::kTraceSm]];
  }
  t.span_us = Pct(ends, 1.0);
  t.start_p50_us = Pct(starts, 0.5);
  t.start_max_us = Pct(starts, 1.0);
  t.end_p50_us = Pct(ends, 0.5);
  t.end_p90_us = Pct(ends, 0.9);
  t.end_max_us = t.span_us;
  t.wall_mean_us = wall.Mean();
  t.wall_max_us = wall.max;
  t.clock_ghz = ns > 0 ? cycles / ns : 0;
  t.sms_used = static_cast<int>(per_sm.size());
  for (const auto& [sm, n] : per_sm) t.rows_per_sm_max = std::max(t.rows_per_sm_max, n);
  t.busy_frac = t.span_us > 0 && t.sms_used > 0 ? wall.sum / (t.span_us * t.sms_used) : 0;
  return t;
}

std::string FormatTrace(const std::string& label, int64_t m, int64_t n, const TraceSummary& t) {
  return absl::StrFormat(
      "  trace %s M=%5d N=%7d rows %d span %.1f us | start p50 %.1f max %.1f | end p50 %.1f p90 "
      "%.1f max %.1f | row wall mean %.1f max %.1f | clock %.2f GHz | SMs %d rows/SM max %d "
      "busy %.2f",
      label, m, n, t.rows, t.span_us, t.start_p50_us, t.start_max_us, t.end_p50_us, t.end_p90_us,
      t.end_max_us, t.wall_mean_us, t.wall_max_us, t.clock_ghz, t.sms_used, t.rows_per_sm_max,
      t.busy_frac);
}

const char* TraceCsvHeader() {
  return "dtype,selector,M,N,ms,rows,span_us,start_p50_us,start_max_us,end_p50_us,end_p90_us,"
         "end_max_us,wall_mean_us,wall_max_us,clock_ghz,sms_used,rows_per_sm_max,busy_frac\n";
}

std::string TraceCsvRow(const std::string& dtype, const std::string& label, int64_t m, int64_t n,
                        double ms, const TraceSummary& t) {
  return absl::StrFormat(
      "%s,%s,%d,%d,%.5f,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%d,%d,%.3f\n", dtype, label,
      m, n, ms, t.rows, t.span_us, t.start_p50_us, t.start_max_us, t.end_p50_us, t.end_p90_us,
      t.end_max_us, t.wall_mean_us, t.wall_max_us, t.clock_ghz, t.sms_used, t.rows_per_sm_max,
      t.busy_frac);
}

}  // namespace topk::bench
