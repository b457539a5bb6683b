// Per-row phase stamps of one traced launch (CudaSelectorConfig::row_trace):
// where a call's wall time goes beyond the per-row phase timers (start skew,
// the last rows' ends, the longest row against the mean, SMs left idle).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace topk::bench {

// From a host copy of rows x kTraceWords words (kernel_args.h), relative to
// the earliest row start, in microseconds.
struct TraceSummary {
  int64_t rows = 0;         // rows with a start and an end stamp
  double span_us = 0;       // earliest start to latest end
  double start_p50_us = 0;  // row starts
  double start_max_us = 0;
  double end_p50_us = 0;  // row ends
  double end_p90_us = 0;
  double end_max_us = 0;
  double wall_mean_us = 0;  // start to end of one row
  double wall_max_us = 0;
  double clock_ghz = 0;  // the rows' clock64 cycles over their globaltimer ns
  int sms_used = 0;      // distinct SMs that ran a row (or a finisher)
  int rows_per_sm_max = 0;
  double busy_frac = 0;  // sum of row walls / (span x SMs used)
};

TraceSummary SummarizeTrace(const std::vector<unsigned long long>& words, int64_t rows);

// One line: "trace <label> M=.. N=.. span .. start p50/max .. end p50/p90/max ..".
std::string FormatTrace(const std::string& label, int64_t m, int64_t n, const TraceSummary& t);

// The CSV header and one row of the fields above.
const char* TraceCsvHeader();
std::string TraceCsvRow(const std::string& dtype, const std::string& label, int64_t m, int64_t n,
                        double ms, const TraceSummary& t);

}  // namespace topk::bench
