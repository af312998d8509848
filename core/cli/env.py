"""``idbench env``: what a bug report needs (versions, the accelerator, the resolved settings)."""

from __future__ import annotations

import argparse


def add_env(commands) -> None:
    env = commands.add_parser(
        "env", help="print versions, the accelerator and the resolved settings (secrets masked), for bug reports"
    )
    env.set_defaults(func=cmd_env)


def cmd_env(args: argparse.Namespace) -> int:
    from idbench.settings import report

    print(report())
    return 0
