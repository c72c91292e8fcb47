// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG --implicit-check-not='[fabric-cuda-runtime]'
// RUN: FileCheck %s --input-file=%t.cpp
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

extern "C" int cudaSetDevice(int device);
extern "C" int cudaStreamCreate(void** stream);

// Reported, never edited.
// CHECK: {{^  }}cudaSetDevice(1);
// CHECK-NEXT: {{^  }}void* raw = nullptr;
// CHECK-NEXT: {{^  }}cudaStreamCreate(&raw);
// CHECK-NEXT: {{^  }}c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
// MSG: fabric-cuda-runtime.cpp:[[@LINE+9]]:3: warning: raw CUDA device or stream management{{.*}}[fabric-cuda-runtime]
// MSG: fabric-cuda-runtime.cpp:[[@LINE+10]]:3: warning: raw CUDA{{.*}}[fabric-cuda-runtime]
// MSG: fabric-cuda-runtime.cpp:[[@LINE+10]]:3: warning: raw CUDA{{.*}}[fabric-cuda-runtime]
// MSG: fabric-cuda-runtime.cpp:[[@LINE+9]]:32: warning: raw CUDA{{.*}}[fabric-cuda-runtime]
// Not reported: asking about CUDA, and a user type named like a stream.
struct CUDAStream {};
bool cuda_ready() { return torch::cuda::is_available(); }
CUDAStream own_stream;
int main() {
  cudaSetDevice(1);
  void* raw = nullptr;
  cudaStreamCreate(&raw);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  return 0;
}
