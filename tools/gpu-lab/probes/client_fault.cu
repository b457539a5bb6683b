// A client that faults on purpose: it launches a kernel that stores through
// a pointer into memory it never allocated (an illegal address), then reports
// what the runtime says. mps_client_fault.sh runs it beside a serving
// topk-server, with and without MPS, to see what one client's fatal GPU fault
// does to the server and to the server's other clients.
// usage: client_fault [delay_ms]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__global__ void StoreThrough(int* p) { p[threadIdx.x] = 1; }

int main(int argc, char** argv) {
  const int delay_ms = argc > 1 ? std::atoi(argv[1]) : 0;
  int* scratch = nullptr;
  if (cudaMalloc(&scratch, 4096) != cudaSuccess) {
    std::printf("client_fault: no device\n");
    return 2;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  // 1 TiB past a live allocation: unmapped on every GPU we run on.
  StoreThrough<<<1, 32>>>(scratch + (size_t{1} << 38));
  const cudaError_t sync = cudaDeviceSynchronize();
  std::printf("client_fault: kernel -> %s (%s)\n", cudaGetErrorName(sync),
              cudaGetErrorString(sync));
  const cudaError_t after = cudaMalloc(&scratch, 4096);
  std::printf("client_fault: cudaMalloc after -> %s\n", cudaGetErrorName(after));
  return sync == cudaSuccess ? 1 : 0;
}
