"""A reader that crashes the way a native library does (a read through a null pointer,
SIGSEGV), for tests of what a crashed extraction child leaves behind."""

import ctypes


def crash_reading(*args, **kwargs):
    ctypes.string_at(0)  # SIGSEGV: no Python exception, the process dies
