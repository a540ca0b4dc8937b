#!/usr/bin/env python3
"""Disassemble the machine code NVIDIA's Vulkan driver compiled for gerbil's WGSL kernels.

Dawn hands the driver SPIR-V; the driver compiles it to SASS and keeps the result in its shader disk cache.
This script unpacks that cache and runs nvdisasm over each program's code section, so that a kernel's
registers, spills (LDL/STL), loads and inner loops can be read (docs/PERFORMANCE.md shows what that found).

On a machine with an NVIDIA GPU and the CUDA toolkit (nvdisasm; zstd or the `zstandard` module):
    mkdir -p /tmp/nvc
    __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \\
        gerbil bench kernels --kernel linear --shape "M=512"
    python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass [--arch SM90]
Each program becomes objNNNN.raw, its sections objNNNN_sS_TYPE.bin and, for the code section (type 0x0001),
objNNNN_sS_0001.sass. Section type 0x0003 starts with the program's register count (a u32).

The cache layout (GLCache/<hash>/<hash>/*.toc + *.bin; a .toc lists (offset, size) of sections of the .bin,
each a 0x24-byte header and a payload packed raw, zstd or in NVIDIA's run-length code; an unpacked payload
holds an "NVuc" object with a table of typed sections) follows the description in therontarigo/nvcachetools'
format.txt. Driver 580 on an H200 (2026-11-30) wrote zstd payloads.
"""
import argparse
import glob
import os
import shutil
import struct
import subprocess


def run_length_decode(src: bytes) -> bytes:
    """NVIDIA's run-length code: a byte (kind << 6 | count), then a literal run, one repeated byte, 0xFF or 0x00."""
    out = bytearray()
    i = 0
    while i < len(src):
        kind, count = src[i] >> 6, src[i] & 0x3F
        i += 1
        if count == 0:
            raise ValueError("not run-length coded")
        if kind == 0:
            out += src[i:i + count]
            i += count
        elif kind == 1:
            out += bytes([src[i]]) * count
            i += 1
        else:
            out += (b"\xff" if kind == 2 else b"\x00") * count
    return bytes(out)


def zstd_decode(data: bytes, size: int) -> bytes:
    try:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    except ImportError:
        return subprocess.run(["zstd", "-d", "-c"], input=data, capture_output=True, check=True).stdout


def cache_payloads(toc_path: str):
    """The unpacked payload of every section listed in one .toc file."""
    bin_path = toc_path[:-4] + ".bin"
    if not os.path.exists(bin_path):
        raise SystemExit(f"{toc_path}: its data file {bin_path} is missing")
    toc = open(toc_path, "rb").read()
    data = open(bin_path, "rb").read()
    if len(toc) < 0x20 or toc[:4] != b"CDVN" or (len(toc) - 0x20) % 0x18:
        raise SystemExit(f"{toc_path}: not a shader cache index (no CDVN header, or a partial entry)")
    for entry in range((len(toc) - 0x20) // 0x18):
        offset, size = struct.unpack_from("<II", toc, 0x20 + entry * 0x18 + 0x10)
        if size < 4 or offset + 0x24 + size - 4 > len(data):
            raise SystemExit(f"{toc_path}: entry {entry} points past the end of {bin_path} "
                             f"(offset {offset}, size {size}, file {len(data)} bytes)")
        unpacked_size = struct.unpack_from("<I", data, offset + 0x20)[0]
        packed = data[offset + 0x24: offset + 0x24 + size - 4]
        if packed[:4] == b"\x28\xb5\x2f\xfd":
            yield zstd_decode(packed, unpacked_size)
        elif packed[:5] == b"\x05NVuc":
            yield run_length_decode(packed)
        else:
            yield packed


def nvuc_sections(payload: bytes):
    """(type, bytes) of each section of the NVuc object in a payload, if it holds one."""
    start = payload.find(b"NVuc")
    if start < 0:
        return
    obj = payload[start:]
    count = struct.unpack_from("<I", obj, 8)[0] & 0xFFFF
    for s in range(count):
        kind, length, offset = struct.unpack_from("<3I", obj, 32 + 32 * s)
        yield kind, obj[offset: offset + length]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cache", help="the folder given as __GL_SHADER_DISK_CACHE_PATH")
    parser.add_argument("out", help="folder for the unpacked programs and their disassembly")
    parser.add_argument("--arch", default="SM90", help="nvdisasm's --binary architecture (H100 / H200: SM90)")
    args = parser.parse_args()
    nvdisasm = shutil.which("nvdisasm") or next(iter(glob.glob("/usr/local/cuda*/bin/nvdisasm")), None)
    if nvdisasm is None:
        print("nvdisasm not found (CUDA toolkit): the sections are written, not disassembled")
    tocs = sorted(glob.glob(os.path.join(args.cache, "**", "*.toc"), recursive=True))
    if not tocs:
        raise SystemExit(f"{args.cache}: no shader cache index (*.toc) below it; was the program run with "
                         "__GL_SHADER_DISK_CACHE_PATH set to this folder (which must exist)?")
    os.makedirs(args.out, exist_ok=True)
    programs = 0
    for toc in tocs:
        for payload in cache_payloads(toc):
            programs += 1
            name = os.path.join(args.out, f"obj{programs:04d}")
            open(name + ".raw", "wb").write(payload)
            for index, (kind, section) in enumerate(nvuc_sections(payload)):
                path = f"{name}_s{index}_{kind:04x}.bin"
                open(path, "wb").write(section)
                if nvdisasm and kind == 0x0001 and len(section) % 16 == 0:
                    listing = subprocess.run([nvdisasm, "--binary", args.arch, path], capture_output=True, text=True)
                    if listing.returncode != 0:
                        print(f"{path}: nvdisasm failed: {listing.stderr.strip()}")
                    else:
                        open(path[:-4] + ".sass", "w").write(listing.stdout)
    print(f"{programs} programs from {args.cache} unpacked into {args.out}")


if __name__ == "__main__":
    main()
