"""Do two services answer nova's reporting reads the same?

The same sample of requests goes to each (both serving one database, no
writes in between); bodies are compared as JSON with lists sorted, since
neither promises an order. A status differing counts as a difference,
and every 5xx is kept with the service that gave it. Each answer is also
timed (sent to the last byte; the services asked in turns, the first of
each request alternating), for the median per read and service.
"""
import collections
import json
import random
import statistics
import time

import httpx

from placement.tests.cloud_load import model


def _norm(value):
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_norm(v) for v in value),
                      key=lambda v: json.dumps(v, sort_keys=True))
    return value


def sample(computes, consumers, projects, size, seed):
    """[(kind label, method, path, version)]: ``size`` of each reporting
    read, on random compute nodes, consumers and projects."""
    rnd = random.Random(seed)
    out = []
    for c in rnd.sample(computes, min(size, len(computes))):
        rp = rnd.choice(c.providers)
        for kind, fill in (('in_tree', {'root': c.root}),
                           ('inventories', {'rp': rp}),
                           ('traits', {'rp': rp}),
                           ('aggregates', {'rp': c.root}),
                           ('rp_allocations', {'rp': c.root})):
            k = model.KINDS[kind]
            out.append((kind, k.method, k.path.format(**fill), k.version))
    for consumer in rnd.sample(consumers, min(size, len(consumers))):
        out.append(('consumer', 'GET', '/allocations/' + consumer, '1.28'))
    for project, user, aggs in projects[:size]:
        q = '/usages?project_id=%s' % project
        out.append(('usages_project', 'GET', q, '1.9'))
        out.append(('usages_user', 'GET', q + '&user_id=' + user, '1.9'))
        # Not nova's version: what a newer client (consumer types) asks.
        out.append(('usages_user 1.38', 'GET', q + '&user_id=' + user,
                    '1.38'))
        k = model.KINDS['sharing']
        out.append(('sharing', 'GET', k.path.format(aggs=aggs), k.version))
    return out


def compare(urls, requests):
    """{label: {'same': n, 'differ': n, 'statuses': {impl: Counter},
    'example': first difference, 'ms': {impl: median ms}}}."""
    out = collections.OrderedDict()
    times = collections.defaultdict(list)
    with httpx.Client(timeout=600) as client:
        for i, (label, method, path, version) in enumerate(requests):
            row = out.setdefault(label, {
                'same': 0, 'differ': 0, 'example': None,
                'statuses': {n: collections.Counter() for n in urls}})
            answers = {}
            order = list(urls.items())
            if i % 2:
                order.reverse()
            for name, url in order:
                headers = {'x-auth-token': 'admin',
                           'accept': 'application/json'}
                if version:
                    headers['openstack-api-version'] = 'placement ' + version
                start = time.perf_counter()
                resp = client.request(method, url + path, headers=headers)
                times[label, name].append(time.perf_counter() - start)
                row['statuses'][name][resp.status_code] += 1
                try:
                    body = _norm(resp.json()) if resp.status_code < 300 \
                        else None
                except ValueError:
                    body = resp.text[:200]
                answers[name] = (resp.status_code, body)
            if len(set(json.dumps(a, sort_keys=True)
                       for a in answers.values())) == 1:
                row['same'] += 1
            else:
                row['differ'] += 1
                if row['example'] is None:
                    row['example'] = '%s %s: %s' % (
                        method, path, {n: (s, json.dumps(b)[:160])
                                       for n, (s, b) in answers.items()})
    for label, row in out.items():
        row['ms'] = {n: statistics.median(times[label, n]) * 1000
                     for n in urls}
    return out
