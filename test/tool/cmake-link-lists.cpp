// Every target that links LibTorch links the runtime, however the CMake code
// spells it: a link list in a variable (through another variable), a list
// built in a loop and linked in a function of the project, a library linked
// through a generator expression and used by another target, link_libraries.
// fabricize reads what CMake evaluated (its File API codemodel, asked for
// by re-running the configure step on the build) rather than the text; a
// target that does not use LibTorch is left alone.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/cmake-link-lists %t/project
// RUN: cmake -S %t/project -B %t/build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: %fabricize --all -p %t/build -o %t/out 2> %t/err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/err
// RUN: not grep -F "[fabric-cmake]" %t/err
// CHECK: fabricize: CMakeLists.txt: 5 edits (fabric-cmake 5)
// CHECK: fabricize: make_data.cpp: 0 edits
// RUN: FileCheck %s --input-file=%t/out/CMakeLists.txt --check-prefix=CMAKE
// CMAKE: {{^}}find_package(Torch REQUIRED)
// CMAKE-NEXT: {{^}}find_package(Fabric CONFIG REQUIRED)
// CMAKE: {{^}}target_link_libraries(${PROJECT_NAME} ${ALL_LIBS} Fabric::fabric)
// An executable's list: the runtime goes last, no keyword needed.
// CMAKE: {{^}}  target_link_libraries(${name} PRIVATE ${EXPERIMENT_LIBS} Fabric::fabric)
// CMAKE: {{^}}target_link_libraries(models PUBLIC $<BUILD_INTERFACE:${TORCH_LIBRARIES}> Fabric::fabric)
// evaluate gets the runtime through models, as it gets LibTorch.
// CMAKE-NEXT: {{^}}add_executable(evaluate evaluate.cpp)
// CMAKE-NEXT: {{^}}target_link_libraries(evaluate PRIVATE models){{$}}
// CMAKE: {{^}}add_executable(make_data make_data.cpp)
// CMAKE: {{^}}link_libraries(${TORCH_LIBRARIES} Fabric::fabric)
//
// The migrated tree configures and builds (every migrated source finds
// <fabric/fabric.h>), and migrating it again changes nothing.
// RUN: cmake -S %t/out -B %t/out-build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/out-configure.log
// RUN: cmake --build %t/out-build > %t/out-build.log
// RUN: %fabricize --all -p %t/out-build --diff --quiet > %t/again.diff 2> /dev/null; test $? -le 1
// RUN: count 0 < %t/again.diff
//
// CMake's answer is what counts: without the codemodel (no cmake to re-run
// the configure step) the text is read, and the loop-built list is missed;
// said on stderr.
// RUN: rm -rf %t/nocmake-build && cmake -S %t/project -B %t/nocmake-build -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_PREFIX_PATH=%S/Inputs/cmake-packages > %t/configure.log
// RUN: sed -i 's|^CMAKE_COMMAND:INTERNAL=.*|CMAKE_COMMAND:INTERNAL=/nonexistent/cmake|' %t/nocmake-build/CMakeCache.txt
// RUN: env PATH=/nonexistent %fabricize --all -p %t/nocmake-build -o %t/text-out 2> %t/text.err; test $? -le 1
// RUN: FileCheck %s --input-file=%t/text.err --check-prefix=TEXT
// TEXT: fabricize: CMake's codemodel is not available (cmake was not found to re-run the configure step of {{.*}}nocmake-build): Fabric::fabric is linked where the CMake files name LibTorch
// RUN: FileCheck %s --input-file=%t/text-out/CMakeLists.txt --check-prefix=TEXT-CMAKE
// TEXT-CMAKE: {{^}}  target_link_libraries(${name} PRIVATE ${EXPERIMENT_LIBS}){{$}}
