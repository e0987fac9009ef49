/* The entry points of embed.h written in C, so they stay lock-free and signal-safe (the
 * Swift ones in Embed.swift take the registry's lock). */
#pragma once
#include "reporthost/embed.h"

#include <sys/types.h>

/* The calling thread's kernel id (gettid). */
pid_t rh_embed_thread_id(void);

/* Lets `pid` trace this process where Yama restricts ptrace (prctl PR_SET_PTRACER); a no-op
 * elsewhere. Returns 0 or -1. */
int rh_embed_allow_tracer(pid_t pid);

/* The path of the library these functions are in (libreporthost.so), or NULL. */
const char *rh_embed_library_path(void);
