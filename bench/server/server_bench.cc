// Server overhead and transport efficiency on the inline path (issue 4, item 6).
//
// 1. Overhead: 64 rows x up to 128K (causal indexer rows), K = 2048. The
//    server's own time per request (SelectResponse.timings.total_us: decode of
//    the raw receive buffer, validation, queue, select and encode; excludes
//    the wire) against the backend's select time on the same data (a
//    CpuSelector with the worker's thread count, same plan). For reference,
//    what protobuf's generated parser costs on the same bytes (the server does
//    not use it for Select). Target: server <= 1.25x backend.
// 2. Throughput: Select with 8 concurrent clients against a raw-bytes Echo RPC
//    carrying the same request payload. Target: Select >= 70 % of Echo.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "packed_rows.h"
#include "server/backends/plan_buckets.h"
#include "server/process_tuning.h"
#include "server/server.h"
#include "topk/cpu_selector.h"

ABSL_FLAG(int64_t, rows, 64, "rows per request");
ABSL_FLAG(int64_t, width, 131072, "largest row length");
ABSL_FLAG(int, k, 2048, "K");
ABSL_FLAG(int, cpu_threads, 0, "selector threads (server worker and baseline); 0: hardware");
ABSL_FLAG(int, repeats, 30, "timed requests for the overhead comparison");
ABSL_FLAG(int, clients, 8, "concurrent clients for the throughput comparison");
ABSL_FLAG(double, seconds, 5, "seconds per throughput measurement");

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

topk::client::ClientOptions Target(const std::string& target) {
  topk::client::ClientOptions options;
  options.target = target;
  return options;
}

double ElapsedUs(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Calls `call` back to back from `clients` threads for `seconds`; requests/s.
template <typename Call>
double Throughput(int clients, double seconds, const std::string& target, Call call) {
  std::vector<std::unique_ptr<topk::client::Client>> channels;
  for (int c = 0; c < clients; ++c) {
    channels.push_back(*topk::client::Client::Connect(Target(target)));
  }
  std::atomic<int64_t> done{0};
  std::atomic<bool> failed{false};
  const auto stop = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      while (Clock::now() < stop) {
        if (!call(*channels[c])) failed = true;
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) absl::PrintF("WARNING: some calls failed\n");
  return done.load() / (ElapsedUs(start) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // As topk-server does by default (--keep_heap).
  topk::server::KeepLargeBuffersResident();
  const int32_t k = absl::GetFlag(FLAGS_k);
  const int threads = absl::GetFlag(FLAGS_cpu_threads) > 0
                          ? absl::GetFlag(FLAGS_cpu_threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const topk::tools::PackedRows rows =
      topk::tools::Generate({.distribution = topk::testing::Distribution::kIndexer,
                             .lengths = topk::testing::LengthPattern::kCausalTerminal,
                             .rows = absl::GetFlag(FLAGS_rows),
                             .width = absl::GetFlag(FLAGS_width),
                             .k = k,
                             .seed = 11});
  const topk::v1::SelectRequest request = topk::client::Client::MakeRequest(k, rows.view(), {});
  absl::PrintF(
      "server_bench: %d rows x up to %d (causal indexer), K=%d, %.1f MB payload, "
      "%d selector thread(s), %u hardware threads\n",
      rows.lengths.size(), absl::GetFlag(FLAGS_width), k, rows.bytes() / 1e6, threads,
      std::thread::hardware_concurrency());

  // Backend alone: the same plan bucket the server's worker uses.
  topk::CpuSelector selector({.threads = threads});
  const topk::ProblemShape shape{
      .k = k,
      .max_rows = topk::server::RoundUpPow2(rows.lengths.size(), 1 << 30),
      .max_width = topk::server::RoundUpPow2(rows.width, 1 << 30),
      .layout = topk::Layout::kPacked};
  const topk::Plan plan = *selector.MakePlan(shape, {});
  std::vector<int32_t> indices(rows.lengths.size() * k);
  std::vector<topk::RowStatus> status(rows.lengths.size());
  topk::RowBatch batch = rows.batch();
  batch.width = shape.max_width;
  // Decode: what gRPC's protobuf deserialisation costs before the handler.
  const std::string wire = request.SerializeAsString();
  std::vector<double> decode_us;
  for (int i = 0; i < 10; ++i) {
    topk::v1::SelectRequest parsed;
    const auto start = Clock::now();
    parsed.ParseFromString(wire);
    decode_us.push_back(ElapsedUs(start));
  }

  topk::server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.enable_echo = true;
  options.backends.backend = "cpu";
  options.backends.workers = 1;
  options.backends.cpu_threads = threads;
  options.engine.limits = {.max_k = k,
                           .max_rows = shape.max_rows,
                           .max_width = shape.max_width,
                           .max_batch_bytes = rows.bytes()};
  auto server = *topk::server::Server::Start(options);
  auto client = *topk::client::Client::Connect(Target(server->address()));
  // Backend and server alternate, so load from anything else on the machine
  // hits both alike; the per-pair ratio's median is the headline.
  std::vector<double> backend_us, server_us, device_us, queue_us, client_us, ratios;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats) + 3; ++i) {
    const auto backend_start = Clock::now();
    if (!selector.Run(plan, batch, {.indices = indices.data(), .row_status = status.data()}, {})
             .ok()) {
      return 1;
    }
    const double backend_once = ElapsedUs(backend_start);
    absl::StatusOr<topk::client::SelectResult> r = client->Select(request);
    if (!r.ok() || !topk::tools::Verify(rows, k, {}, *r).ok()) {
      absl::PrintF("select failed or inexact: %s\n", r.status().ToString());
      return 1;
    }
    if (i < 3) continue;
    backend_us.push_back(backend_once);
    ratios.push_back(r->server.total_us / backend_once);
    server_us.push_back(r->server.total_us);
    device_us.push_back(r->server.device_us);
    queue_us.push_back(r->server.queue_us);
    client_us.push_back(r->client_us);
  }
  const double backend = Median(backend_us), total = Median(server_us);
  const double decode = Median(decode_us);
  absl::PrintF("\n1. overhead (medians of %d)\n", absl::GetFlag(FLAGS_repeats));
  absl::PrintF("   backend select (CpuSelector::Run)      %9.0f us\n", backend);
  absl::PrintF("   server device_us (worker's select)     %9.0f us\n", Median(device_us));
  absl::PrintF("   server queue_us                        %9.0f us\n", Median(queue_us));
  absl::PrintF("   server total_us (decode..encode)       %9.0f us   ratio %.3f (target <= 1.25)\n",
               total, total / backend);
  absl::PrintF("   median of per-pair ratios                          %.3f\n", Median(ratios));
  absl::PrintF("   (protobuf ParseFromString, same bytes  %9.0f us: not on the server path)\n",
               decode);
  absl::PrintF("   client round trip (loopback)           %9.0f us\n", Median(client_us));

  // 2. Throughput against Echo of the same payload. The server keeps its
  // one-worker configuration; with more workers they would only split cores.
  const int clients = absl::GetFlag(FLAGS_clients);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const std::string target = server->address();
  const double select_rps = Throughput(
      clients, seconds, target, [&](topk::client::Client& c) { return c.Select(request).ok(); });
  const std::string payload = request.inline_rows().scores();
  const double echo_rps = Throughput(clients, seconds, target,
                                     [&](topk::client::Client& c) { return c.Echo(payload).ok(); });
  // The same traffic shape as Select: the payload in, M x K x 4 bytes out.
  const int64_t answer_bytes = static_cast<int64_t>(rows.lengths.size()) * k * 4;
  const double shaped_rps = Throughput(clients, seconds, target, [&](topk::client::Client& c) {
    return c.Echo(payload, answer_bytes).ok();
  });
  absl::PrintF("\n2. throughput, %d concurrent clients, %.0f s each\n", clients, seconds);
  absl::PrintF("   Select  %8.1f req/s  %8.2f GB/s of scores\n", select_rps,
               select_rps * rows.bytes() / 1e9);
  absl::PrintF("   Echo    %8.1f req/s  %8.2f GB/s of payload\n", echo_rps,
               echo_rps * rows.bytes() / 1e9);
  absl::PrintF("   Echo, answer trimmed to %d bytes  %8.1f req/s  %8.2f GB/s of payload\n",
               answer_bytes, shaped_rps, shaped_rps * rows.bytes() / 1e9);
  absl::PrintF("   Select / Echo = %.1f %%, Select / trimmed Echo = %.1f %% (target >= 70 %%)\n",
               100 * select_rps / echo_rps, 100 * select_rps / shaped_rps);
  server->Shutdown(absl::Seconds(5));
  return 0;
}
