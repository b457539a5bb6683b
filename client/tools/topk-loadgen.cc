// topk-loadgen: a load generator for topk-server modelled on perf_analyzer.
// Closed loop (--concurrency=1,2,4: that many callers, each with its own
// channel, sending back to back) or open loop (--request_rate=50,100: requests
// issued on a fixed schedule). Rows come from the topk_testing generators;
// every --verify_every-th answer is checked with the exactness verifier.
// Exit status 1 if any answer was inexact or any call failed.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "load_report.h"
#include "packed_rows.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "server host:port");
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
ABSL_FLAG(int64_t, chunk_bytes, int64_t{4} << 20, "SelectStream chunk size");
ABSL_FLAG(std::string, concurrency, "1,2,4,8", "closed-loop sweep (ignored with --request_rate)");
ABSL_FLAG(std::string, request_rate, "", "open-loop sweep in requests/s, e.g. 20,40,80");
ABSL_FLAG(int, max_outstanding, 256, "open loop: most requests in flight before dropping");
ABSL_FLAG(double, duration_s, 5, "measured seconds per step");
ABSL_FLAG(double, warmup_s, 1, "unmeasured seconds before each step");
ABSL_FLAG(int, verify_every, 10, "verify every n-th answer (1: all, 0: none)");
ABSL_FLAG(std::string, csv, "", "write the steps as CSV here");
ABSL_FLAG(std::string, json, "", "write the steps as JSON here");
ABSL_FLAG(bool, progress, true, "live progress line on stderr");

namespace {

using topk::client::Client;
using topk::client::SelectResult;
using topk::tools::PackedRows;
using topk::tools::StepResult;
using Clock = std::chrono::steady_clock;

struct Workload {
  int32_t k = 0;
  topk::client::CallOptions options;
  bool stream = false;
  int64_t chunk_bytes = 0;
  int verify_every = 0;
  std::vector<PackedRows> rows;
  std::vector<std::shared_ptr<const topk::v1::SelectRequest>> requests;
};

// Everything completions record; one per step.
class Collector {
 public:
  Collector(const Workload& workload, Clock::time_point measure_from)
      : workload_(workload), measure_from_(measure_from) {
    latencies_.reserve(1 << 16);
  }

  void Record(const absl::StatusOr<SelectResult>& result, size_t variant) {
    const bool measured = Clock::now() >= measure_from_;
    completed_.fetch_add(1, std::memory_order_relaxed);
    bool verified = false, exact = true;
    if (result.ok() && workload_.verify_every > 0 &&
        verify_counter_.fetch_add(1) % workload_.verify_every == 0) {
      verified = true;
      const topk::SelectOptions options{.sorted = workload_.options.sorted,
                                        .deterministic = workload_.options.deterministic};
      const absl::Status v =
          topk::tools::Verify(workload_.rows[variant], workload_.k, options, *result);
      exact = v.ok();
      if (!exact) {
        absl::MutexLock lock(&mu_);
        if (first_error_.empty()) first_error_ = std::string(v.message());
      }
    }
    absl::MutexLock lock(&mu_);
    if (!result.ok()) {
      ++errors_;
      if (first_error_.empty()) first_error_ = result.status().ToString();
      return;
    }
    if (verified) {
      ++verified_;
      inexact_ += !exact;
    }
    if (!measured) return;
    latencies_.push_back(result->client_us);
    ++requests_;
    rows_ += result->num_rows;
    score_bytes_ += workload_.rows[variant].bytes();
    server_total_ += result->server.total_us;
    server_queue_ += result->server.queue_us;
    server_device_ += result->server.device_us;
  }

  void Drop() {
    absl::MutexLock lock(&mu_);
    ++errors_;
    if (first_error_.empty()) first_error_ = "dropped: --max_outstanding requests in flight";
  }

  int64_t completed() const { return completed_.load(std::memory_order_relaxed); }

  StepResult Finish(std::string mode, double setting, double seconds) {
    absl::MutexLock lock(&mu_);
    StepResult step{.mode = std::move(mode),
                    .setting = setting,
                    .seconds = seconds,
                    .requests = requests_,
                    .errors = errors_,
                    .verified = verified_,
                    .inexact = inexact_,
                    .rows = rows_,
                    .score_bytes = score_bytes_,
                    .first_error = first_error_};
    if (requests_ > 0) {
      step.server_total_us = static_cast<double>(server_total_) / requests_;
      step.server_queue_us = static_cast<double>(server_queue_) / requests_;
      step.server_device_us = static_cast<double>(server_device_) / requests_;
    }
    topk::tools::Summarize(latencies_, step);
    return step;
  }

 private:
  const Workload& workload_;
  Clock::time_point measure_from_;
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> verify_counter_{0};
  absl::Mutex mu_;
  std::vector<int64_t> latencies_;
  int64_t requests_ = 0, errors_ = 0, verified_ = 0, inexact_ = 0, rows_ = 0, score_bytes_ = 0;
  int64_t server_total_ = 0, server_queue_ = 0, server_device_ = 0;
  std::string first_error_;
};

// "\r[concurrency 4] 3.2 s  812 done  254 req/s" on stderr while a step runs.
class Progress {
 public:
  Progress(std::string label, const Collector& collector)
      : label_(std::move(label)), collector_(collector) {
    if (!absl::GetFlag(FLAGS_progress)) return;
    thread_ = std::thread([this] {
      const auto start = Clock::now();
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        const int64_t n = collector_.completed();
        std::fprintf(stderr, "\r[%s] %5.1f s  %8lld done  %8.1f req/s   ", label_.c_str(), s,
                     static_cast<long long>(n), n / s);
      }
      std::fprintf(stderr, "\r%*s\r", 70, "");
    });
  }
  ~Progress() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string label_;
  const Collector& collector_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

absl::StatusOr<SelectResult> CallOnce(Client& client, const Workload& w, size_t variant) {
  if (w.stream) {
    return client.SelectStreaming(w.k, w.rows[variant].view(), w.options, w.chunk_bytes);
  }
  return client.Select(*w.requests[variant], w.options);
}

StepResult RunConcurrency(const Workload& w, std::vector<std::unique_ptr<Client>>& clients,
                          int concurrency) {
  const auto warmup = absl::GetFlag(FLAGS_warmup_s);
  const auto duration = absl::GetFlag(FLAGS_duration_s);
  const auto start = Clock::now();
  const auto measure_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  const auto stop_at = measure_from + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(duration));
  Collector collector(w, measure_from);
  Progress progress(absl::StrFormat("concurrency %d", concurrency), collector);
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c) {
    threads.emplace_back([&, c] {
      for (size_t i = c; Clock::now() < stop_at; ++i) {
        const size_t variant = i % w.rows.size();
        collector.Record(CallOnce(*clients[c], w, variant), variant);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double measured = std::chrono::duration<double>(Clock::now() - measure_from).count();
  return collector.Finish("concurrency", concurrency, measured);
}

StepResult RunRate(const Workload& w, std::vector<std::unique_ptr<Client>>& clients, double rate) {
  const auto warmup = absl::GetFlag(FLAGS_warmup_s);
  const auto duration = absl::GetFlag(FLAGS_duration_s);
  const auto start = Clock::now();
  const auto measure_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  const auto stop_at = measure_from + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(duration));
  Collector collector(w, measure_from);
  Progress progress(absl::StrFormat("rate %g/s", rate), collector);
  std::atomic<int> outstanding{0};
  const int max_outstanding = absl::GetFlag(FLAGS_max_outstanding);
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
  size_t i = 0;
  for (auto next = start; next < stop_at; next += interval, ++i) {
    std::this_thread::sleep_until(next);
    if (outstanding.load() >= max_outstanding) {
      collector.Drop();
      continue;
    }
    const size_t variant = i % w.rows.size();
    Client& client = *clients[i % clients.size()];
    ++outstanding;
    if (w.stream) {
      // Streaming has no async form in the client library: a short-lived
      // thread per call keeps the schedule open-loop.
      std::thread([&, variant] {
        collector.Record(CallOnce(client, w, variant), variant);
        --outstanding;
      }).detach();
    } else {
      client.SelectAsync(w.requests[variant], w.options,
                         [&collector, &outstanding, variant](absl::StatusOr<SelectResult> r) {
                           collector.Record(r, variant);
                           --outstanding;
                         });
    }
  }
  while (outstanding.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double measured = std::chrono::duration<double>(stop_at - measure_from).count();
  return collector.Finish("rate", rate, measured);
}

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

  Workload w;
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

  std::vector<StepResult> steps;
  if (open_loop) {
    for (double rate : *rates) steps.push_back(RunRate(w, clients, rate));
  } else {
    for (int level : *levels) steps.push_back(RunConcurrency(w, clients, level));
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
