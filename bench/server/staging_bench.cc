// staging_bench: the CUDA backend's inline staging in isolation, to find where
// a large inline request's device stage goes. A request's score bytes are
// laid in gRPC slices of a chosen size (gRPC's receive path decides the real
// ones; a slice of all the bytes is a flat buffer) and copied out by
// ByteBufferRows in chunks on the shared CopyPool, with 1..16 threads, by
// chunk size: the copy's GB/s and the first chunk's latency, with cached
// and with streaming stores. With a GPU also the whole path in two forms:
// every copying thread enqueuing its own chunk's upload on one stream (the
// previous backend), and the staged chunks going up in order from one thread
// at a time (StagedChunks, the backend's now); and, for reference, one pinned
// cudaMemcpyAsync of the same bytes, the same bytes in per-chunk calls from
// one thread, a pageable cudaMemcpy, and a copy into never-touched memory.
// Every mode's result is compared with the source first (on the GPU: read
// back); a mismatch fails the run.
//
//   staging_bench --bytes=33554432 --slice_bytes=16384,262144,33554432 --threads=1,4,8,16
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/backends/copy_bytes.h"
#include "server/backends/copy_pool.h"
#include "server/backends/staged_chunks.h"
#include "server/transport/raw_select.h"

#if TOPK_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "topk/cuda/resources.h"
#endif

ABSL_FLAG(int64_t, bytes, int64_t{64} * 131072 * 4, "request bytes (default 64 x 128K FP32)");
ABSL_FLAG(std::string, slice_bytes, "16384,262144,4194304", "gRPC slice sizes to lay them in");
ABSL_FLAG(std::string, threads, "1,2,4,8,16", "copying threads (the caller included)");
ABSL_FLAG(std::string, chunk_bytes, "524288", "staging chunk sizes (the backend's: 512 KiB)");
ABSL_FLAG(int, repeats, 20, "timed runs per configuration (the median is reported)");

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      std::cerr << "bad list entry '" << part << "'\n";
      std::exit(2);
    }
    out.push_back(value);
  }
  return out;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// Where the staged bytes go: pinned host memory and, with a GPU, its twin
// on the device and the stream the uploads run on.
struct Target {
  std::byte* host = nullptr;
#if TOPK_HAVE_CUDA
  std::byte* device = nullptr;
  cudaStream_t stream = nullptr;
#endif
};

struct Timing {
  double ms = 0;
  double first_chunk_us = 0;
};

enum class Upload {
  kNone,      // the copy alone
  kPerChunk,  // each copying thread enqueues its own chunk
  kInOrder,   // staged runs go up in order from one thread at a time
};

const char* Name(Upload upload) {
  switch (upload) {
    case Upload::kNone:
      return "none";
    case Upload::kPerChunk:
      return "per-chunk";
    case Upload::kInOrder:
      return "in-order";
  }
  return "?";
}

// One staging of `rows` into `target` in chunks on `pool` with `threads`
// copying, uploading as `upload` says.
Timing StageOnce(const topk::server::ByteBufferRows& rows, topk::server::CopyPool& pool,
                 int threads, size_t chunk, Upload upload, topk::server::CopyStores stores,
                 topk::server::StagedChunks& staged, const Target& target) {
  const size_t size = rows.size_bytes();
  const int64_t chunks = static_cast<int64_t>((size + chunk - 1) / chunk);
  std::atomic<int64_t> first_ns{-1};
  staged.Reset(static_cast<size_t>(chunks));
  const auto up = [&](size_t begin, size_t end) {
#if TOPK_HAVE_CUDA
    const size_t from = begin * chunk;
    const size_t to = std::min(end * chunk, size);
    (void)cudaMemcpyAsync(target.device + from, target.host + from, to - from,
                          cudaMemcpyHostToDevice, target.stream);
#else
    (void)begin;
    (void)end;
#endif
  };
  const Clock::time_point start = Clock::now();
  pool.Run(chunks, threads - 1, [&](int64_t i) {
    const size_t from = static_cast<size_t>(i) * chunk;
    const size_t bytes = std::min(chunk, size - from);
    rows.CopyRange(from, bytes, target.host + from, stores);
    if (upload == Upload::kPerChunk) up(static_cast<size_t>(i), static_cast<size_t>(i) + 1);
    if (upload == Upload::kInOrder) staged.Staged(static_cast<size_t>(i), up);
    int64_t none = -1;
    const int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    first_ns.compare_exchange_strong(none, now);
  });
#if TOPK_HAVE_CUDA
  if (upload != Upload::kNone) (void)cudaStreamSynchronize(target.stream);
#endif
  return {.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
          .first_chunk_us = static_cast<double>(first_ns.load()) / 1e3};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const auto size = static_cast<size_t>(absl::GetFlag(FLAGS_bytes));
  const std::vector<int64_t> chunk_sizes = ParseList(absl::GetFlag(FLAGS_chunk_bytes));
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  const std::vector<int64_t> slice_sizes = ParseList(absl::GetFlag(FLAGS_slice_bytes));
  const std::vector<int64_t> thread_counts = ParseList(absl::GetFlag(FLAGS_threads));
  if (size == 0) {
    std::cerr << "--bytes must be positive\n";
    return 2;
  }
  size_t most_chunks = 0;
  for (int64_t chunk : chunk_sizes) {
    most_chunks = std::max(most_chunks, (size + chunk - 1) / static_cast<size_t>(chunk));
  }
  topk::server::StagedChunks staged(most_chunks);

  // Random bytes: never time or check zeros.
  std::vector<std::byte> source(size);
  std::mt19937 random(7);
  for (std::byte& b : source) b = static_cast<std::byte>(random() & 0xff);

  Target target;
#if TOPK_HAVE_CUDA
  const bool gpu = cudaSetDevice(0) == cudaSuccess && cudaFree(nullptr) == cudaSuccess;
  absl::StatusOr<topk::cuda::PinnedBuffer<std::byte>> pinned;
  absl::StatusOr<topk::cuda::DeviceBuffer<std::byte>> device;
  absl::StatusOr<topk::cuda::Stream> stream;
  std::vector<std::byte> plain;
  if (gpu) {
    pinned = topk::cuda::AllocatePinned<std::byte>(size);
    device = topk::cuda::AllocateDevice<std::byte>(size);
    stream = topk::cuda::CreateStream();
    if (!pinned.ok() || !device.ok() || !stream.ok()) {
      std::cerr << "CUDA allocation failed\n";
      return 2;
    }
    target = {.host = pinned->get(), .device = device->get(), .stream = stream->get()};
  } else {
    plain.resize(size);
    target.host = plain.data();
  }
#else
  const bool gpu = false;
  std::vector<std::byte> plain(size);
  target.host = plain.data();
#endif
  absl::PrintF("staging %d bytes; %s\n", size,
               gpu ? "GPU 0: the copy, and the copy with the uploads" : "no GPU: the copy only");

  // A copy into memory never touched before (its page faults in the copy),
  // against the same copy again into the now-resident pages.
  {
    const Clock::time_point start = Clock::now();
    std::unique_ptr<std::byte[]> fresh(new std::byte[size]);
    std::memcpy(fresh.get(), source.data(), size);
    const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const Clock::time_point again = Clock::now();
    std::memcpy(fresh.get(), source.data(), size);
    const double again_ms = std::chrono::duration<double, std::milli>(Clock::now() - again).count();
    if (std::memcmp(fresh.get(), source.data(), size) != 0) {
      absl::PrintF("MISMATCH: plain copy\n");
      return 1;
    }
    absl::PrintF("one thread, flat memcpy: into fresh memory %.3f ms, again %.3f ms (%.1f GB/s)\n",
                 first_ms, again_ms, size / again_ms / 1e6);
  }

#if TOPK_HAVE_CUDA
  if (gpu) {
    // The reference: the same bytes from pinned memory in one call.
    std::memcpy(target.host, source.data(), size);
    std::vector<double> ms;
    for (int r = 0; r < repeats + 3; ++r) {
      const Clock::time_point start = Clock::now();
      (void)cudaMemcpyAsync(target.device, target.host, size, cudaMemcpyHostToDevice,
                            target.stream);
      (void)cudaStreamSynchronize(target.stream);
      if (r >= 3)
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    absl::PrintF("pinned upload, one call: %.3f ms (%.1f GB/s)\n", Median(ms),
                 size / Median(ms) / 1e6);
    // The same bytes in per-chunk calls from one thread: the calls' cost.
    for (int64_t chunk : chunk_sizes) {
      std::vector<double> chunked;
      for (int r = 0; r < repeats; ++r) {
        const Clock::time_point start = Clock::now();
        for (size_t at = 0; at < size; at += static_cast<size_t>(chunk)) {
          (void)cudaMemcpyAsync(target.device + at, target.host + at,
                                std::min(static_cast<size_t>(chunk), size - at),
                                cudaMemcpyHostToDevice, target.stream);
        }
        (void)cudaStreamSynchronize(target.stream);
        chunked.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
      absl::PrintF("pinned upload in %d-byte calls from one thread: %.3f ms (%.1f GB/s)\n", chunk,
                   Median(chunked), size / Median(chunked) / 1e6);
    }
    // From pageable memory (the driver stages it itself).
    std::vector<double> pageable;
    for (int r = 0; r < 5; ++r) {
      const Clock::time_point start = Clock::now();
      (void)cudaMemcpy(target.device, source.data(), size, cudaMemcpyHostToDevice);
      pageable.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    absl::PrintF("pageable cudaMemcpy, one call: %.3f ms (%.1f GB/s)\n", Median(pageable),
                 size / Median(pageable) / 1e6);
  }
#endif

  bool exact = true;
  absl::PrintF("%12s %10s %8s %10s %10s %10s %10s %14s\n", "slice_bytes", "chunk", "threads",
               "stores", "upload", "ms", "GB/s", "first_chunk_us");
  for (int64_t slice : slice_sizes) {
    std::vector<grpc::Slice> slices;
    for (size_t at = 0; at < size; at += static_cast<size_t>(slice)) {
      slices.emplace_back(source.data() + at, std::min(static_cast<size_t>(slice), size - at));
    }
    const grpc::ByteBuffer buffer(slices.data(), slices.size());
    const topk::server::ByteBufferRows rows(&buffer, 0, static_cast<int64_t>(size));
    for (int64_t threads : thread_counts) {
      topk::server::CopyPool pool(static_cast<int>(threads) - 1);
      for (int64_t chunk_bytes : chunk_sizes) {
        const auto chunk = static_cast<size_t>(chunk_bytes);
        for (Upload upload : {Upload::kNone, Upload::kPerChunk, Upload::kInOrder}) {
          if (upload != Upload::kNone && !gpu) continue;
          for (topk::server::CopyStores stores :
               {topk::server::CopyStores::kCached, topk::server::CopyStores::kStreaming}) {
            const bool streaming = stores == topk::server::CopyStores::kStreaming;
            // The per-chunk form only as the previous backend ran it.
            if (upload == Upload::kPerChunk && streaming) continue;
            // Checked first, from a cleared destination.
            std::memset(target.host, 0, size);
#if TOPK_HAVE_CUDA
            if (upload != Upload::kNone) (void)cudaMemset(target.device, 0, size);
#endif
            (void)StageOnce(rows, pool, static_cast<int>(threads), chunk, upload, stores, staged,
                            target);
            std::vector<std::byte> check(target.host, target.host + size);
#if TOPK_HAVE_CUDA
            if (upload != Upload::kNone) {
              (void)cudaMemcpy(check.data(), target.device, size, cudaMemcpyDeviceToHost);
            }
#endif
            if (std::memcmp(check.data(), source.data(), size) != 0) {
              absl::PrintF("MISMATCH: slice %d, chunk %d, %d threads, %s stores, upload %s\n",
                           slice, chunk, threads, streaming ? "streaming" : "cached", Name(upload));
              exact = false;
            }
            std::vector<double> ms, first;
            for (int r = 0; r < repeats; ++r) {
              const Timing t = StageOnce(rows, pool, static_cast<int>(threads), chunk, upload,
                                         stores, staged, target);
              ms.push_back(t.ms);
              first.push_back(t.first_chunk_us);
            }
            absl::PrintF("%12d %10d %8d %10s %10s %10.3f %10.1f %14.1f\n", slice, chunk, threads,
                         streaming ? "streaming" : "cached", Name(upload), Median(ms),
                         size / Median(ms) / 1e6, Median(first));
          }
        }
      }
    }
  }
  return exact ? 0 : 1;
}
