# How gRPC, protobuf and abseil are linked. Dynamically, Debian's grpc++ brings about 60 shared libraries
# that cost ≈6 ms before main on every distrun start (--detect, each srun task); from Debian's own static
# archives (position-independent, shipped with the -dev packages) distrun starts in ≈1 ms. See
# bench/RESULTS.md.
option(DISTRUN_STATIC_GRPC "Link gRPC, protobuf and abseil statically" ON)

add_library(distrun_grpc INTERFACE)
if(DISTRUN_STATIC_GRPC)
  set(_archives)
  set(_system)
  # grpc++.pc's static closure (abseil included), then protobuf, which it does not name.
  foreach(_name IN LISTS GRPCPP_STATIC_LIBRARIES ITEMS protobuf)
    if(_name MATCHES "^(pthread|dl|rt|m|c|atomic|systemd)$")
      list(APPEND _system ${_name})
      continue()
    endif()
    find_library(DISTRUN_ARCHIVE_${_name} NAMES lib${_name}.a)
    if(NOT DISTRUN_ARCHIVE_${_name})
      message(FATAL_ERROR "lib${_name}.a not found for a static gRPC link; install the -dev package that "
                          "ships it, or configure with -DDISTRUN_STATIC_GRPC=OFF")
    endif()
    list(APPEND _archives ${DISTRUN_ARCHIVE_${_name}})
  endforeach()
  list(REMOVE_DUPLICATES _archives)
  list(REMOVE_DUPLICATES _system)
  list(TRANSFORM _system PREPEND "-l")
  # Executables take the archives; a shared library or module (the workers' client library, distrun's
  # runtime module) links Debian's shared gRPC, which its users' programs may load as well, unless it is to
  # carry everything it needs (property DISTRUN_SELF_CONTAINED: the wheel's client library, the runtime
  # module where it can). $<TARGET_PROPERTY:...> is the consuming target's.
  set(_shared "$<AND:$<IN_LIST:$<TARGET_PROPERTY:TYPE>,SHARED_LIBRARY;MODULE_LIBRARY>,$<NOT:$<BOOL:$<TARGET_PROPERTY:DISTRUN_SELF_CONTAINED>>>>")
  target_link_libraries(distrun_grpc INTERFACE "$<${_shared}:PkgConfig::GRPCPP>" "$<${_shared}:protobuf::libprotobuf>")
  # One group: abseil's archives refer to each other in cycles.
  foreach(_item -Wl,--start-group ${_archives} -Wl,--end-group ${_system})
    target_link_libraries(distrun_grpc INTERFACE "$<$<NOT:${_shared}>:${_item}>")
  endforeach()
  target_link_libraries(distrun_grpc INTERFACE Threads::Threads)
  target_include_directories(distrun_grpc SYSTEM INTERFACE ${GRPCPP_INCLUDE_DIRS})
else()
  target_link_libraries(distrun_grpc INTERFACE PkgConfig::GRPCPP protobuf::libprotobuf)
endif()
