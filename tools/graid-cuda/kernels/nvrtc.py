"""Compiles a CUDA source file to PTX with NVRTC, loaded from the given libnvrtc, and prints the
PTX. No GPU or toolkit is needed. usage: nvrtc.py LIBNVRTC SOURCE.cu"""
import ctypes
import os
import sys

# compute_80 (Ampere) PTX: the driver compiles it for any newer GPU (Hopper's sm_90 too).
OPTIONS = [b"--gpu-architecture=compute_80", b"--std=c++11"]


def main():
    lib_path, source_path = sys.argv[1:3]
    nvrtc = ctypes.CDLL(lib_path)
    with open(source_path, "rb") as f:
        source = f.read()
    name = os.path.basename(source_path).encode()

    def check(status, what, program=None):
        if status == 0:
            return
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        message = nvrtc.nvrtcGetErrorString(status).decode()
        if program is not None:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(program, log)
            sys.stderr.write(log.value.decode(errors="replace"))
        sys.exit(f"nvrtc: {what}: {message}")

    program = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, name, 0, None, None), "create")
    options = (ctypes.c_char_p * len(OPTIONS))(*OPTIONS)
    check(nvrtc.nvrtcCompileProgram(program, len(OPTIONS), options), "compile", program)
    size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetPTXSize(program, ctypes.byref(size)), "PTX size")
    ptx = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetPTX(program, ptx), "PTX")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    sys.stdout.write(ptx.value.decode())


if __name__ == "__main__":
    main()
