# distrun-runtime.so, the runtime module (launcher/job/runtime_module.h): the runtime, gRPC, protobuf and
# abseil, and the verbs that speak to a job, loaded by distrun when it launches a job or runs such a verb.
# Built beside distrun, where distrun looks for it first; installed in libexec/distrun. The wheel has its
# own, from the same function (cmake/wheel.cmake).
#
# Where gRPC links statically (Release builds with the Debian sources scripts/install-deps.sh fetches) the
# module carries everything but glibc, as the wheel's client library does (client_library.cmake): its own
# static libstdc++ and libgcc, every symbol but the entry hidden. Elsewhere (sanitizer builds, no sources)
# it needs Debian's shared gRPC and libstdc++.
set(DISTRUN_RUNTIME_MODULE_MAP ${CMAKE_CURRENT_LIST_DIR}/distrun_runtime_module.map)
function(distrun_runtime_module target)
  if(TARGET distrun_wheel_pic)
    add_library(${target} MODULE ${PROJECT_SOURCE_DIR}/launcher/module/module_entry.cc
      $<TARGET_OBJECTS:distrun_wheel_pic> ${PROJECT_SOURCE_DIR}/runtime/client/wheel/grpc_without_xds.cc)
    target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL
      -Wl,--gc-sections -static-libstdc++ -static-libgcc)
    set_target_properties(${target} PROPERTIES DISTRUN_SELF_CONTAINED ON)
    # libstdc++ first: a C++ symbol the objects above need must come from it, not from whichever archive
    # member of the launcher happens to hold an inline copy and drags its own needs in (yaml-cpp's static
    # archive, which cannot go into a shared object).
    target_link_libraries(${target} PRIVATE -Wl,-Bstatic stdc++ -Wl,-Bdynamic)
  else()
    add_library(${target} MODULE ${PROJECT_SOURCE_DIR}/launcher/module/module_entry.cc)
  endif()
  target_link_libraries(${target} PRIVATE distrun_launcher_runtime distrun_launcher)
  target_link_options(${target} PRIVATE -Wl,--version-script=${DISTRUN_RUNTIME_MODULE_MAP} -Wl,--as-needed)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME distrun-runtime SUFFIX .so
    LINK_DEPENDS ${DISTRUN_RUNTIME_MODULE_MAP})
endfunction()

distrun_runtime_module(distrun_runtime_module)
set_target_properties(distrun_runtime_module PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
add_dependencies(distrun distrun_runtime_module)
