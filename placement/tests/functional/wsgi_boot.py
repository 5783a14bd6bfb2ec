"""Boot a placement WSGI application as a deployer's server does, send it
some requests, print the answers.

Usage: PYTHON wsgi_boot.py '[["GET", "/resource_providers", null], ...]'

Runs under either interpreter, ours or upstream's venv (so it imports
``placement`` only inside ``main``): the application comes from the
package's own ``init_application``, which reads
``$OS_PLACEMENT_CONFIG_DIR/placement.conf`` and, with
``[placement_database] sync_on_startup = True``, migrates the database
first. Each answer is one stdout line ``ANSWER {"status": int, "body":
...}`` (the application's log may share stdout).
"""
import json
import sys


def _init_application():
    import importlib
    wsgi = importlib.import_module('placement.wsgi')
    # Upstream's lives in placement.wsgi (placement.wsgi.api builds it on
    # import); ours in placement.wsgi.api.
    init = getattr(wsgi, 'init_application', None)
    if init is None:
        init = importlib.import_module('placement.wsgi.api').init_application
    return init()


def main():
    import webob
    requests = json.loads(sys.argv[1])
    app = _init_application()
    for method, path, body in requests:
        req = webob.Request.blank(path, method=method, headers={
            'x-auth-token': 'admin', 'accept': 'application/json',
            'openstack-api-version': 'placement latest'})
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = 'application/json'
        resp = req.get_response(app)
        try:
            answer = json.loads(resp.body)
        except ValueError:
            answer = resp.text
        line = json.dumps({'status': resp.status_int, 'body': answer})
        sys.stdout.write('ANSWER %s\n' % line)


if __name__ == '__main__':
    main()
