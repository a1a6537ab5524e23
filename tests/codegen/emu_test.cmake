# emu_test.cmake: h3_emu_test(), a test program that runs the CUDA C that codegen emits for
# the ops of an IR file on the host: h3_codegen_emu_gen (tests/codegen/emu_gen.c) writes the
# kernels as host C++ over host_emu.h, compiled together with the test's own source; and
# h3_kernel_emu_test() (below) for the hand-written kernels.
#   h3_emu_test(NAME <ctest name> EXE <executable> SOURCE <test.c> IR <ops.ir (relative)>
#               LABELS <l1;l2> [UNUSED_FUNCTIONS])
# UNUSED_FUNCTIONS: the test source includes header helpers it does not call (op_check.h).
function(h3_emu_test)
  cmake_parse_arguments(E "UNUSED_FUNCTIONS" "NAME;EXE;SOURCE;IR" "LABELS" ${ARGN})
  set(cpp ${CMAKE_CURRENT_BINARY_DIR}/${E_EXE}_kernels.cpp)
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND h3_codegen_emu_gen ${CMAKE_CURRENT_SOURCE_DIR}/${E_IR} ${cpp}
    DEPENDS h3_codegen_emu_gen ${CMAKE_CURRENT_SOURCE_DIR}/${E_IR}
    COMMENT "Emitting the kernels of ${E_IR} as host C++")
  add_executable(${E_EXE} ${E_SOURCE} ${cpp})
  # generated code: unused index maps and prelude helpers are expected
  set_source_files_properties(${cpp} PROPERTIES COMPILE_OPTIONS
    "-std=c++17;-O1;-ffp-contract=off;-Wno-unknown-pragmas;-Wno-unused-variable;-Wno-unused-but-set-variable;-Wno-unused-parameter;-Wno-maybe-uninitialized")
  if(E_UNUSED_FUNCTIONS)
    set_source_files_properties(${E_SOURCE} PROPERTIES COMPILE_OPTIONS "-Wno-unused-function")
  endif()
  target_include_directories(${E_EXE} PRIVATE ${CMAKE_SOURCE_DIR}/tests/codegen)
  target_link_libraries(${E_EXE} PRIVATE h3_runtime h3_frontend h3_codegen h3_passes h3_ir
                        Threads::Threads m)
  add_test(NAME ${E_NAME} COMMAND ${E_EXE})
  set_tests_properties(${E_NAME} PROPERTIES LABELS "${E_LABELS}" TIMEOUT 300)
endfunction()

# h3_kernel_emu_test(), a test program that runs hand-written kernels of kernels/ on the host:
# the test source includes them over tests/m31/emu_harness.h (host_emu.h) and compares with
# the CPU backend.
#   h3_kernel_emu_test(NAME <ctest name> SOURCE <test.cpp> LABELS <l1;l2>)
# The executable is <ctest name>_test; the timeout 900 s.
function(h3_kernel_emu_test)
  cmake_parse_arguments(E "" "NAME;SOURCE" "LABELS" ${ARGN})
  add_executable(${E_NAME}_test ${E_SOURCE})
  set_source_files_properties(${E_SOURCE} PROPERTIES COMPILE_OPTIONS
    "-std=c++17;-O1;-ffp-contract=off;-Wno-unknown-pragmas;-Wno-unused-function;-Wno-unused-parameter")
  target_include_directories(${E_NAME}_test PRIVATE ${CMAKE_SOURCE_DIR}/tests/codegen
                             ${CMAKE_SOURCE_DIR}/tests/m31 ${CMAKE_SOURCE_DIR}/tests/common
                             ${CMAKE_SOURCE_DIR}/kernels ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(${E_NAME}_test PRIVATE h3_runtime h3_ir Threads::Threads m)
  add_test(NAME ${E_NAME} COMMAND ${E_NAME}_test)
  set_tests_properties(${E_NAME} PROPERTIES LABELS "${E_LABELS}" TIMEOUT 900)
endfunction()
