// kspec's CPU device: the prelude the host compiler force-includes (-include kspec_host/cuda.h) before every
// module it builds, so that CUDA C++ (kspec's rendered kernels, raw sources, jit output) compiles for the
// host unchanged. Headers named like CUDA's (cuda_fp16.h, cooperative_groups.h, cuda/std/complex...) live
// beside this directory, first on the host include path.
#pragma once

#ifndef KSPEC_HOST
#define KSPEC_HOST 1
#endif

#include <kspec_host/qualifiers.h>
#include <kspec_host/entry.h>
#include <kspec_host/math.h>
#include <kspec_host/runtime.h>
#include <kspec_host/parallel.h>
