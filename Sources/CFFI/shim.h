#pragma once
#include <ffi.h>

/* libffi's type descriptors are mutable C globals, which Swift 6 refuses to touch
   directly; these accessors hand out their addresses. */
static inline ffi_type *rh_ffi_type_void(void) { return &ffi_type_void; }
static inline ffi_type *rh_ffi_type_pointer(void) { return &ffi_type_pointer; }
static inline ffi_type *rh_ffi_type_size_t(void) { return sizeof(size_t) == 8 ? &ffi_type_uint64 : &ffi_type_uint32; }
static inline ffi_type *rh_ffi_type_sint32(void) { return &ffi_type_sint32; }
static inline ffi_abi rh_ffi_default_abi(void) { return FFI_DEFAULT_ABI; }
