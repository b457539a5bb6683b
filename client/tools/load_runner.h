// The two load modes of topk-loadgen: closed loop (a fixed number of
// callers sending back to back) and open loop (requests on a schedule,
// constant or Poisson). Each step records client latency, server timings,
// throughput, errors by status code and verifier spot checks into a
// StepResult; calls that end during the warm-up are counted apart.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "channel_transport.h"
#include "load_report.h"
#include "packed_rows.h"
#include "reference_transport.h"
#include "topk/client/client.h"
#include "topk/client/regions.h"

namespace topk::tools {

// What every request of a run carries: distinct pre-generated batches sent
// round robin (their wire requests built once).
struct Workload {
  int32_t k = 0;
  client::CallOptions options;
  bool stream = false;  // SelectStream instead of Select
  int64_t chunk_bytes = 0;
  int verify_every = 0;  // verify every n-th answer; 0: none
  std::vector<PackedRows> rows;
  std::vector<std::shared_ptr<const v1::SelectRequest>> requests;
  // Set: rows and outputs by reference (closed loop only); caller c sends
  // references->request(c, variant) and reads the answer back from its
  // output area for the calls it verifies.
  const ReferenceRegions* references = nullptr;
  // Set: each caller calls through a channel of its own (closed loop); the
  // answer is read back from its output area for the calls it verifies.
  const ChannelCallers* channels = nullptr;
  // Set: each caller sends on a SelectPipeline stream of its own (entry
  // `caller`, opened on its client at its first call and reopened if the
  // server ended it) instead of one unary Select per request. Closed loop.
  std::vector<std::unique_ptr<client::SelectPipeline>>* pipelines = nullptr;
  // Set: each call is an Echo of these bytes instead of a Select (the
  // transport's ceiling without the engine); the answer must equal them.
  bool echo = false;
  std::string echo_payload;
};

struct StepTiming {
  double warmup_s = 1;    // unmeasured
  double duration_s = 5;  // measured
  // Progress on stderr: a line rewritten in place on a terminal, otherwise a
  // plain line every few seconds (a log file gets no carriage returns).
  bool progress = true;
};

// How an open loop spaces its sends: evenly, or as a Poisson process of the
// same mean rate (exponential gaps: the bursts real traffic has).
enum class Arrivals { kConstant, kPoisson };
absl::StatusOr<Arrivals> ParseArrivals(const std::string& name);

// `concurrency` callers, caller c on clients[c % clients.size()].
StepResult RunConcurrency(const Workload& w, const StepTiming& timing,
                          std::vector<std::unique_ptr<client::Client>>& clients, int concurrency);

// `rate` requests/s spread round robin over `clients`; beyond
// `max_outstanding` in flight a request is dropped (counted as an error).
StepResult RunRate(const Workload& w, const StepTiming& timing,
                   std::vector<std::unique_ptr<client::Client>>& clients, double rate,
                   Arrivals arrivals, uint64_t seed, int max_outstanding);

}  // namespace topk::tools
