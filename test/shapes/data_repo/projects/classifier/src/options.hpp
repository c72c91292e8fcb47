#ifndef OPTIONS_HPP
#define OPTIONS_HPP

#include <cstddef>
#include <cstdint>

// Settings of one run (a command line parser in a bigger project).
struct Options{
    size_t train_size = 2048;
    size_t valid_size = 512;
    size_t test_size = 512;
    int64_t dim = 10;
    int64_t class_num = 4;
    int64_t hid_dim = 64;
    double dropout = 0.1;
    size_t epochs = 10;
    size_t batch_size = 32;
    size_t valid_batch_size = 128;
    double lr = 3e-3;
    unsigned seed = 0;
};

#endif
