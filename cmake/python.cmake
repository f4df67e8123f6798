# The Python module `distrun` (python/distrun: ctypes over libdistrun_client.so), component distrun.
#
# It goes where Debian's python3 looks for the prefix it is installed to: <prefix>/lib/python3/dist-packages
# for /usr (the Debian package), <prefix>/lib/python3.<minor>/dist-packages for any other prefix
# (/usr/local is on sys.path). Which of the two is known only at install time (cmake --install --prefix,
# CPack's /usr), hence install(CODE). The install also writes distrun/_install.py, naming the library
# installed with the module, which the module loads before asking the dynamic loader.

# Configure time: the interpreter's version for the versioned directory.
if(NOT DEFINED DISTRUN_PYTHON_VERSION AND EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c "import sys; print('%d.%d' % sys.version_info[:2])"
    OUTPUT_VARIABLE _distrun_python_version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
set(DISTRUN_PYTHON_VERSION "${_distrun_python_version}" CACHE STRING
  "python3.<minor> of the module's directory under prefixes other than /usr (empty: lib/python3/dist-packages)")

set(_distrun_python_install [[
  if(CMAKE_INSTALL_PREFIX MATCHES "^/usr/*$" OR "@DISTRUN_PYTHON_VERSION@" STREQUAL "")
    set(_distrun_site "${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages")
  else()
    set(_distrun_site "${CMAKE_INSTALL_PREFIX}/lib/python@DISTRUN_PYTHON_VERSION@/dist-packages")
  endif()
  set(_distrun_mode FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  file(INSTALL "@PROJECT_SOURCE_DIR@/python/distrun" DESTINATION "${_distrun_site}" ${_distrun_mode}
    PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)
  # The library's final path: the prefix without DESTDIR, which CPack and packagers stage into.
  set(_distrun_library "${CMAKE_INSTALL_PREFIX}/@CMAKE_INSTALL_LIBDIR@/@_distrun_soname@")
  string(REPLACE "\\" "\\\\" _distrun_library "${_distrun_library}")
  string(REPLACE "\"" "\\\"" _distrun_library "${_distrun_library}")
  file(WRITE "@PROJECT_BINARY_DIR@/python/_install.py"
    "# Written by cmake --install: the client library installed with this module.\n"
    "LIBRARY = \"${_distrun_library}\"\n")
  file(INSTALL "@PROJECT_BINARY_DIR@/python/_install.py" DESTINATION "${_distrun_site}/distrun" ${_distrun_mode})
]])
set(_distrun_soname "$<TARGET_SONAME_FILE_NAME:distrun_client_shared>")  # install(CODE) expands it
string(CONFIGURE "${_distrun_python_install}" _distrun_python_install @ONLY)
install(CODE "${_distrun_python_install}" COMPONENT distrun)
