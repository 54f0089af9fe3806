"""The ctypes mirrors of the native library's structs are checked against the
library's own layout of them when it loads (protocol_abi.h's
icefloe_abi_layout; issue 44): a mirror that drifted from the C header is
refused naming the struct and field, never read at the wrong offsets."""

from __future__ import annotations

import ctypes

import pytest
from piece_util import _Parsed

from icefloe import _native


def test_every_struct_the_library_describes_is_checked():
    assert set(_native.LAYOUT) == {"IcefloeMergeStep", "IcefloePieceHeader", "ArrowArray"}
    assert set(_native.MIRRORS) | {"IcefloePieceHeader"} == set(_native.LAYOUT)  # piece_util's
    for name, mirror in [*_native.MIRRORS.items(), ("IcefloePieceHeader", _Parsed)]:
        _native.check_layout(name, mirror, _native.LAYOUT)  # the real mirrors pass
    # The Arrow C Data Interface's ArrowArray: 5 int64 and 5 pointers.
    assert _native.LAYOUT["ArrowArray"]["size"] == 5 * 8 + 5 * ctypes.sizeof(ctypes.c_void_p)


def _mirror(fields):
    return type("Wrong", (ctypes.Structure,), {"_fields_": fields})


def test_a_field_at_the_wrong_offset_is_refused_by_name():
    fields = list(_native.MergeStep._fields_)
    fields[2] = ("batch", ctypes.c_uint32)  # the header says uint64_t
    with pytest.raises(ImportError, match=r"IcefloeMergeStep\.batch is at offset 8, 4 bytes; "
                                          r"the native library .* at offset 8, 8 bytes"):
        _native.check_layout("IcefloeMergeStep", _mirror(fields), _native.LAYOUT)


def test_a_missing_or_extra_field_is_refused_by_name():
    fields = list(_native.ArrowArray._fields_)
    with pytest.raises(ImportError, match=r"has no field ArrowArray\.private_data"):
        _native.check_layout("ArrowArray", _mirror(fields[:-1]), _native.LAYOUT)
    with pytest.raises(ImportError, match=r"has field ArrowArray\.spare"):
        _native.check_layout("ArrowArray", _mirror([*fields, ("spare", ctypes.c_int64)]),
                             _native.LAYOUT)
    with pytest.raises(ImportError, match="describes no struct Nothing"):
        _native.check_layout("Nothing", _mirror(fields), _native.LAYOUT)


def test_loading_the_library_runs_the_check():
    # A library whose IcefloeMergeStep.batch is 4 bytes (its layout doctored
    # before icefloe._native loads it, in a process of its own): the import
    # is refused, naming the struct and field.
    code = r"""
import ctypes, json
real = ctypes.CDLL
class Doctored:
    def __init__(self, lib):
        self._lib = lib
    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if name != "icefloe_abi_layout":
            return fn
        class Layout:
            restype = argtypes = None
            def __call__(self):
                fn.restype = ctypes.c_char_p
                layout = json.loads(fn())
                layout["IcefloeMergeStep"]["fields"]["batch"][1] = 4
                return json.dumps(layout).encode()
        return self.__dict__.setdefault(name, Layout())
ctypes.CDLL = lambda path, *a, **k: Doctored(real(path, *a, **k)) if "icefloe_client" in str(path) \
    else real(path, *a, **k)
try:
    import icefloe
except ImportError as exc:
    print(exc)
"""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IcefloeMergeStep.batch is at offset 8, 8 bytes; the native library" in out.stdout, \
        out.stdout + out.stderr
    assert "at offset 8, 4 bytes" in out.stdout
