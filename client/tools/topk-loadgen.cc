// topk-loadgen: a load generator for topk-server modelled on perf_analyzer
// and ghz. Closed loop (--concurrency=1,2,4: that many callers sending back
// to back) or open loop (--request_rate=50,100: requests issued on a
// constant or Poisson schedule), over --connections TCP connections, plain
// or TLS. Rows come from the topk_testing generators or from .npy files;
// every --verify_every-th answer of the measured window is checked with the
// exactness verifier. Exit status 1 if any answer was inexact or any call in
// a measured window failed.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "load_connections.h"
#include "load_report.h"
#include "load_runner.h"
#include "npy_rows.h"
#include "packed_rows.h"
#include "topk/client/client.h"

ABSL_FLAG(std::string, target, topk::client::ClientOptions{}.target, "server host:port");
ABSL_FLAG(int, k, 2048, "K");
ABSL_FLAG(int64_t, rows, 64, "rows per request (M)");
ABSL_FLAG(int64_t, width, 131072, "largest row length (N)");
ABSL_FLAG(std::string, distribution, "indexer", "score distribution (topk_testing names)");
constexpr char kDefaultLengths[] = "causal";
ABSL_FLAG(std::string, lengths, kDefaultLengths,
          "full | causal | random | edges (--workload=decode: full unless another is named)");
ABSL_FLAG(int, variants, 4, "distinct pre-generated requests, sent round robin");
ABSL_FLAG(std::string, workload, "fixed",
          "fixed: every request --rows rows; decode: a decode step's requests, each of "
          "--rows_per_request rows, from many clients (use a high --concurrency)");
ABSL_FLAG(std::string, rows_per_request, "1-8",
          "--workload=decode: rows per request, N or a range LO-HI (each variant draws its count)");
ABSL_FLAG(std::string, npy, "",
          "real rows instead of generated ones: .npy files of float32 (M, N) (np.save), "
          "comma-separated, one request each, sent round robin (--rows, --width, "
          "--distribution, --lengths and --variants then unused)");
ABSL_FLAG(std::string, npy_lengths, "",
          "with --npy: .npy files of M int32/int64 row lengths, one per --npy file, empty for full "
          "rows (padded rows: "
          "row r is its first lengths[r] values)");
ABSL_FLAG(uint64_t, seed, 1, "generator seed");
ABSL_FLAG(std::string, dtype, "fp32",
          "score type of the generated rows: fp32 | bf16 | fp16 (the generator's FP32 rows "
          "rounded to the type, sent as 2-byte elements)");
ABSL_FLAG(bool, sorted, false, "ask for sorted rows");
ABSL_FLAG(bool, deterministic, false, "ask for deterministic ties");
ABSL_FLAG(bool, stream, false, "send with SelectStream");
ABSL_FLAG(int64_t, chunk_bytes, static_cast<int64_t>(topk::client::kDefaultChunkBytes),
          "SelectStream chunk size");
ABSL_FLAG(std::string, concurrency, "1,2,4,8", "closed-loop sweep (ignored with --request_rate)");
ABSL_FLAG(std::string, request_rate, "", "open-loop sweep in requests/s, e.g. 20,40,80");
ABSL_FLAG(std::string, arrivals, "constant",
          "open loop: constant (evenly spaced) | poisson (exponential gaps, same mean rate)");
ABSL_FLAG(int, connections, 0,
          "TCP connections the calls are spread over (0: one per caller in a closed loop, 4 in "
          "an open loop)");
ABSL_FLAG(double, wait_for_serving_s, 30,
          "seconds to wait for the server to report SERVING before the first step");
ABSL_FLAG(bool, tls, false, "TLS with the system roots (or --tls_ca)");
ABSL_FLAG(std::string, tls_ca, "", "PEM file of the roots that sign the server certificate (TLS)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of this client, for a server that requires one (mutual TLS; "
          "with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert (mutual TLS)");
ABSL_FLAG(std::string, tls_server_name, "",
          "name checked in the server certificate when it is not the target's host");
ABSL_FLAG(int, max_outstanding, 256, "open loop: most requests in flight before dropping");
ABSL_FLAG(double, duration_s, 5, "measured seconds per step");
ABSL_FLAG(double, warmup_s, 1, "unmeasured seconds before each step");
ABSL_FLAG(int, verify_every, 10, "verify every n-th answer (1: all, 0: none)");
ABSL_FLAG(std::string, csv, "", "write the steps as CSV here (rewritten as each step ends)");
ABSL_FLAG(std::string, json, "",
          "write the run's metadata and steps as JSON here (rewritten as each step ends)");
ABSL_FLAG(bool, progress, true,
          "progress on stderr (a line rewritten in place on a terminal, a line per 5 s otherwise)");
ABSL_FLAG(std::string, transport, "inline",
          "inline (rows in the request) | shm (rows and answers in a shared-memory region) | ipc "
          "(in a CUDA allocation exported over IPC) | channel (a channel per caller, calls "
          "enqueued on its CUDA stream, rows by IPC; docs/channels.md) | channel-shm (a channel "
          "per caller called from the host, rows in shared memory: a CPU server); all but inline "
          "need a local server with --enable_regions and a closed loop");
ABSL_FLAG(std::string, call, "",
          "unary (one Select call per request) | pipeline (each caller keeps a SelectPipeline "
          "stream open and sends its requests on it; closed loop) | echo (unary Echo calls of "
          "--echo_bytes, checked byte for byte: the transport's ceiling; closed loop, inline); "
          "empty: pipeline with --transport=shm|ipc, unary inline");
ABSL_FLAG(std::string, row_layout, "offsets",
          "--transport=shm|ipc: offsets (an int64 row start per row, stored in the region: the "
          "server reads them out of it per request) | pitch (one row pitch in the request; "
          "rows evenly spaced, e.g. --lengths=full)");
ABSL_FLAG(int64_t, echo_bytes, 256, "--call=echo: payload bytes of each Echo (sent and returned)");
ABSL_FLAG(std::string, ipc_device, "0",
          "--transport=ipc: the CUDA devices holding the rows, comma separated: one region per "
          "device, caller c on entry c % n (one process loading every GPU; the table and CSV "
          "split the results per device). --transport=shm: a segment per entry, labelled so");
ABSL_FLAG(bool, mutex_deadlock_detection, false,
          "keep absl::Mutex's lock-order checking on where the library was built with it: it "
          "serialises every lock of the process (gRPC's included) on one global lock, so a "
          "load generator with it caps the messages/s it can drive");

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

struct RowRange {
  int64_t low = 0, high = 0;
};

// "4" or "1-8": positive, low <= high.
absl::StatusOr<RowRange> ParseRowRange(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  RowRange range;
  bool ok = false;
  if (parts.size() == 1) {
    ok = absl::SimpleAtoi(parts[0], &range.low);
    range.high = range.low;
  } else if (parts.size() == 2) {
    ok = absl::SimpleAtoi(parts[0], &range.low) && absl::SimpleAtoi(parts[1], &range.high);
  }
  if (!ok || range.low < 1 || range.high < range.low) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rows_per_request=", text, ": expected N or LO-HI with 1 <= LO <= HI"));
  }
  return range;
}

// A decode step's rows are whole contexts: full length unless --lengths
// names a pattern other than its default (a prefill's causal rows).
std::string LengthsName(bool decode) {
  const std::string lengths = absl::GetFlag(FLAGS_lengths);
  return decode && lengths == kDefaultLengths ? std::string("full") : lengths;
}

// The requests: one per --npy file, or --variants generated batches (of
// --rows rows, or for --workload=decode a count drawn per variant).
absl::StatusOr<std::vector<topk::tools::PackedRows>> LoadRows(int32_t k) {
  std::vector<topk::tools::PackedRows> rows;
  absl::StatusOr<topk::ScoreType> dtype = topk::tools::ParseScoreType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  if (!absl::GetFlag(FLAGS_npy).empty()) {
    if (*dtype != topk::ScoreType::kFloat32) {
      return absl::InvalidArgumentError("--dtype: --npy rows are float32");
    }
    const std::vector<std::string> files =
        absl::StrSplit(absl::GetFlag(FLAGS_npy), ',', absl::SkipEmpty());
    // An empty entry ("a_len.npy,,c_len.npy") leaves that file's rows full width.
    std::vector<std::string> lengths;
    if (!absl::GetFlag(FLAGS_npy_lengths).empty()) {
      lengths = absl::StrSplit(absl::GetFlag(FLAGS_npy_lengths), ',');
    }
    if (!lengths.empty() && lengths.size() != files.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--npy_lengths: ", lengths.size(),
                                                     " files for ", files.size(), " --npy files"));
    }
    lengths.resize(files.size());
    for (size_t f = 0; f < files.size(); ++f) {
      absl::StatusOr<topk::tools::PackedRows> loaded =
          topk::tools::LoadNpyRows(files[f], lengths[f]);
      if (!loaded.ok()) return loaded.status();
      rows.push_back(*std::move(loaded));
    }
    return rows;
  }
  absl::StatusOr<topk::testing::Distribution> distribution =
      topk::tools::ParseDistribution(absl::GetFlag(FLAGS_distribution));
  if (!distribution.ok()) return distribution.status();
  const std::string workload = absl::GetFlag(FLAGS_workload);
  if (workload != "fixed" && workload != "decode") {
    return absl::InvalidArgumentError(
        absl::StrCat("--workload=", workload, ": expected fixed or decode"));
  }
  const bool decode = workload == "decode";
  absl::StatusOr<topk::testing::LengthPattern> pattern =
      topk::tools::ParseLengthPattern(LengthsName(decode));
  if (!pattern.ok()) return pattern.status();
  RowRange range{absl::GetFlag(FLAGS_rows), absl::GetFlag(FLAGS_rows)};
  if (decode) {
    absl::StatusOr<RowRange> parsed = ParseRowRange(absl::GetFlag(FLAGS_rows_per_request));
    if (!parsed.ok()) return parsed.status();
    range = *parsed;
  }
  std::mt19937_64 draw(absl::GetFlag(FLAGS_seed));
  for (int v = 0; v < std::max(1, absl::GetFlag(FLAGS_variants)); ++v) {
    const int64_t count =
        range.low +
        static_cast<int64_t>(draw() % static_cast<uint64_t>(range.high - range.low + 1));
    rows.push_back(topk::tools::Generate({.distribution = *distribution,
                                          .lengths = *pattern,
                                          .rows = count,
                                          .width = absl::GetFlag(FLAGS_width),
                                          .k = k,
                                          .seed = absl::GetFlag(FLAGS_seed) + v,
                                          .dtype = *dtype}));
  }
  return rows;
}

std::string HostName() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "topk-loadgen --target=H:P [--concurrency=1,2,4 | --request_rate=..]");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (!absl::GetFlag(FLAGS_mutex_deadlock_detection)) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  if (positional.size() > 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional[1], "' (every option is a --flag)")));
  }
  const std::string command_line = absl::StrJoin(argv, argv + argc, " ");
  const std::string started_utc =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());

  topk::tools::Workload w;
  w.k = absl::GetFlag(FLAGS_k);
  w.options = {.sorted = absl::GetFlag(FLAGS_sorted),
               .deterministic = absl::GetFlag(FLAGS_deterministic)};
  w.stream = absl::GetFlag(FLAGS_stream);
  w.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  w.verify_every = absl::GetFlag(FLAGS_verify_every);
  absl::StatusOr<std::vector<topk::tools::PackedRows>> rows = LoadRows(w.k);
  if (!rows.ok()) return Fail(rows.status());
  if (rows->empty()) return Fail(absl::InvalidArgumentError("--npy: no files"));
  w.rows = *std::move(rows);
  for (const topk::tools::PackedRows& r : w.rows) {
    w.requests.push_back(std::make_shared<const topk::v1::SelectRequest>(
        Client::MakeRequest(w.k, r.view(), w.options)));
  }
  const bool decode = absl::GetFlag(FLAGS_workload) == "decode";
  const std::string source =
      absl::GetFlag(FLAGS_npy).empty()
          ? absl::StrFormat("%s%d variants of %s rows x up to %d (%s, %s, %s)",
                            decode ? "decode: " : "", w.rows.size(),
                            decode ? absl::GetFlag(FLAGS_rows_per_request)
                                   : absl::StrCat(absl::GetFlag(FLAGS_rows)),
                            absl::GetFlag(FLAGS_width), absl::GetFlag(FLAGS_distribution),
                            LengthsName(decode), absl::GetFlag(FLAGS_dtype))
          : absl::StrFormat("%d .npy requests (%s), the first %d rows x up to %d", w.rows.size(),
                            absl::GetFlag(FLAGS_npy), w.rows.front().lengths.size(),
                            w.rows.front().width);
  absl::PrintF("target %s: %s, k=%d, %.2f MB/request\n", absl::GetFlag(FLAGS_target), source, w.k,
               w.rows.front().bytes() / 1e6);

  const bool open_loop = !absl::GetFlag(FLAGS_request_rate).empty();
  absl::StatusOr<std::vector<double>> rates =
      ParseList<double>(absl::GetFlag(FLAGS_request_rate), "--request_rate");
  absl::StatusOr<std::vector<int>> levels =
      ParseList<int>(absl::GetFlag(FLAGS_concurrency), "--concurrency");
  if (!rates.ok()) return Fail(rates.status());
  if (!levels.ok()) return Fail(levels.status());
  absl::StatusOr<topk::tools::Arrivals> arrivals =
      topk::tools::ParseArrivals(absl::GetFlag(FLAGS_arrivals));
  if (!arrivals.ok()) return Fail(arrivals.status());
  const int callers = open_loop ? 0 : *std::max_element(levels->begin(), levels->end());
  const int connections = absl::GetFlag(FLAGS_connections) > 0 ? absl::GetFlag(FLAGS_connections)
                          : open_loop                          ? 4
                                                               : callers;
  absl::StatusOr<std::vector<std::unique_ptr<Client>>> opened =
      topk::tools::OpenConnections({.target = absl::GetFlag(FLAGS_target),
                                    .count = connections,
                                    .tls = absl::GetFlag(FLAGS_tls),
                                    .tls_ca_path = absl::GetFlag(FLAGS_tls_ca),
                                    .tls_server_name = absl::GetFlag(FLAGS_tls_server_name),
                                    .tls_cert_path = absl::GetFlag(FLAGS_tls_cert),
                                    .tls_key_path = absl::GetFlag(FLAGS_tls_key)});
  if (!opened.ok()) return Fail(opened.status());
  std::vector<std::unique_ptr<Client>> clients = *std::move(opened);
  if (absl::Status s =
          clients.front()->WaitForServing(absl::Seconds(absl::GetFlag(FLAGS_wait_for_serving_s)));
      !s.ok())
    return Fail(s);
  absl::StatusOr<topk::v1::ServerInfo> server = clients.front()->GetServerInfo();
  if (!server.ok()) return Fail(server.status());

  absl::StatusOr<topk::tools::Transport> transport =
      topk::tools::ParseTransport(absl::GetFlag(FLAGS_transport));
  if (!transport.ok()) return Fail(transport.status());
  std::unique_ptr<topk::tools::ReferenceRegions> references;
  std::unique_ptr<topk::tools::ChannelCallers> channels;
  const bool channel = *transport == topk::tools::Transport::kChannel ||
                       *transport == topk::tools::Transport::kChannelShm;
  if (channel) {
    if (open_loop || w.stream) {
      return Fail(
          absl::InvalidArgumentError("--transport=channel|channel-shm: closed loop (--concurrency) "
                                     "with Select (no --stream)"));
    }
    absl::StatusOr<std::vector<int>> devices =
        topk::tools::ParseDeviceList(absl::GetFlag(FLAGS_ipc_device), "--ipc_device");
    if (!devices.ok()) return Fail(devices.status());
    absl::StatusOr<std::unique_ptr<topk::tools::ChannelCallers>> created =
        topk::tools::ChannelCallers::Create(*transport == topk::tools::Transport::kChannel,
                                            *clients.front(), w.rows, w.k, w.options, callers,
                                            devices->front());
    if (!created.ok()) return Fail(created.status());
    channels = *std::move(created);
    w.channels = channels.get();
  } else if (*transport != topk::tools::Transport::kInline) {
    if (open_loop || w.stream) {
      return Fail(absl::InvalidArgumentError(
          "--transport=shm|ipc: closed loop (--concurrency) with Select (no --stream)"));
    }
    absl::StatusOr<topk::tools::RowLayout> layout =
        topk::tools::ParseRowLayout(absl::GetFlag(FLAGS_row_layout));
    if (!layout.ok()) return Fail(layout.status());
    absl::StatusOr<std::vector<int>> devices =
        topk::tools::ParseDeviceList(absl::GetFlag(FLAGS_ipc_device), "--ipc_device");
    if (!devices.ok()) return Fail(devices.status());
    absl::StatusOr<std::unique_ptr<topk::tools::ReferenceRegions>> created =
        topk::tools::ReferenceRegions::Create(*transport, *clients.front(), w.rows, w.k, w.options,
                                              callers, *devices, *layout);
    if (!created.ok()) return Fail(created.status());
    references = *std::move(created);
    w.references = references.get();
  }
  std::string call = absl::GetFlag(FLAGS_call);
  if (call.empty()) call = *transport == topk::tools::Transport::kInline ? "unary" : "pipeline";
  if (channel) call = "unary";  // no RPC per call: neither a stream nor an Echo
  if (call != "unary" && call != "pipeline" && call != "echo") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--call=", call, ": expected unary, pipeline or echo")));
  }
  if (call == "echo") {
    if (open_loop || w.stream || references != nullptr) {
      return Fail(absl::InvalidArgumentError(
          "--call=echo: closed loop (--concurrency), inline transport, no --stream"));
    }
    const int64_t echo_bytes = absl::GetFlag(FLAGS_echo_bytes);
    if (echo_bytes < 1) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--echo_bytes=", echo_bytes, ": at least 1 byte")));
    }
    w.echo = true;
    w.verify_every = 0;  // nothing to select: each Echo is checked byte for byte instead
    w.echo_payload.resize(static_cast<size_t>(echo_bytes));
    for (size_t i = 0; i < w.echo_payload.size(); ++i) {
      w.echo_payload[i] = static_cast<char>('a' + i % 26);
    }
  }
  std::vector<std::unique_ptr<topk::client::SelectPipeline>> pipelines(callers);
  if (call == "pipeline") {
    if (open_loop || w.stream) {
      return Fail(absl::InvalidArgumentError(
          "--call=pipeline: closed loop (--concurrency) without --stream"));
    }
    w.pipelines = &pipelines;
  }

  const topk::tools::StepTiming timing{.warmup_s = absl::GetFlag(FLAGS_warmup_s),
                                       .duration_s = absl::GetFlag(FLAGS_duration_s),
                                       .progress = absl::GetFlag(FLAGS_progress)};
  const topk::tools::RunMetadata metadata{{
      {"tool", "topk-loadgen"},
      {"started_utc", started_utc},
      {"host", HostName()},
      {"command_line", command_line},
      {"target", absl::GetFlag(FLAGS_target)},
      {"tls", absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty() ? "true" : "false"},
      {"tls_client_certificate", absl::GetFlag(FLAGS_tls_cert).empty() ? "false" : "true"},
      {"connections", absl::StrCat(connections)},
      {"transport", absl::GetFlag(FLAGS_transport)},
      {"dtype", absl::GetFlag(FLAGS_dtype)},
      {"call", w.echo     ? "Echo"
               : w.stream ? "SelectStream"
               : channel  ? "Channel"
                          : (w.pipelines != nullptr ? "SelectPipeline" : "Select")},
      {"arrivals", open_loop ? absl::GetFlag(FLAGS_arrivals) : "closed loop"},
      {"workload", absl::GetFlag(FLAGS_workload)},
      {"rows_source", source},
      {"k", absl::StrCat(w.k)},
      {"sorted", w.options.sorted ? "true" : "false"},
      {"deterministic", w.options.deterministic ? "true" : "false"},
      {"warmup_s", absl::StrCat(timing.warmup_s)},
      {"duration_s", absl::StrCat(timing.duration_s)},
      {"verify_every", absl::StrCat(w.verify_every)},
      {"server_version", server->version()},
      {"server_backend", server->backend()},
      {"server_devices", absl::StrCat(server->devices_size())},
  }};
  std::vector<StepResult> steps;
  // Each step is written as soon as it ends: a sweep stopped half way keeps
  // what it measured.
  const auto write_files = [&]() -> absl::Status {
    if (!absl::GetFlag(FLAGS_csv).empty()) {
      if (absl::Status s = topk::tools::WriteCsv(steps, absl::GetFlag(FLAGS_csv)); !s.ok()) {
        return s;
      }
    }
    if (!absl::GetFlag(FLAGS_json).empty()) {
      return topk::tools::WriteJson(metadata, steps, absl::GetFlag(FLAGS_json));
    }
    return absl::OkStatus();
  };
  const size_t step_count = open_loop ? rates->size() : levels->size();
  for (size_t i = 0; i < step_count; ++i) {
    steps.push_back(open_loop ? topk::tools::RunRate(w, timing, clients, (*rates)[i], *arrivals,
                                                     absl::GetFlag(FLAGS_seed) + i,
                                                     absl::GetFlag(FLAGS_max_outstanding))
                              : topk::tools::RunConcurrency(w, timing, clients, (*levels)[i]));
    if (absl::Status s = write_files(); !s.ok()) return Fail(s);
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
  return clean ? 0 : 1;
}
