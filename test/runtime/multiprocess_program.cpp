// The program behind the multi-process runtime tests. Fabric re-executes it
// for every rank, so each scenario runs its checks on every rank; a failed
// check exits that rank with code 1 and a message, which makes the whole job
// exit non-zero (Fabric stops the other ranks).
//
//   fabric_multiprocess_program ddp [--devices=N]
//       parameters/buffers identical across ranks after setup and after
//       training; DDP gradients equal single-process gradients on the whole
//       batch; distributed samplers shard, cover and reshuffle; collectives;
//       checkpoints.
//   fabric_multiprocess_program argv OUT_DIR ARGS...
//       (for fabric-run) writes its ARGS, NUL-separated, and its launcher
//       environment to OUT_DIR/rank<R>.argv and OUT_DIR/rank<R>.env.
//   fabric_multiprocess_program state --dir=D [--devices=N]
//       fabric::State round trip and load errors, symlink at the temporary
//       path, rank_zero_first, no_backward_sync, clip_gradients, seeding.
//   fabric_multiprocess_program resume --dir=D --phase=full|first|second
//       trains (full: 8 steps; first: 4 steps then save; second: load then
//       4 steps) and prints every step's loss exactly (hex float).
//   fabric_multiprocess_program save_twice --dir=D
//       saves step 1, then step 2 (the test pauses and kills it in between).
//   fabric_multiprocess_program log --dir=D
//       logs loss/acc/lr on every rank to a CSVLogger (D/csv) and a
//       TensorBoardLogger (D/tb); the test reads the files.
//   fabric_multiprocess_program scaler [--devices=N]
//       "16-mixed" on N ranks: an inf on one rank only makes every rank skip
//       the step and halve the scale; unscaled gradients equal fp32 DDP's.
//   fabric_multiprocess_program fail --devices=N --fail-rank=R --fail-step=S
//       [--fail-how=exit|sigkill|abort|throw] [--marker=...]
//       trains with all-reduce every step; rank R dies at step S (exit code 3
//       or SIGKILL, or an exception that leaves the Fabric's scope and makes
//       main return 4), or with S = -1 exits 0 before launch(). --marker only
//       tags the processes for the test driver.
//   fabric_multiprocess_program by_value [--devices=N]
//       models held by value (struct Net : torch::nn::Module; Net model;):
//       DDP in sync, setup without optimizer, a GAN of two by-value models,
//       an optimizer through unique_ptr<Optimizer>, a train() function
//       called twice (the second model at the first one's address),
//       save/load, no_backward_sync and clip_gradients on a by-value model.
//   fabric_multiprocess_program scalars [--devices=N]
//       fabric.all_reduce of double, float, int, int64_t, long, size_t,
//       unsigned, bool with Sum/Mean/Max/Min.
//   fabric_multiprocess_program load_fresh --dir=D [--devices=N]
//       try { fabric.load(...) } catch (const c10::Error&) { start fresh }
//       for every overload; a checkpoint missing (or corrupted) on some
//       ranks only throws on every rank; training then continues in sync.
//   fabric_multiprocess_program diverge --stop-rank=R --stop-step=K [--steps=N]
//       [--collective=barrier|all_reduce|save --dir=D]
//       trains with DDP; rank R leaves the loop after step K (a stop
//       condition that differs per rank). The job must end within seconds.
//       With --collective, every step ends with that collective, in which
//       the other ranks then wait (instead of the next backward).
//   fabric_multiprocess_program paths --path=P --stop-rank=R --stop-step=K [--steps=N]
//       rank R takes another path at step K (P: scalar_after_loop, barrier,
//       broadcast, skip_backward; see run_paths) and the ranks enter
//       different collectives. The job must end within seconds.
//   fabric_multiprocess_program late_work [--local-work-s=S] [--local-work-rank=R]
//       trains 5 steps in sync, then rank R (0) works alone for S seconds
//       (no collective) while the others have finished: must succeed.
//   fabric_multiprocess_program unsynchronized --setup=0|1
//       backward and fabric.step for a model that was (not) set up.
//   fabric_multiprocess_program sync [--perturb-rank=R --perturb-step=K] [--strategy=S]
//       6 fabric.step()s (FABRIC_CHECK_SYNC is the driver's); rank R
//       changes a parameter outside the Fabric after step K.
//   fabric_multiprocess_program unused [--devices=N] [--strategy=S] [--find-unused=0|1]
//       [--uncaught=1 [--unused-rank=R]]
//       a model whose second head is used on some steps only: without
//       find_unused_parameters the backward that leaves it unused throws,
//       naming head2.weight and head2.bias (zero2: no error); with it the
//       ranks stay in sync, gradients are the ranks' average (head2 used on
//       one rank only, or under no_backward_sync only). --uncaught: the
//       error leaves main (rank R only, or every rank, skips head2).
//   fabric_multiprocess_program phases [--devices=N] [--strategy=S] [--disagree=one]
//       LoRA-style phases: the adapter only (base frozen before setup,
//       optimizer A), everything (optimizer B through setup_optimizer), the
//       base frozen again after setup; gradients are the ranks' average in
//       every step; ranks that change the set differently get an error.
//       --disagree=one: rank 1 alone changes it (the job must end).
//   fabric_multiprocess_program loose [--devices=N] [--strategy=S] [--precision=P]
//       [--bucket-cap-mb=M] [--setup=0|1]
//       an optimizer over parameters that no set-up model owns: a class
//       owning two modules made with new, trained by a generic Trainer whose
//       Adam is set up with fabric.setup_optimizer only (twice: train() makes
//       a new optimizer per call); rank 0's values after setup, gradients
//       the ranks' average, every step equal to a plain Adam step on the
//       averaged gradient (bit for bit with 1 process), ranks identical,
//       "*-true" precisions applied; one of the two modules set up as a
//       model afterwards (its parameters move to it); then one set-up model
//       plus a loose extra tensor in its optimizer. --setup=0: never set up
//       (the warnings must say so).
//   fabric_multiprocess_program banner [--devices=N] [--fail-rank=R]
//       prints a banner before launch() (once, from rank 0) and lines from
//       ranks 0 and 1 after it; rank R fails before launch() on stderr.
//   fabric_multiprocess_program rank_zero_file --dir=D [--devices=N]
//       a logger class of its own opens fabric::rank_zero_ofstream(path) in
//       its constructor, before and after launch(): rank 0's rows only.
//   fabric_multiprocess_program index_sampler [--devices=N]
//       fabric.index_sampler() and fabric.shard() over 1001 samples: the same
//       permutation on every rank, strided shares, padded to equal counts
//       or an exact partition, a new order each epoch; shard() of vectors
//       each rank shuffled with its own seed.
#include "scenarios/scenarios.h"
#include "scenarios/support.h"

#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>

using namespace fabric_test;

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "argv") return run_argv_report(argc, argv);
  const Arguments arguments = parse_arguments(argc, argv);
  if (arguments.scenario == "state") return run_state_checks(arguments);
  if (arguments.scenario == "resume") return run_resume(arguments);
  if (arguments.scenario == "save_twice") return run_save_twice(arguments);
  if (arguments.scenario == "load_step") return run_load_step(arguments);
  if (arguments.scenario == "log") return run_logging(arguments);
  if (arguments.scenario == "scaler") return run_scaler_checks(arguments);
  if (arguments.scenario == "ddp") return run_ddp_checks(arguments);
  if (arguments.scenario == "gradient_read") return run_gradient_read(arguments);
  if (arguments.scenario == "zero") return run_zero_checks(arguments);
  if (arguments.scenario == "fsdp_direct_step") return run_fsdp_direct_step(arguments);
  if (arguments.scenario == "fsdp_divergent_forward") return run_fsdp_divergent_forward(arguments);
  if (arguments.scenario == "unused") return run_unused_checks(arguments);
  if (arguments.scenario == "index_sampler") return run_index_sampler_checks(arguments);
  if (arguments.scenario == "hang") return run_hang(arguments);
  if (arguments.scenario == "by_value") return run_by_value_checks(arguments);
  if (arguments.scenario == "scalars") return run_scalar_checks(arguments);
  if (arguments.scenario == "load_fresh") return run_load_fresh(arguments);
  if (arguments.scenario == "diverge") return run_diverge(arguments);
  if (arguments.scenario == "late_work") return run_late_work(arguments);
  if (arguments.scenario == "paths") return run_paths(arguments);
  if (arguments.scenario == "unsynchronized") return run_unsynchronized(arguments);
  if (arguments.scenario == "sync") return run_sync(arguments);
  if (arguments.scenario == "replaced") return run_replaced(arguments);
  if (arguments.scenario == "phases") return run_phase_checks(arguments);
  if (arguments.scenario == "loose") return run_loose_checks(arguments);
  if (arguments.scenario == "banner") return run_banner(arguments);
  if (arguments.scenario == "rank_zero_file") return run_rank_zero_file(arguments);
  if (arguments.scenario == "fail") {
    try {
      return run_until_failure(arguments);
    } catch (const std::runtime_error& error) {
      std::fprintf(stderr, "test: caught '%s' after the Fabric was destroyed\n", error.what());
      return 4;
    }
  }
  std::cerr << "unknown scenario '" << arguments.scenario << "'\n";
  return 2;
}
