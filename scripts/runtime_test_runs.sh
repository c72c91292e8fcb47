# Sourced by scripts/test.sh and scripts/sanitize.sh: which run of the
# runtime's tests checks what, so that each scenario runs once per LibTorch
# build and not three times (CI time, issue 40's stop: 62 min and over).
#
#   - 1.13 under ASan+UBSan (scripts/sanitize.sh): every runtime, multi-node
#     and runtime reliability scenario but the repeats below;
#   - 1.13 plain (test.sh's ctest): only the repeats below, when test.sh runs
#     everything (a partial run, `test.sh -R ...` or FABRIC_TEST_QUICK=1,
#     runs what it is asked, the sanitizer step being skipped then);
#   - 2.11 plain (scripts/test_libtorch2.sh): all of them.
#
# The repeats: the 3-process variants of 2-process scenarios (the same code
# with one more rank), the same divergence started through torchrun and
# fabric-run, and the fault tests built around a SIGKILL (kill-and-resume on
# 2 ranks and under fsdp, a kill in save, forward or backward, a node killed
# or cut off, local work long after the others): the killed process is not
# checked (it gets no chance to report), the survivors' path is
# rank_failure's and the resume path kill_resume_1proc's and the checkpoint
# tests', which run under the sanitizers; their deadlines cost ~250
# CPU-seconds of waiting at ASan's speed.
runtime_repeats='_3proc$|_torchrun_fabric_run$|^runtime\.(kill_resume_(2proc|fsdp_2proc)|local_work_after_others_finished)$'
runtime_repeats+='|^reliability\.runtime\.kill_|^multinode\.(node_killed|link_cut)$'
runtime_scenarios='^(runtime|multinode|reliability\.runtime)\.'

# sanitized_runtime_tests BUILD_DIR: a ctest -E regex naming, one by one, the
# tests of BUILD_DIR the sanitizer step runs among the runtime scenarios
# (empty when there is none).
sanitized_runtime_tests() {
  local names
  names="$(ctest --test-dir "$1" -N | sed -n 's/^ *Test *#[0-9]*: //p' |
           grep -E "$runtime_scenarios" | grep -vE "$runtime_repeats" || true)"
  [ -n "$names" ] || return 0
  printf '^(%s)$' "$(sed 's/\./\\./g' <<<"$names" | paste -sd '|')"
}
