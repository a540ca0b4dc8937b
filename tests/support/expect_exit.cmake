# cmake -DEXPECTED_EXIT=N -DEXPECTED_OUTPUT=TEXT -P expect_exit.cmake PROGRAM ARGS...
# Runs PROGRAM and fails unless it exits with N and its output contains TEXT (a CTest test of another
# test executable's exit status, which add_test alone can only require to be 0).
set(command "")
set(take OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(take)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" MATCHES "expect_exit\\.cmake$")
    set(take ON)
  endif()
endforeach()
execute_process(COMMAND ${command} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(FIND "${out}" "${EXPECTED_OUTPUT}" found)
if(NOT code STREQUAL "${EXPECTED_EXIT}" OR found EQUAL -1)
  message(FATAL_ERROR "${command}\nexited with ${code} (expected ${EXPECTED_EXIT}), output expected to contain "
                      "\"${EXPECTED_OUTPUT}\":\n${out}")
endif()
message(STATUS "exit ${code} as expected")
