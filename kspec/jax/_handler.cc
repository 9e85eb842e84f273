// kspec's XLA FFI handler (kspec/jax): runs a kspec call that was planned when JAX traced it.
//
// Python plans the call (kernel.plan_launch: function handle, grid, block, shared memory, a parameter buffer
// with the scalars written and the pointers left 0, where each pointer goes) and registers that description
// here once (kspec_xla_register); the HLO carries its index and this process's number as two attributes. Per
// call the handler finds the description, copies each step's parameter buffer, writes the buffers XLA gives
// it (inputs, results, the workspace result) into it and launches: cuLaunchKernel on XLA's stream on a GPU,
// the host module's entry on kspec's CPU device. An index from another process (a serialized or exported
// executable) is refused with an error, never launched. Built by kspec's host compiler (kspec/compiler,
// compile_host_library) against jaxlib's xla/ffi/api/c_api.h and kspec's host entry ABI.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "xla/ffi/api/c_api.h"
#include <kspec_host/entry.h>  // kspec_host_launch, kspec_host_fault: the CPU device's entry ABI

#define KSPEC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum Kind { kind_cuda = 0, kind_host = 1 };
enum Role { role_input = 0, role_output = 1, role_workspace = 2 };

const uint32_t blob_magic = 0x4458534bu;  // "KSXD"
const uint32_t blob_version = 1;
const uint32_t max_descriptions = 1u << 20;
const size_t local_params = 4096;  // a step's parameter buffer up to this size lives on the stack
const size_t local_slots = 512;

struct Patch {
  uint32_t offset;
  uint32_t role;
  uint64_t index;
};

struct Step {
  uint64_t function;
  uint32_t grid, block, shared;
  uint32_t params_size, slots, patches;
  unsigned char* params;
  uint32_t* slot_offsets;
  Patch* patch;
};

struct Description {
  int32_t kind, device, inputs, outputs;
  uint64_t workspace;
  int32_t threads, steps_count;
  Step* steps;
  char name[160];
};

typedef int (*cu_launch_t)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned shared, void* stream, void** params, void** extra);
typedef int (*cu_error_string_t)(int error, const char** text);
typedef int (*host_entry_t)(void** params, const kspec_host_launch* launch, kspec_host_fault* fault);

std::atomic<int64_t> process_number{0};
std::atomic<uint32_t> cuda_traits{0};  // XLA_FFI_Handler_Traits of the CUDA handler (kspec_xla_set_cuda_traits)
std::atomic<cu_launch_t> cu_launch{nullptr};
std::atomic<cu_error_string_t> cu_error_string{nullptr};
std::atomic<cu_error_string_t> cu_error_name{nullptr};
std::atomic<Description*> table[max_descriptions];
std::atomic<uint32_t> table_size{0};
std::mutex register_lock;

// -- reading the description blob that Python wrote (kspec/jax/_describe.py) --------------------------------

struct Reader {
  const unsigned char* data;
  uint64_t size, at;
  bool ok;
  template <typename T>
  T take() {
    T value{};
    if (!ok || at + sizeof(T) > size) {
      ok = false;
      return value;
    }
    memcpy(&value, data + at, sizeof(T));
    at += sizeof(T);
    return value;
  }
  const unsigned char* bytes(uint64_t n) {
    if (!ok || at + n > size) {
      ok = false;
      return nullptr;
    }
    const unsigned char* p = data + at;
    at += n;
    return p;
  }
  void align8() { at = (at + 7) & ~uint64_t(7); }
};

void release(Description* d) {
  if (d == nullptr) return;
  if (d->steps != nullptr) {
    for (int32_t i = 0; i < d->steps_count; ++i) {
      free(d->steps[i].params);
      free(d->steps[i].slot_offsets);
      free(d->steps[i].patch);
    }
    free(d->steps);
  }
  free(d);
}

const char* parse(const unsigned char* blob, uint64_t size, Description** out) {
  Reader r{blob, size, 0, true};
  if (r.take<uint32_t>() != blob_magic) return "not a kspec launch description";
  if (r.take<uint32_t>() != blob_version) return "a launch description of another version";
  Description* d = static_cast<Description*>(calloc(1, sizeof(Description)));
  if (d == nullptr) return "out of host memory";
  d->kind = r.take<int32_t>();
  d->device = r.take<int32_t>();
  d->inputs = r.take<int32_t>();
  d->outputs = r.take<int32_t>();
  d->workspace = r.take<uint64_t>();
  d->threads = r.take<int32_t>();
  d->steps_count = r.take<int32_t>();
  uint32_t name_size = r.take<uint32_t>();
  r.take<uint32_t>();
  const unsigned char* name = r.bytes(name_size);
  r.align8();
  if (!r.ok || (d->kind != kind_cuda && d->kind != kind_host) || d->inputs < 0 || d->outputs < 0 || d->steps_count < 0 ||
      d->threads < 1) {
    release(d);
    return "a damaged launch description header";
  }
  size_t keep = name_size < sizeof d->name - 1 ? name_size : sizeof d->name - 1;
  memcpy(d->name, name, keep);
  d->steps = static_cast<Step*>(calloc(d->steps_count ? d->steps_count : 1, sizeof(Step)));
  if (d->steps == nullptr) {
    release(d);
    return "out of host memory";
  }
  for (int32_t i = 0; i < d->steps_count; ++i) {
    Step& s = d->steps[i];
    s.function = r.take<uint64_t>();
    s.grid = r.take<uint32_t>();
    s.block = r.take<uint32_t>();
    s.shared = r.take<uint32_t>();
    s.params_size = r.take<uint32_t>();
    s.slots = r.take<uint32_t>();
    s.patches = r.take<uint32_t>();
    const unsigned char* params = r.bytes(s.params_size);
    r.align8();
    s.params = static_cast<unsigned char*>(malloc(s.params_size ? s.params_size : 1));
    s.slot_offsets = static_cast<uint32_t*>(malloc(sizeof(uint32_t) * (s.slots ? s.slots : 1)));
    s.patch = static_cast<Patch*>(malloc(sizeof(Patch) * (s.patches ? s.patches : 1)));
    if (s.params == nullptr || s.slot_offsets == nullptr || s.patch == nullptr) {
      release(d);
      return "out of host memory";
    }
    if (params != nullptr) memcpy(s.params, params, s.params_size);
    for (uint32_t k = 0; k < s.slots; ++k) s.slot_offsets[k] = r.take<uint32_t>();
    r.align8();
    for (uint32_t k = 0; k < s.patches; ++k) {
      s.patch[k].offset = r.take<uint32_t>();
      s.patch[k].role = r.take<uint32_t>();
      s.patch[k].index = r.take<uint64_t>();
    }
    if (!r.ok || s.function == 0 || s.grid == 0 || s.block == 0) {
      release(d);
      return "a damaged launch step";
    }
    for (uint32_t k = 0; k < s.slots; ++k) {
      if (s.slot_offsets[k] >= s.params_size) {
        release(d);
        return "a parameter slot outside the parameter buffer";
      }
    }
    for (uint32_t k = 0; k < s.patches; ++k) {
      const Patch& p = s.patch[k];
      bool inside = uint64_t(p.offset) + sizeof(void*) <= s.params_size;
      bool known = (p.role == role_input && p.index < uint64_t(d->inputs)) ||
                   (p.role == role_output && p.index < uint64_t(d->outputs)) ||
                   (p.role == role_workspace && p.index < d->workspace);
      if (!inside || !known) {
        release(d);
        return "a pointer outside the parameter buffer or naming no buffer";
      }
    }
  }
  if (r.at != size) {
    release(d);
    return "trailing bytes after the launch description";
  }
  *out = d;
  return nullptr;
}

// -- errors back to XLA -------------------------------------------------------------------------------

XLA_FFI_Error* error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const char* message) {
  XLA_FFI_Error_Create_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = message;
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

bool api_has(const XLA_FFI_Api* api, size_t field_end) { return api->struct_size >= field_end; }

#define KSPEC_API_HAS(api, field) \
  api_has(api, offsetof(XLA_FFI_Api, field) + sizeof(((XLA_FFI_Api*)0)->field))

// Answers XLA's metadata query (at registration): the FFI API these headers describe, and the traits. The CUDA
// handler may be declared command-buffer compatible (KSPEC_JAX_COMMAND_BUFFER=1): its launches depend on the
// attributes and the buffers' addresses only, as XLA requires of a handler it captures into a CUDA graph.
XLA_FFI_Error* metadata(XLA_FFI_CallFrame* frame, int kind) {
  XLA_FFI_Metadata_Extension* ext = reinterpret_cast<XLA_FFI_Metadata_Extension*>(frame->extension_start);
  if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE) {
    return error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "kspec: XLA's FFI metadata structs are too small");
  }
  ext->metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  ext->metadata->api_version.extension_start = nullptr;
  ext->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  ext->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  ext->metadata->traits = kind == kind_cuda ? cuda_traits.load() : 0;
  return nullptr;
}

bool is_metadata(const XLA_FFI_CallFrame* frame) {
  return frame->extension_start != nullptr && frame->extension_start->type == XLA_FFI_Extension_Metadata;
}

bool scalar_attr(const XLA_FFI_Attrs& attrs, const char* name, int64_t* value) {
  size_t length = strlen(name);
  for (int64_t i = 0; i < attrs.size; ++i) {
    const XLA_FFI_ByteSpan* n = attrs.names[i];
    if (n->len == length && memcmp(n->ptr, name, length) == 0) {
      if (attrs.types[i] != XLA_FFI_AttrType_SCALAR) return false;
      const XLA_FFI_Scalar* s = static_cast<const XLA_FFI_Scalar*>(attrs.attrs[i]);
      if (s->dtype != XLA_FFI_DataType_S64) return false;
      memcpy(value, s->value, sizeof *value);
      return true;
    }
  }
  return false;
}

// The description a call frame names, or an error saying why there is none.
const Description* find(XLA_FFI_CallFrame* frame, XLA_FFI_Error** failed) {
  int64_t index = -1, process = 0;
  if (!scalar_attr(frame->attrs, "kspec_launch", &index) || !scalar_attr(frame->attrs, "kspec_process", &process)) {
    *failed = error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "kspec: the custom call has no kspec_launch / kspec_process attributes (int64): it was not made "
                    "by kspec.jax");
    return nullptr;
  }
  if (process != process_number.load(std::memory_order_relaxed) || index < 0 ||
      uint64_t(index) >= table_size.load(std::memory_order_acquire)) {
    *failed = error(frame->api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                    "kspec: this executable holds a kspec launch planned by another process (a serialized, exported "
                    "or cached executable from elsewhere); kspec plans its launches when JAX traces the function, in "
                    "the process that runs it: trace and compile it again here (the launch was not run)");
    return nullptr;
  }
  return table[index].load(std::memory_order_acquire);
}

XLA_FFI_Error* check_buffers(XLA_FFI_CallFrame* frame, const Description* d) {
  int64_t results = d->outputs + (d->workspace ? 1 : 0);
  if (frame->args.size != d->inputs || frame->rets.size != results) {
    char text[512];
    snprintf(text, sizeof text,
             "kspec: kernel '%s' was planned for %d array argument(s) and %lld result(s), XLA passed %lld and %lld",
             d->name, d->inputs, (long long)results, (long long)frame->args.size, (long long)frame->rets.size);
    return error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, text);
  }
  return nullptr;
}

// One step's parameter buffer: the template with the buffers written in, and CUDA's kernelParams into it.
void fill(const Step& s, XLA_FFI_CallFrame* frame, unsigned char* params, void** slots) {
  memcpy(params, s.params, s.params_size);
  char* workspace = nullptr;
  for (uint32_t k = 0; k < s.patches; ++k) {
    const Patch& p = s.patch[k];
    void* pointer;
    if (p.role == role_input) {
      pointer = static_cast<XLA_FFI_Buffer*>(frame->args.args[p.index])->data;
    } else if (p.role == role_output) {
      pointer = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[p.index])->data;
    } else {
      if (workspace == nullptr) workspace = static_cast<char*>(static_cast<XLA_FFI_Buffer*>(frame->rets.rets[frame->rets.size - 1])->data);
      pointer = workspace + p.index;
    }
    memcpy(params + p.offset, &pointer, sizeof pointer);
  }
  for (uint32_t k = 0; k < s.slots; ++k) slots[k] = params + s.slot_offsets[k];
}

struct Scratch {
  alignas(16) unsigned char params[local_params];
  void* slots[local_slots];
  unsigned char* heap_params = nullptr;
  void** heap_slots = nullptr;
  ~Scratch() {
    free(heap_params);
    free(heap_slots);
  }
  bool prepare(const Step& s, unsigned char** p, void*** sl) {
    *p = params;
    *sl = slots;
    if (s.params_size > local_params) {
      free(heap_params);
      heap_params = static_cast<unsigned char*>(malloc(s.params_size));
      if (heap_params == nullptr) return false;
      *p = heap_params;
    }
    if (s.slots > local_slots) {
      free(heap_slots);
      heap_slots = static_cast<void**>(malloc(sizeof(void*) * s.slots));
      if (heap_slots == nullptr) return false;
      *sl = heap_slots;
    }
    return true;
  }
};

XLA_FFI_Error* run(XLA_FFI_CallFrame* frame, int kind) {
  if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE) {
    return error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "kspec: XLA's FFI call frame is too small");
  }
  if (is_metadata(frame)) return metadata(frame, kind);
  XLA_FFI_Error* failed = nullptr;
  const Description* d = find(frame, &failed);
  if (d == nullptr) return failed;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;  // instantiate: the lookup was the check
  if (d->kind != kind) {
    char text[512];
    snprintf(text, sizeof text, "kspec: kernel '%s' was planned for %s, XLA runs it on %s; plan it for the device "
             "the computation runs on (jax.default_device)", d->name, d->kind == kind_cuda ? "a CUDA GPU" : "the CPU",
             kind == kind_cuda ? "a CUDA GPU" : "the CPU");
    return error(frame->api, XLA_FFI_Error_Code_FAILED_PRECONDITION, text);
  }
  if ((failed = check_buffers(frame, d)) != nullptr) return failed;
  void* stream = nullptr;
  cu_launch_t launch = nullptr;
  if (kind == kind_cuda) {
    launch = cu_launch.load(std::memory_order_acquire);
    if (launch == nullptr) {
      return error(frame->api, XLA_FFI_Error_Code_FAILED_PRECONDITION, "kspec: the CUDA launch function was not set");
    }
    if (KSPEC_API_HAS(frame->api, XLA_FFI_DeviceOrdinal_Get)) {
      XLA_FFI_DeviceOrdinal_Get_Args args;
      memset(&args, 0, sizeof args);
      args.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE;
      args.ctx = frame->ctx;
      if (XLA_FFI_Error* e = frame->api->XLA_FFI_DeviceOrdinal_Get(&args)) return e;
      if (args.device_ordinal != d->device) {
        char text[512];
        snprintf(text, sizeof text, "kspec: kernel '%s' was planned and loaded for CUDA device %d, XLA runs it on "
                 "device %d; kspec plans for JAX's default device when it traces (jax.default_device)", d->name,
                 d->device, args.device_ordinal);
        return error(frame->api, XLA_FFI_Error_Code_FAILED_PRECONDITION, text);
      }
    }
    XLA_FFI_Stream_Get_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
    args.ctx = frame->ctx;
    if (XLA_FFI_Error* e = frame->api->XLA_FFI_Stream_Get(&args)) return e;
    stream = args.stream;
  }
  Scratch scratch;
  for (int32_t i = 0; i < d->steps_count; ++i) {
    const Step& s = d->steps[i];
    unsigned char* params;
    void** slots;
    if (!scratch.prepare(s, &params, &slots)) {
      return error(frame->api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "kspec: out of host memory for a launch");
    }
    fill(s, frame, params, slots);
    if (kind == kind_cuda) {
      int result = launch(reinterpret_cast<void*>(s.function), s.grid, 1, 1, s.block, 1, 1, s.shared, stream, slots,
                          nullptr);
      if (result != 0) {
        const char* name = "?";
        const char* text = "unknown error";
        if (cu_error_string_t get = cu_error_name.load()) get(result, &name);
        if (cu_error_string_t get = cu_error_string.load()) get(result, &text);
        char message[768];
        snprintf(message, sizeof message, "kspec: launching kernel '%s' (step %d of %d, grid %u, block %u, %u bytes "
                 "of shared memory) failed: %s (%d): %s", d->name, i + 1, d->steps_count, s.grid, s.block, s.shared,
                 name ? name : "?", result, text ? text : "");
        return error(frame->api, XLA_FFI_Error_Code_INTERNAL, message);
      }
    } else {
      kspec_host_launch host = {{s.grid, 1, 1}, {s.block, 1, 1}, s.shared, d->threads};
      kspec_host_fault fault;
      fault.code = 0;
      fault.message[0] = '\0';
      host_entry_t entry = reinterpret_cast<host_entry_t>(s.function);
      int code = entry(slots, &host, &fault);
      if (code != 0) {
        char message[2300];
        snprintf(message, sizeof message, "kspec: kernel '%s' faulted on the CPU device (code %d): %s", d->name, code,
                 fault.message);
        return error(frame->api, code == 1 ? XLA_FFI_Error_Code_OUT_OF_RANGE : XLA_FFI_Error_Code_INTERNAL, message);
      }
    }
  }
  return nullptr;
}

}  // namespace

// -- what Python calls (ctypes) and registers with XLA ----------------------------------------------------

KSPEC_EXPORT const int kspec_xla_blob_version = blob_version;

KSPEC_EXPORT void kspec_xla_set_process(int64_t number) { process_number.store(number); }

KSPEC_EXPORT void kspec_xla_set_cuda_traits(uint32_t traits) { cuda_traits.store(traits); }

KSPEC_EXPORT void kspec_xla_set_cuda(void* launch, void* error_string, void* error_name) {
  cu_error_string.store(reinterpret_cast<cu_error_string_t>(error_string));
  cu_error_name.store(reinterpret_cast<cu_error_string_t>(error_name));
  cu_launch.store(reinterpret_cast<cu_launch_t>(launch), std::memory_order_release);
}

// Registers a description; its index (>= 0), or -1 with the reason in `why`.
KSPEC_EXPORT int64_t kspec_xla_register(const unsigned char* blob, uint64_t size, char* why, uint64_t why_size) {
  Description* d = nullptr;
  const char* problem = parse(blob, size, &d);
  if (problem == nullptr) {
    std::lock_guard<std::mutex> hold(register_lock);
    uint32_t index = table_size.load(std::memory_order_relaxed);
    if (index < max_descriptions) {
      table[index].store(d, std::memory_order_release);
      table_size.store(index + 1, std::memory_order_release);
      return index;
    }
    release(d);
    problem = "too many distinct kspec launches in this process (over a million)";
  }
  if (why_size) snprintf(why, why_size, "%s", problem);
  return -1;
}

KSPEC_EXPORT XLA_FFI_Error* kspec_xla_cuda(XLA_FFI_CallFrame* frame) { return run(frame, kind_cuda); }

KSPEC_EXPORT XLA_FFI_Error* kspec_xla_host(XLA_FFI_CallFrame* frame) { return run(frame, kind_host); }
