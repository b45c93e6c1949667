"""argparse with one-line errors: ``PROG: error: MESSAGE`` on stderr and exit 2, before anything runs."""

import argparse
import sys

USAGE_EXIT = 2


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit USAGE_EXIT."""

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
