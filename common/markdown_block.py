"""A generated block of a Markdown file: the lines between a begin and an end marker comment, which the command
that makes them prints, or writes in place of the old ones (`--update-readme`). Standard library only."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """The lines between markers ``begin`` and ``end``."""

    begin: str
    end: str

    def read(self, text):
        """The block's lines in ``text``, without newlines at either end; None where a marker is missing."""
        if self.begin not in text or self.end not in text:
            return None
        return text[text.index(self.begin) + len(self.begin):text.index(self.end)].strip("\n")

    def replace(self, text, made):
        """``text`` with the block's lines replaced by ``made``; ValueError naming the markers where one is missing."""
        if self.read(text) is None:
            raise ValueError(f"no {self.begin} ... {self.end} block")
        head, tail = text[:text.index(self.begin) + len(self.begin)], text[text.index(self.end):]
        return f"{head}\n{made.strip(chr(10))}\n{tail}"


def print_or_update(parser, update, path, block, make, name):
    """Print what ``make()`` returns or, when ``update``, write it as ``block`` of the Markdown file ``path`` and
    say so (``name`` updated); a ValueError of ``make`` or a file without the block: ``parser.error`` (one line,
    exit 2, nothing written). Returns the exit status."""
    try:
        made = make()
    except ValueError as exc:
        parser.error(str(exc))
    if not update:
        print(made)
        return 0
    try:
        path.write_text(block.replace(path.read_text(), made))
    except ValueError as exc:
        parser.error(f"--update-readme: {path}: {exc}")
    print(f"{name}: {path} updated")
    return 0
