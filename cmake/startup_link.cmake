# How distrun's own executables link the rest of their dependencies. Every srun task and every MPI rank starts
# a distrun, so its start is on every job's critical path: each shared library costs the dynamic loader
# symbol lookups and page faults before main (bench/RESULTS.md, "Where the time goes").
#
#   spdlog and fmt   header-only (Debian ships both forms): no libspdlog.so, no libfmt.so;
#   yaml-cpp         Debian's static archive (position-independent) where installed;
#   libstdc++, libgcc  linked statically into the executables (-static-libstdc++ -static-libgcc), so the
#                    loader resolves no C++ symbol at start.
# The workers' shared client library keeps the system's libstdc++ (see client_library.cmake): it is loaded
# into programs that have their own.
option(DISTRUN_STATIC_STARTUP_LIBS "Link yaml-cpp, libstdc++ and libgcc statically into distrun" ON)

# Debian's spdlog_header_only target still links the shared libfmt: header-only fmt is named here instead.
if(DISTRUN_STATIC_STARTUP_LIBS AND TARGET spdlog::spdlog_header_only AND TARGET fmt::fmt-header-only)
  add_library(distrun_spdlog INTERFACE)
  get_target_property(_spdlog_includes spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(distrun_spdlog SYSTEM INTERFACE ${_spdlog_includes})
  target_compile_definitions(distrun_spdlog INTERFACE SPDLOG_FMT_EXTERNAL)
  target_link_libraries(distrun_spdlog INTERFACE fmt::fmt-header-only Threads::Threads)
  set(DISTRUN_SPDLOG distrun_spdlog)
else()
  set(DISTRUN_SPDLOG spdlog::spdlog)
endif()

set(DISTRUN_YAML yaml-cpp)
if(DISTRUN_STATIC_STARTUP_LIBS AND NOT DISTRUN_SANITIZE)
  find_library(DISTRUN_YAML_ARCHIVE NAMES libyaml-cpp.a)
  if(DISTRUN_YAML_ARCHIVE)
    set(DISTRUN_YAML ${DISTRUN_YAML_ARCHIVE})
  endif()
endif()

# For executables (distrun, distrun-bench, the check worker): C++ runtime inside the binary.
function(distrun_static_startup target)
  if(DISTRUN_STATIC_STARTUP_LIBS AND NOT DISTRUN_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
