// The JobMonitor's judgement, in one process: two monitors (rank 0 and rank
// 1 of a 2-rank job) share an in-process c10d::HashStore, and the test plays
// their main threads (entering and leaving collectives by hand). Each rule
// that tells "the ranks are in different collectives" is checked on its own,
// which the multi-process tests (launch_driver.py divergence, paths) cannot
// force: Gloo decides there which rank fails first. A verdict ends the
// process (exit code 1), so those cases are death tests.
#include "job_monitor/job_monitor.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

using fabric::detail::JobMonitor;
using namespace std::chrono_literals;

struct Job {
  c10::intrusive_ptr<c10d::HashStore> store = c10::make_intrusive<c10d::HashStore>();
  std::unique_ptr<JobMonitor> rank0;
  std::unique_ptr<JobMonitor> rank1;
  Job() {
    rank0 = make(0);
    rank1 = make(1);  // last: the terminate handler's monitor
  }
  std::unique_ptr<JobMonitor> make(int rank) {
    JobMonitor::Config config;
    config.rank = rank;
    config.world_size = 2;
    return std::make_unique<JobMonitor>(config, store, store);
  }
};

// `count` collectives entered and left, and `steps` steps, on one monitor.
void run(JobMonitor& monitor, int count, int steps) {
  for (int i = 0; i < count; ++i) monitor.leave(monitor.enter("fabric.all_reduce()"));
  for (int i = 0; i < steps; ++i) monitor.count_step();
}

// Waits for the verdict (the process ends), failing after 15 s.
[[noreturn]] void wait_for_the_end() {
  std::this_thread::sleep_for(15s);
  std::fprintf(stderr, "no verdict within 15 s\n");
  std::exit(7);
}

class JobMonitorDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

const char kPaths[] =
    "fabric: the ranks took different paths through the program and are in different "
    "collectives, which can never match: ";

TEST_F(JobMonitorDeathTest, SameNumberAnotherCall) {
  // Rank 1 entered a barrier where rank 0 runs backward: no timing involved.
  EXPECT_EXIT(
      {
        Job job;
        run(*job.rank0, 2, 3);
        run(*job.rank1, 2, 3);
        job.rank0->enter("fabric.backward()");
        job.rank1->enter(job.rank1->label_for_barrier("x"));
        wait_for_the_end();
      },
      ::testing::ExitedWithCode(1),
      std::string(kPaths) +
          "rank 0 waits in fabric\\.backward\\(\\) \\(collective #3\\) after 3 steps; rank 1 waits "
          "in fabric\\.barrier\\(\"x\"\\) \\(collective #3\\) after 3 steps\\. The likely cause");
}

TEST_F(JobMonitorDeathTest, AnotherNumberConfirmed) {
  // Both in fabric.all_reduce(), but rank 0 has passed one more collective
  // (one that completed with the other rank's data of the same size).
  EXPECT_EXIT(
      {
        Job job;
        run(*job.rank0, 3, 2);
        run(*job.rank1, 2, 2);
        job.rank0->enter("fabric.all_reduce()");
        job.rank1->enter("fabric.all_reduce()");
        wait_for_the_end();
      },
      ::testing::ExitedWithCode(1),
      std::string(kPaths) +
          "rank 0 waits in fabric\\.all_reduce\\(\\) \\(collective #4\\) after 2 steps; rank 1 "
          "waits in fabric\\.all_reduce\\(\\) \\(collective #3\\) after 2 steps\\.");
}

TEST_F(JobMonitorDeathTest, FinishedPastThisCollective) {
  // Rank 1 finished after 5 collectives; rank 0 still waits in its 3rd: the
  // 3rd of rank 1 was another one.
  EXPECT_EXIT(
      {
        Job job;
        run(*job.rank0, 2, 1);
        run(*job.rank1, 5, 4);
        job.rank0->enter("fabric.backward()");
        std::thread([&] { job.rank1->finish(); }).detach();
        wait_for_the_end();
      },
      ::testing::ExitedWithCode(1),
      std::string(kPaths) +
          "rank 0 waits in fabric\\.backward\\(\\) \\(collective #3\\) after 1 step; rank 1 "
          "finished the job \\(its Fabric was destroyed\\) after 4 steps\\.");
}

TEST_F(JobMonitorDeathTest, FinishedBeforeThisCollective) {
  // The case the monitor was first built for: its own message.
  EXPECT_EXIT(
      {
        Job job;
        run(*job.rank0, 6, 6);
        run(*job.rank1, 6, 6);
        job.rank0->enter("fabric.backward()");
        std::thread([&] { job.rank1->finish(); }).detach();
        wait_for_the_end();
      },
      ::testing::ExitedWithCode(1),
      "fabric: the ranks left the training loop at different steps: rank 1 finished the job "
      "\\(its Fabric was destroyed\\) after 6 steps, while rank 0, in its step 7, waits in "
      "fabric\\.backward\\(\\) for it to join");
}

TEST_F(JobMonitorDeathTest, GlooThreadTerminates) {
  // Gloo's own thread throws gloo::EnforceNotMet: the terminate handler
  // hands it to the watchdog, which tells the story instead of an abort.
  EXPECT_EXIT(
      {
        Job job;
        run(*job.rank0, 2, 4);
        run(*job.rank1, 2, 4);
        job.rank0->enter("fabric.backward()");
        job.rank1->enter("fabric.all_reduce()");
        std::thread([] {
          throw std::runtime_error(
              "[enforce fail at ./gloo/transport/tcp/pair.cc:510] op.preamble.length <= "
              "op.nbytes. 8 vs 4");
        }).detach();
        wait_for_the_end();
      },
      ::testing::ExitedWithCode(1),
      std::string(kPaths) +
          "rank 0 waits in fabric\\.backward\\(\\) \\(collective #3\\) after 4 steps; rank 1 is "
          "in fabric\\.all_reduce\\(\\) \\(collective #3\\) after 4 steps, where Gloo received 8 "
          "bytes from another rank for a receive of 4 \\(");
}

TEST_F(JobMonitorDeathTest, OtherTerminationsAreNotTouched) {
  // An exception that is not Gloo's still aborts as C++ says.
  EXPECT_DEATH(
      {
        Job job;
        job.rank1->enter("fabric.all_reduce()");
        std::thread([] { throw std::logic_error("the program's own bug"); }).detach();
        wait_for_the_end();
      },
      "the program's own bug");
}

TEST(JobMonitor, SlowRanksAreNoDivergence) {
  // 3 s in the same collective, and 3 s waiting for a rank that works
  // alone outside collectives: nothing happens (the process goes on).
  Job job;
  run(*job.rank0, 2, 2);
  run(*job.rank1, 2, 2);
  auto outer0 = job.rank0->enter(job.rank0->label_for_barrier("same"));
  auto outer1 = job.rank1->enter(job.rank1->label_for_barrier("same"));
  std::this_thread::sleep_for(3s);
  job.rank0->leave(outer0);
  job.rank1->leave(outer1);
  outer0 = job.rank0->enter("fabric.backward()");
  std::this_thread::sleep_for(3s);
  job.rank0->leave(outer0);
  // The waits were published, and withdrawn when they ended.
  std::this_thread::sleep_for(600ms);
  for (int rank : {0, 1}) {
    const std::string key = "fabric/job/where/" + std::to_string(rank);
    ASSERT_TRUE(job.store->check({key}));
    const auto bytes = job.store->get(key);
    const std::string text(bytes.begin(), bytes.end());
    EXPECT_EQ(text.substr(text.find(' ') + 1, 2), "0 ") << rank << ": " << text;
  }
  EXPECT_FALSE(job.store->check({"fabric/job/stop"}));
}

TEST(JobMonitor, BarrierLabels) {
  Job job;
  EXPECT_STREQ(job.rank0->label_for_barrier("epoch end"), "fabric.barrier(\"epoch end\")");
  const char* first = job.rank0->label_for_barrier("epoch end");
  EXPECT_EQ(first, job.rank0->label_for_barrier("epoch end"));  // kept, same pointer
  const std::string longer(100, 'x');
  EXPECT_EQ(std::string(job.rank0->label_for_barrier(longer)),
            "fabric.barrier(\"" + std::string(60, 'x') + "...\")");
  for (int i = 0; i < 100; ++i) job.rank0->label_for_barrier("step " + std::to_string(i));
  EXPECT_STREQ(job.rank0->label_for_barrier("one more"), "fabric.barrier()");
  EXPECT_EQ(first, job.rank0->label_for_barrier("epoch end"));
}

TEST(JobMonitor, MismatchErrors) {
  EXPECT_TRUE(JobMonitor::is_mismatch_error(
      "[enforce fail at ./gloo/transport/tcp/pair.cc:510] op.preamble.length <= op.nbytes. 8 vs 4"));
  EXPECT_FALSE(JobMonitor::is_mismatch_error("Connection closed by peer [127.0.0.1]:1234"));
  EXPECT_FALSE(JobMonitor::is_mismatch_error("[enforce fail at my_code.cpp:1] x"));
}

} // namespace
