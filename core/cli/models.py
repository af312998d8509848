"""``idbench models``: list the profiles' models, download them, or make the tiny ones."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_models(commands) -> None:
    models = commands.add_parser(
        "models",
        help="list the profiles' models and whether they are here, download them, or make the tiny ones",
        description="list: per role, the card, its Hub id@revision (or local) and present/missing (nothing is loaded). "
        "download: fetch what the profile lacks (Hub files into the Hugging Face cache, resumable; insightface's "
        "buffalo_l pack only with --accept-insightface-license); exit code 1 while anything is still missing. "
        "make-tiny: make a plumbing profile's random models ahead of use (default --profile tiny; --profile "
        "paper-random makes the paper models' real sizes, about 3 GB, for timing).",
    )
    models.add_argument("action", choices=("list", "download", "make-tiny"))
    models.add_argument(
        "--profile",
        help="list: one profile (default: all); download: the profile to fetch (default: paper); "
        "make-tiny: the plumbing profile to make (default: tiny)",
    )
    models.add_argument(
        "--models-dir", type=Path, help="idbench's model folder (default: $IDBENCH_MODELS or ~/.cache/idbench/models)"
    )
    models.add_argument(
        "--accept-insightface-license",
        action="store_true",
        help="download: you accept insightface's non-commercial research licence; fetches buffalo_l",
    )
    models.add_argument(
        "--dry-run", action="store_true", help="download: print what would be fetched, from where; fetch nothing"
    )
    models.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.models import registry

    if args.action == "make-tiny":
        profile = args.profile or "tiny"
        cards = registry.resolve_profile(profile)  # an unknown profile: one error listing the known
        if not registry.profile_is_plumbing(profile):
            raise registry.UnknownModelError(
                f"profile {profile!r} has no random models to make; plumbing profiles: "
                + ", ".join(p for p in registry.PROFILES if registry.profile_is_plumbing(p))
            )
        # tiny: every tiny model (arcface-tiny too, which no profile names); another profile: its random models
        for path in registry.make_tiny(models_dir=args.models_dir, profile=None if profile == "tiny" else profile):
            print(f"  {path}")
        for card in cards.values():
            if card.name in registry.NOT_MADE:
                print(f"  {card.name}: not made: {registry.NOT_MADE[card.name]}")
        print(f"{profile} models ready (random weights: results made with them are plumbing checks)")
        return 0
    from idbench.evaluate_pkg.models import download

    if args.action == "download" and args.dry_run:
        for step in download.plan(args.profile or registry.DEFAULT_PROFILE, models_dir=args.models_dir):
            print(f"  {step.role:10s} {step.name:28s} {step.describe()}")
        return 0
    if args.action == "download":
        accepted = {download.INSIGHTFACE_LICENSE} if args.accept_insightface_license else set()
        report = download.download(
            args.profile or registry.DEFAULT_PROFILE, models_dir=args.models_dir, accept_licenses=accepted
        )
        print(report.summary())
        return 0 if report.ok else 1  # 1: the profile is not complete on this machine yet (each line says why)
    registry.resolve_profile(
        args.profile or registry.DEFAULT_PROFILE
    )  # an unknown profile: one error listing the known
    for line in download.list_lines(args.profile, models_dir=args.models_dir):
        print(line)
    return 0
