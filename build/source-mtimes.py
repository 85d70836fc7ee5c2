"""Gives a fresh clone's files back the modification times of an earlier run, where their
content is the same, so cargo (which judges freshness by mtime) reuses cached outputs for
crates whose sources did not change instead of rebuilding every workspace crate: a clone makes
every file new. Used by .ci/run with the cargo outputs cache.

    source-mtimes.py record FILE    write each tracked file's blob id and mtime to FILE
    source-mtimes.py restore FILE   set the mtime recorded in FILE on every tracked file whose
                                    blob id is still the one recorded

A file whose content changed keeps its new mtime, so what depends on it is rebuilt. The record
names the checkout it was made in, and is only restored in that same place: outputs built in
another directory carry its paths (CARGO_MANIFEST_DIR in the tests), so there everything is
rebuilt."""
import os
import subprocess
import sys


def tracked():
    """(blob id, path) of every tracked file, from the index."""
    out = subprocess.run(["git", "ls-files", "-s", "-z"], check=True, capture_output=True).stdout
    for entry in out.split(b"\0"):
        if entry:
            meta, path = entry.split(b"\t", 1)
            yield meta.split()[1].decode(), os.fsdecode(path)


def main():
    command, manifest = sys.argv[1:3]
    root = os.getcwd()
    if command == "record":
        with open(manifest, "w") as f:
            f.write(f"root\t{root}\n")
            for blob, path in tracked():
                if os.path.isfile(path) and not os.path.islink(path):
                    f.write(f"{blob}\t{os.stat(path).st_mtime_ns}\t{path}\n")
    elif command == "restore":
        old = {}
        with open(manifest) as f:
            first = f.readline().rstrip("\n").split("\t", 1)
            if first != ["root", root]:
                print(f"mtimes recorded in another checkout ({first[-1]}): not restored")
                return
            for line in f:
                blob, mtime, path = line.rstrip("\n").split("\t", 2)
                old[path] = (blob, int(mtime))
        restored = 0
        for blob, path in tracked():
            if path in old and old[path][0] == blob and os.path.isfile(path) and not os.path.islink(path):
                os.utime(path, ns=(old[path][1], old[path][1]))
                restored += 1
        print(f"{restored} unchanged files keep their earlier mtime")
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
