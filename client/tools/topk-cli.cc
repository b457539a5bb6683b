// topk-cli: one-off calls against a topk-server.
//   topk-cli select --target=H:P --k=2048 --rows=64 --width=131072 [--input=F] [--save=F]
//   topk-cli replay --target=H:P --input=F --k=2048 --repeat=10
//   topk-cli info | stats [--json] | health --target=H:P
//   topk-cli help [COMMAND], topk-cli COMMAND --help
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "packed_rows.h"
#include "stats_report.h"
#include "topk/client/client.h"

ABSL_FLAG(std::string, target, topk::client::ClientOptions{}.target, "server host:port");
ABSL_FLAG(bool, tls, false, "use TLS (system roots unless --tls_roots)");
ABSL_FLAG(std::string, tls_roots, "", "PEM file of root certificates");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of this client, for a server that requires one (mutual TLS; "
          "with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert (mutual TLS)");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name checked in the server certificate, if not the target's host");
ABSL_FLAG(int, k, 2048, "K");
ABSL_FLAG(std::string, input, "", "TOPKROWS file to send (select, replay)");
ABSL_FLAG(std::string, save, "", "select: also save the sent rows to this TOPKROWS file");
ABSL_FLAG(std::string, output, "", "write the indices (int32 LE, rows x k) to this file");
ABSL_FLAG(std::string, distribution, "indexer", "generated rows: distribution");
ABSL_FLAG(std::string, lengths, "causal", "generated rows: full | causal | random | edges");
ABSL_FLAG(int64_t, rows, 64, "generated rows: M");
ABSL_FLAG(int64_t, width, 131072, "generated rows: N (largest length)");
ABSL_FLAG(uint64_t, seed, 1, "generated rows: seed");
ABSL_FLAG(std::string, dtype, "fp32",
          "generated rows: score type on the wire, fp32 | bf16 | fp16 (16-bit rows are the "
          "generator's FP32 rows rounded to the type; half the bytes)");
ABSL_FLAG(bool, sorted, false, "ask for sorted rows");
ABSL_FLAG(bool, deterministic, false, "ask for deterministic ties");
ABSL_FLAG(bool, return_values, false, "ask for the values too");
ABSL_FLAG(bool, stream, false, "send with SelectStream (chunks)");
ABSL_FLAG(int64_t, chunk_bytes, static_cast<int64_t>(topk::client::kDefaultChunkBytes),
          "SelectStream chunk size");
ABSL_FLAG(bool, verify, true, "check every answer with the exactness verifier");
ABSL_FLAG(int, repeat, 1, "replay: how many times to send the rows");
ABSL_FLAG(int, print_rows, 1, "print the first indices of this many rows");
ABSL_FLAG(bool, prometheus, false, "stats: print the Prometheus text");
ABSL_FLAG(bool, json, false, "stats: print one JSON object (counters, errors, percentiles)");

namespace {

using topk::client::Client;

// The subcommands, what each does, and the flags it reads (besides the
// connection flags every command takes).
struct Command {
  const char* name;
  const char* summary;
  std::vector<const char*> flags;
};

const std::vector<Command>& Commands() {
  static const auto* const commands = new std::vector<Command>{
      {"select",
       "send one batch (generated, or --input) and verify the answer",
       {"k", "input", "save", "output", "distribution", "lengths", "rows", "width", "seed", "dtype",
        "sorted", "deterministic", "return_values", "stream", "chunk_bytes", "verify",
        "print_rows"}},
      {"replay",
       "resend a saved batch (--input) --repeat times and verify every answer",
       {"input", "k", "repeat", "output", "sorted", "deterministic", "return_values", "stream",
        "chunk_bytes", "verify", "print_rows"}},
      {"info", "the server's version, backend, devices and limits", {}},
      {"stats",
       "counters, errors by code and latency percentiles (--json: one object)",
       {"json", "prometheus"}},
      {"health", "SERVING or NOT_SERVING (exit status 0 only when serving)", {}},
  };
  return *commands;
}

constexpr const char* kConnectionFlags[] = {"target",   "tls",     "tls_roots",
                                            "tls_cert", "tls_key", "tls_server_name"};

std::string CommandNames() {
  std::vector<std::string> names;
  for (const Command& command : Commands()) names.emplace_back(command.name);
  return absl::StrJoin(names, ", ");
}

const Command* FindCommand(std::string_view name) {
  for (const Command& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

void PrintFlag(const char* name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) return;
  absl::PrintF("  --%-14s %s (default: %s)\n", name, flag->Help(), flag->DefaultValue());
}

// `topk-cli help`, `topk-cli help COMMAND`, `topk-cli COMMAND --help`.
int PrintHelp(std::string_view name) {
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    absl::PrintF("topk-cli COMMAND [--flags]: calls a topk-server\n\ncommands:\n");
    for (const Command& c : Commands()) absl::PrintF("  %-8s %s\n", c.name, c.summary);
    absl::PrintF("\nconnection flags (every command):\n");
    for (const char* flag : kConnectionFlags) PrintFlag(flag);
    absl::PrintF("\n'topk-cli help COMMAND' or 'topk-cli COMMAND --help' lists its flags.\n");
    return 0;
  }
  absl::PrintF("topk-cli %s: %s\n\nflags:\n", command->name, command->summary);
  for (const char* flag : command->flags) PrintFlag(flag);
  for (const char* flag : kConnectionFlags) PrintFlag(flag);
  return 0;
}

// The subcommand asked for help, when the arguments ask for it.
std::optional<std::string> HelpRequest(int argc, char** argv) {
  std::string command;
  bool asked = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "help") {
      asked = true;
    } else if (!arg.starts_with("-") && command.empty()) {
      command = std::string(arg);
    }
  }
  if (!asked) return std::nullopt;
  return command;
}

int Fail(const absl::Status& status) {
  std::cerr << "topk-cli: " << status << "\n";
  return 1;
}

absl::StatusOr<topk::tools::PackedRows> LoadOrGenerate() {
  absl::StatusOr<topk::ScoreType> dtype = topk::tools::ParseScoreType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  if (!absl::GetFlag(FLAGS_input).empty()) {
    if (*dtype != topk::ScoreType::kFloat32) {
      return absl::InvalidArgumentError("--dtype: TOPKROWS files (--input) hold FP32 rows");
    }
    return topk::tools::Load(absl::GetFlag(FLAGS_input));
  }
  absl::StatusOr<topk::testing::Distribution> d =
      topk::tools::ParseDistribution(absl::GetFlag(FLAGS_distribution));
  if (!d.ok()) return d.status();
  absl::StatusOr<topk::testing::LengthPattern> l =
      topk::tools::ParseLengthPattern(absl::GetFlag(FLAGS_lengths));
  if (!l.ok()) return l.status();
  return topk::tools::Generate({.distribution = *d,
                                .lengths = *l,
                                .rows = absl::GetFlag(FLAGS_rows),
                                .width = absl::GetFlag(FLAGS_width),
                                .k = absl::GetFlag(FLAGS_k),
                                .seed = absl::GetFlag(FLAGS_seed),
                                .dtype = *dtype});
}

absl::StatusOr<std::unique_ptr<Client>> Connect() {
  topk::client::ClientOptions options{.target = absl::GetFlag(FLAGS_target),
                                      .tls = absl::GetFlag(FLAGS_tls),
                                      .tls_server_name = absl::GetFlag(FLAGS_tls_server_name)};
  if (absl::Status read =
          topk::client::ReadTlsFiles(absl::GetFlag(FLAGS_tls_roots), absl::GetFlag(FLAGS_tls_cert),
                                     absl::GetFlag(FLAGS_tls_key), options);
      !read.ok()) {
    return read;
  }
  return Client::Connect(options);
}

int Select(Client& client, bool replay) {
  absl::StatusOr<topk::tools::PackedRows> rows = LoadOrGenerate();
  if (!rows.ok()) return Fail(rows.status());
  if (!absl::GetFlag(FLAGS_save).empty()) {
    if (absl::Status s = topk::tools::Save(*rows, absl::GetFlag(FLAGS_save)); !s.ok()) {
      return Fail(s);
    }
  }
  const int32_t k = absl::GetFlag(FLAGS_k);
  const topk::client::CallOptions options{.sorted = absl::GetFlag(FLAGS_sorted),
                                          .deterministic = absl::GetFlag(FLAGS_deterministic),
                                          .return_values = absl::GetFlag(FLAGS_return_values)};
  const int repeat = replay ? std::max(1, absl::GetFlag(FLAGS_repeat)) : 1;
  absl::PrintF("%d rows, %.2f MB of scores, k=%d%s\n", rows->lengths.size(), rows->bytes() / 1e6, k,
               absl::GetFlag(FLAGS_stream) ? " (streamed)" : "");
  absl::PrintF("%6s %12s %12s %12s %12s %8s\n", "call", "client_us", "server_us", "queue_us",
               "device_us", "exact");
  topk::client::SelectResult last;
  for (int i = 0; i < repeat; ++i) {
    absl::StatusOr<topk::client::SelectResult> result =
        absl::GetFlag(FLAGS_stream)
            ? client.SelectStreaming(k, rows->view(), options, absl::GetFlag(FLAGS_chunk_bytes))
            : client.Select(k, rows->view(), options);
    if (!result.ok()) return Fail(result.status());
    std::string exact = "-";
    if (absl::GetFlag(FLAGS_verify)) {
      const absl::Status v = topk::tools::Verify(
          *rows, k, {.sorted = options.sorted, .deterministic = options.deterministic}, *result);
      if (!v.ok()) return Fail(v);
      exact = "yes";
    }
    absl::PrintF("%6d %12d %12d %12d %12d %8s\n", i, result->client_us, result->server.total_us,
                 result->server.queue_us, result->server.device_us, exact);
    last = *std::move(result);
  }
  for (int r = 0; r < std::min<int64_t>(absl::GetFlag(FLAGS_print_rows), last.num_rows); ++r) {
    const auto first = last.indices.begin() + static_cast<int64_t>(r) * k;
    absl::PrintF("row %d: [%s%s]\n", r, absl::StrJoin(first, first + std::min(k, 8), ", "),
                 k > 8 ? ", ..." : "");
  }
  if (!absl::GetFlag(FLAGS_output).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_output), std::ios::binary);
    out.write(reinterpret_cast<const char*>(last.indices.data()),
              last.indices.size() * sizeof(int32_t));
    if (!out) return Fail(absl::DataLossError("cannot write --output"));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      absl::StrCat("topk-cli COMMAND [--flags]: calls a topk-server; COMMAND is one of ",
                   CommandNames(), "; 'topk-cli help COMMAND' lists its flags"));
  if (std::optional<std::string> help = HelpRequest(argc, argv)) return PrintHelp(*help);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::cerr << "topk-cli: expected one command (" << CommandNames()
              << "); 'topk-cli help' lists them\n";
    return 2;
  }
  const std::string command = args[1];
  if (FindCommand(command) == nullptr) {
    std::cerr << "topk-cli: unknown command '" << command << "'; expected one of " << CommandNames()
              << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(client.status());
  if (command == "select") return Select(**client, /*replay=*/false);
  if (command == "replay") {
    if (absl::GetFlag(FLAGS_input).empty()) {
      return Fail(
          absl::InvalidArgumentError("replay needs --input=FILE (a TOPKROWS file that "
                                     "'topk-cli select --save=FILE' wrote)"));
    }
    return Select(**client, /*replay=*/true);
  }
  if (command == "info") {
    absl::StatusOr<topk::v1::ServerInfo> info = (*client)->GetServerInfo();
    if (!info.ok()) return Fail(info.status());
    std::cout << info->DebugString();
    return 0;
  }
  if (command == "stats") {
    absl::StatusOr<topk::v1::Stats> stats = (*client)->GetStats(absl::GetFlag(FLAGS_prometheus));
    if (!stats.ok()) return Fail(stats.status());
    if (absl::GetFlag(FLAGS_prometheus)) {
      std::cout << stats->prometheus_text();
    } else if (absl::GetFlag(FLAGS_json)) {
      std::cout << topk::tools::StatsJson(*stats);
    } else {
      std::cout << topk::tools::StatsText(*stats);
    }
    return 0;
  }
  if (command == "health") {
    absl::StatusOr<bool> serving = (*client)->IsServing();
    if (!serving.ok()) return Fail(serving.status());
    std::cout << (*serving ? "SERVING" : "NOT_SERVING") << "\n";
    return *serving ? 0 : 1;
  }
  return 2;  // FindCommand above knows only the commands handled here
}
