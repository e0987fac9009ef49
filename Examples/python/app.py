#!/usr/bin/env python3
"""app.py: a Python program embedding ReportHost through libreporthost.so (reporthost/embed.h).

    app.py [--config FILE] [--repository DIR] report|crash|both

Same behaviour as Examples/c-app: `report` raises an "error" report and prints
`report <id>`; `crash` prints `crashing` and dies by a real SIGSEGV; `both` does both.
The library is the one named by REPORTHOST_LIB (a path to libreporthost.so).
Standard library only (ctypes).
"""
import ctypes
import os
import sys

RH_EMBED_OK = 0


def load_library():
    path = os.environ.get("REPORTHOST_LIB")
    if not path:
        sys.exit("app.py: set REPORTHOST_LIB to the path of libreporthost.so "
                 "(e.g. \"$(swift build --show-bin-path)/libreporthost.so\")")
    try:
        lib = ctypes.CDLL(path)
    except OSError as error:
        sys.exit(f"app.py: cannot load {path}: {error}")
    # rh_embed * is opaque: c_void_p. Strings are UTF-8 bytes; None passes NULL.
    lib.rh_embed_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rh_embed_start.restype = ctypes.c_void_p
    lib.rh_embed_set_attribute.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.rh_embed_set_attribute.restype = ctypes.c_int
    lib.rh_embed_report.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_char_p]
    lib.rh_embed_report.restype = ctypes.c_int
    lib.rh_embed_add_attachment.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.rh_embed_add_attachment.restype = ctypes.c_int
    lib.rh_embed_stop.argtypes = [ctypes.c_void_p]
    lib.rh_embed_stop.restype = None
    return lib


def utf8(text):
    return None if text is None else text.encode("utf-8")


def usage():
    print("usage: app.py [--config FILE] [--repository DIR] report|crash|both", file=sys.stderr)
    sys.exit(2)


def parse(argv):
    config = repository = command = None
    i = 0
    while i < len(argv):
        if argv[i] in ("--config", "--repository") and i + 1 < len(argv):
            if argv[i] == "--config":
                config = argv[i + 1]
            else:
                repository = argv[i + 1]
            i += 2
        elif command is None and not argv[i].startswith("-"):
            command = argv[i]
            i += 1
        else:
            usage()
    if command not in ("report", "crash", "both"):
        usage()
    return config, repository, command


def main():
    config, repository, command = parse(sys.argv[1:])
    lib = load_library()
    error = ctypes.create_string_buffer(512)
    host = lib.rh_embed_start(utf8(config), utf8(repository), error, ctypes.sizeof(error))
    if not host:
        print(f"app.py: {error.value.decode('utf-8', 'replace')}", file=sys.stderr)
        return 1

    def fail(what, status):
        print(f"app.py: {what} failed ({status})", file=sys.stderr)
        lib.rh_embed_stop(host)
        return 1

    status = lib.rh_embed_set_attribute(host, b"example", b"python")
    if status != RH_EMBED_OK:
        return fail("rh_embed_set_attribute", status)
    if command in ("report", "both"):
        report_id = ctypes.create_string_buffer(37)
        status = lib.rh_embed_report(host, b"error", b"python error", None, report_id)
        if status != RH_EMBED_OK:
            return fail("rh_embed_report", status)
        print(f"report {report_id.value.decode('ascii')}", flush=True)
    if command in ("crash", "both"):
        print("crashing", flush=True)
        ctypes.string_at(0)  # reads address 0: a real SIGSEGV, recorded by the crash writer
    lib.rh_embed_stop(host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
