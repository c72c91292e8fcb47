#include "model/net.h"

torch::Tensor NetImpl::forward(torch::Tensor x) { return x; }
