# What `cmake --install` puts under the prefix, and the Debian packages CPack makes of it.
#
# Component distrun (package distrun): the program, its man page, bash completion, the examples and the
# shared client library. Component dev (package distrun-dev): the header, the static library, the .so link, the CMake
# package (find_package(distrun) → distrun::client) and distrun.pc.
include(CMakePackageConfigHelpers)

set(DISTRUN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/distrun)

install(TARGETS distrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT distrun)
install(TARGETS distrun-sentinel RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/distrun COMPONENT distrun)
install(TARGETS distrun_runtime_module LIBRARY DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/distrun COMPONENT distrun)
install(FILES man/distrun.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT distrun)
# bash-completion loads completions/<command> when <command> is first completed.
install(FILES completion/distrun.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  RENAME distrun COMPONENT distrun)

install(TARGETS distrun_client_shared EXPORT distrunTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT distrun NAMELINK_COMPONENT dev)
install(TARGETS distrun_client_static EXPORT distrunStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES runtime/include/distrun/client.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/distrun COMPONENT dev)
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT distrun
  PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)

install(EXPORT distrunTargets NAMESPACE distrun:: DESTINATION ${DISTRUN_CMAKE_DIR} COMPONENT dev)
install(EXPORT distrunStaticTargets NAMESPACE distrun:: DESTINATION ${DISTRUN_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/distrunConfig.cmake.in ${PROJECT_BINARY_DIR}/distrunConfig.cmake
  INSTALL_DESTINATION ${DISTRUN_CMAKE_DIR})
# 0.x releases may change the C API between minor versions (DISTRUN_CLIENT_SOVERSION says when the ABI did).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/distrunConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/distrunConfig.cmake ${PROJECT_BINARY_DIR}/distrunConfigVersion.cmake
  DESTINATION ${DISTRUN_CMAKE_DIR} COMPONENT dev)

# distrun.pc finds the prefix from its own place (${pcfiledir}), so the installed tree can be moved.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "distrun.pc needs CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR relative to the prefix")
endif()
file(RELATIVE_PATH DISTRUN_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" DISTRUN_PC_TO_PREFIX "${DISTRUN_PC_TO_PREFIX}")
configure_file(cmake/distrun.pc.in ${PROJECT_BINARY_DIR}/distrun.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/distrun.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- Debian packages: cpack -G DEB (or `cpack --config <build>/CPackConfig.cmake`) ----
set(DISTRUN_PACKAGE_CONTACT "distrun maintainers <maintainers@distrun.invalid>" CACHE STRING
  "Maintainer field of the Debian packages")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME distrun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${DISTRUN_PACKAGE_CONTACT})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL distrun dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Depends computed by dpkg-shlibdeps from the ELF files: the Debian packages of gRPC, protobuf, yaml-cpp,
# spdlog, fmt and libstdc++ that the program and the library were linked against.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(CPACK_DEBIAN_DISTRUN_PACKAGE_NAME distrun)
set(CPACK_DEBIAN_DISTRUN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_DISTRUN_PACKAGE_RECOMMENDS bash-completion)
# A shlibs file for libdistrun_client.so.<soversion>, so that packages built against it depend on distrun.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# The first line of each description is the package's synopsis.
set(CPACK_DEBIAN_DISTRUN_DESCRIPTION
  "launcher and cluster auto-detector for distributed GPU jobs
distrun finds out how a distributed job was launched (Slurm, Open MPI, MPICH and
other PMI launchers, TPU VMs, Kubernetes, torchrun-style variables, LSF, Flux or
a workstation), plans one worker per GPU or per task with the variables PyTorch,
JAX and Keras read, and starts and supervises the workers.

Also the worker client library, libdistrun_client, for the job's key-value
store and barriers.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME distrun-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# distrun.pc's Requires.private and the static library need gRPC's and protobuf's development files.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libgrpc++-dev, libprotobuf-dev")
set(CPACK_COMPONENT_DEV_DEPENDS distrun)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "distrun's worker client library: development files
The C header <distrun/client.h>, the static library, a CMake package
(find_package(distrun), target distrun::client) and a pkg-config file (distrun)
for programs that use the key-value store and barriers of a distrun job.")
include(CPack)
