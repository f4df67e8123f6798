// Defaults compiled into the sanitizer builds' programs (DISTRUN_SANITIZE); ASAN_OPTIONS overrides them.
//
// intercept_tls_get_addr=0: the runtime of GCC up to 13 (LLVM up to 16) takes a dynamic TLS block that
// malloc happened to place 16 bytes past a page boundary for one with a pre-2.25 glibc header, and reads
// the words before it as an address and length; LeakSanitizer's tracer then dies at exit ("Tracer caught
// signal 11"), with no leak looked at. distrun's runtime module and gRPC have such blocks. Measured on
// 2026-12-06 with python_module_test's 16 jobs, alternating: a crash in 6 of 38 runs with the interceptor,
// 0 of 38 without. The blocks are heap chunks reachable from the thread's DTV, so leaks are still found.
extern "C" const char* __asan_default_options();
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "intercept_tls_get_addr=0";
}
