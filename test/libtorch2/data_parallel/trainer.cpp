#include "trainer.h"

Trainer::Trainer(WaveNet model, torch::optim::Optimizer& optimizer, torch::Device device)
    : model_(std::move(model)), optimizer_(optimizer), device_(device), gpus_(cuda_devices()) {}
