// topk-loadgen: a load generator for topk-server modelled on perf_analyzer.
// Closed loop (--concurrency=1,2,4: that many callers, each with its own
// channel, sending back to back) or open loop (--request_rate=50,100: requests
// issued on a fixed schedule). Rows come from the topk_testing generators;
// every --verify_every-th answer is checked with the exactness verifier.
// Exit status 1 if any answer was inexact or any call failed.
#include <algorithm>
#include <iostream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "load_report.h"
#include "load_runner.h"
#include "packed_rows.h"
#include "topk/client/client.h"

ABSL_FLAG(std::string, target, topk::client::ClientOptions{}.target, "server host:port");
ABSL_FLAG(int, k, 2048, "K");
ABSL_FLAG(int64_t, rows, 64, "rows per request (M)");
ABSL_FLAG(int64_t, width, 131072, "largest row length (N)");
ABSL_FLAG(std::string, distribution, "indexer", "score distribution (topk_testing names)");
ABSL_FLAG(std::string, lengths, "causal", "full | causal | random | edges");
ABSL_FLAG(int, variants, 4, "distinct pre-generated requests, sent round robin");
ABSL_FLAG(uint64_t, seed, 1, "generator seed");
ABSL_FLAG(bool, sorted, false, "ask for sorted rows");
ABSL_FLAG(bool, deterministic, false, "ask for deterministic ties");
ABSL_FLAG(bool, stream, false, "send with SelectStream");
ABSL_FLAG(int64_t, chunk_bytes, static_cast<int64_t>(topk::client::kDefaultChunkBytes),
          "SelectStream chunk size");
ABSL_FLAG(std::string, concurrency, "1,2,4,8", "closed-loop sweep (ignored with --request_rate)");
ABSL_FLAG(std::string, request_rate, "", "open-loop sweep in requests/s, e.g. 20,40,80");
ABSL_FLAG(int, max_outstanding, 256, "open loop: most requests in flight before dropping");
ABSL_FLAG(double, duration_s, 5, "measured seconds per step");
ABSL_FLAG(double, warmup_s, 1, "unmeasured seconds before each step");
ABSL_FLAG(int, verify_every, 10, "verify every n-th answer (1: all, 0: none)");
ABSL_FLAG(std::string, csv, "", "write the steps as CSV here");
ABSL_FLAG(std::string, json, "", "write the steps as JSON here");
ABSL_FLAG(bool, progress, true, "live progress line on stderr");
ABSL_FLAG(std::string, transport, "inline",
          "inline (rows in the request) | shm (rows and answers in a shared-memory region) | ipc "
          "(in a CUDA allocation exported over IPC); shm and ipc need a local server with "
          "--enable_regions and a closed loop");
ABSL_FLAG(int, ipc_device, 0, "--transport=ipc: the CUDA device holding the rows");

namespace {

using topk::client::Client;
using topk::tools::StepResult;

template <typename T>
absl::StatusOr<std::vector<T>> ParseList(const std::string& text, const char* flag) {
  std::vector<T> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    T value{};
    bool ok = false;
    if constexpr (std::is_same_v<T, double>) {
      ok = absl::SimpleAtod(part, &value);
    } else {
      ok = absl::SimpleAtoi(part, &value);
    }
    if (!ok || value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": bad value '", part, "'"));
    }
    out.push_back(value);
  }
  return out;
}

int Fail(const absl::Status& status) {
  std::cerr << "topk-loadgen: " << status << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "topk-loadgen --target=H:P [--concurrency=1,2,4 | --request_rate=..]");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<topk::testing::Distribution> distribution =
      topk::tools::ParseDistribution(absl::GetFlag(FLAGS_distribution));
  if (!distribution.ok()) return Fail(distribution.status());
  absl::StatusOr<topk::testing::LengthPattern> lengths =
      topk::tools::ParseLengthPattern(absl::GetFlag(FLAGS_lengths));
  if (!lengths.ok()) return Fail(lengths.status());

  topk::tools::Workload w;
  w.k = absl::GetFlag(FLAGS_k);
  w.options = {.sorted = absl::GetFlag(FLAGS_sorted),
               .deterministic = absl::GetFlag(FLAGS_deterministic)};
  w.stream = absl::GetFlag(FLAGS_stream);
  w.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  w.verify_every = absl::GetFlag(FLAGS_verify_every);
  for (int v = 0; v < std::max(1, absl::GetFlag(FLAGS_variants)); ++v) {
    w.rows.push_back(topk::tools::Generate({.distribution = *distribution,
                                            .lengths = *lengths,
                                            .rows = absl::GetFlag(FLAGS_rows),
                                            .width = absl::GetFlag(FLAGS_width),
                                            .k = w.k,
                                            .seed = absl::GetFlag(FLAGS_seed) + v}));
    w.requests.push_back(std::make_shared<const topk::v1::SelectRequest>(
        Client::MakeRequest(w.k, w.rows.back().view(), w.options)));
  }
  absl::PrintF("target %s: %d variants of %d rows x up to %d (%s, %s), k=%d, %.2f MB/request\n",
               absl::GetFlag(FLAGS_target), w.rows.size(), absl::GetFlag(FLAGS_rows),
               absl::GetFlag(FLAGS_width), absl::GetFlag(FLAGS_distribution),
               absl::GetFlag(FLAGS_lengths), w.k, w.rows.front().bytes() / 1e6);

  const bool open_loop = !absl::GetFlag(FLAGS_request_rate).empty();
  absl::StatusOr<std::vector<double>> rates =
      ParseList<double>(absl::GetFlag(FLAGS_request_rate), "--request_rate");
  absl::StatusOr<std::vector<int>> levels =
      ParseList<int>(absl::GetFlag(FLAGS_concurrency), "--concurrency");
  if (!rates.ok()) return Fail(rates.status());
  if (!levels.ok()) return Fail(levels.status());
  const int channels = open_loop ? 4 : *std::max_element(levels->begin(), levels->end());
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < channels; ++c) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect({.target = absl::GetFlag(FLAGS_target)});
    if (!client.ok()) return Fail(client.status());
    clients.push_back(*std::move(client));
  }
  if (absl::Status s = clients.front()->WaitForServing(absl::Seconds(30)); !s.ok()) return Fail(s);

  absl::StatusOr<topk::tools::Transport> transport =
      topk::tools::ParseTransport(absl::GetFlag(FLAGS_transport));
  if (!transport.ok()) return Fail(transport.status());
  std::unique_ptr<topk::tools::ReferenceRegions> references;
  if (*transport != topk::tools::Transport::kInline) {
    if (open_loop || w.stream) {
      return Fail(absl::InvalidArgumentError(
          "--transport=shm|ipc: closed loop (--concurrency) with unary Select only"));
    }
    absl::StatusOr<std::unique_ptr<topk::tools::ReferenceRegions>> created =
        topk::tools::ReferenceRegions::Create(*transport, *clients.front(), w.rows, w.k, w.options,
                                              channels, absl::GetFlag(FLAGS_ipc_device));
    if (!created.ok()) return Fail(created.status());
    references = *std::move(created);
    w.references = references.get();
  }

  const topk::tools::StepTiming timing{.warmup_s = absl::GetFlag(FLAGS_warmup_s),
                                       .duration_s = absl::GetFlag(FLAGS_duration_s),
                                       .progress = absl::GetFlag(FLAGS_progress)};
  std::vector<StepResult> steps;
  if (open_loop) {
    for (double rate : *rates) {
      steps.push_back(
          topk::tools::RunRate(w, timing, clients, rate, absl::GetFlag(FLAGS_max_outstanding)));
    }
  } else {
    for (int level : *levels) {
      steps.push_back(topk::tools::RunConcurrency(w, timing, clients, level));
    }
  }
  topk::tools::PrintTable(steps);
  bool clean = true;
  for (const StepResult& s : steps) {
    if (s.errors > 0 || s.inexact > 0) {
      clean = false;
      std::cerr << "step " << s.mode << "=" << s.setting << ": " << s.errors << " errors, "
                << s.inexact << " inexact; first: " << s.first_error << "\n";
    }
  }
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    if (absl::Status s = topk::tools::WriteCsv(steps, absl::GetFlag(FLAGS_csv)); !s.ok()) {
      return Fail(s);
    }
  }
  if (!absl::GetFlag(FLAGS_json).empty()) {
    if (absl::Status s = topk::tools::WriteJson(steps, absl::GetFlag(FLAGS_json)); !s.ok()) {
      return Fail(s);
    }
  }
  return clean ? 0 : 1;
}
