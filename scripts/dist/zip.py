#!/usr/bin/env python3
"""A reproducible zip of DIR/NAME for scripts/dist.sh: entries in name
order, dated at SOURCE_DATE_EPOCH, executables 0755 and the rest 0644.

    zip.py OUT.zip DIR NAME
"""
import os
import sys
import time
import zipfile


def main(out, base, name):
    stamp = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")))[:6]
    stamp = max(stamp, (1980, 1, 1, 0, 0, 0))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for folder, dirs, files in os.walk(os.path.join(base, name)):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(folder, f)
                arc = os.path.relpath(path, base)
                info = zipfile.ZipInfo(arc, stamp)
                info.compress_type = zipfile.ZIP_DEFLATED
                mode = 0o755 if os.access(path, os.X_OK) else 0o644
                info.external_attr = (0o100000 | mode) << 16
                with open(path, "rb") as src:
                    z.writestr(info, src.read(), compresslevel=9)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: zip.py OUT.zip DIR NAME")
    main(*sys.argv[1:])
