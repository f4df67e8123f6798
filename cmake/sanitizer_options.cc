// Defaults compiled into the sanitizer builds' programs (DISTRUN_SANITIZE): the options CI exports to the
// suite (scripts/test.sh), so that every distrun a test starts runs with them, however the test built its
// environment (most give distrun exactly the variables they test, and a test's cluster or worker may start
// distrun again). ASAN_OPTIONS and UBSAN_OPTIONS still override them, option by option.
//
// abort_on_error=1: an error ends the process by SIGABRT, which no test mistakes for one of distrun's own
// exit codes. strict_string_checks=1: the C string functions' arguments must end where they say.
//
// intercept_tls_get_addr=0: the runtime of GCC up to 13 (LLVM up to 16) takes a dynamic TLS block that
// malloc happened to place 16 bytes past a page boundary for one with a pre-2.25 glibc header, and reads
// the words before it as an address and length; LeakSanitizer's tracer then dies at exit ("Tracer caught
// signal 11"), with no leak looked at. distrun's runtime module and gRPC have such blocks. Measured on
// 2026-12-06 with python_module_test's 16 jobs, alternating: a crash in 6 of 38 runs with the interceptor,
// 0 of 38 without. The blocks are heap chunks reachable from the thread's DTV, so leaks are still found.
extern "C" const char* __asan_default_options();
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "detect_leaks=1:abort_on_error=1:strict_string_checks=1:intercept_tls_get_addr=0";
}

// Undefined behaviour already ends the process (-fno-sanitize-recover=undefined); the stack says where.
extern "C" const char* __ubsan_default_options();
extern "C" __attribute__((visibility("default"), used)) const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}
