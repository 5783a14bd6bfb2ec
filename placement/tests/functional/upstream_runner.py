"""Serve requests with upstream placement (run by its own venv).

Usage: .upstream-venv/bin/python upstream_runner.py DB [init]
  [MAX_CANDIDATES [randomize]]

DB is a SQLite file's path or a database URL.

``init`` creates the schema with upstream's migrations and exits. Without
it, each stdin line is JSON {"path": ..., "version": ...} and optionally
"method" (GET by default), "body" (sent as JSON) and "headers" (added);
each answer is one stdout line {"status": int, "body": ...} (a text when
not JSON). ``randomize`` sets ``randomize_allocation_candidates``. This
file must not import our ``placement`` package: it runs under upstream's
interpreter.
"""
import json
import logging
import os
import sys

# A PYTHONPATH naming our checkout (how a developer runs the suite from a
# work tree) would put our ``placement`` before upstream's.
sys.path[:] = [p for p in sys.path
               if p not in os.environ.get('PYTHONPATH', '').split(os.pathsep)]

from oslo_config import cfg  # noqa: E402
import webob  # noqa: E402

from placement import conf as pconf  # noqa: E402
from placement import db_api  # noqa: E402
from placement import deploy  # noqa: E402


def main():
    db_path = sys.argv[1]
    init = len(sys.argv) > 2 and sys.argv[2] == 'init'
    max_cands = int(sys.argv[2]) if len(sys.argv) > 2 and not init else -1
    randomize = sys.argv[3:4] == ['randomize']
    logging.disable(logging.CRITICAL)
    conf = cfg.ConfigOpts()
    pconf.register_opts(conf)
    url = db_path if '://' in db_path else 'sqlite:///' + db_path
    conf.set_default('connection', url,
                     group='placement_database')
    conf([], project='placement', default_config_files=[])
    conf.set_override('sync_on_startup', init, group='placement_database')
    conf.set_override('auth_strategy', 'noauth2', group='api')
    conf.set_override('max_allocation_candidates', max_cands,
                      group='placement')
    conf.set_override('randomize_allocation_candidates', randomize,
                      group='placement')
    db_api.configure(conf)
    deploy.update_database(conf)
    if init:
        return
    app = deploy.loadapp(conf)
    for line in sys.stdin:
        req = json.loads(line)
        wreq = webob.Request.blank(
            req['path'], method=req.get('method', 'GET'), headers={
                'x-auth-token': 'admin', 'accept': 'application/json',
                'openstack-api-version': 'placement %s' % req['version']})
        wreq.headers.update(req.get('headers') or {})
        if req.get('body') is not None:
            wreq.body = json.dumps(req['body']).encode()
            wreq.content_type = 'application/json'
        resp = wreq.get_response(app)
        try:
            body = json.loads(resp.body)
        except ValueError:
            body = resp.text
        sys.stdout.write(json.dumps({'status': resp.status_int,
                                     'body': body}) + '\n')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
