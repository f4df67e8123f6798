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
# name.

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

add_library(distrun_client_static STATIC $<TARGET_OBJECTS:distrun_client_objects>
  $<TARGET_OBJECTS:distrun_runtime> $<TARGET_OBJECTS:distrun_proto>)
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
