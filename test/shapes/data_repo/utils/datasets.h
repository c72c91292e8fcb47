#ifndef DATASETS_H
#define DATASETS_H

#include <tuple>
#include <cstdint>
// For External Library
#include <torch/torch.h>


// -----------------------
// namespace{datasets}
// -----------------------
namespace datasets{

    enum class Task{
        Classification,
        Regression
    };

    // ---------------------------------------------------------------------
    // namespace{datasets} -> class{SyntheticTable}
    // A table of samples held in memory. The "problem" (teacher weights) is
    // drawn from problem_seed, the samples from sample_seed, so that a train
    // and a test table of one problem share the same target function.
    // ---------------------------------------------------------------------
    class SyntheticTable{
    private:
        torch::Tensor features;  // {N,D}
        torch::Tensor targets;   // {N} (long) or {N,1} (float)
        Task task;
        int64_t classes;
    public:
        SyntheticTable(){}
        SyntheticTable(const size_t size_, const int64_t dim_, const Task task_, const uint64_t sample_seed_, const uint64_t problem_seed_=0, const int64_t classes_=4);
        void get(const size_t idx, std::tuple<torch::Tensor, torch::Tensor> &data) const;
        size_t size() const;
        int64_t dim() const;
        int64_t num_classes() const;
    };

}



#endif
