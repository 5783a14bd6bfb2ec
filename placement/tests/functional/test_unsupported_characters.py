"""Characters outside the Basic Multilingual Plane (an emoji) in a URL,
a query or a body: never a 500, on any database.

MySQL connections made by oslo.db use charset=utf8 (three bytes a
character): comparing such a value with a column fails there with
"Illegal mix of collations", storing it with "Incorrect string value";
the fault barrier answers both 400, as for any value the database
refuses. Through gunicorn, so the engine is oslo.db's as deployed (the
in-process test engines are plain SQLAlchemy ones).
"""
import requests

from placement.tests.functional import live_server

EMOJI = '%F0%9F%98%80'
RP = '/resource_providers/' + EMOJI
READS = [RP + '/inventories', RP + '/inventories/VCPU', RP + '/traits',
         RP + '/usages', RP + '/allocations', RP + '/aggregates',
         '/allocations/' + EMOJI, '/resource_classes/' + EMOJI,
         '/traits/' + EMOJI, '/traits?name=in:' + EMOJI,
         '/usages?project_id=' + EMOJI, '/resource_providers?name=' + EMOJI]


def test_emoji_never_gets_5xx():
    with live_server.LiveServer(workers=1) as server:
        session = requests.Session()
        answers = {}
        for path in READS:
            for method in ('GET', 'DELETE'):
                resp = session.request(method, server.url + path,
                                       headers=server.headers())
                answers[method, path] = resp.status_code
        resp = session.post(server.url + '/resource_providers',
                            headers=server.headers(),
                            json={'name': 'cn-\U0001F600'})
        answers['POST', 'name'] = resp.status_code
        if resp.status_code == 400:
            assert resp.json()['errors'][0]['status'] == 400
        # An empty list or a 404 where the database can compare it, a
        # 400 where it cannot; never a 5xx.
        assert not {k: v for k, v in answers.items() if v >= 500}, answers
        # Whatever the database could store, it stored whole.
        listed = session.get(server.url + '/resource_providers',
                             headers=server.headers()).json()
        names = [rp['name'] for rp in listed['resource_providers']]
        assert names in ([], ['cn-\U0001F600']), names
