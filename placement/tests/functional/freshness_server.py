"""One of our placement processes, for the freshness check (freshness.py).

Usage: python freshness_server.py DB_URL [--sql|--reload-every-request]
                                         [--trust-triggers] [--share DIR]
                                         [--recheck-always]

Serves our WSGI app over an existing database, one request at a time,
through JSON lines rather than HTTP: each stdin line is {"method",
"path", "version", "body", "headers"} and each answer one stdout line
{"status", "body", "ms"} (ms: the time it took here). What the check is
about -- every process keeping its own world (candidates/world/) and
refreshing it from the database's change counters -- is the same as
under gunicorn; a socket per request
would only make each of the check's steps slower.

``--sql`` answers allocation candidates with the SQL engine
(``engine.USE_WORLD = False``): the check's reference. That process also
runs ``placement-manage`` commands: a line {"manage": [args]} runs
``placement-manage args`` in it, answering {"status": exit code, "body":
output}. It keeps no world, so the command's own configuration of the
database (the same options, hence the same engine) disturbs nothing.

``--reload-every-request`` (the check's control run) reads the whole
world again at every request: such a world cannot be stale, so whatever
still differs from SQL is the check's fault or the engines'.

``--trust-triggers`` keeps the world even when a change trigger is
missing (a process otherwise falls back to the SQL engine, which is
always fresh): the check's run without each trigger in turn.

``--recheck-always``: the process asks at every request whether the
database counts its changes (every trigger there and firing), not every
``changes.RECHECK_SECONDS``: the check turns triggers off and on
between two steps (freshness_operator.py).

``--share DIR``: the world processes share their snapshot through a
file in DIR whatever the world's size, and make a new one after
``_SHARED_OVERLAY`` changes (world/settings.py's thresholds, lowered so that a
check of a few thousand steps maps, catches up from and switches
snapshots many times).

Every search a world kept for later requests (World.searches) is run
again when read, and a stale one answers 500 (_verify_kept).

Each answer also says which engine answered a candidates request
("engine": "world" or "sql"): a world process that answered with SQL
was not checked at all.
"""
import contextlib
import io
import json
import logging
import sys
import time

import webob


def _always_reload():
    from placement.objects.candidates import world

    def refresh(self, ctx, conn):
        self.read_all(ctx, conn)

    world.World.refresh = refresh


_SHARED_OVERLAY = 12


def _share(directory):
    from placement.objects.candidates.world import settings
    settings.SHARED_DIR = directory
    settings.SHARE_FROM = 0
    settings.OVERLAY = _SHARED_OVERLAY


def _verify_kept():
    """Every search a world kept (World.searches) is run again when it is
    read, and one that differs answers 500: a write that forgets to drop
    it fails the check at its next use, whether or not the answer would
    show it."""
    from placement.objects.candidates import combine
    real = combine._kept

    def kept(search, searches, anchor):
        picks = searches.get(anchor)
        if picks is not None:
            now = tuple(search.run(anchor))
            if now != picks:
                raise AssertionError('the search kept under %s is stale: '
                                     '%r, now %r' % (anchor, picks, now))
        return real(search, searches, anchor)

    combine._kept = kept


_ENGINE = {'used': None}


def _track_engines():
    """Note in _ENGINE which engine each candidates request used."""
    from placement.objects.candidates import search
    from placement.objects.candidates import sql

    for module, name, label in ((search, 'find_in_world', 'world'),
                                (sql, 'find_in_database', 'sql')):
        def tracked(*args, _real=getattr(module, name), _label=label,
                    **kwargs):
            _ENGINE['used'] = _label
            return _real(*args, **kwargs)
        setattr(module, name, tracked)


def _trust_triggers():
    from placement.db import change_triggers
    change_triggers.missing = lambda conn: []


def _app(url, use_world):
    from placement.objects.candidates import engine
    from placement import conf as placement_conf
    from placement import deploy
    engine.USE_WORLD = use_world
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    conf.set_override('auth_strategy', 'noauth2', group='api')
    conf.set_override('connection', url, group='placement_database')
    conf.set_override('sync_on_startup', False, group='placement_database')
    conf.set_override('sqlite_synchronous', False, group='placement_database')
    return deploy.loadapp(conf)


def _call(app, req):
    wreq = webob.Request.blank(req['path'], method=req['method'], headers={
        'x-auth-token': 'admin', 'accept': 'application/json',
        'openstack-api-version': 'placement %s' % req['version']})
    wreq.headers.update(req.get('headers') or {})
    if req.get('body') is not None:
        wreq.body = json.dumps(req['body']).encode()
        wreq.content_type = 'application/json'
    _ENGINE['used'] = None
    resp = wreq.get_response(app)
    try:
        body = json.loads(resp.body) if resp.body else None
    except ValueError:
        body = resp.text
    return {'status': resp.status_int, 'body': body,
            'engine': _ENGINE['used']}


def _manage(conf_path, args):
    from placement.cmd import manage
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            status = manage.main(['--config-file', conf_path] + args)
        except SystemExit as e:
            status = e.code
    return {'status': status, 'body': out.getvalue()}


def main():
    url = sys.argv[1]
    sql = '--sql' in sys.argv[2:]
    # Errors only (a 500's traceback), to stderr: the check shows them.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    if '--reload-every-request' in sys.argv[2:]:
        _always_reload()
    if '--trust-triggers' in sys.argv[2:]:
        _trust_triggers()
    if '--recheck-always' in sys.argv[2:]:
        from placement.objects import changes
        changes.RECHECK_SECONDS = 0
    _track_engines()
    _verify_kept()
    app = _app(url, use_world=not sql)
    if '--share' in sys.argv[2:]:
        _share(sys.argv[sys.argv.index('--share') + 1])
    conf_path = None
    if sql:
        import tempfile
        fd, conf_path = tempfile.mkstemp(prefix='freshness-', suffix='.conf')
        with open(fd, 'w') as f:
            f.write('[placement_database]\nconnection = %s\n' % url)
    # Ready: the caller waits for this line before its first request.
    sys.stdout.write('{"ready": true}\n')
    sys.stdout.flush()
    try:
        for line in sys.stdin:
            start = time.perf_counter()
            req = json.loads(line)
            if 'manage' in req:
                answer = _manage(conf_path, req['manage'])
            else:
                answer = _call(app, req)
            answer['ms'] = round(1000 * (time.perf_counter() - start), 3)
            sys.stdout.write(json.dumps(answer) + '\n')
            sys.stdout.flush()
    finally:
        if conf_path:
            import os
            os.unlink(conf_path)


if __name__ == '__main__':
    main()
