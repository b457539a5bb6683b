// Which host-side CUDA calls block while another stream of the same context
// waits (cuStreamWaitValue32) on a flag nobody has set yet? A channel keeps
// such waits armed for as long as its client is idle, so any call that waits
// for the context to go quiet would hang the server. Each call runs on a
// worker thread with a deadline; a call past it is reported BLOCKED and the
// flag (pinned host memory, so a plain store releases it) is set to let it
// finish. Also times the wake-up of a wait on host vs device memory.
// Development probe (tools/gpu-lab), not part of the product.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#define CK(x)                                                           \
  do {                                                                  \
    auto e_ = (x);                                                      \
    if (e_ != 0) {                                                      \
      std::printf("%s failed: %d at line %d\n", #x, (int)e_, __LINE__); \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

__global__ void Touch(int* p) { p[threadIdx.x] += 1; }

static volatile unsigned* host_flag;
static CUdeviceptr dev_flag_alias;

static void Arm(cudaStream_t s, int* scratch) {
  *host_flag = 0;
  CK(cuStreamWaitValue32((CUstream)s, dev_flag_alias, 1, CU_STREAM_WAIT_VALUE_EQ));
  Touch<<<1, 32, 0, s>>>(scratch);
}

static void Probe(const char* name, cudaStream_t s, int* scratch, const std::function<void()>& op) {
  std::printf("start,%s\n", name);
  Arm(s, scratch);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::atomic<bool> done{false};
  auto t0 = std::chrono::steady_clock::now();
  std::thread worker([&] {
    op();
    done = true;
  });
  while (!done && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool blocked = !done;
  *host_flag = 1;  // release the armed wait
  worker.join();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CK(cudaStreamSynchronize(s));
  std::printf("probe,%s,%s,%.3f\n", name, blocked ? "BLOCKED" : "ok", blocked ? -1.0 : ms);
}

static int Setup(cudaStream_t* s, cudaStream_t* other, int** scratch);

// Child mode: opens the parent's exported allocation, then probes
// cudaIpcCloseMemHandle / cudaIpcOpenMemHandle with a wait armed.
static int Child(const char* path) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  cudaStream_t s, other;
  int* scratch;
  Setup(&s, &other, &scratch);
  cudaIpcMemHandle_t m;
  FILE* f = std::fopen(path, "rb");
  if (!f || std::fread(&m, sizeof m, 1, f) != 1) return 2;
  std::fclose(f);
  void* mapped;
  CK(cudaIpcOpenMemHandle(&mapped, m, cudaIpcMemLazyEnablePeerAccess));
  Probe("cudaIpcCloseMemHandle", s, scratch, [&] { CK(cudaIpcCloseMemHandle(mapped)); });
  Probe("cudaIpcOpenMemHandle", s, scratch,
        [&] { CK(cudaIpcOpenMemHandle(&mapped, m, cudaIpcMemLazyEnablePeerAccess)); });
  CK(cudaIpcCloseMemHandle(mapped));
  return 0;
}

static int Setup(cudaStream_t* s, cudaStream_t* other, int** scratch) {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  unsigned* hf;
  CK(cudaHostAlloc(&hf, 4096, cudaHostAllocMapped));
  host_flag = hf;
  void* alias;
  CK(cudaHostGetDevicePointer(&alias, hf, 0));
  dev_flag_alias = (CUdeviceptr)alias;
  CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(other, cudaStreamNonBlocking));
  CK(cudaMalloc(scratch, 4096));
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc == 3 && std::string(argv[1]) == "child") return Child(argv[2]);
  const std::string mode = argc > 1 ? argv[1] : "local";
  cudaStream_t s, other;
  int* scratch;
  Setup(&s, &other, &scratch);
  if (mode == "ipc") {
    void* exported;
    CK(cudaMalloc(&exported, 1 << 21));
    cudaIpcMemHandle_t m;
    CK(cudaIpcGetMemHandle(&m, exported));
    FILE* f = std::fopen("/tmp/probe_handle.bin", "wb");
    std::fwrite(&m, sizeof m, 1, f);
    std::fclose(f);
    std::string cmd = std::string(argv[0]) + " child /tmp/probe_handle.bin";
    std::printf("child exit %d\n", std::system(cmd.c_str()));
    return 0;
  }
  void* keep;
  CK(cudaMalloc(&keep, 1 << 20));
  Probe("cudaMalloc_1MiB", s, scratch, [] {
    void* p;
    CK(cudaMalloc(&p, 1 << 20));
  });
  void* p1;
  CK(cudaMalloc(&p1, 1 << 20));
  Probe("cudaFree_1MiB", s, scratch, [&] { CK(cudaFree(p1)); });
  void* p2;
  CK(cudaMalloc(&p2, size_t(1) << 30));
  Probe("cudaFree_1GiB", s, scratch, [&] { CK(cudaFree(p2)); });
  Probe("cudaMallocAsync_FreeAsync", s, scratch, [&] {
    void* p;
    CK(cudaMallocAsync(&p, 1 << 20, other));
    CK(cudaFreeAsync(p, other));
    CK(cudaStreamSynchronize(other));
  });
  void* h;
  CK(cudaHostAlloc(&h, 1 << 20, 0));
  Probe("cudaFreeHost", s, scratch, [&] { CK(cudaFreeHost(h)); });
  Probe("cudaStreamCreate_Destroy", s, scratch, [] {
    cudaStream_t t;
    CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    CK(cudaStreamDestroy(t));
  });
  Probe("cudaEventCreate_Destroy", s, scratch, [] {
    cudaEvent_t e;
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaEventDestroy(e));
  });
  Probe("cudaMemcpyAsync_other_stream_sync", s, scratch, [&] {
    CK(cudaMemcpyAsync(keep, scratch, 4096, cudaMemcpyDeviceToDevice, other));
    CK(cudaStreamSynchronize(other));
  });
  Probe("kernel_other_stream_sync", s, scratch, [&] {
    Touch<<<1, 32, 0, other>>>((int*)keep);
    CK(cudaStreamSynchronize(other));
  });
  Probe("cudaMemcpy_legacy_sync", s, scratch, [&] {
    int v[4];
    CK(cudaMemcpy(v, keep, 16, cudaMemcpyDeviceToHost));
  });
  Probe("cudaIpcGetMemHandle", s, scratch, [&] {
    cudaIpcMemHandle_t m;
    CK(cudaIpcGetMemHandle(&m, keep));
  });
  Probe("graph_capture_instantiate_destroy", s, scratch, [&] {
    cudaStream_t t;
    CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t x;
    CK(cudaStreamBeginCapture(t, cudaStreamCaptureModeThreadLocal));
    Touch<<<1, 32, 0, t>>>((int*)keep);
    CK(cudaStreamEndCapture(t, &g));
    CK(cudaGraphInstantiate(&x, g, 0));
    CK(cudaGraphLaunch(x, t));
    CK(cudaStreamSynchronize(t));
    CK(cudaGraphExecDestroy(x));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(t));
  });
  Probe("cudaStreamDestroy_of_waiting_stream_copy", s, scratch, [&] {
    cudaStream_t t;
    CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    CK(cuStreamWaitValue32((CUstream)t, dev_flag_alias, 1, CU_STREAM_WAIT_VALUE_EQ));
    CK(cudaStreamDestroy(t));
  });
  Probe("cudaDeviceSynchronize", s, scratch, [] { CK(cudaDeviceSynchronize()); });

  // Wake-up latency: stream `s` waits on the flag then writes ack; the host
  // times store -> ack seen, flag in host memory vs in device memory.
  unsigned* hack;
  CK(cudaHostAlloc(&hack, 4096, cudaHostAllocMapped));
  void* ack_alias;
  CK(cudaHostGetDevicePointer(&ack_alias, hack, 0));
  unsigned* dflag;
  CK(cudaMalloc(&dflag, 4096));
  CK(cudaMemset(dflag, 0, 4096));
  for (int where = 0; where < 2; ++where) {
    double total = 0, worst = 0;
    const int n = 200;
    for (int i = 0; i < n; ++i) {
      *host_flag = 0;
      *(volatile unsigned*)hack = 0;
      CUdeviceptr f = where == 0 ? dev_flag_alias : (CUdeviceptr)dflag;
      CK(cuStreamWaitValue32((CUstream)s, f, 1, CU_STREAM_WAIT_VALUE_EQ));
      CK(cuStreamWriteValue32((CUstream)s, f, 0, 0));
      CK(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)ack_alias, 1, 0));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      auto t0 = std::chrono::steady_clock::now();
      if (where == 0)
        *host_flag = 1;
      else
        CK(cuStreamWriteValue32((CUstream)other, f, 1, 0));
      while (*(volatile unsigned*)hack == 0) {
      }
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      total += us;
      if (us > worst) worst = us;
      CK(cudaStreamSynchronize(s));
    }
    std::printf("wake,%s,mean_us=%.2f,max_us=%.2f\n",
                where == 0 ? "host_flag_store" : "device_flag_memop", total / n, worst);
  }
  std::printf("probe done\n");
  return 0;
}
