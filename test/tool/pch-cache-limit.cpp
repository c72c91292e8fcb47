// The PCH cache is bounded: past its size limit the least recently used
// PCHs are evicted (a use touches one), never one this run uses; the
// temporary files of interrupted builds are removed once no build holds them
// and they are older than 10 minutes.
// RUN: rm -rf %t && mkdir -p %t/cache
// Three PCHs of other flag sets (10 MiB each), used 3, 2 and 1 hours ago.
// RUN: for age in 3 2 1; do truncate -s 10M %t/cache/torch-00000000000000a$age.pch && echo '#include <torch/torch.h>' > %t/cache/torch-00000000000000a$age.h && touch -d "-$age hours" %t/cache/torch-00000000000000a$age.pch %t/cache/torch-00000000000000a$age.h; done
//
// Room for 30 MiB: this run's PCH (a few MiB) pushes out the oldest only.
// RUN: %fabricize --pch-cache %t/cache --pch-cache-size=30 --verbose --stdout %s -- %flags > %t/first.cpp 2> %t/first.err
// RUN: FileCheck %s --input-file=%t/first.err --check-prefix=EVICT
// EVICT: evicted {{.*}}torch-00000000000000a3.pch ({{[0-9]+}} MiB, least recently used) to keep the PCH cache under 30 MiB
// RUN: ls %t/cache | FileCheck %s --check-prefix=AFTER-FIRST
// AFTER-FIRST-NOT: a3
// AFTER-FIRST: torch-00000000000000a1.h
// AFTER-FIRST-NEXT: torch-00000000000000a1.pch
// AFTER-FIRST-NEXT: torch-00000000000000a2.h
// AFTER-FIRST-NEXT: torch-00000000000000a2.pch
// AFTER-FIRST-NEXT: torch-{{[0-9a-f]+}}.h
// AFTER-FIRST-NEXT: torch-{{[0-9a-f]+}}.pch
// AFTER-FIRST-NOT: torch
//
// A use makes a PCH the most recent: aged by hand to before the others, it
// is touched when used, and the limit then evicts a2 rather than it.
// RUN: for f in %t/cache/torch-*.pch; do case $f in *a1.pch|*a2.pch) ;; *) cp $f %t/ours.pch; touch -d '-5 hours' $f;; esac; done
// RUN: touch %t/before-second
// RUN: %fabricize --pch-cache %t/cache --pch-cache-size=25 --stdout %s -- %flags > %t/second.cpp
// RUN: find %t/cache -name 'torch-*.pch' -newer %t/before-second | wc -l | FileCheck %s --check-prefix=TOUCHED
// TOUCHED: {{^}}1{{$}}
// RUN: ls %t/cache | FileCheck %s --check-prefix=AFTER-SECOND
// AFTER-SECOND-NOT: a2
// AFTER-SECOND: torch-00000000000000a1.pch
// AFTER-SECOND-NEXT: torch-{{[0-9a-f]+}}.h
// AFTER-SECOND-NEXT: torch-{{[0-9a-f]+}}.pch
// AFTER-SECOND-NOT: torch
// RUN: diff %t/first.cpp %t/second.cpp
//
// A limit of 0 (here from the environment) keeps only what the run uses:
// its PCH stays, and it still parses with it (the folder spelt with a
// trailing slash, as a user may).
// RUN: env FABRICIZE_PCH_CACHE_MB=0 %fabricize --pch-cache %t/cache/ --verbose --stdout %s -- %flags > %t/third.cpp 2> %t/third.err
// RUN: ls %t/cache/*.pch | wc -l | FileCheck %s --check-prefix=ONLY-OURS
// ONLY-OURS: {{^}}1{{$}}
// RUN: cmp %t/ours.pch %t/cache/torch-*.pch
// RUN: not grep -e "not accepted" -e "building a LibTorch PCH" %t/third.err
// RUN: diff %t/first.cpp %t/third.cpp
// The option wins over the environment; a bad size is an error.
// RUN: truncate -s 10M %t/cache/torch-00000000000000b1.pch
// RUN: env FABRICIZE_PCH_CACHE_MB=0 %fabricize --pch-cache %t/cache --pch-cache-size=100 --stdout %s -- %flags > /dev/null
// RUN: test -e %t/cache/torch-00000000000000b1.pch
// RUN: not %fabricize --pch-cache %t/cache --pch-cache-size=2G --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=BAD-SIZE
// BAD-SIZE: error: --pch-cache-size takes the PCH cache's size limit in MiB (a whole number, 0 keeps only what a run uses), got '2G'
// RUN: env FABRICIZE_PCH_CACHE_MB=lots not %fabricize --pch-cache %t/cache --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=BAD-ENV
// BAD-ENV: error: FABRICIZE_PCH_CACHE_MB takes the PCH cache's size limit in MiB
// The default is stated where the options are.
// RUN: %fabricize --help | FileCheck %s --check-prefix=HELP
// RUN: %lint --help | FileCheck %s --check-prefix=HELP
// HELP: --pch-cache-size{{.*}}$FABRICIZE_PCH_CACHE_MB, else 2048
//
// Temporary files: an interrupted build's (ours and Clang's, an hour old)
// are removed; a fresh one may be a build in progress and stays; an old one
// that a running build holds (its lock) stays.
// RUN: rm -rf %t/cache && mkdir -p %t/cache
// RUN: touch -d '-1 hour' %t/cache/torch-00000000000000c1.pch.tmp-abc123 %t/cache/torch-00000000000000c1.pch.tmp-abc123-0123abcd.tmp %t/cache/torch-00000000000000c1.h
// RUN: touch %t/cache/torch-00000000000000c2.pch.tmp-def456
// RUN: touch -d '-1 hour' %t/cache/torch-00000000000000c3.pch.tmp-fed654 %t/cache/torch-00000000000000c3.pch.tmp-fed654-4567cdef.tmp %t/cache/torch-00000000000000c3.h
// RUN: flock %t/cache/torch-00000000000000c3.pch.tmp-fed654 %fabricize --pch-cache %t/cache --verbose --stdout %s -- %flags 2> %t/temps.err > /dev/null
// RUN: ls %t/cache | FileCheck %s --check-prefix=TEMPS
// TEMPS-NOT: c1
// TEMPS: torch-00000000000000c2.pch.tmp-def456
// TEMPS-NEXT: torch-00000000000000c3.h
// TEMPS-NEXT: torch-00000000000000c3.pch.tmp-fed654
// TEMPS-NEXT: torch-00000000000000c3.pch.tmp-fed654-4567cdef.tmp
// RUN: FileCheck %s --input-file=%t/temps.err --check-prefix=REMOVED
// REMOVED-DAG: removed {{.*}}torch-00000000000000c1.pch.tmp-abc123 (left by an interrupted PCH build)
// REMOVED-DAG: removed {{.*}}torch-00000000000000c1.pch.tmp-abc123-0123abcd.tmp (left by an interrupted PCH build)
#include <torch/torch.h>

int main() {
  torch::Tensor loss;
  loss.backward();
  return 0;
}
