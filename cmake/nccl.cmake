# The NCCL helper (DESIGN §4): distrun_nccl, a small library with <distrun/nccl.h> that bootstraps an NCCL
# communicator through the job's key-value store, and distrun-check-worker, the program `distrun check`
# runs on every GPU. Both link the CUDA runtime and NCCL, so they are built only where the toolkit is:
#
#   DISTRUN_WITH_NCCL=AUTO  (default) build them when CUDA and NCCL are found
#   DISTRUN_WITH_NCCL=ON    the same, and an error when they are not
#   DISTRUN_WITH_NCCL=OFF   never
#
# CUDA is found by FindCUDAToolkit (CUDAToolkit_ROOT, nvcc on PATH, else /usr/local/cuda); NCCL beside it
# or under NCCL_HOME. distrun itself never links either. Afterwards DISTRUN_WITH_NCCL is a plain ON or OFF
# (cmake/features.cmake reads it for `distrun --version`).

set(DISTRUN_WITH_NCCL AUTO CACHE STRING "Build the NCCL helper and distrun check's worker: AUTO, ON or OFF")
set_property(CACHE DISTRUN_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DISTRUN_WITH_NCCL}" distrun_nccl_mode)
if(NOT distrun_nccl_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DISTRUN_WITH_NCCL=${DISTRUN_WITH_NCCL}: use AUTO, ON or OFF")
endif()

set(distrun_nccl_missing "")
if(NOT distrun_nccl_mode STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    set(distrun_nccl_missing "the CUDA toolkit (set CUDAToolkit_ROOT)")
  else()
    find_path(DISTRUN_NCCL_INCLUDE_DIR nccl.h
      HINTS ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES include)
    find_library(DISTRUN_NCCL_LIBRARY nccl
      HINTS ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES lib lib64)
    if(NOT DISTRUN_NCCL_INCLUDE_DIR OR NOT DISTRUN_NCCL_LIBRARY)
      set(distrun_nccl_missing "NCCL (nccl.h and libnccl; set NCCL_HOME)")
    endif()
  endif()
endif()

if(distrun_nccl_mode STREQUAL "OFF" OR distrun_nccl_missing)
  if(distrun_nccl_mode STREQUAL "ON")
    message(FATAL_ERROR "DISTRUN_WITH_NCCL=ON but ${distrun_nccl_missing} was not found; "
      "install it or configure with -DDISTRUN_WITH_NCCL=AUTO")
  endif()
  if(distrun_nccl_missing)
    message(STATUS "NCCL helper and distrun check: not built (${distrun_nccl_missing} not found)")
  endif()
  set(DISTRUN_WITH_NCCL OFF)
  return()
endif()

message(STATUS "NCCL helper and distrun check: building with CUDA ${CUDAToolkit_VERSION} and ${DISTRUN_NCCL_LIBRARY}")
set(DISTRUN_WITH_NCCL ON)

# Imported, so that nccl.h is a system header and the project's strict warnings stay on its own code.
add_library(distrun_nccl_library UNKNOWN IMPORTED)
set_target_properties(distrun_nccl_library PROPERTIES
  IMPORTED_LOCATION ${DISTRUN_NCCL_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${DISTRUN_NCCL_INCLUDE_DIR})

add_library(distrun_nccl STATIC runtime/nccl/nccl.cc)
target_include_directories(distrun_nccl PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(distrun_nccl PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(distrun_nccl PUBLIC distrun_client distrun_nccl_library CUDA::cudart)
set_target_properties(distrun_nccl PROPERTIES ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

# Beside distrun in the build tree and when installed: `distrun check` looks for it there.
add_executable(distrun-check-worker runtime/nccl/check_worker.cc)
target_link_libraries(distrun-check-worker PRIVATE distrun_nccl distrun_check_report)
if(DISTRUN_SANITIZE)
  target_link_libraries(distrun-check-worker PRIVATE distrun_sanitizer_options)
endif()
# Installed, it still finds NCCL and the CUDA runtime where they were at build time (the toolkit's lib
# directory is rarely in the loader's path).
set_target_properties(distrun-check-worker PROPERTIES RUNTIME_OUTPUT_DIRECTORY $<TARGET_FILE_DIR:distrun>
  INSTALL_RPATH_USE_LINK_PATH ON)

# Component nccl: `cmake --install` installs it; the Debian packages (CPACK_COMPONENTS_ALL) leave it out,
# since it links the CUDA toolkit's libraries, which no Debian package provides to depend on.
install(TARGETS distrun-check-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT nccl)
install(TARGETS distrun_nccl ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT nccl)
install(FILES runtime/include/distrun/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/distrun COMPONENT nccl)
