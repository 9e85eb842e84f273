// kspec's CPU device: libcu++'s namespace cuda::std on the host is the host's std. Qualified lookup of
// cuda::std::X finds ::std::X through the using-directive, so every <cuda/std/...> header only has to include
// its standard counterpart and this file. (Inside namespace cuda, `std::` names cuda::std; code here says ::std.)
#pragma once

namespace std {}
namespace cuda {
namespace std {
using namespace ::std;
}  // namespace std
}  // namespace cuda
