"""A process that leads recovery on a PostgreSQL schema until it is killed.

It runs a recovery manager whose handler does nothing, prints ``leading``
once its sweep reports leadership, then keeps the advisory lock by sweeping
every 0.1 s (for at most ``--seconds``). The failover test kills it with
SIGKILL.
"""

from __future__ import annotations

import argparse
import sys
import time
from uuid import UUID

from incarnate import Engine, RecoveryManager, RecoverySettings, Storage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schema", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--dbname", required=True)
    parser.add_argument("--lock-id", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    storage = Storage.postgres(
        args.dbname, host=args.host, port=args.port, user=args.user, schema=args.schema
    )
    settings = RecoverySettings(lock_id=args.lock_id, ttl=3600.0, scan_interval=0.1, item_timeout=1.0)

    def ignore(root: UUID) -> None:
        return None

    engine = Engine(storage=storage, engine_id="leader-process")
    try:
        manager = RecoveryManager(engine, settings, handler=ignore)
        announced = False
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            if manager.sweep().leader and not announced:
                print("leading", flush=True)
                announced = True
            time.sleep(0.1)
    finally:
        engine.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
