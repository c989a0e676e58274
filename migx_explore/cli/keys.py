"""`migx-explore keys`: the ed25519 keys that vouch for kernel binaries in saved programs.

migx-explore keys create            make this user's signing key (and trust it)
migx-explore keys list              trusted keys, by id (this user's own marked)
migx-explore keys export            print this user's public key, to give to another machine
migx-explore keys trust HEX [--name N]   trust another machine's public key
"""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from .. import keys

    if args.action == "create":
        kid = keys.create_key(replace=args.replace)
        print(f"created signing key {kid} in {keys.key_dir()}; `compile --out` now signs saved programs with it")
    elif args.action == "export":
        print(keys.own_public_hex())
    elif args.action == "trust":
        if not args.key:
            from migx_explore.compiler.errors import MigxError

            raise MigxError("keys trust needs the public key (64 hex digits, from `migx-explore keys export`)")
        kid = keys.trust_key(args.key, name=args.name or "")
        print(f"trusted key {kid}: kernel binaries in programs it signs will run on this machine's GPU")
    else:
        mine = keys.own_key_id()
        rows = keys.trusted_keys()
        if not rows:
            print(f"no trusted keys in {keys.key_dir()}; create one with `migx-explore keys create`")
        for kid, entry in rows.items():
            tag = " (this user's signing key)" if kid == mine else ""
            print(f"{kid}  {entry['name'] or '-'}{tag}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("keys", help="create, list, export and trust the keys that sign saved programs")
    p.add_argument(
        "action",
        metavar="ACTION",
        choices=["create", "list", "export", "trust"],
        nargs="?",
        default="list",
        help="create, list (the default), export or trust",
    )
    p.add_argument("key", nargs="?", default=None, help="with trust: the public key, hex")
    p.add_argument("--name", default=None, help="with trust: a label for the key")
    p.add_argument("--replace", action="store_true", help="with create: replace an existing signing key")
    p.set_defaults(func=run)
