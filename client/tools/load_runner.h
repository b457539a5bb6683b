// The two load modes of topk-loadgen: closed loop (a fixed number of
// callers sending back to back) and open loop (requests on a fixed schedule).
// Each step records client latency, server timings, throughput and verifier
// spot checks into a StepResult.
#pragma once

#include <memory>
#include <vector>

#include "load_report.h"
#include "packed_rows.h"
#include "reference_transport.h"
#include "topk/client/client.h"

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
};

struct StepTiming {
  double warmup_s = 1;    // unmeasured
  double duration_s = 5;  // measured
  bool progress = true;   // live line on stderr
};

// `concurrency` callers, caller c on clients[c] (needs that many clients).
StepResult RunConcurrency(const Workload& w, const StepTiming& timing,
                          std::vector<std::unique_ptr<client::Client>>& clients, int concurrency);

// `rate` requests/s spread round robin over `clients`; beyond
// `max_outstanding` in flight a request is dropped (counted as an error).
StepResult RunRate(const Workload& w, const StepTiming& timing,
                   std::vector<std::unique_ptr<client::Client>>& clients, double rate,
                   int max_outstanding);

}  // namespace topk::tools
