#!/usr/bin/env python3
"""Turns callgrind profiles of dracode into the linker's symbol ordering (link/hot-symbols.txt).

usage: hot_symbols.py LINK_MAP CALLGRIND_FILE... > link/hot-symbols.txt

LINK_MAP is lld's map of the profiled binary (build.rs writes it when DRACODE_LINK_MAP is set).
Every instruction callgrind saw executed in that binary (`--dump-instr=yes`) is looked up in the
map's `.text.*` input sections; the symbol each section holds is printed once, in address order.
"""
import bisect
import re
import sys

SECTION = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+\S.*:\(\.text\.(\S+)\)\s*$")
NAME = re.compile(r"^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$")


# Prefixes LLVM puts between `.text.` and the symbol (cold, hot, start-up, exit code).
KINDS = ("unlikely.", "hot.", "startup.", "exit.", "split.")


def symbol_of(section):
    """The symbol a `.text.*` input section holds."""
    for kind in KINDS:
        if section.startswith(kind):
            return section[len(kind):]
    return section


def text_sections(map_path):
    """(start, end, symbol) of every per-function text section, sorted by start."""
    sections = []
    for line in open(map_path, encoding="utf-8", errors="replace"):
        m = SECTION.match(line)
        if m and int(m.group(2), 16) > 0:
            start = int(m.group(1), 16)
            sections.append((start, start + int(m.group(2), 16), symbol_of(m.group(3))))
    sections.sort()
    return sections


def executed_addresses(profile, binary_name):
    """Addresses of the instructions callgrind saw run in the binary (`--dump-instr=yes`)."""
    objects, found = {}, set()
    in_binary, last = False, 0
    for line in open(profile, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        m = NAME.match(line)
        if m:
            kind, key, name = m.groups()
            if kind.endswith("ob") and name:
                objects[key] = name.strip()
            if kind == "ob":
                in_binary = objects.get(key, "").endswith(binary_name)
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        position = line.split()[0]
        if position.startswith("0x"):
            last = int(position, 16)
        elif position[0] in "+-":
            last += int(position)
        if in_binary:
            found.add(last)
    return found


def main():
    map_path, profiles = sys.argv[1], sys.argv[2:]
    sections = text_sections(map_path)
    starts = [s[0] for s in sections]
    hot = set()
    for profile in profiles:
        for address in executed_addresses(profile, "/dracode"):
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and sections[i][0] <= address < sections[i][1]:
                hot.add(i)
    for i in sorted(hot):
        print(sections[i][2])
    size = sum(sections[i][1] - sections[i][0] for i in hot)
    print(f"{len(hot)} hot functions, {size / 1e6:.2f} MB of code", file=sys.stderr)


if __name__ == "__main__":
    main()
