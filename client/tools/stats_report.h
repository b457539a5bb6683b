// topk-cli stats: a server's Stats as a reader wants them: counters, errors by
// code, and per-stage latency percentiles estimated from the cumulative
// histograms (linear within a bucket, as Prometheus' histogram_quantile does),
// as text or as one JSON object.
#pragma once

#include <string>

#include "topk/v1/topk.pb.h"

namespace topk::tools {

// The `q` quantile (0 < q < 1) of `histogram`, in microseconds; 0 when it is
// empty. Past the last finite bound, the last bound (a lower estimate).
double HistogramQuantileUs(const v1::Histogram& histogram, double q);

std::string StatsText(const v1::Stats& stats);
std::string StatsJson(const v1::Stats& stats);

}  // namespace topk::tools
