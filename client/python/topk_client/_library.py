"""Where the package looks for a shared library it loads with ctypes
(libtopk_c.so for the in-process path, libtopk_client_c.so for the native
RPC core), in this order; the first that applies decides:
  1. an explicit path (an argument);
  2. the environment variable that names it (a path);
  3. this package's own folder (the CMake build puts both there);
  4. lib/ and lib64/ of each CMake install prefix in TOPK_PREFIX, then in
     CMAKE_PREFIX_PATH (both ':'-separated), then /usr/local.
An explicit path (1 or 2) is the only candidate: when it does not load, that
is an error, not a reason to look elsewhere."""

import ctypes
import os
from typing import List, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))


def candidates(name: str, variable: str, library: Optional[str] = None) -> List[str]:
    if library:
        return [library]
    if os.environ.get(variable):
        return [os.environ[variable]]
    paths = [os.path.join(_HERE, name)]
    prefixes = []
    for prefixes_variable in ("TOPK_PREFIX", "CMAKE_PREFIX_PATH"):
        prefixes += [p for p in os.environ.get(prefixes_variable, "").split(":") if p]
    for prefix in prefixes + ["/usr/local"]:
        paths += [os.path.join(prefix, lib, name) for lib in ("lib", "lib64")]
    return paths


def explicit(variable: str, library: Optional[str] = None) -> bool:
    """Whether candidates() names a single path the caller asked for."""
    return bool(library or os.environ.get(variable))


def open_library(path: str, name: str, version_function: str) -> Tuple[ctypes.CDLL, int]:
    """The library at `path` and what its version_function() returns;
    RuntimeError when it does not load or is not `name` (no such function)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise RuntimeError(f"{path}: cannot be loaded ({e})") from e
    if not hasattr(lib, version_function):
        raise RuntimeError(f"{path}: not {name} (it has no {version_function})")
    function = getattr(lib, version_function)
    function.argtypes = []
    function.restype = ctypes.c_int
    return lib, function()
