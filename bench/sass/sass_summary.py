#!/usr/bin/env python3
"""One line per disassembled program: registers (section 0x0003) and counts of the instructions that matter."""
import glob, os, re, struct, sys
folder = sys.argv[1]
for sass in sorted(glob.glob(os.path.join(folder, "*_0001.sass"))):
    obj = os.path.basename(sass).split("_")[0]
    regs = "?"
    for info in glob.glob(os.path.join(folder, obj + "_s*_0003.bin")):
        with open(info, "rb") as f:
            regs = struct.unpack("<I", f.read(4))[0]
    text = open(sass).read()
    counts = {op: len(re.findall(r"\b" + op + r"\b", text)) for op in ["FFMA", "LDS", "LDS.128", "STS", "LDG.E.128", "LDL", "STL", "BAR.SYNC", "BRA"]}
    print(obj, "regs", regs, " ".join(f"{k}={v}" for k, v in counts.items()))
