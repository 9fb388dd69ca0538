"""Compares data/text/unicode_text.h with Python's str and re for every code point 0..0x10FFFF:
str.isspace(), re's \\d, str.isalnum(), re's \\w, string.punctuation, Case_Ignorable and Cased
(as str.lower()'s final-sigma rule sees them), and the full lower(), upper() and capitalize()
mappings of each character alone.

    /usr/bin/python3 check_unicode_text.py EVAL_REFERENCE_DUMP

Code points that this Python's Unicode database leaves unassigned (category Cn) are skipped:
utf8proc may know a newer Unicode version (Debian 12: utf8proc 15.0, Python 3.11 14.0), which
assigns some of them. Every assigned code point must agree on everything.
"""
import re
import string
import subprocess
import sys
import unicodedata

SIGMA, FINAL = "\u03a3", "\u03c2"
DIGIT = re.compile(r"\d")
WORD = re.compile(r"\w")


def mapping(cp, s):
    if len(s) == 1 and ord(s) == cp:
        return "="
    return ",".join("%x" % ord(ch) for ch in s)


def python_row(cp):
    c = chr(cp)
    # Σ is final after a cased character (past case-ignorable ones) and before none:
    #   "A" + c + "Σ" is final iff c is case-ignorable or cased;
    #   "AΣ" + c is final iff c is case-ignorable or not cased.
    r1 = ("A" + c + SIGMA).lower()[-1] == FINAL
    r2 = ("A" + SIGMA + c).lower()[1] == FINAL
    ignorable = r1 and r2
    cased = r1 and not ignorable  # only meaningful when not case-ignorable
    flags = [c.isspace(), DIGIT.fullmatch(c) is not None, c.isalnum(), WORD.fullmatch(c) is not None,
             c in string.punctuation, ignorable, cased]
    return ("".join("1" if f else "0" for f in flags), mapping(cp, c.lower()), mapping(cp, c.upper()),
            mapping(cp, c.capitalize()))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    proc = subprocess.Popen([sys.argv[1], "code-points"], stdout=subprocess.PIPE, text=True,
                            encoding="ascii")
    header = proc.stdout.readline().split()
    print("utf8proc Unicode %s, Python %s Unicode %s" % (header[1], sys.version.split()[0],
                                                         unicodedata.unidata_version))
    names = ["isspace", "\\d", "isalnum", "\\w", "string.punctuation", "case-ignorable", "cased",
             "lower", "upper", "capitalize"]
    mismatches = []
    checked = skipped = newer = 0
    expected_cp = 0
    for line in proc.stdout:
        hex_cp, flags, lower, upper, title = line.split()
        cp = int(hex_cp, 16)
        assert cp == expected_cp, "code point %x out of order" % cp
        expected_cp += 1
        if unicodedata.category(chr(cp)) == "Cn":
            skipped += 1
            newer += (flags, lower, upper, title) != ("0000000", "=", "=", "=")
            continue
        checked += 1
        ref = python_row(cp)
        ours = (flags, lower, upper, title)
        if ours == ref:
            continue
        what = []
        for k in range(7):
            if k == 6 and ref[0][5] == "1":
                continue  # cased is not asked of case-ignorable characters
            if flags[k] != ref[0][k]:
                what.append("%s ours %s python %s" % (names[k], flags[k], ref[0][k]))
        for k in range(1, 4):
            if ours[k] != ref[k]:
                what.append("%s ours %s python %s" % (names[6 + k], ours[k], ref[k]))
        if what:
            mismatches.append("U+%04X %s (%s): %s" % (cp, unicodedata.name(chr(cp), "?"),
                                                    unicodedata.category(chr(cp)), "; ".join(what)))
    if proc.wait() != 0:
        sys.exit("eval_reference_dump code-points failed")
    assert expected_cp == 0x110000, "the dump stopped at %x" % expected_cp
    print("%d code points compared, %d unassigned in Python's Unicode skipped (%d of them classed or "
          "mapped by utf8proc's newer tables)" % (checked, skipped, newer))
    if mismatches:
        print("%d DISAGREE:\n%s" % (len(mismatches), "\n".join(mismatches[:200])))
        sys.exit(1)
    print("all agree")


if __name__ == "__main__":
    main()
