#pragma once

#include <cstdint>
#include <string>

struct Config {
  int64_t train_size = 1536;
  int64_t test_size = 512;
  int64_t batch_size = 32;
  int64_t hidden = 32;
  int epochs = 20;
  double learning_rate = 5e-3;
  std::string log_file = "train_log.csv";
  std::string checkpoint = "model.pt";
};
