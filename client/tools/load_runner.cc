#include "load_runner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace topk::tools {
namespace {

using topk::client::Client;
using topk::client::SelectResult;
using Clock = std::chrono::steady_clock;

// Everything completions record; one per step.
class Collector {
 public:
  Collector(const Workload& workload, Clock::time_point measure_from)
      : workload_(workload),
        measure_from_(measure_from),
        groups_(workload.references != nullptr ? workload.references->groups() : 1) {
    latencies_.reserve(1 << 16);
  }

  // `caller`: the closed loop's caller (its group's share is kept apart);
  // 0 in an open loop.
  void Record(const absl::StatusOr<SelectResult>& result, size_t variant, int caller) {
    completed_.fetch_add(1, std::memory_order_relaxed);
    if (Clock::now() < measure_from_) {
      absl::MutexLock lock(&mu_);
      ++warmup_calls_;
      return;
    }
    bool verified = false, exact = true;
    // By reference, the caller read back exactly the answers to verify.
    const bool verify = workload_.references != nullptr
                            ? result.ok() && !result->indices.empty()
                            : result.ok() && workload_.verify_every > 0 &&
                                  verify_counter_.fetch_add(1) % workload_.verify_every == 0;
    if (verify) {
      verified = true;
      const topk::SelectOptions options{.sorted = workload_.options.sorted,
                                        .deterministic = workload_.options.deterministic};
      const absl::Status v = Verify(workload_.rows[variant], workload_.k, options, *result);
      exact = v.ok();
      if (!exact) {
        absl::MutexLock lock(&mu_);
        if (first_error_.empty()) first_error_ = std::string(v.message());
      }
    }
    absl::MutexLock lock(&mu_);
    if (!result.ok()) {
      ++errors_;
      ++errors_by_code_[absl::StatusCodeToString(result.status().code())];
      if (first_error_.empty()) first_error_ = result.status().ToString();
      return;
    }
    if (verified) {
      ++verified_;
      inexact_ += !exact;
    }
    latencies_.push_back(result->client_us);
    ++requests_;
    rows_ += result->num_rows;
    score_bytes_ += workload_.echo ? static_cast<int64_t>(workload_.echo_payload.size())
                                   : workload_.rows[variant].bytes();
    server_total_ += result->server.total_us;
    server_queue_ += result->server.queue_us;
    server_device_ += result->server.device_us;
    server_prepare_ += result->server.prepare_us;
    batch_sum_ += result->server.batch_requests;
    batch_max_ = std::max<int64_t>(batch_max_, result->server.batch_requests);
    Sums& group =
        groups_[workload_.references != nullptr ? workload_.references->group_of(caller) : 0];
    ++group.requests;
    group.client_us += result->client_us;
    group.server_total_us += result->server.total_us;
    group.server_queue_us += result->server.queue_us;
    group.server_device_us += result->server.device_us;
    group.batch_sum += result->server.batch_requests;
  }

  void Drop() {
    if (Clock::now() < measure_from_) return;
    absl::MutexLock lock(&mu_);
    ++errors_;
    ++errors_by_code_["DROPPED"];
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
                    .errors_by_code = errors_by_code_,
                    .warmup_calls = warmup_calls_,
                    .verified = verified_,
                    .inexact = inexact_,
                    .rows = rows_,
                    .score_bytes = score_bytes_,
                    .first_error = first_error_};
    if (requests_ > 0) {
      step.server_total_us = static_cast<double>(server_total_) / requests_;
      step.server_queue_us = static_cast<double>(server_queue_) / requests_;
      step.server_device_us = static_cast<double>(server_device_) / requests_;
      step.server_prepare_us = static_cast<double>(server_prepare_) / requests_;
      step.batch_mean = static_cast<double>(batch_sum_) / requests_;
      step.batch_max = batch_max_;
    }
    Summarize(latencies_, step);
    for (size_t g = 0; groups_.size() > 1 && g < groups_.size(); ++g) {
      const Sums& sums = groups_[g];
      const double n = static_cast<double>(std::max<int64_t>(1, sums.requests));
      step.groups.push_back({.name = workload_.references->group_name(static_cast<int>(g)),
                             .requests = sums.requests,
                             .seconds = seconds,
                             .mean_us = static_cast<double>(sums.client_us) / n,
                             .server_total_us = static_cast<double>(sums.server_total_us) / n,
                             .server_queue_us = static_cast<double>(sums.server_queue_us) / n,
                             .server_device_us = static_cast<double>(sums.server_device_us) / n,
                             .batch_mean = static_cast<double>(sums.batch_sum) / n});
    }
    return step;
  }

 private:
  struct Sums {
    int64_t requests = 0, client_us = 0, server_total_us = 0, server_queue_us = 0;
    int64_t server_device_us = 0, batch_sum = 0;
  };

  const Workload& workload_;
  Clock::time_point measure_from_;
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> verify_counter_{0};
  absl::Mutex mu_;
  std::vector<int64_t> latencies_;
  std::map<std::string, int64_t> errors_by_code_;
  int64_t warmup_calls_ = 0;
  int64_t requests_ = 0, errors_ = 0, verified_ = 0, inexact_ = 0, rows_ = 0, score_bytes_ = 0;
  int64_t server_total_ = 0, server_queue_ = 0, server_device_ = 0, server_prepare_ = 0;
  int64_t batch_sum_ = 0, batch_max_ = 0;
  std::vector<Sums> groups_;  // per group of callers
  std::string first_error_;
};

// This process's CPU seconds so far (user + system, every thread).
double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// "[concurrency 4] 3.2 s  812 done  254 req/s" on stderr while a step runs:
// rewritten in place every half second on a terminal; into a file or pipe a
// plain line every 5 s, so a CI log holds a few lines instead of one line of
// carriage returns.
class Progress {
 public:
  Progress(bool enabled, std::string label, const Collector& collector)
      : label_(std::move(label)), collector_(collector) {
    if (!enabled) return;
    const bool terminal = isatty(fileno(stderr)) != 0;
    thread_ = std::thread([this, terminal] {
      const auto start = Clock::now();
      const auto period = terminal ? std::chrono::milliseconds(500) : std::chrono::seconds(5);
      auto next = start + period;
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (Clock::now() < next) continue;
        next += period;
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        const int64_t n = collector_.completed();
        std::fprintf(stderr, "%s[%s] %5.1f s  %8lld done  %8.1f req/s%s", terminal ? "\r" : "",
                     label_.c_str(), s, static_cast<long long>(n), n / s, terminal ? "   " : "\n");
      }
      if (terminal) std::fprintf(stderr, "\r%*s\r", 70, "");
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

// One request on caller `caller`'s pipeline (opened on first use).
absl::StatusOr<SelectResult> PipelineCall(Client& client, const Workload& w, int caller,
                                          const v1::SelectRequest& request) {
  std::unique_ptr<client::SelectPipeline>& pipeline = (*w.pipelines)[caller];
  if (pipeline == nullptr || !pipeline->healthy()) {
    absl::StatusOr<std::unique_ptr<client::SelectPipeline>> opened =
        client::SelectPipeline::Open(client.channel());
    if (!opened.ok()) return opened.status();
    pipeline = *std::move(opened);
  }
  return pipeline->Call(request);
}

// One unary Echo, checked byte for byte: an answer that differs is an error.
absl::StatusOr<SelectResult> EchoOnce(Client& client, const Workload& w) {
  const auto start = Clock::now();
  absl::StatusOr<std::string> echoed = client.Echo(w.echo_payload);
  if (!echoed.ok()) return echoed.status();
  if (*echoed != w.echo_payload) {
    return absl::DataLossError(absl::StrCat("Echo: ", echoed->size(), " bytes came back for ",
                                            w.echo_payload.size(), ", or different ones"));
  }
  SelectResult result;
  result.client_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return result;
}

absl::StatusOr<SelectResult> CallOnce(Client& client, const Workload& w, size_t variant, int caller,
                                      int64_t call) {
  if (w.echo) return EchoOnce(client, w);
  if (w.channels != nullptr) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<SelectResult> result = w.channels->Call(caller, variant);
    if (!result.ok()) return result;
    result->client_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    if (w.verify_every > 0 && call % w.verify_every == 0) {
      if (absl::Status s = w.channels->ReadOutput(caller, *result); !s.ok()) return s;
    }
    return result;
  }
  if (w.references != nullptr) {
    const v1::SelectRequest& request = w.references->request(caller, variant);
    absl::StatusOr<SelectResult> result = w.pipelines != nullptr
                                              ? PipelineCall(client, w, caller, request)
                                              : client.Select(request, w.options);
    if (result.ok() && w.verify_every > 0 && call % w.verify_every == 0) {
      if (absl::Status s = w.references->ReadOutput(caller, *result); !s.ok()) return s;
    }
    return result;
  }
  if (w.stream) {
    return client.SelectStreaming(w.k, w.rows[variant].view(), w.options, w.chunk_bytes);
  }
  if (w.pipelines != nullptr) return PipelineCall(client, w, caller, *w.requests[variant]);
  return client.Select(*w.requests[variant], w.options);
}

// The measured window of a step: warm-up first, then `duration_s` of calls.
struct Window {
  Clock::time_point measure_from;
  Clock::time_point stop_at;
};

Window MeasureWindow(const StepTiming& timing) {
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point measure_from = Clock::now() + seconds(timing.warmup_s);
  return {measure_from, measure_from + seconds(timing.duration_s)};
}

// Coefficient of variation of the gaps between consecutive times.
double GapVariation(const std::vector<Clock::time_point>& times) {
  if (times.size() < 3) return 0;
  double sum = 0, sum_squares = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    const double gap = std::chrono::duration<double>(times[i] - times[i - 1]).count();
    sum += gap;
    sum_squares += gap * gap;
  }
  const double n = static_cast<double>(times.size() - 1);
  const double mean = sum / n;
  const double variance = std::max(0.0, sum_squares / n - mean * mean);
  return mean > 0 ? std::sqrt(variance) / mean : 0;
}

}  // namespace

absl::StatusOr<Arrivals> ParseArrivals(const std::string& name) {
  if (name == "constant") return Arrivals::kConstant;
  if (name == "poisson") return Arrivals::kPoisson;
  return absl::InvalidArgumentError(
      absl::StrCat("--arrivals: '", name, "' is not one of constant, poisson"));
}

StepResult RunConcurrency(const Workload& w, const StepTiming& timing,
                          std::vector<std::unique_ptr<Client>>& clients, int concurrency) {
  const double cpu_before = ProcessCpuSeconds();
  const auto [measure_from, stop_at] = MeasureWindow(timing);
  Collector collector(w, measure_from);
  Progress progress(timing.progress, absl::StrFormat("concurrency %d", concurrency), collector);
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c) {
    threads.emplace_back([&, c] {
      int64_t call = 0;
      for (size_t i = c; Clock::now() < stop_at; ++i, ++call) {
        const size_t variant = i % w.rows.size();
        collector.Record(CallOnce(*clients[c % clients.size()], w, variant, c, call), variant, c);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double measured = std::chrono::duration<double>(Clock::now() - measure_from).count();
  StepResult step = collector.Finish("concurrency", concurrency, measured);
  step.client_cpu_s = ProcessCpuSeconds() - cpu_before;
  return step;
}

StepResult RunRate(const Workload& w, const StepTiming& timing,
                   std::vector<std::unique_ptr<Client>>& clients, double rate, Arrivals arrivals,
                   uint64_t seed, int max_outstanding) {
  const double cpu_before = ProcessCpuSeconds();
  const auto start = Clock::now();
  const auto [measure_from, stop_at] = MeasureWindow(timing);
  Collector collector(w, measure_from);
  Progress progress(timing.progress, absl::StrFormat("rate %g/s", rate), collector);
  std::atomic<int> outstanding{0};
  std::mt19937_64 random(seed);
  std::exponential_distribution<double> poisson_gap(rate);
  const auto next_gap = [&] {
    const double seconds = arrivals == Arrivals::kPoisson ? poisson_gap(random) : 1.0 / rate;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  std::vector<Clock::time_point> sent;
  sent.reserve(static_cast<size_t>(rate * (timing.warmup_s + timing.duration_s) * 1.2) + 16);
  size_t i = 0;
  for (auto next = start; next < stop_at; next += next_gap(), ++i) {
    std::this_thread::sleep_until(next);
    sent.push_back(Clock::now());
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
        collector.Record(CallOnce(client, w, variant, 0, 0), variant, 0);
        --outstanding;
      }).detach();
    } else {
      client.SelectAsync(w.requests[variant], w.options,
                         [&collector, &outstanding, variant](absl::StatusOr<SelectResult> r) {
                           collector.Record(r, variant, 0);
                           --outstanding;
                         });
    }
  }
  while (outstanding.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double measured = std::chrono::duration<double>(stop_at - measure_from).count();
  StepResult step = collector.Finish("rate", rate, measured);
  step.arrival_cv = GapVariation(sent);
  step.client_cpu_s = ProcessCpuSeconds() - cpu_before;
  return step;
}

}  // namespace topk::tools
