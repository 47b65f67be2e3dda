#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The architecture the build claims, checked on the sources (docs/architecture.md):
- every folder of src/ is a layer, and a file includes only its own layer and the layers below it;
- kernels/ (device code, part of the backends layer) includes only common/, core/ and kernels/;
- a backend's folder (backends/cpu, cuda, sim) includes no other backend's folder (only the registry knows them all);
- no file outside src/backends/ compares a backend's name ("cpu", "cuda", "sim"): it reads the backend's traits;
- no file below the CLI spells a flag in a string ("--batch"): it names the field and asks flag_of (common/flag_names.hpp),
  which the CLI fills; the run field table (config/run_fields.cpp) is where the run fields' flags are written.
  Another program's option (an engine's server flag that a message tells the user to set) is not ours: a line whose
  comment says "another program's option" may spell it.
Usage: check_layers.py ROOT LAYER [LAYER ...]   (lowest layer first, as CMakeLists.txt's MOEBENCH_LAYERS)"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)
NAME_COMPARE = re.compile(r'(?:[=!]=\s*"(?:cpu|cuda|sim)")|(?:"(?:cpu|cuda|sim)"\s*[=!]=)')
SOURCES = ("*.cpp", "*.hpp", "*.cu", "*.cuh")
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
FLAG = re.compile(r'(?:^|[^A-Za-z0-9_-])(--[a-z][a-z0-9-]*)')
FLAG_TABLE = "src/config/run_fields.cpp"
FOREIGN = "another program's option"


def flag_literals(text):
    """(line, flag) of each flag written in a string literal, comments left out."""
    for number, line in enumerate(text.splitlines(), 1):
        code = line
        # a comment starts at // outside a string literal
        out, in_string, i = "", False, 0
        while i < len(code):
            c = code[i]
            if in_string and c == "\\":
                out += code[i:i + 2]
                i += 2
                continue
            if c == '"':
                in_string = not in_string
            elif not in_string and code.startswith("//", i):
                if FOREIGN in code[i:]:
                    out = ""  # another program's flag, named as such
                break
            out += c
            i += 1
        for m in STRING.finditer(out):
            for f in FLAG.finditer(m.group(1)):
                yield number, f.group(1)


def files(folder):
    for pattern in SOURCES:
        yield from sorted(folder.rglob(pattern))


def main():
    root = pathlib.Path(sys.argv[1])
    layers = sys.argv[2:]
    rank = {name: i for i, name in enumerate(layers)}
    rank["kernels"] = rank["backends"]
    problems = []
    src = root / "src"
    for folder in sorted(p for p in src.iterdir() if p.is_dir()):
        if folder.name not in rank:
            problems.append(f"src/{folder.name}/: not a layer; add it to MOEBENCH_LAYERS in CMakeLists.txt")
    checked = 0
    for path in list(files(src)) + list(files(root / "kernels")):
        rel = path.relative_to(root).as_posix()
        parts = rel.split("/")
        own = parts[0] if parts[0] == "kernels" else (parts[1] if len(parts) > 2 else "cli")  # src/main.cpp: top
        if own not in rank:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        checked += 1
        for m in INCLUDE.finditer(text):
            target, rest = m.group(1), m.group(2)
            if target not in rank:
                continue  # generated headers (build_info.hpp) and third-party ones have no layer folder
            line = text.count("\n", 0, m.start()) + 1
            if own == "kernels" and target not in ("common", "core", "kernels"):
                problems.append(f"{rel}:{line}: kernels/ includes {target}/{rest}: device code depends on common/ and core/ only")
            elif rank[target] > rank[own]:
                problems.append(f"{rel}:{line}: layer {own} includes {target}/{rest}, a layer above it")
            elif own == "backends" and target == "backends" and len(parts) > 3 and "/" in rest:
                if rest.split("/")[0] != parts[2]:
                    problems.append(f"{rel}:{line}: backend {parts[2]} includes backend {rest.split('/')[0]}: only the registry knows them all")
        if own != "cli" and rel != FLAG_TABLE:
            for line, flag in flag_literals(text):
                problems.append(f"{rel}:{line}: spells the flag {flag} below the CLI: name the field and use flag_of")
        if own != "backends" and own != "kernels":
            for m in NAME_COMPARE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: compares a backend's name ({m.group(0).strip()}): use Backend::traits()")
    for p in problems:
        print(p)
    print(f"check_layers: {checked} files, layers {' < '.join(layers)}: "
          + ("OK" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
