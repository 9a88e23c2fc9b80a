"""The mechanical fixes of the Chinese catalogues (issue 40), and the checks that find what they
fix: the tests import the checks, and a catalogue changed later is fixed again by running

    python tests/docs/zh_fixes.py locale/zh_CN/LC_MESSAGES/tutorials/4_generation/14_positions.po

Three fixes, in this order, on every translation (msgstr) of the catalogues named:

1. **Terms.** One Chinese term per concept (:data:`TERMS`: 「瓦片」 is 「块」, 「本软件包」 is
   「本包」, ...), as ``locale/zh_CN/glossary.csv`` fixes them.
2. **Glosses.** An English gloss in brackets (「注意力（attention）」) stays only at the first use
   of its concept in the course, in the pages' order (:func:`glosses`, :func:`gloss_concept`);
   the course's other catalogues are read, never written, to know what an earlier page glosses.
3. **Spaces.** reST needs a space between a Chinese character and inline markup, and a plain
   space shows: 「整门课程 分为」. Where the markup shows Chinese on the side of that space, the
   space becomes reST's escaped space ``\\ `` (which shows nothing), or goes where a
   punctuation mark already delimits the markup (:func:`fix_spaces`). A space beside markup that
   shows code or Latin text stays, as Chinese typesetting keeps one there.

What is not mechanical (a sentence that reads as translated English) is not done here.
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CATALOGUES = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"

#: A Chinese character as typography counts it: an ideograph, CJK punctuation (、。「」) or a
#: full-width form (，：（）).
CHINESE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff01-\uff60]")

#: One Chinese term per concept: (a term that drifted, the glossary's term). Applied in order.
#: (「暂退法」 became the glossary's "dropout" by hand: Latin after Chinese needs a space.)
TERMS = (
    ("瓦片图", "分块图"),
    ("瓦片", "块"),
    ("键/值头", "键值头"),
    ("本软件包", "本包"),
    ("注意力汇聚点", "注意力锚点"),
    ("汇聚点", "锚点"),
)

#: Inline markup, with the text it shows in a group: emphasis, strong, a link, a
#: cross-reference (its title, or none: the title of the page or section, which the Chinese
#: build shows in Chinese), and the roles whose text is code or Latin (never Chinese).
_MARKUP = re.compile(
    r"(?P<code>``.+?``|:(?:math|func|class|meth|mod|attr|data|obj|cite:p|cite:t|download"
    r"|course|pages|assumes):`[^`]*`)"
    r"|:(?:ref|doc):`(?P<ref>[^`<]*?)(?:\s*<[^>]+>)?`"
    r"|`(?P<link>[^`<]+?)\s*<[^>]+>`__?"
    r"|\*\*(?P<strong>[^*]+)\*\*"
    r"|(?<![\w*\\])\*(?P<em>[^*\s][^*]*)\*"
)
#: Cross-references without a title whose target's title starts with Latin text.
_LATIN_TITLES = {"api"}


def _shown(match: re.Match) -> str | None:
    """The text a piece of markup shows, as far as its first and last characters go: None for
    code and Latin roles."""
    if match["code"] is not None:
        return None
    if match["ref"] is not None:
        title = match["ref"].strip()
        target = re.search(r"<([^>]+)>`$", match.group(0))
        if title and target:
            return title
        return None if match.group(0).split("`")[1] in _LATIN_TITLES else "中"
    for group in ("link", "strong", "em"):
        if match[group] is not None:
            return match[group]
    return None


#: The punctuation that delimits inline markup for reST on each side (docutils' inline markup
#: recognition rules): before its start, and after its end.
_BEFORE = ("Ps", "Pi", "Pf", "Pd", "Po")
_AFTER = ("Pe", "Pi", "Pf", "Pd", "Po")


def fix_spaces(text: str) -> str:
    """``text`` with no plain space between a Chinese character and markup that shows Chinese
    on that side: 「课程 :ref:`分为 <x>`」 is 「课程\\ :ref:`分为 <x>`」; 「， **键**」 loses it."""
    out = []
    last = 0
    #: Where the markup before ended, if it showed Chinese at its end.
    chinese_end = -1
    for m in _MARKUP.finditer(text):
        shown = _shown(m)
        start, end = m.start(), m.end()
        if shown and CHINESE.match(shown[0]) and start >= 2 and text[start - 1] == " ":
            if start - 1 == chinese_end:
                joint = "\\ "  # between two pieces of markup
            elif CHINESE.match(text[start - 2]):
                joint = "" if unicodedata.category(text[start - 2]) in _BEFORE else "\\ "
            else:
                joint = None
            if joint is not None:
                out.append(text[last : start - 1] + joint)
                last = start
        out.append(text[last:end])
        last = end
        chinese_end = end if shown and CHINESE.match(shown[-1]) else -1
        if (
            shown
            and end + 1 < len(text)
            and text[end] == " "
            and CHINESE.match(text[end + 1])
            and CHINESE.match(shown[-1])
        ):
            joint = "" if unicodedata.category(text[end + 1]) in _AFTER else "\\ "
            out.append(joint)
            last = end + 1
    out.append(text[last:])
    return "".join(out)


def stray_spaces(text: str) -> list[str]:
    """The places of plain text (not reST) where whitespace stands between two Chinese
    characters, each with a few characters around it."""
    pattern = re.compile(rf"{CHINESE.pattern}[ \t\n]+{CHINESE.pattern}")
    return [text[max(0, m.start() - 6) : m.end() + 6] for m in pattern.finditer(text)]


# -- Glosses -----------------------------------------------------------------------------------

#: A term followed by its English in full-width brackets: 「注意力（attention）」,
#: 「键值缓存（KV cache）」, 「在线 softmax（online softmax）」. The English has a run of
#: lower-case letters: an abbreviation such as 「（RoPE）」 or 「（IQR）」 is a name, not a gloss.
GLOSS = re.compile(
    r"(?<=[\u3400-\u9fffA-Za-z])（(?=[^（）]*[a-z]{2})"
    r"(?P<english>[A-Za-z][A-Za-z\- /'’]*[A-Za-z])）"
)


def gloss_key(english: str) -> str:
    """The English of a gloss, as the same term on every page: lower case, singular."""
    words = re.sub(r"[\s-]+", " ", english.lower()).strip()
    return re.sub(r"(?<=[a-z]{3})(?<![siu])s$", "", words)


def _glossary() -> dict[str, str]:
    import csv

    with (ROOT / "locale" / "zh_CN" / "glossary.csv").open(encoding="utf-8") as f:
        return {gloss_key(row["English"]): row["中文"] for row in csv.DictReader(f)}


def gloss_concept(match: re.Match, glossary: dict[str, str] | None = None) -> tuple[str, str]:
    """The concept a gloss names: its English (:func:`gloss_key`) and the Chinese it follows,
    the glossary's term where the text ends with it, else its last two characters. The same
    English after another Chinese term is another concept (「内核（kernel）」, a compute kernel,
    and 「核（kernel）」, a kernel function), glossed once each."""
    glossary = _glossary() if glossary is None else glossary
    key = gloss_key(match["english"])
    before = re.sub(r"[\s*`\\]", "", match.string[: match.start()])
    term = glossary.get(key)
    if term and before.endswith(term):
        return key, term
    return key, before[-2:]


def glosses(text: str) -> list[re.Match]:
    return list(GLOSS.finditer(text))


def _joint(text: str, start: int, end: int) -> str:
    """What replaces ``text[start:end]`` (a gloss) between what stands before and after it: a
    space between Chinese and Latin text or markup (「softmax 遍历」, 「键 ``k``」), else
    nothing."""
    if start == 0 or end == len(text):
        return ""
    before, after = text[start - 1], text[end]
    ideograph = re.compile(r"[\u3400-\u9fff]")
    latin = re.compile(r"[A-Za-z0-9`:]")
    # Not before "*": it may close emphasis, which no space may precede.
    if ideograph.match(before) and latin.match(after):
        return " "
    return " " if latin.match(before) and ideograph.match(after) else ""


def course_catalogues() -> list[Path]:
    """The tutorials' catalogues in the course's order (their number)."""
    return sorted((CATALOGUES / "tutorials").rglob("[0-9][0-9]_*.po"), key=lambda path: path.name)


def remove_repeated_glosses(catalogues: Iterable[Path]) -> dict[Path, int]:
    """Removes from ``catalogues`` every gloss of a term that an earlier message of the course
    glosses (the course's other catalogues are read, not written). Returns the count removed
    per catalogue."""
    import polib

    targets = {path.resolve() for path in catalogues}
    glossary = _glossary()
    seen: set[tuple[str, str]] = set()
    removed = {}
    for path in course_catalogues():
        po = polib.pofile(str(path))
        write = path.resolve() in targets
        count = 0
        for entry in po:
            if entry.obsolete or not entry.msgstr:
                continue

            def keep_first(m: re.Match) -> str:
                nonlocal count
                key = gloss_concept(m, glossary)
                if key not in seen:
                    seen.add(key)
                    return m.group(0)
                count += 1
                return _joint(m.string, m.start(), m.end())

            text = GLOSS.sub(keep_first, entry.msgstr)
            if write:
                entry.msgstr = text
        if write:
            po.save()
            removed[path] = count
    return removed


# -- The command -------------------------------------------------------------------------------


def fix_catalogue(path: Path, *, spaces: bool = True, terms: bool = True) -> tuple[int, int]:
    """Applies :data:`TERMS` and :func:`fix_spaces` to every translation of one catalogue.
    Returns the counts of terms replaced and of messages whose spaces were fixed."""
    import polib

    po = polib.pofile(str(path))
    replaced = fixed = 0
    for entry in po:
        if entry.obsolete or not entry.msgstr:
            continue
        text = entry.msgstr
        if terms:
            for old, new in TERMS:
                replaced += text.count(old)
                text = text.replace(old, new)
        if spaces:
            spaced, text = text, fix_spaces(text)
            fixed += spaced != text
        entry.msgstr = text
    po.save()
    return replaced, fixed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("catalogues", nargs="+", type=Path, help=".po files to fix in place")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.catalogues]
    for path in paths:
        replaced, _ = fix_catalogue(path, spaces=False)
        print(f"{path.name}: {replaced} terms replaced")
    for path, count in remove_repeated_glosses(paths).items():
        print(f"{path.name}: {count} repeated glosses removed")
    for path in paths:
        _, fixed = fix_catalogue(path, terms=False)
        print(f"{path.name}: spaces fixed in {fixed} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
