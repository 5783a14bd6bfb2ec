"""Serve requests with upstream placement (run by its own venv).

Usage: .upstream-venv/bin/python upstream_runner.py DB [init]
  [MAX_CANDIDATES]

DB is a SQLite file's path or a database URL.

``init`` creates the schema with upstream's migrations and exits. Without
it, each stdin line is JSON {"path": ..., "version": ...} and optionally
"method" (GET by default), "body" (sent as JSON) and "headers" (added);
each answer is one stdout line {"status": int, "body": ...} (a text when
not JSON). This file must not import our ``placement`` package: it runs
under upstream's interpreter.
"""
import json
import logging
import sys

from oslo_config import cfg
import webob

from placement import conf as pconf
from placement import db_api
from placement import deploy


def main():
    db_path = sys.argv[1]
    init = len(sys.argv) > 2 and sys.argv[2] == 'init'
    max_cands = int(sys.argv[2]) if len(sys.argv) > 2 and not init else -1
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
