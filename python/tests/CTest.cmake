# ctest `python` (label python): installs this build into a prefix, builds
# the tqc Python package against it in a virtual environment under the build
# directory and runs its pytest suite (python/tests/run-ctest.sh). Included
# from cmake/Install.cmake: the package builds on the installed prefix.
add_test(NAME python
  COMMAND ${TQC_SOURCE_DIR}/python/tests/run-ctest.sh
          ${TQC_BINARY_DIR} ${TQC_SOURCE_DIR}
          ${TQC_BINARY_DIR}/python-test ${CMAKE_CXX_COMPILER}
          ${CMAKE_COMMAND})
set_tests_properties(python PROPERTIES
  LABELS python
  SKIP_RETURN_CODE 77
  TIMEOUT 900)
