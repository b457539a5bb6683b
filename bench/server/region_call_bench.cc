// The call path of a tiny Select by reference against the transport's floor,
// one caller, against a running server (--enable_regions --enable_echo, a
// unix socket): Echo with an empty payload (one unary gRPC round trip, no
// work), Select by reference as one unary call per request, and the same
// request on a SelectPipeline stream. The rows are small so the selection
// itself is a few microseconds; the reply's timings split the server's
// share (total) into queue and device. Every answer is checked exact.
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "packed_rows.h"
#include "topk/client/client.h"
#include "topk/client/regions.h"

ABSL_FLAG(std::string, target, "unix:/tmp/topk.sock", "server address");
ABSL_FLAG(int64_t, width, 256, "row length (one row)");
ABSL_FLAG(int, k, 16, "K");
ABSL_FLAG(int, calls, 20000, "timed calls per path (after as many warm-up calls / 10)");

namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
  double client_us = 0;
  double total_us = 0;
  double queue_us = 0;
  double device_us = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

void Report(const char* name, const std::vector<Sample>& samples) {
  std::vector<double> client, total, queue, device;
  for (const Sample& s : samples) {
    client.push_back(s.client_us);
    total.push_back(s.total_us);
    queue.push_back(s.queue_us);
    device.push_back(s.device_us);
  }
  absl::PrintF(
      "%-28s p50 %7.1f us  p99 %7.1f us | server p50: total %6.1f  queue %6.1f  device %6.1f\n",
      name, Percentile(client, 0.5), Percentile(client, 0.99), Percentile(total, 0.5),
      Percentile(queue, 0.5), Percentile(device, 0.5));
}

// Runs `call` calls/10 times unmeasured, then `calls` times measured.
std::vector<Sample> Run(int calls, const std::function<Sample()>& call) {
  for (int i = 0; i < calls / 10; ++i) call();
  std::vector<Sample> samples;
  samples.reserve(calls);
  for (int i = 0; i < calls; ++i) samples.push_back(call());
  return samples;
}

int Fail(const absl::Status& status) {
  absl::FPrintF(stderr, "region_call_bench: %s\n", status.ToString());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int k = absl::GetFlag(FLAGS_k);
  const int calls = absl::GetFlag(FLAGS_calls);
  auto client = topk::client::Client::Connect({.target = absl::GetFlag(FLAGS_target)});
  if (!client.ok()) return Fail(client.status());
  const topk::tools::PackedRows rows =
      topk::tools::Generate({.distribution = topk::testing::Distribution::kIndexer,
                             .lengths = topk::testing::LengthPattern::kFull,
                             .rows = 1,
                             .width = absl::GetFlag(FLAGS_width),
                             .k = k,
                             .seed = 3});
  const size_t score_bytes = rows.scores.size() * sizeof(float);
  const size_t out_at = (score_bytes + 63) / 64 * 64;
  absl::StatusOr<topk::client::SharedMemorySegment> segment =
      topk::client::SharedMemorySegment::Create(absl::StrFormat("/topk-call-bench-%d", getpid()),
                                                out_at + k * sizeof(int32_t));
  if (!segment.ok()) return Fail(segment.status());
  std::copy(rows.scores.begin(), rows.scores.end(), segment->at<float>(0));

  std::vector<std::pair<const char*, topk::client::CallPath>> paths = {
      {"Select by reference, unary", topk::client::CallPath::kUnary},
      {"Select by reference, pipeline", topk::client::CallPath::kStream}};
  // The floor: one unary round trip that does nothing.
  Report("Echo (empty)", Run(calls, [&] {
           const auto start = Clock::now();
           absl::StatusOr<std::string> echoed = (*client)->Echo("");
           const double us =
               std::chrono::duration<double, std::micro>(Clock::now() - start).count();
           if (!echoed.ok()) {
             Fail(echoed.status());
             std::exit(1);
           }
           return Sample{.client_us = us};
         }));
  for (const auto& [name, path] : paths) {
    auto session = topk::client::RegionSession::Open(**client, path);
    if (!session.ok()) return Fail(session.status());
    if (absl::Status s = (*session)->Register("rows", *segment); !s.ok()) return Fail(s);
    topk::client::RegionRowsRef ref{.scores = {"rows", 0},
                                    .num_rows = 1,
                                    .row_pitch = static_cast<int64_t>(rows.scores.size()),
                                    .lengths = rows.lengths};
    const topk::client::RegionOutputRef out{.indices = {"rows", out_at}};
    const topk::v1::SelectRequest request = (*session)->MakeRequest(k, ref, &out, {});
    int64_t checked = 0;
    Report(name, Run(calls, [&] {
             absl::StatusOr<topk::client::SelectResult> result = (*session)->Select(request);
             if (!result.ok()) {
               Fail(result.status());
               std::exit(1);
             }
             if (++checked % 1000 == 1) {
               result->indices.assign(segment->at<int32_t>(out_at),
                                      segment->at<int32_t>(out_at) + k);
               if (absl::Status s = topk::tools::Verify(rows, k, {}, *result); !s.ok()) {
                 Fail(s);
                 std::exit(1);
               }
             }
             return Sample{.client_us = static_cast<double>(result->client_us),
                           .total_us = static_cast<double>(result->server.total_us),
                           .queue_us = static_cast<double>(result->server.queue_us),
                           .device_us = static_cast<double>(result->server.device_us)};
           }));
  }
  return 0;
}
