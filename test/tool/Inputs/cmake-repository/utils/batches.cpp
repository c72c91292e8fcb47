#include "batches.h"

torch::Tensor synthetic_batch(int64_t rows) { return torch::randn({rows, 4}); }
