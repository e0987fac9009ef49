/* The entry points of embed.h written in C, so they stay lock-free and signal-safe (the
 * Swift ones in Embed.swift take the registry's lock). */
#pragma once
#include "reporthost/embed.h"
