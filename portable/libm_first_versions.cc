// libm's functions that glibc 2.29 gave new versions, bound to their first ones for the wheel's shared objects
// (cmake/wheel.cmake: gRPC's and abseil's archives call them; distrun's own code does not, and its programs
// link no libm at all). The 2.29 versions only dropped the SVID error-handling wrapper: results and errno are
// those of the first versions. cmake/wheel.cmake's --wrap sends every call here.

extern "C" {

#define DISTRUN_FIRST_VERSION(name, params, args)                   \
  double distrun_first_##name params;                               \
  __asm__(".symver distrun_first_" #name "," #name "@GLIBC_2.2.5"); \
  double __wrap_##name params { return distrun_first_##name args; }
DISTRUN_FIRST_VERSION(exp, (double x), (x))
DISTRUN_FIRST_VERSION(exp2, (double x), (x))
DISTRUN_FIRST_VERSION(log, (double x), (x))
DISTRUN_FIRST_VERSION(log2, (double x), (x))
DISTRUN_FIRST_VERSION(pow, (double x, double y), (x, y))
#undef DISTRUN_FIRST_VERSION

}  // extern "C"
