#pragma once
#include <torch/torch.h>

torch::Tensor synthetic_batch(int64_t rows);
