#!/usr/bin/env python3
"""Writes src/validate/push_url/tlds.rs: the top-level domains of the ICANN section of the
Public Suffix List (https://publicsuffix.org/, MPL 2.0), as the URL parser spells them
(ASCII; internationalized ones in their xn-- form), sorted for a binary search.

Usage: python3 packaging/gen-tlds.py [/usr/share/publicsuffix/public_suffix_list.dat]
(Debian's `publicsuffix` package installs the list there.)
"""
import os
import sys
import time

src = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/publicsuffix/public_suffix_list.dat"
text = open(src, encoding="utf-8").read()
version = next(
    (l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("// VERSION:")),
    None,
) or "of " + time.strftime("%Y-%m-%d", time.gmtime(os.path.getmtime(src)))
tlds, icann = set(), False
for line in text.splitlines():
    if "===BEGIN ICANN DOMAINS===" in line:
        icann = True
    elif "===END ICANN DOMAINS===" in line:
        icann = False
    line = line.strip()
    if not icann or not line or line.startswith("//"):
        continue
    tld = line.lstrip("!*.").split(".")[-1]
    tlds.add(tld.encode("idna").decode("ascii").lower())
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "validate", "push_url", "tlds.rs")
with open(out, "w") as f:
    f.write("//! The top-level domains a push callback's host name may end in: the ICANN section of the\n")
    f.write(f"//! Public Suffix List (publicsuffix.org, MPL 2.0; version {version}), as the URL parser\n")
    f.write("//! spells them (ASCII, `xn--` for internationalized ones), sorted. Written by\n")
    f.write("//! `packaging/gen-tlds.py`; do not edit by hand.\n\n")
    f.write(f"/// {len(tlds)} top-level domains, sorted.\n")
    f.write("pub const TLDS: &[&str] = &[\n")
    for t in sorted(tlds):
        f.write(f"    \"{t}\",\n")
    f.write("];\n")
print(f"{len(tlds)} TLDs from {src} ({version}) -> {out}")
