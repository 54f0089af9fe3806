# FindArrowWheel: Arrow C++ from the installed `pyarrow` wheel.
#
# Debian has no Arrow packages, so icefloe links against the shared libraries
# that the pyarrow wheel bundles (libarrow*.so.NNNN, libparquet.so.NNNN) and its
# headers. The wheel ships no CMake package config and no unversioned symlinks,
# so this module asks the Python interpreter where pyarrow lives and defines
# imported targets that point straight at the versioned files.
#
# Inputs:   Python_EXECUTABLE (from find_package(Python)), ArrowWheel_VERSION
#           (optional exact version to require, e.g. 26.0.1).
# Outputs:  ArrowWheel_FOUND, ArrowWheel_INCLUDE_DIR, ArrowWheel_LIB_DIR,
#           ArrowWheel_SO_VERSION and the imported targets
#           ArrowWheel::arrow, ::compute, ::acero, ::dataset, ::flight,
#           ::parquet, ::s3.

if(NOT Python_EXECUTABLE)
  message(FATAL_ERROR "FindArrowWheel needs Python_EXECUTABLE (find_package(Python) first)")
endif()

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import pyarrow as pa; print(pa.__version__); print(pa.get_include()); print(pa.get_library_dirs()[0])"
  OUTPUT_VARIABLE _aw_out
  ERROR_VARIABLE _aw_err
  RESULT_VARIABLE _aw_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _aw_rc EQUAL 0)
  message(FATAL_ERROR "pyarrow is not importable by ${Python_EXECUTABLE}: ${_aw_err}")
endif()
string(REPLACE "\n" ";" _aw_lines "${_aw_out}")
list(GET _aw_lines 0 ArrowWheel_PYARROW_VERSION)
list(GET _aw_lines 1 ArrowWheel_INCLUDE_DIR)
list(GET _aw_lines 2 ArrowWheel_LIB_DIR)

if(ArrowWheel_FIND_VERSION AND NOT ArrowWheel_PYARROW_VERSION VERSION_EQUAL ArrowWheel_FIND_VERSION)
  message(FATAL_ERROR "pyarrow ${ArrowWheel_FIND_VERSION} required, found ${ArrowWheel_PYARROW_VERSION}")
endif()

# 26.0.1 -> 2600: Arrow's SONAME is major*100 + minor.
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _aw_m "${ArrowWheel_PYARROW_VERSION}")
math(EXPR ArrowWheel_SO_VERSION "${CMAKE_MATCH_1} * 100 + ${CMAKE_MATCH_2}")

function(_arrow_wheel_target name file)
  set(_path "${ArrowWheel_LIB_DIR}/${file}.so.${ArrowWheel_SO_VERSION}")
  if(NOT EXISTS "${_path}")
    message(FATAL_ERROR "pyarrow wheel has no ${_path}")
  endif()
  add_library(ArrowWheel::${name} SHARED IMPORTED GLOBAL)
  set_target_properties(ArrowWheel::${name} PROPERTIES
    IMPORTED_LOCATION "${_path}"
    IMPORTED_NO_SONAME FALSE
    INTERFACE_INCLUDE_DIRECTORIES "${ArrowWheel_INCLUDE_DIR}")
  foreach(dep IN LISTS ARGN)
    set_property(TARGET ArrowWheel::${name} APPEND PROPERTY INTERFACE_LINK_LIBRARIES ArrowWheel::${dep})
  endforeach()
endfunction()

_arrow_wheel_target(arrow libarrow)
_arrow_wheel_target(compute libarrow_compute arrow)
_arrow_wheel_target(acero libarrow_acero compute)
_arrow_wheel_target(parquet libparquet arrow)
_arrow_wheel_target(dataset libarrow_dataset acero parquet)
_arrow_wheel_target(flight libarrow_flight arrow)
_arrow_wheel_target(s3 libarrow_s3 arrow)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ArrowWheel
  REQUIRED_VARS ArrowWheel_INCLUDE_DIR ArrowWheel_LIB_DIR
  VERSION_VAR ArrowWheel_PYARROW_VERSION)
message(STATUS "Arrow C++ ${ArrowWheel_PYARROW_VERSION} from ${ArrowWheel_LIB_DIR}")
