// Stub of LibTorch's c10/cuda/CUDAStream.h for the rule tests: the stream
// type and the pool call fabric-cuda-runtime reports.
#pragma once
#include <cstdint>

namespace c10::cuda {
class CUDAStream {};
CUDAStream getStreamFromPool(bool high_priority = false, int8_t device = -1);
}  // namespace c10::cuda
