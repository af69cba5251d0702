"""One client process of bench/servers_bench.py: post or drain tasks on one system, then print
one JSON line: {"count", "start", "end"} (time.monotonic(), one clock for the machine's
processes, so the parent takes the phase from the first start to the last end).

    python bench/servers/load.py SYSTEM ACTION --address A --queue Q [--tasks N] [--batch B]

SYSTEM: taskhoster (A: its URL; TASKHOSTER_BENCH_TOKEN: the token), beanstalkd or rabbitmq
(A: host:port). ACTION: post (N tasks, one request each or B to a request) or drain (until the
queue is empty: taskhoster and beanstalkd claim with no wait; RabbitMQ pushes, so the parent
posts one stop message per consumer after the tasks). Run with var/bench-servers-venv's
interpreter, which has pika for RabbitMQ; the taskhoster client is the project's own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent)]

STOP = b"stop"  # RabbitMQ's end of the drain, one per consumer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=("taskhoster", "beanstalkd", "rabbitmq"))
    parser.add_argument("action", choices=("post", "drain", "stops"))
    parser.add_argument("--address", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--tasks", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    run = {"taskhoster": taskhoster, "beanstalkd": beanstalkd, "rabbitmq": rabbitmq}
    start = time.monotonic()
    count = run[args.system](args)
    print(json.dumps({"count": count, "start": start, "end": time.monotonic()}), flush=True)


def taskhoster(args: argparse.Namespace) -> int:
    from taskhoster.client import Client

    host, queue = args.queue.split("/")
    client = Client(args.address, os.environ["TASKHOSTER_BENCH_TOKEN"], timeout=60)
    worker = f"bench-{os.getpid()}"
    count = 0
    if args.action == "post":
        while count < args.tasks:
            n = min(args.batch, args.tasks - count)
            if args.batch == 1:
                client.post(host, queue, {"n": count})
            else:
                client.post_many(host, queue, [{"item": {"n": count + i}} for i in range(n)])
            count += n
        return count
    if args.batch == 1:  # a worker's way: each result claims the next task (api.md's next)
        task: Any = client.claim(host, queue, worker)
        while task:
            answer = client.result(host, queue, task["id"], worker, task["attempts"], {},
                                   claim_next={})  # fmt: skip
            count += 1
            task = answer["next"][0] if answer.get("next") else None
        return count
    tasks: Any = client.claim(host, queue, worker, max=args.batch)
    while tasks:
        outcomes = [{"id": t["id"], "attempt": t["attempts"], "outcome": "result", "result": {}}
                    for t in tasks]  # fmt: skip
        answer = client.finish_many_answer(host, queue, worker, outcomes,
                                           claim_next={"max": args.batch})  # fmt: skip
        assert all(o["status"] == 200 for o in answer["outcomes"]), answer
        count += len(tasks)
        tasks = answer.get("next") or []
    return count


def beanstalkd(args: argparse.Namespace) -> int:
    from beanstalk import Beanstalk

    host, port = args.address.rsplit(":", 1)
    conn = Beanstalk(host, int(port), args.queue)
    count = 0
    if args.action == "post":  # beanstalkd has no batch: one put each
        for n in range(args.tasks):
            conn.put(json.dumps({"n": n}).encode())
        return args.tasks
    while (job := conn.reserve(0)) is not None:
        conn.delete(job[0])
        count += 1
    conn.close()
    return count


def rabbitmq(args: argparse.Namespace) -> int:
    import pika

    host, port = args.address.rsplit(":", 1)
    params = pika.ConnectionParameters(host, int(port), credentials=pika.PlainCredentials(
        "guest", "guest"), heartbeat=0)  # fmt: skip
    connection = pika.BlockingConnection(params)
    channel = connection.channel()
    channel.queue_declare(args.queue, durable=True)
    persistent = pika.BasicProperties(delivery_mode=2)
    count = 0
    if args.action in ("post", "stops"):
        bodies = ([json.dumps({"n": n}).encode() for n in range(args.tasks)]
                  if args.action == "post" else [STOP] * args.tasks)  # fmt: skip
        if args.batch == 1:  # publisher confirms: each publish returns once the broker has it
            channel.confirm_delivery()
            for body in bodies:
                channel.basic_publish("", args.queue, body, persistent, mandatory=True)
        else:  # a transaction of `batch` publishes: durable at its commit
            channel.tx_select()
            for at in range(0, len(bodies), args.batch):
                for body in bodies[at : at + args.batch]:
                    channel.basic_publish("", args.queue, body, persistent)
                channel.tx_commit()
        connection.close()
        return len(bodies)
    channel.basic_qos(prefetch_count=args.batch)
    unacked = 0
    for method, _, body in channel.consume(args.queue, inactivity_timeout=60):
        if method is None:
            raise SystemExit("RabbitMQ sent nothing for 60 s")
        if body == STOP:
            channel.basic_ack(method.delivery_tag, multiple=True)
            break
        count += 1
        unacked += 1
        if unacked >= args.batch:  # one ack for the batch (multiple: every earlier one too)
            channel.basic_ack(method.delivery_tag, multiple=True)
            unacked = 0
    channel.cancel()
    connection.close()
    return count


if __name__ == "__main__":
    main()
