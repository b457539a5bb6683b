// topk-bench-gpu: times the CUDA selector on the operator matrix (K = 2048 by
// default, M x N, causal terminal rows, indexer-like scores generated on the GPU)
// against the one-scan floor measured in the same run, our exact route with
// sampling off, and a scan-only kernel with the same row schedule. Every timed
// output is verified on the GPU (all rows: distinct, in range, exact).
//
// --dtype=bf16|fp16 rounds the same scores to the 16-bit type (nearest even) and
// times the 16-bit kernels; the floor is then sum(L) x 2 bytes at the same
// measured read bandwidth.
//
// usage: topk-bench-gpu [--csv=FILE] [--quick] [--reps=N] [--shapes=M:N,M:N,...]
//                       [--dtype=fp32|bf16|fp16] [--exact]
//                       [--stride=S] [--run=R] [--prefetch] [--nokv_split]
//                       [--ctas_per_sm=0|2|4] [--alt_ctas_per_sm=0|2|4] [--k=K]
//                       [--short_rows=-1|0|W] [--alt_short_rows=-1|0|W]
//                       [--cluster=0|1|-1] [--cluster_size=8|16] [--alt_cluster=0|1|-1]
//                       [--alt_cluster_size=8|16] [--cluster_ctas_per_sm=1|2]
//                       [--alt_cluster_ctas_per_sm=1|2] [--times_csv=FILE]
//                       [--resident=0|1|-1] [--resident_cluster_size=1..16]
//                       [--resident_threads=512|1024]
//                       [--alt_resident=0|1|-1] [--spec_rows=N]
// --alt_cluster times a second selector with that cluster-route setting (A/B
// of the cluster route against the route it replaces); --times_csv appends
// every timed repetition (shape, selector, route, ms) for percentiles.
// --alt_ctas_per_sm / --alt_short_rows time a second selector with that kernel
// variant or short-row setting on the same data right after the first ("alt"
// columns). The "exact" column is the row-local exact route
// (sampling off) on the same data. Causal rows: L_r = N - M + 1 + r while M <= N / 2; taller
// matrices repeat the last N / 2 lengths (bench_data.h).
// Times are the median and the p99 (nearest rank) of the repetitions, CUDA
// events around one graph replay (bench_timing.h); the CSV has both.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "bench_config.h"
#include "bench_data.h"
#include "bench_timing.h"
#include "bench_trace.h"
#include "device_verifier.h"
#include "kernel_args.h"
#include "topk/cuda/resources.h"
#include "topk/cuda_selector.h"

// The run's options (the selector's: bench_config.h).
ABSL_FLAG(std::string, csv, "bench_gpu.csv", "where to write the per-shape CSV");
ABSL_FLAG(bool, quick, false, "5 repetitions per shape");
ABSL_FLAG(int32_t, reps, 0, "repetitions per shape (0: by size, 15 or 40)");
ABSL_FLAG(std::string, shapes, "",
          "M:N pairs, comma separated (empty: the 20-shape matrix, then the decode shapes)");
ABSL_FLAG(int32_t, k, 2048, "K, the rank selected per row");
ABSL_FLAG(int32_t, spec_rows, 1,
          "rows per request (speculative decoding: a request's rows end at L - n + 1 .. L, the "
          "requests' L causal); 1: causal rows");
ABSL_FLAG(std::string, dtype, "fp32", "score type of the rows: fp32, bf16 or fp16");
ABSL_FLAG(bool, exact, true, "also time the exact route (sampling off) on the same data");
ABSL_FLAG(std::string, times_csv, "", "append every timed repetition here (empty: none)");
ABSL_FLAG(bool, trace, false,
          "after timing, one more launch per selector with each row's start and end on the "
          "global timer (row_trace): start skew, row ends, the longest row, SMs used");
ABSL_FLAG(std::string, trace_csv, "", "append the --trace summaries here (empty: none)");
ABSL_FLAG(int32_t, replay_loop, 0,
          "also issue up to N replays back to back (no host wait), each into its own verified "
          "output: host issue time and device time per call");

namespace {

template <typename T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*v);
}

struct Row {
  int64_t m, n;
  std::string route;
  double ours, floor, exact, scan;
  double ours_p99 = 0, alt_p99 = 0;  // ms, nearest rank (bench_timing.h)
  int loop_calls = 0;                // --replay_loop: calls, host and device us per call
  double loop_host_us = 0, loop_device_us = 0;
  double band_rate, exact_rate, mean_cands;
  double us_proposal, us_admit, us_refine, us_finalize;  // per row, one CTA's view
  long long bad;
  int copies, reps;
  int block = 0;  // threads per CTA of the sampled plan
  // A/B variant (--alt-ctas-per-sm): time, threads per CTA, per-row phases.
  double alt = 0;
  int alt_block = 0;
  std::string alt_route;
  double alt_mean_cands = 0, alt_rescans = 0;
  double alt_us_proposal = 0, alt_us_admit = 0, alt_us_refine = 0, alt_us_finalize = 0;
  // The resident route's steps, us per row (ours and the variant).
  std::string steps = "-", alt_steps = "-";
};

// The resident route's steps (route_stats.h) in us per row: load / its
// barrier / exchange / boundary / gather / its barrier; "-" for other routes.
std::string ResidentSteps(const topk::CudaRouteStats& s, double per_row_us) {
  if (s.resident_rows == 0) return "-";
  return absl::StrFormat(
      "%.2f/%.2f/%.2f/%.2f/%.2f/%.2f", s.cycles_resident_load * per_row_us,
      s.cycles_resident_load_wait * per_row_us, s.cycles_resident_exchange * per_row_us,
      s.cycles_resident_boundary * per_row_us, s.cycles_resident_gather * per_row_us,
      s.cycles_resident_gather_wait * per_row_us);
}

}  // namespace

// "M:N,M:N,..." -> shapes; false on a malformed item.
bool ParseShapes(const std::string& text, std::vector<std::pair<int64_t, int64_t>>* shapes) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return false;
    shapes->emplace_back(std::atoll(item.substr(0, colon).c_str()),
                         std::atoll(item.substr(colon + 1).c_str()));
    pos = comma + 1;
  }
  return true;
}

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("times the CUDA selector on the operator matrix");
  absl::ParseCommandLine(argc, argv);
  const std::string csv_path = absl::GetFlag(FLAGS_csv);
  const bool quick = absl::GetFlag(FLAGS_quick);
  const int reps_override = absl::GetFlag(FLAGS_reps);
  std::vector<std::pair<int64_t, int64_t>> shapes;
  if (!ParseShapes(absl::GetFlag(FLAGS_shapes), &shapes)) {
    std::fprintf(stderr, "--shapes: expected M:N,M:N,...\n");
    return 2;
  }
  const topk::CudaSelectorConfig cfg = topk::bench::SelectorConfigFromFlags();
  const bool trace = absl::GetFlag(FLAGS_trace);
  FILE* trace_csv = nullptr;
  if (!absl::GetFlag(FLAGS_trace_csv).empty()) {
    const std::string path = absl::GetFlag(FLAGS_trace_csv);
    FILE* probe = std::fopen(path.c_str(), "r");
    const bool fresh = probe == nullptr;
    if (probe != nullptr) std::fclose(probe);
    trace_csv = std::fopen(path.c_str(), "a");
    if (trace_csv == nullptr) return 1;
    if (fresh) std::fputs(topk::bench::TraceCsvHeader(), trace_csv);
  }
  FILE* times_csv = nullptr;
  if (!absl::GetFlag(FLAGS_times_csv).empty()) {
    times_csv = std::fopen(absl::GetFlag(FLAGS_times_csv).c_str(), "a");
    if (times_csv == nullptr) return 1;
  }
  if (shapes.empty()) {
    for (int64_t n : {131072, 262144, 524288, 1048576}) {
      for (int64_t m : {512, 1024, 2048, 4096, 8192}) shapes.emplace_back(m, n);
    }
    for (int64_t n : {131072, 262144, 524288, 1048576}) {
      for (int64_t m : {1, 8, 64}) shapes.emplace_back(m, n);
    }
  }
  const int32_t k = absl::GetFlag(FLAGS_k);
  const int per_request = absl::GetFlag(FLAGS_spec_rows);
  if (per_request < 1) {
    std::fprintf(stderr, "--spec_rows must be >= 1\n");
    return 2;
  }
  const std::string dtype_name = absl::GetFlag(FLAGS_dtype);
  topk::ScoreType dtype = topk::ScoreType::kFloat32;
  if (dtype_name == "bf16") {
    dtype = topk::ScoreType::kBFloat16;
  } else if (dtype_name == "fp16") {
    dtype = topk::ScoreType::kFloat16;
  } else if (dtype_name != "fp32") {
    std::fprintf(stderr, "--dtype: fp32, bf16 or fp16\n");
    return 2;
  }
  const int elem = topk::ScoreTypeBytes(dtype);
  const bool time_exact = absl::GetFlag(FLAGS_exact);
  auto sampled = Must(topk::CudaSelector::Create(cfg));
  topk::CudaSelectorConfig off_cfg;
  off_cfg.enable_sampling = false;
  auto exact = Must(topk::CudaSelector::Create(off_cfg));
  // The A/B selector: the same options as the sampled one but the variant
  // or the short-row setting.
  std::unique_ptr<topk::CudaSelector> alt;
  const std::optional<topk::CudaSelectorConfig> alt_choice = topk::bench::AltConfigFromFlags(cfg);
  const topk::CudaSelectorConfig alt_cfg = alt_choice.value_or(cfg);
  if (alt_choice.has_value()) alt = Must(topk::CudaSelector::Create(alt_cfg));
  auto stream = Must(topk::cuda::CreateStream());
  auto ev0 = Must(topk::cuda::CreateEvent());
  auto ev1 = Must(topk::cuda::CreateEvent());
  cudaStream_t st = stream.get();
  int clock_khz = 1980000;
  CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));

  // Read bandwidth, same run: 4 GiB with 16-byte loads, median of 7.
  const double bw = topk::bench::MeasureReadBandwidth(st, ev0.get(), ev1.get());
  std::printf("# read bandwidth (4 GiB, 16-byte ld.global.cg): %.3f TB/s\n", bw / 1e12);

  std::vector<Row> results;
  auto bad_dev = Must(topk::cuda::AllocateDevice<unsigned long long>(1));
  auto first_bad = Must(topk::cuda::AllocateDevice<int>(1));
  auto sink = Must(topk::cuda::AllocateDevice<float>(1));
  for (auto [m, n] : shapes) {
    double bytes = 0;
    for (int64_t r = 0; r < m; ++r) {
      bytes += static_cast<double>(elem) * topk::bench::RowLength(r, m, n, per_request);
    }
    const int64_t mat = m * n;
    const int64_t mat_bytes = mat * elem;
    // Enough copies that the rotation cannot be served from the 60 MiB L2.
    const int copies = static_cast<int>(
        std::min<int64_t>(64, std::max<int64_t>(1, (int64_t{400} << 20) / mat_bytes + 1)));
    auto data = Must(topk::cuda::AllocateDevice<uint8_t>(static_cast<size_t>(mat_bytes) * copies));
    {
      // The same FP32 scores for every type; 16-bit rows are them rounded.
      topk::cuda::DeviceBuffer<float> wide;
      if (elem != 4) wide = Must(topk::cuda::AllocateDevice<float>(static_cast<size_t>(mat)));
      for (int c = 0; c < copies; ++c) {
        float* target =
            elem == 4 ? reinterpret_cast<float*>(data.get() + c * mat_bytes) : wide.get();
        topk::bench::GenerateIndexer(target, m, n, 1000 + c, st, per_request);
        CHECK_CUDA(cudaGetLastError());
        if (elem != 4) {
          topk::bench::NarrowScores(wide.get(),
                                    reinterpret_cast<uint16_t*>(data.get() + c * mat_bytes), mat,
                                    dtype == topk::ScoreType::kFloat16, st);
          CHECK_CUDA(cudaGetLastError());
        }
      }
      CHECK_CUDA(cudaStreamSynchronize(st));
    }
    auto lengths = Must(topk::cuda::AllocateDevice<int32_t>(m));
    topk::bench::FillLengths(lengths.get(), m, n, st, per_request);
    CHECK_CUDA(cudaGetLastError());
    auto out = Must(topk::cuda::AllocateDevice<int32_t>(m * k));
    CHECK_CUDA(cudaStreamSynchronize(st));
    const int reps = reps_override > 0 ? reps_override : (quick ? 5 : (bytes > 4e9 ? 15 : 40));

    Row row{m, n, "", 0, bytes / bw * 1e3};  // the rest zero until measured
    row.copies = copies;
    row.reps = reps;
    CHECK_CUDA(cudaMemsetAsync(bad_dev.get(), 0, 8, st));
    for (int variant = 0; variant < 3; ++variant) {
      if (variant == 2 && alt == nullptr) break;
      if (variant == 1 && !time_exact) continue;
      topk::CudaSelector& sel = variant == 0 ? *sampled : (variant == 1 ? *exact : *alt);
      auto plan =
          Must(sel.MakePlan(topk::ProblemShape{k, m, n, topk::Layout::kPitched, dtype}, {}));
      if (variant == 0) row.route = std::string(topk::RouteName(plan.route));
      if (variant == 0) row.block = plan.block;
      if (variant == 2) row.alt_block = plan.block;
      if (variant == 2) row.alt_route = std::string(topk::RouteName(plan.route));
      auto ws = Must(topk::cuda::AllocateDevice<uint8_t>(plan.workspace_bytes));
      topk::RunContext ctx{ws.get(), ws.bytes(), st};
      auto runner = Must(topk::CudaGraphRunner::Create(sel, plan, ctx));
      CHECK_OK(sel.ResetStats(ctx));
      // Copy c of the data as a batch, and the on-device check of an output.
      auto batch_of = [&](int c) {
        topk::RowBatch b;
        b.dtype = dtype;
        const uint8_t* scores = data.get() + c * mat_bytes;
        if (elem == 4) {
          b.scores = reinterpret_cast<const float*>(scores);
        } else {
          b.scores16 = reinterpret_cast<const uint16_t*>(scores);
        }
        b.pitch = n;
        b.lengths = lengths.get();
        b.num_rows = m;
        b.width = n;
        return b;
      };
      auto verify = [&](int c, int32_t* indices) {
        topk::cuda::DeviceArgs va;
        va.scores = data.get() + c * mat_bytes;
        va.pitch = n;
        va.lengths = lengths.get();
        va.indices = indices;
        va.num_rows = m;
        va.width = n;
        CHECK_CUDA(topk::cuda::LaunchVerify(va, k, dtype, m, bad_dev.get(), first_bad.get(), st));
      };
      std::vector<float> times;
      for (int it = 0; it < reps + 2; ++it) {
        const int c = it % copies;
        CHECK_CUDA(cudaEventRecord(ev0.get(), st));
        CHECK_OK(runner->Replay(batch_of(c), topk::OutputView{out.get(), nullptr}, st));
        CHECK_CUDA(cudaEventRecord(ev1.get(), st));
        verify(c, out.get());  // outside the timed region, before the wait
        CHECK_CUDA(cudaEventSynchronize(ev1.get()));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, ev0.get(), ev1.get()));
        if (it >= 2) times.push_back(ms);
      }
      CHECK_CUDA(cudaStreamSynchronize(st));
      if (times_csv != nullptr) {
        for (float t : times) {
          std::fprintf(times_csv, "%s,%lld,%lld,%d,%s,%s,%.5f\n", dtype_name.c_str(),
                       static_cast<long long>(m), static_cast<long long>(n), k,
                       variant == 0 ? "ours" : (variant == 1 ? "exact" : "alt"),
                       std::string(topk::RouteName(plan.route)).c_str(), t);
        }
      }
      const int loop = static_cast<int>(std::min<int64_t>(
          absl::GetFlag(FLAGS_replay_loop), (int64_t{256} << 20) / (m * int64_t{k} * 4)));
      if (variant == 0 && loop > 0) {
        // Back to back with no host wait, each call into its own output.
        std::vector<topk::cuda::DeviceBuffer<int32_t>> outs;
        for (int i = 0; i < loop; ++i)
          outs.push_back(Must(topk::cuda::AllocateDevice<int32_t>(m * k)));
        const topk::bench::LoopTiming t =
            topk::bench::TimeBackToBack(st, ev0.get(), ev1.get(), loop, [&](int i) {
              CHECK_OK(runner->Replay(batch_of(i % copies),
                                      topk::OutputView{outs[i].get(), nullptr}, st));
            });
        for (int i = 0; i < loop; ++i) verify(i % copies, outs[i].get());
        row.loop_calls = loop;
        row.loop_host_us = t.host_us;
        row.loop_device_us = t.device_us;
      }
      const topk::bench::Timing timing = topk::bench::Summarize(times);
      const double med = timing.median;
      if (variant == 2) {
        row.alt = med;
        row.alt_p99 = timing.p99;
        const auto stats = Must(sel.ReadStats(ctx));
        const double per_row_us = 1e3 / clock_khz / std::max<int64_t>(stats.rows, 1);
        row.alt_us_proposal = stats.cycles_proposal * per_row_us;
        row.alt_us_admit = stats.cycles_admit * per_row_us;
        row.alt_us_refine = stats.cycles_refine * per_row_us;
        row.alt_us_finalize = stats.cycles_finalize * per_row_us;
        row.alt_steps = ResidentSteps(stats, per_row_us);
        row.alt_mean_cands =
            static_cast<double>(stats.candidates) / std::max<int64_t>(stats.rows, 1);
        row.alt_rescans = static_cast<double>(stats.rescans) / std::max<int64_t>(stats.rows, 1);
      } else if (variant == 0) {
        row.ours = med;
        row.ours_p99 = timing.p99;
        const auto stats = Must(sel.ReadStats(ctx));
        const double sampled_rows = std::max<int64_t>(stats.sampled, 1);
        row.band_rate = stats.band_rescued / sampled_rows;
        row.exact_rate = stats.exact_recovery / sampled_rows;
        row.mean_cands = static_cast<double>(stats.candidates) / std::max<int64_t>(stats.rows, 1);
        const double per_row_us = 1e3 / clock_khz / std::max<int64_t>(stats.rows, 1);
        row.us_proposal = stats.cycles_proposal * per_row_us;
        row.us_admit = stats.cycles_admit * per_row_us;
        row.us_refine = stats.cycles_refine * per_row_us;
        row.us_finalize = stats.cycles_finalize * per_row_us;
        row.steps = ResidentSteps(stats, per_row_us);
      } else {
        row.exact = med;
      }
      if (trace && variant != 1) {
        // One more launch of the same plan, stamped per row (copy 0, verified).
        topk::CudaSelectorConfig tcfg = variant == 0 ? cfg : alt_cfg;
        auto words = Must(topk::cuda::AllocateDevice<unsigned long long>(static_cast<size_t>(m) *
                                                                         topk::cuda::kTraceWords));
        tcfg.row_trace = words.get();
        auto traced = Must(topk::CudaSelector::Create(tcfg));
        auto tplan =
            Must(traced->MakePlan(topk::ProblemShape{k, m, n, topk::Layout::kPitched, dtype}, {}));
        auto tws = Must(topk::cuda::AllocateDevice<uint8_t>(tplan.workspace_bytes));
        topk::RunContext tctx{tws.get(), tws.bytes(), st};
        for (int pass = 0; pass < 2; ++pass) {  // the first warms the code and the TLB
          CHECK_CUDA(cudaMemsetAsync(words.get(), 0, words.bytes(), st));
          CHECK_OK(traced->Run(tplan, batch_of(0), topk::OutputView{out.get(), nullptr}, tctx));
          verify(0, out.get());
        }
        std::vector<unsigned long long> host(static_cast<size_t>(m) * topk::cuda::kTraceWords);
        CHECK_CUDA(
            cudaMemcpyAsync(host.data(), words.get(), words.bytes(), cudaMemcpyDeviceToHost, st));
        CHECK_CUDA(cudaStreamSynchronize(st));
        const topk::bench::TraceSummary ts = topk::bench::SummarizeTrace(host, m);
        const std::string label = variant == 0 ? "ours" : "alt";
        std::printf("%s\n", topk::bench::FormatTrace(label, m, n, ts).c_str());
        if (trace_csv != nullptr) {
          std::fputs(topk::bench::TraceCsvRow(dtype_name, label, m, n, med, ts).c_str(), trace_csv);
          std::fflush(trace_csv);
        }
      }
    }
    {
      const int grid = std::min<int64_t>(m, 264);
      row.scan = topk::bench::TimeRepeated(st, ev0.get(), ev1.get(), 2, reps, [&](int it) {
                   const int c = it % copies;
                   topk::bench::ScanRows(data.get() + c * mat_bytes, n, elem, m, sink.get(), grid,
                                         st, per_request);
                   CHECK_CUDA(cudaGetLastError());
                 }).median;
    }
    unsigned long long bad = 0;
    CHECK_CUDA(cudaMemcpy(&bad, bad_dev.get(), 8, cudaMemcpyDeviceToHost));
    row.bad = static_cast<long long>(bad);
    results.push_back(row);
    std::printf(
        "%s M=%5lld N=%7lld ours %.4f ms (p99 %.4f)  floor %.4f  x%.2f  exact %.4f  scan %.4f  "
        "band %.3f "
        "exact %.3f cands %.0f  bad %lld  us/row prop %.1f admit %.1f refine %.1f out %.1f\n",
        dtype_name.c_str(), static_cast<long long>(m), static_cast<long long>(n), row.ours,
        row.ours_p99, row.floor, row.ours / row.floor, row.exact, row.scan, row.band_rate,
        row.exact_rate, row.mean_cands, row.bad, row.us_proposal, row.us_admit, row.us_refine,
        row.us_finalize);
    if (row.steps != "-" || row.alt_steps != "-") {
      std::printf(
          "  steps M=%5lld N=%7lld us/row load/wait/exchange/boundary/gather/wait: ours %s alt "
          "%s\n",
          static_cast<long long>(m), static_cast<long long>(n), row.steps.c_str(),
          row.alt_steps.c_str());
    }
    if (row.loop_calls > 0) {
      std::printf(
          "  loop M=%5lld N=%7lld %d back-to-back replays: host %.2f us/call, device %.2f "
          "us/call\n",
          static_cast<long long>(m), static_cast<long long>(n), row.loop_calls, row.loop_host_us,
          row.loop_device_us);
    }
    if (alt != nullptr) {
      std::printf(
          "  alt M=%5lld N=%7lld %s block %d: %.4f ms x%.2f (%s block %d: %.4f ms x%.2f) alt/ours "
          "%.3f  cands %.0f rescans/row %.3f us/row prop %.1f admit %.1f refine %.1f out %.1f\n",
          static_cast<long long>(m), static_cast<long long>(n), row.alt_route.c_str(),
          row.alt_block, row.alt, row.alt / row.floor, row.route.c_str(), row.block, row.ours,
          row.ours / row.floor, row.alt / row.ours, row.alt_mean_cands, row.alt_rescans,
          row.alt_us_proposal, row.alt_us_admit, row.alt_us_refine, row.alt_us_finalize);
    }
    std::fflush(stdout);
  }

  FILE* f = std::fopen(csv_path.c_str(), "w");
  if (f == nullptr) {
    std::perror(csv_path.c_str());
    return 1;
  }
  std::fprintf(
      f,
      "M,N,K,route,ours_ms,floor_ms,frac_floor,exact_ms,scan_ms,band_rate,exact_rate,"
      "mean_candidates,bad_rows,copies,reps,read_bw_TBps,verified,us_proposal,us_admit,"
      "us_refine,us_finalize,block,alt_block,alt_ms,alt_frac_floor,alt_us_proposal,"
      "alt_us_admit,alt_us_refine,alt_us_finalize,alt_route,alt_mean_candidates,dtype,"
      "ours_p99_ms,alt_p99_ms,loop_calls,loop_host_us,loop_device_us,steps_us,alt_steps_us\n");
  for (const Row& r : results) {
    std::fprintf(f,
                 "%lld,%lld,%d,%s,%.5f,%.5f,%.4f,%.5f,%.5f,%.5f,%.5f,%.1f,%lld,%d,%d,%.4f,%s,%.2f,"
                 "%.2f,%.2f,%.2f,%d,%d,%.5f,%.4f,%.2f,%.2f,%.2f,%.2f,%s,%.1f,%s,%.5f,%.5f,%d,%.2f,%"
                 ".2f,%s,%s\n",
                 static_cast<long long>(r.m), static_cast<long long>(r.n), k, r.route.c_str(),
                 r.ours, r.floor, r.ours / r.floor, r.exact, r.scan, r.band_rate, r.exact_rate,
                 r.mean_cands, r.bad, r.copies, r.reps, bw / 1e12, "gpu-all-rows-every-rep",
                 r.us_proposal, r.us_admit, r.us_refine, r.us_finalize, r.block, r.alt_block, r.alt,
                 r.alt / r.floor, r.alt_us_proposal, r.alt_us_admit, r.alt_us_refine,
                 r.alt_us_finalize, r.alt_route.c_str(), r.alt_mean_cands, dtype_name.c_str(),
                 r.ours_p99, r.alt_p99, r.loop_calls, r.loop_host_us, r.loop_device_us,
                 r.steps.c_str(), r.alt_steps.c_str());
  }
  std::fclose(f);
  if (times_csv != nullptr) std::fclose(times_csv);
  if (trace_csv != nullptr) std::fclose(trace_csv);
  long long total_bad = 0;
  for (const Row& r : results) total_bad += r.bad;
  std::printf("# wrote %s; inexact rows over all timed outputs: %lld\n", csv_path.c_str(),
              total_bad);
  return total_bad == 0 ? 0 : 3;
}
