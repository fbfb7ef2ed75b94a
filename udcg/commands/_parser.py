"""What the commands' parsers share: the subcommand with its description and examples."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def command(sub: argparse._SubParsersAction, name: str, help: str, description: str, examples: Sequence[str] = (),
            notes: str = "", formatter_class: type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter,
            ) -> argparse.ArgumentParser:
    """The parser of ``udcg NAME``. ``description`` is one paragraph: its line breaks and indentation
    in the source fold to single spaces. The epilog lists ``examples`` one a line, indented by two
    spaces, under "example:" (one) or "examples:" (several), then ``notes`` after a blank line. The
    default formatter prints the description and the epilog as they are (the examples keep their lines)."""
    parts = []
    if examples:
        parts.append(("example:\n" if len(examples) == 1 else "examples:\n") + "\n".join(f"  {e}" for e in examples))
    if notes:
        parts.append(notes)
    return sub.add_parser(name, help=help, description=" ".join(description.split()), epilog="\n\n".join(parts) or None,
                          formatter_class=formatter_class)

