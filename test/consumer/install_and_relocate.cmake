# Installs mmops into STAGE_DIR, then moves the tree to FINAL_DIR: a consumer
# that finds it there proves the package has no absolute paths into its build.
foreach(dir STAGE_DIR FINAL_DIR)
  file(REMOVE_RECURSE "${${dir}}")
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${STAGE_DIR}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
file(RENAME "${STAGE_DIR}" "${FINAL_DIR}")
message(STATUS "mmops installed and relocated to ${FINAL_DIR}")
