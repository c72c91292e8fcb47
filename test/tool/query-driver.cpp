// Compile commands as the build ran them: a command whose compiler is GCC
// gets the system include folders GCC searches and Clang does not (asked
// once from `<gcc> -E -x c++ -v -`, added after Clang's own with
// -idirafter), so GCC-built projects parse. Only compilers in the system
// folders are run unless --query-driver allows more; a compiler that does
// not exist or cannot run is never run; a failed query is a warning.
// RUN: rm -rf %t && mkdir -p %t/project && cp %S/Inputs/gcc-project/*.cpp %t/project/
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/omp-build /usr/bin/g++ %t/project/openmp.cpp -std=gnu++17 -fopenmp -isystem %S/../stubs
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/quad-build /usr/bin/g++ %t/project/quadmath.cpp -std=gnu++17 -isystem %S/../stubs
//
// -fopenmp, <omp.h> and `#pragma omp parallel for`: migrated.
// RUN: %fabricize -p %t/project/omp-build --all -o %t/omp-out --verbose 2> %t/omp.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/omp.err --check-prefix=ASKED
// ASKED: fabricize: /usr/bin/g++: its include folders Clang lacks: {{.*}}/gcc/{{.*}}/include
// RUN: FileCheck %s --input-file=%t/omp-out/openmp.cpp --check-prefix=OMP
// OMP: fabric.launch();
// OMP: #pragma omp parallel for
// OMP: fabric.backward(loss);
// omp.h itself is Clang's (libomp-19-dev, which scripts/setup.sh installs):
// GCC's does not parse with Clang, so the project parses without the query
// too, and with it Clang's omp.h still wins over GCC's.
// RUN: %fabricize -p %t/project/omp-build --all --diff --quiet --no-query-driver > %t/omp-off.diff; test $? -le 1
// RUN: FileCheck %s --input-file=%t/omp-off.diff --check-prefix=OMP-DIFF
//
// A header only GCC has: found in GCC's folder, migrated; the same through
// the lint, which shares the compile commands.
// RUN: %fabricize -p %t/project/quad-build --all -o %t/quad-out 2> %t/quad.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/quad-out/quadmath.cpp --check-prefix=QUAD
// QUAD: fabric.backward(loss);
// RUN: %lint -p %t/project/quad-build > %t/lint.txt; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/lint.txt --check-prefix=LINT
// LINT: quadmath.cpp:{{[0-9]+}}:{{[0-9]+}}: warning: {{.*}}[fabric-backward]
//
// Without the query the project does not parse, and the error says why and
// what to do; nothing is written.
// RUN: not %fabricize -p %t/project/quad-build --all -o %t/quad-off --no-query-driver 2> %t/off.err
// RUN: FileCheck %s --input-file=%t/off.err --check-prefix=OFF
// OFF: fatal error: 'quadmath.h' file not found
// OFF: fabricize: error: {{.*}}quadmath.cpp: does not compile (see the errors above); nothing was written
// OFF-NEXT: fabricize: note: /usr/bin/g++ is GCC, and fabricize did not ask it for its own include folders (--no-query-driver): headers only GCC has are not found; run without --no-query-driver
// RUN: test ! -e %t/quad-off
// RUN: %lint -p %t/project/quad-build --no-query-driver > /dev/null 2> %t/lint-off.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/lint-off.err --check-prefix=LINT-OFF
// LINT-OFF: fabricize lint: note: /usr/bin/g++ is GCC, and fabricize did not ask it
//
// Symlinks are resolved to tell GCC (c++ -> g++ -> g++-12 here), and a
// target-prefixed, versioned name is GCC too.
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/cxx-build /usr/bin/c++ %t/project/quadmath.cpp -std=gnu++17 -isystem %S/../stubs
// RUN: %fabricize -p %t/project/cxx-build --all --diff --quiet > /dev/null; test $? -le 1
// RUN: %python -c "import os; print(os.path.basename(os.path.realpath('/usr/bin/g++')))" > %t/gxx-name
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/versioned-build /usr/bin/x86_64-linux-gnu-$(cat %t/gxx-name | sed 's/^x86_64-linux-gnu-//') %t/project/quadmath.cpp -std=gnu++17 -isystem %S/../stubs
// RUN: %fabricize -p %t/project/versioned-build --all --diff --quiet > /dev/null; test $? -le 1
//
// A GCC outside the system folders is not run unless --query-driver allows
// it; the error names the option.
// RUN: mkdir -p %t/bin && printf '#!/bin/sh\ntouch %t/ran\nexec /usr/bin/g++ "$@"\n' > %t/bin/g++ && chmod +x %t/bin/g++
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/own-build %t/bin/g++ %t/project/quadmath.cpp -std=gnu++17 -isystem %S/../stubs
// RUN: not %fabricize -p %t/project/own-build --all --diff 2> %t/untrusted.err
// RUN: test ! -e %t/ran
// RUN: FileCheck %s --input-file=%t/untrusted.err --check-prefix=UNTRUSTED
// UNTRUSTED: fabricize: note: {{.*}}/bin/g++ is GCC outside the folders fabricize runs compilers from (/usr/bin, /bin, /usr/local/bin, /usr/lib/ccache), so it was not asked for its own include folders: allow it with --query-driver='{{.*}}/bin/g++' (a comma list of globs)
// RUN: %fabricize -p %t/project/own-build --all --diff --quiet --query-driver='/nowhere/*,%t/bin/*' > %t/allowed.diff; test $? -le 1
// RUN: test -e %t/ran
// RUN: FileCheck %s --input-file=%t/allowed.diff --check-prefix=QUAD
//
// A compiler that does not exist, or is not executable, is never run: a
// warning, and the parse goes on without its folders.
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/gone-build /usr/bin/g++-999 %t/project/openmp.cpp -std=gnu++17 -fopenmp -isystem %S/../stubs
// RUN: %fabricize -p %t/project/gone-build --all --diff --quiet > /dev/null 2> %t/gone.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/gone.err --check-prefix=GONE
// GONE: fabricize: warning: /usr/bin/g++-999 (the compiler of the compile command for {{.*}}openmp.cpp) does not exist or is not executable: its include folders are unknown; fix the compile command (re-run CMake) so it names the compiler that built it
// RUN: printf '#!/bin/sh\ntouch %t/ran-noexec\n' > %t/bin/noexec-g++
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/noexec-build %t/bin/noexec-g++ %t/project/openmp.cpp -std=gnu++17 -fopenmp -isystem %S/../stubs
// RUN: %fabricize -p %t/project/noexec-build --all --diff --quiet --query-driver='%t/bin/*' > /dev/null 2> %t/noexec.err; test $? -le 1
// RUN: test ! -e %t/ran-noexec
// RUN: FileCheck %s --input-file=%t/noexec.err --check-prefix=NOEXEC
// NOEXEC: warning: {{.*}}/bin/noexec-g++ (the compiler of the compile command for {{.*}}) does not exist or is not executable
//
// A query that fails is a warning, not fatal.
// RUN: printf '#!/bin/sh\necho "g++: fatal error: no licence" >&2\nexit 3\n' > %t/bin/broken-g++ && chmod +x %t/bin/broken-g++
// RUN: %python %S/Inputs/gcc-project/database.py %t/project/broken-build %t/bin/broken-g++ %t/project/openmp.cpp -std=gnu++17 -fopenmp -isystem %S/../stubs
// RUN: %fabricize -p %t/project/broken-build --all --diff --quiet --query-driver='%t/bin/*' > %t/broken.diff 2> %t/broken.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/broken.err --check-prefix=BROKEN
// BROKEN: fabricize: warning: asking {{.*}}/bin/broken-g++ for its include folders failed (it exited with 3: g++: fatal error: no licence): parsing without them
// RUN: FileCheck %s --input-file=%t/broken.diff --check-prefix=OMP-DIFF
// OMP-DIFF: +  fabric.backward(loss);
//
// A bad glob is a usage error.
// RUN: not %fabricize -p %t/project/quad-build --all --diff --query-driver='[' 2>&1 | FileCheck %s --check-prefix=BAD-GLOB
// BAD-GLOB: error: --query-driver: '[' is not a glob
