# The Python wheel's programs and libraries (scripts/make_wheel.py), in wheel/ of the build tree: distrun,
# distrun-sentinel, distrun-runtime.so and libdistrun_client.so.0, from the objects of the build's own, and
# made to run on any glibc from 2.28 on (manylinux_2_28: RHEL/Rocky/Alma 8 and 9, SLES 15, Ubuntu 20.04 and
# later), as PyTorch's wheels do.
#
# The compiler, its C++ runtime and the static gRPC, protobuf and abseil are Debian 12's, as in the build's own
# programs; only the link differs. Linked against Debian 12's glibc (2.36), every program needs GLIBC_2.34
# versions at least (pthread_create, __libc_start_main). Linked against Debian 11's glibc 2.31 instead
# (DISTRUN_WHEEL_SYSROOT: its libc6 and libc6-dev, scripts/bullseye.sh), each symbol binds to the newest
# version 2.31 has. What the precompiled code needs of 2.29-2.36 is given by portable/glibc_symbols.cc, or,
# for libm's functions whose 2.29 versions only dropped a wrapper, bound to their first version
# (portable/libm_first_versions.cc);
# scripts/make_wheel.py then refuses any symbol version above 2.28. The same sources, one set of objects: a
# second toolchain (an older GCC, gRPC 1.30's API) is avoided, and with it a second build of everything.
set(DISTRUN_WHEEL_SYSROOT /var/cache/distrun/bullseye-sysroot CACHE PATH
  "glibc 2.31's libraries and start files, for the wheel's link (scripts/bullseye.sh sysroot)")

if(NOT TARGET distrun_wheel_pic)
  return()  # no self-contained shared objects in this build (client_library.cmake says why)
endif()
if(NOT EXISTS ${DISTRUN_WHEEL_SYSROOT}/.complete)
  message(STATUS "No glibc 2.31 sysroot in ${DISTRUN_WHEEL_SYSROOT}: the wheel's programs are not built; "
                 "run scripts/install-deps.sh (or scripts/bullseye.sh sysroot)")
  return()
endif()

# Bound inside each program and library, never exported.
add_library(distrun_glibc_symbols OBJECT ${PROJECT_SOURCE_DIR}/portable/glibc_symbols.cc)
target_link_libraries(distrun_glibc_symbols PUBLIC distrun_portable)
add_library(distrun_libm_first_versions OBJECT ${PROJECT_SOURCE_DIR}/portable/libm_first_versions.cc)
set_target_properties(distrun_glibc_symbols distrun_libm_first_versions PROPERTIES CXX_VISIBILITY_PRESET hidden)

# The linker's search starts in the sysroot (-B: its start files and libc.so first); gcc's own directory
# still gives the static libstdc++ and libgcc, whose newer glibc needs glibc_symbols.cc meets. -pthread: glibc
# 2.31's threads are libpthread's. Every library a program does not use is left out (--as-needed): each costs
# its start an open and four mappings (bench/RESULTS.md).
set(_distrun_wheel_link -pthread --sysroot=${DISTRUN_WHEEL_SYSROOT} -B${DISTRUN_WHEEL_SYSROOT}/usr/lib/x86_64-linux-gnu/
  -L${DISTRUN_WHEEL_SYSROOT}/lib/x86_64-linux-gnu -Wl,--as-needed)

# MATH for what calls libm's functions of glibc 2.29 (the shared objects: gRPC's and abseil's archives).
function(distrun_wheel_elf target output_name)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "MATH" "" "")
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:distrun_glibc_symbols>)
  target_link_libraries(${target} PRIVATE distrun_portable)
  target_link_options(${target} PRIVATE ${_distrun_wheel_link})
  if(ARG_MATH)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:distrun_libm_first_versions>)
    foreach(_function exp exp2 log log2 pow)
      target_link_options(${target} PRIVATE -Wl,--wrap=${_function})
    endforeach()
  endif()
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${output_name}
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/wheel LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/wheel)
endfunction()

add_executable(distrun_wheel_program ${PROJECT_SOURCE_DIR}/launcher/main.cc)
target_link_libraries(distrun_wheel_program PRIVATE distrun_launcher)
distrun_static_startup(distrun_wheel_program)
distrun_wheel_elf(distrun_wheel_program distrun)

add_executable(distrun_wheel_sentinel ${PROJECT_SOURCE_DIR}/launcher/sentinel_main.cc)
target_link_libraries(distrun_wheel_sentinel PRIVATE distrun_launcher)
distrun_static_startup(distrun_wheel_sentinel)
distrun_wheel_elf(distrun_wheel_sentinel distrun-sentinel)

distrun_runtime_module(distrun_wheel_runtime_module)
distrun_wheel_elf(distrun_wheel_runtime_module distrun-runtime MATH)

# The workers' client library with everything but glibc inside: it needs nothing of a Python environment.
add_library(distrun_client_wheel SHARED $<TARGET_OBJECTS:distrun_client_objects>
  $<TARGET_OBJECTS:distrun_wheel_pic> ${PROJECT_SOURCE_DIR}/runtime/client/wheel/grpc_without_xds.cc)
target_link_libraries(distrun_client_wheel PRIVATE distrun_runtime)
target_link_options(distrun_client_wheel PRIVATE -Wl,--version-script=${DISTRUN_CLIENT_MAP} -Wl,--as-needed
  -Wl,--no-undefined -Wl,--exclude-libs,ALL -Wl,--gc-sections -static-libstdc++ -static-libgcc)
set_target_properties(distrun_client_wheel PROPERTIES
  DISTRUN_SELF_CONTAINED ON
  VERSION ${PROJECT_VERSION} SOVERSION ${DISTRUN_CLIENT_SOVERSION}
  LINK_DEPENDS ${DISTRUN_CLIENT_MAP})
distrun_wheel_elf(distrun_client_wheel distrun_client MATH)
