// The scenarios of fabric_multiprocess_program, one file per component
// (test/runtime/scenarios/<component>.cpp).
#pragma once

namespace fabric_test {

struct Arguments;

// ddp.cpp
int run_gradient_read(const Arguments& arguments);
int run_ddp_checks(const Arguments& arguments);
// launcher.cpp
int run_until_failure(const Arguments& arguments);
int run_argv_report(int argc, char** argv);
int run_banner(const Arguments& arguments);
// checkpoints.cpp
int run_state_checks(const Arguments& arguments);
int run_resume(const Arguments& arguments);
int run_save_twice(const Arguments& arguments);
int run_load_step(const Arguments& arguments);
int run_load_fresh(const Arguments& arguments);
// loggers.cpp
int run_logging(const Arguments& arguments);
int run_rank_zero_file(const Arguments& arguments);
// precision.cpp
int run_scaler_checks(const Arguments& arguments);
// sharded.cpp
int run_zero_checks(const Arguments& arguments);
int run_fsdp_direct_step(const Arguments& arguments);
int run_fsdp_divergent_forward(const Arguments& arguments);
// set_up_models.cpp
int run_unused_checks(const Arguments& arguments);
int run_phase_checks(const Arguments& arguments);
int run_loose_checks(const Arguments& arguments);
int run_by_value_checks(const Arguments& arguments);
int run_replaced(const Arguments& arguments);
// data.cpp
int run_index_sampler_checks(const Arguments& arguments);
// collectives.cpp
int run_scalar_checks(const Arguments& arguments);
// job_monitor.cpp
int run_hang(const Arguments& arguments);
int run_diverge(const Arguments& arguments);
int run_paths(const Arguments& arguments);
int run_late_work(const Arguments& arguments);
int run_unsynchronized(const Arguments& arguments);
int run_sync(const Arguments& arguments);

}  // namespace fabric_test
