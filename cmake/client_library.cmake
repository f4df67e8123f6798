# The client library that workers link (DESIGN §4), built from the objects of distrun_client_objects:
#
#   libdistrun_client.so.<soversion>  exports only the C API of <distrun/client.h> (distrun_client.map),
#                                     with gRPC, protobuf and distrun's C++ inside or in its DT_NEEDED, so
#                                     any language can dlopen or bind it;
#   libdistrun_client.a               distrun's own objects (the runtime's others ride along; a program's
#                                     linker takes only those the client calls); gRPC and protobuf stay
#                                     link dependencies, declared in distrun.pc (Requires.private) and the
#                                     CMake package.
#
# Both go to lib/ of the build tree, apart from distrun_client, the tests' library, whose file has the same
# name. The Python wheel has a third, self-contained one (cmake/wheel.cmake), which needs what follows.

# The C ABI's version, apart from the project's: raise it when a change to distrun/client.h breaks binaries
# built against the previous one.
set(DISTRUN_CLIENT_SOVERSION 0)

add_library(distrun_client_shared SHARED $<TARGET_OBJECTS:distrun_client_objects>)
target_link_libraries(distrun_client_shared PRIVATE distrun_runtime)
target_include_directories(distrun_client_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set(DISTRUN_CLIENT_MAP ${CMAKE_CURRENT_LIST_DIR}/distrun_client.map)
# --as-needed: distrun_runtime's link interface names libraries (spdlog) that the client's objects never
# use; they must not become DT_NEEDED entries of the installed library.
target_link_options(distrun_client_shared PRIVATE -Wl,--version-script=${DISTRUN_CLIENT_MAP} -Wl,--as-needed)
if(NOT DISTRUN_SANITIZE)
  # Every symbol resolved at link time: the library carries its dependencies. (clang's sanitizers leave
  # their runtime to the executable, so sanitizer builds cannot check this.)
  target_link_options(distrun_client_shared PRIVATE -Wl,--no-undefined)
endif()
set_target_properties(distrun_client_shared PROPERTIES
  OUTPUT_NAME distrun_client EXPORT_NAME client
  VERSION ${PROJECT_VERSION} SOVERSION ${DISTRUN_CLIENT_SOVERSION}
  LINK_DEPENDS ${DISTRUN_CLIENT_MAP}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

list(TRANSFORM DISTRUN_RUNTIME_ROOMS REPLACE "(.+)" "$<TARGET_OBJECTS:\\1>" OUTPUT_VARIABLE _runtime_objects)
add_library(distrun_client_static STATIC $<TARGET_OBJECTS:distrun_client_objects>
  ${_runtime_objects} $<TARGET_OBJECTS:distrun_proto>)
# For an archive these are link-only dependencies of its users. Installed, gRPC comes from its own CMake
# package (distrunConfig.cmake): resolving grpc++.pc's hundred abseil modules takes pkg-config seconds.
target_link_libraries(distrun_client_static PRIVATE
  $<BUILD_INTERFACE:PkgConfig::GRPCPP> $<INSTALL_INTERFACE:gRPC::grpc++>
  protobuf::libprotobuf Threads::Threads)
target_include_directories(distrun_client_static INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(distrun_client_static PROPERTIES
  OUTPUT_NAME distrun_client EXPORT_NAME client_static
  ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

# The self-contained shared objects (the wheel's client library, the runtime modules) need Debian's gRPC,
# protobuf and abseil archives position-independent, and a few of their objects were built for executables
# only (local-exec TLS, or a PC-relative reference to glibc's stderr): those files are compiled again, position-independent, from the Debian source packages of the
# installed versions, which scripts/install-deps.sh fetches into DISTRUN_DEBIAN_SOURCES. The list is what
# the link of Debian 12's archives needs; a link error naming another object means one more file here.
set(DISTRUN_DEBIAN_SOURCES /var/cache/distrun/debian-sources CACHE PATH
  "Debian sources of abseil and protobuf, for self-contained shared objects (scripts/install-deps.sh)")
function(distrun_debian_source out dev_package)
  execute_process(COMMAND dpkg-query -W [=[-f=${source:Package}-${source:Version}]=] ${dev_package}
    OUTPUT_VARIABLE _dir ERROR_QUIET)
  if(_dir AND IS_DIRECTORY ${DISTRUN_DEBIAN_SOURCES}/${_dir})
    set(${out} ${DISTRUN_DEBIAN_SOURCES}/${_dir} PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
    message(STATUS "No Debian source of ${dev_package} (${_dir}) under ${DISTRUN_DEBIAN_SOURCES}: the "
                   "wheel's client library is not built; run scripts/install-deps.sh")
  endif()
endfunction()

if(DISTRUN_STATIC_GRPC AND NOT DISTRUN_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  distrun_debian_source(_absl libabsl-dev)
  distrun_debian_source(_protobuf libprotobuf-dev)
endif()
if(_absl AND _protobuf)
  add_library(distrun_wheel_pic OBJECT
    ${_absl}/absl/base/internal/sysinfo.cc                # local-exec TLS
    ${_absl}/absl/container/internal/raw_hash_set.cc      # local-exec TLS
    ${_absl}/absl/random/internal/pool_urbg.cc            # local-exec TLS
    ${_absl}/absl/strings/internal/cordz_functions.cc     # local-exec TLS
    ${_absl}/absl/strings/internal/str_format/parser.cc   # stderr
    ${_protobuf}/src/google/protobuf/arena.cc             # local-exec TLS
    ${_protobuf}/src/google/protobuf/stubs/common.cc)     # stderr
  # Compiled against the installed headers (the objects they replace were), warnings off: not our code.
  set_target_properties(distrun_wheel_pic PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_STANDARD 17)
  target_compile_options(distrun_wheel_pic PRIVATE -w)
  target_compile_definitions(distrun_wheel_pic PRIVATE NDEBUG)
  # common.cc includes a header protobuf does not install (its own int128.h).
  set_source_files_properties(${_protobuf}/src/google/protobuf/stubs/common.cc PROPERTIES
    INCLUDE_DIRECTORIES ${_protobuf}/src)
endif()
