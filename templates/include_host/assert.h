// kspec's CPU device: <assert.h> (and <cassert>, which includes it) for device code. A failing assert
// throws a kspec_host fault (code 2) that the grid runner reports, as the GPU reports a device assert,
// instead of aborting the process. No include guard: like the C header, every inclusion redefines assert.
#include_next <assert.h>

namespace kspec_host {
[[noreturn]] inline void assert_fail(const char* expression, const char* file, unsigned line, const char* function);
}

#undef assert
#ifdef NDEBUG
#define assert(expression) (static_cast<void>(0))
#else
#define assert(expression) \
  (static_cast<bool>(expression) ? static_cast<void>(0) : ::kspec_host::assert_fail(#expression, __FILE__, __LINE__, __func__))
#endif
