# ir_tests.cmake: h3_ir_pass_tests(), the IR-in / IR-out pass tests of a test folder: one
# test <PREFIX>_ir_<name> per <name>.ir of the folder (h3_pass_test compares the output
# with <name>.expected), and optionally one test that runs the memory-plan simulator over
# all of them after the default pipeline.
#   h3_ir_pass_tests(PREFIX <prefix> LABELS <l1;l2> [MEMORY_PLAN <ctest name>])
function(h3_ir_pass_tests)
  cmake_parse_arguments(P "" "PREFIX;MEMORY_PLAN" "LABELS" ${ARGN})
  file(GLOB irs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.ir)
  foreach(ir ${irs})
    get_filename_component(name ${ir} NAME_WE)
    add_test(NAME ${P_PREFIX}_ir_${name} COMMAND h3_pass_test ${ir})
    set_tests_properties(${P_PREFIX}_ir_${name} PROPERTIES LABELS "${P_LABELS}")
  endforeach()
  if(P_MEMORY_PLAN)
    add_test(NAME ${P_MEMORY_PLAN} COMMAND h3_memory_plan_test ${irs})
    set_tests_properties(${P_MEMORY_PLAN} PROPERTIES LABELS "${P_LABELS}")
  endif()
endfunction()
