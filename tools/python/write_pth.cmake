# Copies stepsim.pth into the user's site-packages after the module is linked (CMakeLists.txt):
# cmake -DFROM=stepsim.pth -DTO_DIR=USER_SITE -P write_pth.cmake. A home folder that cannot be
# written (a read-only CI home, another user's build) costs a warning, not the build: PYTHONPATH
# still finds the module.
execute_process(COMMAND ${CMAKE_COMMAND} -E make_directory ${TO_DIR} RESULT_VARIABLE made)
if(made EQUAL 0)
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${FROM} ${TO_DIR}/stepsim.pth RESULT_VARIABLE copied)
endif()
if(NOT made EQUAL 0 OR NOT copied EQUAL 0)
  message(WARNING "could not write ${TO_DIR}/stepsim.pth: import stepsim needs PYTHONPATH=<build>/python")
endif()
