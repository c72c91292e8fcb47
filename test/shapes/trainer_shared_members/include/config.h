#ifndef SURFACE_FIT_CONFIG_H
#define SURFACE_FIT_CONFIG_H

#include <string>

namespace surface {

struct Config {
  std::string optimizer = "adam";  // "adam" or "sgd"
  double lr = 5e-3;
  int hidden = 48;
  int epochs = 16;
  long batch_size = 32;
  long train_samples = 1024;
  long test_samples = 256;
};

}  // namespace surface

#endif
