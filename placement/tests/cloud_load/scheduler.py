"""The replay's scheduler: nova's candidates request sent, read and
decoded in processes of their own, the pick made there.

At a million providers the answer is 4.9 MB of JSON. Read and decoded on
the replay's event loop, it stalled the loop for tens of milliseconds ten
times a second at 10 boots/s, and the service's sync workers waited on the
generator: to drain each answer, then for its connection's close
(gunicorn's ``close_graceful``), three of four workers at a time, while
the service's CPUs sat half idle. A nova-scheduler reads its answers in a
process of its own too.
"""
import concurrent.futures
import json
import multiprocessing
import random
import time

import httpx

# Processes reading candidates (12 a second at 10 boots/s, 40-100 ms each
# on a busy machine).
PROCESSES = 4

_CLIENT = None
_ROOT_OF = {}


def _start(root_of, timeout):
    global _CLIENT, _ROOT_OF
    _CLIENT = httpx.Client(timeout=timeout)
    _ROOT_OF = root_of


def _ready():
    return True


def _fetch_and_pick(url, headers, source_root, seed):
    """(sent at, seconds to the answer's last byte, status, the picked
    candidate's allocations or None, 'no valid host' when the answer had
    none on another simulated compute node, CPU seconds spent here)."""
    cpu = time.process_time()
    sent = time.perf_counter()
    try:
        resp = _CLIENT.get(url, headers=headers)
        status, data = resp.status_code, resp.content
    except httpx.HTTPError:
        status, data = 0, b''
    seconds = time.perf_counter() - sent
    pick, why = None, None
    if status == 200 and data:
        requests = [
            ar['allocations'] for ar in _allocation_requests(data)
            if _ROOT_OF.get(next(iter(ar['allocations']))) not in (
                None, source_root)]
        if requests:
            pick = random.Random(seed).choice(requests)
        else:
            why = 'no valid host'
    return sent, seconds, status, pick, why, time.process_time() - cpu


def _allocation_requests(data):
    """The answer's ``allocation_requests`` alone: the provider summaries,
    nine tenths of it, are not decoded (a whole answer of 4.9 MB took a
    process 50 ms to decode)."""
    text = data.decode()
    at = text.find('"allocation_requests"')
    if at < 0:
        return json.loads(text)['allocation_requests']
    start = text.index('[', at)
    return json.JSONDecoder().raw_decode(text, start)[0]


class Scheduler:
    """A pool of processes answering ``pick``; ``root_of`` maps every
    provider of the simulated compute nodes to its root."""

    def __init__(self, root_of, timeout):
        # (spawned: the replay's process runs an event loop and threads)
        self.pool = concurrent.futures.ProcessPoolExecutor(
            PROCESSES, mp_context=multiprocessing.get_context('spawn'),
            initializer=_start, initargs=(root_of, timeout))
        # Their imports done before the window, not in it.
        for f in [self.pool.submit(_ready) for _ in range(PROCESSES)]:
            f.result()

    async def pick(self, loop, url, headers, source_root, seed):
        return await loop.run_in_executor(
            self.pool, _fetch_and_pick, url, headers, source_root, seed)

    def close(self):
        self.pool.shutdown(cancel_futures=True)
